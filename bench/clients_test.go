package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
	"github.com/redlock-go/redlock/redlocktest"
)

// BenchmarkClients: K=8 independent Clients of each library, each with its own
// go-redis clients and one worker, as 8 processes would be; the libraries alternate
// within each workload.
//
//   - hot: the workers loop on one key (acquire, hold ~100 µs, release, straight
//     back); b.N is the number of acquisitions. Reports real hand-overs/s (a grant to
//     another worker than the previous holder), the waits of the hand-over grants
//     (p50, p99), the longest wait of any call, Jain's index over the workers'
//     acquisition counts, the mean cycle (time per grant), and for fair mode the bound
//     2 × (waiters × cycle) that its longest wait should stay under. box-stall-ms is
//     the longest time the process got no CPU when it asked for it (stallWatch).
//   - uncontended: each worker acquires and releases fresh keys; b.N is the number
//     of cycles. Reports what BenchmarkUncontended does.
func BenchmarkClients(b *testing.B) {
	for _, l := range clientLibs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("hot/lib=%s/K=%d/N=%d", l.name, clientsK, n), func(b *testing.B) {
			ns := startNodes(b, n)
			run := prepareClients(b, l, ns, clientsK)
			run.warmHot(b)
			cost := measureCost(ns)
			b.ResetTimer()
			stalls := watchStalls(time.Sleep, time.Now)
			st, f := run.hot(b.N, *hotMax)
			b.StopTimer()
			reportClientsHot(b, l, st, f)
			b.ReportMetric(ms(stalls.end()), "box-stall-ms")
			reportCost(b, cost, measureCost(ns), f.grants)
			if st.Violations > 0 || st.ReleaseErrs > 0 {
				b.Errorf("%d mutual-exclusion violations, %d failed releases (first error: %v)", st.Violations, st.ReleaseErrs, st.FirstErr)
			}
		})
	}
	for _, l := range clientLibs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("uncontended/lib=%s/K=%d/N=%d", l.name, clientsK, n), func(b *testing.B) {
			ns := startNodes(b, n)
			run := prepareClients(b, l, ns, clientsK)
			measureCycles(b, l.name+"-clients", run.all, clientsK, ns)
		})
	}
}

// clientsRun is k independent setups of one library on the same nodes.
type clientsRun struct {
	l      lib
	setups []*setup
	all    *setup // hands out the setups' lockers in turn (roundRobin)
}

// prepareClients opens l k times on ns, each time over new go-redis clients, closed
// when tb ends, and warms each up with a few uncontended cycles so that its
// connections are open before the measurement.
func prepareClients(tb testing.TB, l lib, ns []*redlocktest.Process, k int) *clientsRun {
	tb.Helper()
	run := &clientsRun{l: l}
	for range k {
		run.setups = append(run.setups, open(tb, l, ns))
	}
	run.all = &setup{newLocker: roundRobin(run.setups)}
	warm := freshKeys("clients-warm:"+l.name, 4*k)
	if st := runCycles(context.Background(), run.all, k, warm); st.Errors() != 0 {
		tb.Logf("warm-up: %d failed calls, first: %v", st.Errors(), st.FirstErr)
	}
	return run
}

// warmHot contends for a key of its own, briefly, before the measured hot-key run:
// so that what a process pays once (this library's subscription connections, one per
// node, and the scripts only contention runs, which the nodes load on first use) is
// not counted as waiting for the hot key. prepareClients' uncontended cycles open the
// command connections the same way. Without it the first grants of fair mode came
// 14 ms after the start (8 Clients dialling 40 subscription connections at once) and
// made the run's longest wait.
func (r *clientsRun) warmHot(tb testing.TB) {
	tb.Helper()
	st := benchload.HotKey(context.Background(), r.all.newLocker, freshKeys("clients-hot-warm:"+r.l.name, 1)[0], benchload.HotConfig{
		Workers:      len(r.setups),
		Hold:         hotHold,
		Acquisitions: 4 * len(r.setups),
		MaxDuration:  500 * time.Millisecond,
		WaitTimeout:  10 * time.Second,
	})
	if st.Violations > 0 || st.ReleaseErrs > 0 {
		tb.Errorf("hot warm-up: %d mutual-exclusion violations, %d failed releases (first error: %v)", st.Violations, st.ReleaseErrs, st.FirstErr)
	}
}

// hot runs the hot-key loop of benchload with one worker per setup until acquisitions
// grants (0: no limit) or limit passed, and returns its stats and the grant log's figures.
func (r *clientsRun) hot(acquisitions int, limit time.Duration) (benchload.HotStats, hotFigures) {
	log := newGrantLog(len(r.setups))
	st := benchload.HotKey(context.Background(), logged(r.all.newLocker, log), freshKeys("clients-hot:"+r.l.name, 1)[0], benchload.HotConfig{
		Workers:      len(r.setups),
		Hold:         hotHold,
		Acquisitions: acquisitions,
		MaxDuration:  limit,
		WaitTimeout:  10 * time.Second,
	})
	return st, log.figures(acquisitions)
}

// reportClientsHot reports the metrics of a multi-Client hot-key run of l.
func reportClientsHot(b *testing.B, l lib, st benchload.HotStats, f hotFigures) {
	secs := st.Elapsed.Seconds()
	b.ReportMetric(float64(f.handoffs)/secs, "handoffs/s")
	b.ReportMetric(float64(f.grants)/secs, "acq/s")
	if f.grants > 1 {
		b.ReportMetric(100*float64(f.self)/float64(f.grants-1), "self-%")
	}
	b.ReportMetric(ms(benchload.Percentile(f.waits, 0.50)), "wait-p50-ms")
	b.ReportMetric(ms(benchload.Percentile(f.waits, 0.99)), "wait-p99-ms")
	b.ReportMetric(ms(f.longest), "wait-max-ms")
	b.ReportMetric(ms(f.longestLate), "wait-max-late-ms")
	b.ReportMetric(jain(f.counts), "jain")
	if f.grants > 0 {
		b.ReportMetric(100*float64(f.overtakes)/float64(f.grants), "overtakes-%")
	}
	if f.grants > 0 {
		cycle := st.Elapsed / time.Duration(f.grants)
		b.ReportMetric(float64(cycle)/float64(time.Microsecond), "cycle-us")
		if l.name == "redlock-fair" {
			b.ReportMetric(ms(waitBound(len(f.counts), cycle)), "wait-bound-ms")
		}
	}
	b.ReportMetric(float64(st.Violations), "violations")
	b.ReportMetric(float64(st.GaveUp), "gaveup")
}

// waitBound is the longest wait fair mode should stay under with workers workers on
// one key and a mean cycle (time from one grant to the next) of cycle: in arrival order
// a waiter waits for the workers−1 others ahead of it, and twice that leaves room for
// a slow cycle or two.
func waitBound(workers int, cycle time.Duration) time.Duration {
	return 2 * time.Duration(workers-1) * cycle
}
