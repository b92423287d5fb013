package main

import (
	"fmt"
	"slices"
	"strings"
)

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

// withinOwn: lib's unit is at most its bound in the same run, in the median run. A
// bound is a run's own (fair mode's is 2 × waiters × that run's cycle), so each run's
// value is held to the bound of that run, never to another run's: the verdict is on
// the median of the per-run ratios unit ÷ bound (at most 1: the bound held in at least
// half the runs). Comparing the two medians instead would pair one run's wait with
// another run's cycle. Runs are paired in order; without a bound for every run there
// is no verdict.
func withinOwn(lib, unit, bound string) func(*clientWorkload) (string, bool, bool) {
	return func(cw *clientWorkload) (string, bool, bool) {
		vs := cw.values[lib+"\x00"+unit]
		bs := cw.values[lib+"\x00"+bound]
		if len(vs) == 0 || len(vs) != len(bs) || slices.ContainsFunc(bs, func(b float64) bool { return b <= 0 }) {
			return "", false, false
		}
		ratios := make([]float64, len(vs))
		runs := make([]string, len(vs))
		held := 0
		for i := range vs {
			ratios[i] = ratio(vs[i], bs[i])
			runs[i] = fmtValue(vs[i]) + "/" + fmtValue(bs[i])
			if vs[i] <= bs[i] {
				held++
			}
		}
		r := median(ratios)
		shown := fmt.Sprintf("per run ms %s: median %s, held in %d of %d runs", strings.Join(runs, ", "), fmtRatio(r), held, len(vs))
		return shown, r <= 1, true
	}
}
