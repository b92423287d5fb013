package main

import "fmt"

// clientTarget is a target of issue #13 for one multi-Client workload. check returns
// what was measured, as text, and whether it meets the target; ok is false when the
// results needed are missing. A target with report set has no bound: its figure is
// only shown.
type clientTarget struct {
	workload string
	text     string
	report   bool
	check    func(cw *clientWorkload) (shown string, met, ok bool)
}

var clientTargets = []clientTarget{
	{workload: "Clients/hot/K=8", text: "fair: hand-overs/s ≥ redislock's on one node", check: atLeastTimes(libFair, libOneNode, "handoffs/s", 1)},
	{workload: "Clients/hot/K=8", text: "fair: waiter p99 ≤ 10 ms", check: atMost(libFair, "wait-p99-ms", 10)},
	{workload: "Clients/hot/K=8", text: "fair: Jain's index ≥ 0.99", check: atLeast(libFair, "jain", 0.99)},
	{workload: "Clients/hot/K=8", text: "fair: longest wait ≤ 2 × (waiters × cycle)", check: withinOwn(libFair, "wait-max-ms", "wait-bound-ms")},
	{workload: "Clients/hot/K=8", text: "default: hand-overs/s ≥ 50 × redsync's", check: atLeastTimes(libDefault, libRedsync, "handoffs/s", 50)},
	{workload: "Clients/hot/K=8", text: "default: waiter p99 ≤ 15 ms", check: atMost(libDefault, "wait-p99-ms", 15)},
	{workload: "Clients/uncontended/K=8", text: "default: cycles/s ÷ redsync's (1.42× before #13)", report: true, check: atLeastTimes(libDefault, libRedsync, "cycles/s", 0)},
	{workload: "Clients/uncontended/K=8", text: "fair: cycles/s ÷ redsync's", report: true, check: atLeastTimes(libFair, libRedsync, "cycles/s", 0)},
}

// targetLines are the rows of the targets table for the workloads in list.
func targetLines(list []*clientWorkload) [][]string {
	lines := [][]string{{"workload", "target", "measured (medians)", "verdict"}}
	for _, t := range clientTargets {
		var cw *clientWorkload
		for _, w := range list {
			if w.name == t.workload {
				cw = w
			}
		}
		if cw == nil {
			continue
		}
		shown, met, ok := t.check(cw)
		verdict := "MISSED"
		switch {
		case !ok:
			shown, verdict = "—", "no data"
		case t.report:
			verdict = "reported"
		case met:
			verdict = "met"
		}
		lines = append(lines, []string{t.workload, t.text, shown, verdict})
	}
	return lines
}

// atLeastTimes: num's median of unit is at least factor × den's.
func atLeastTimes(num, den, unit string, factor float64) func(*clientWorkload) (string, bool, bool) {
	return func(cw *clientWorkload) (string, bool, bool) {
		n, ok1 := cw.median(num, unit)
		d, ok2 := cw.median(den, unit)
		if !ok1 || !ok2 {
			return "", false, false
		}
		return fmt.Sprintf("%s / %s = %s", fmtValue(n), fmtValue(d), fmtRatio(ratio(n, d))), n >= factor*d, true
	}
}

// atMost: lib's median of unit is at most limit.
func atMost(lib, unit string, limit float64) func(*clientWorkload) (string, bool, bool) {
	return func(cw *clientWorkload) (string, bool, bool) {
		v, ok := cw.median(lib, unit)
		return fmtValue(v) + " " + unit, v <= limit, ok
	}
}

// atLeast: lib's median of unit is at least limit.
func atLeast(lib, unit string, limit float64) func(*clientWorkload) (string, bool, bool) {
	return func(cw *clientWorkload) (string, bool, bool) {
		v, ok := cw.median(lib, unit)
		return fmt.Sprintf("%.4f %s", v, unit), v >= limit, ok
	}
}

// withinOwn: lib's median of unit is at most its median of bound.
func withinOwn(lib, unit, bound string) func(*clientWorkload) (string, bool, bool) {
	return func(cw *clientWorkload) (string, bool, bool) {
		v, ok1 := cw.median(lib, unit)
		b, ok2 := cw.median(lib, bound)
		return fmt.Sprintf("%s ms, bound %s ms", fmtValue(v), fmtValue(b)), v <= b, ok1 && ok2
	}
}
