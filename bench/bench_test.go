package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/bench/internal/nodes"
)

// hotHold is the critical section of the hot-key workload.
const hotHold = 100 * time.Microsecond

// runSeq makes the keys of every benchmark run unique.
var runSeq atomic.Int64

// freshKeys returns n keys never used before in this process.
func freshKeys(prefix string, n int) []string {
	run := strconv.FormatInt(runSeq.Add(1), 10)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + ":" + run + ":" + strconv.Itoa(i)
	}
	return keys
}

// BenchmarkUncontended: G goroutines, each acquiring and releasing a fresh key per
// cycle; b.N is the number of cycles. The libraries alternate within each G.
func BenchmarkUncontended(b *testing.B) {
	for _, g := range []int{1, 8} {
		for _, l := range libs {
			n := nodesOf(l, *nodeCount)
			b.Run(fmt.Sprintf("lib=%s/G=%d/N=%d", l.name, g, n), func(b *testing.B) {
				benchCycles(b, l, g, n)
			})
		}
	}
}

// BenchmarkScaling is BenchmarkUncontended with G=8 over N = 1, 3, 5 and 7 nodes,
// for the two quorum libraries.
func BenchmarkScaling(b *testing.B) {
	for _, n := range []int{1, 3, 5, 7} {
		for _, l := range libs {
			if l.single {
				continue
			}
			b.Run(fmt.Sprintf("lib=%s/G=8/N=%d", l.name, n), func(b *testing.B) {
				benchCycles(b, l, 8, n)
			})
		}
	}
}

// benchCycles measures b.N uncontended cycles of l with g goroutines on n nodes.
func benchCycles(b *testing.B, l lib, g, n int) {
	ns := startNodes(b, n)
	s := open(b, l, ns)
	ctx := context.Background()
	// Warm up: open the connections every goroutine will use.
	warm := freshKeys("warm:"+l.name, 4*g)
	if st := runCycles(ctx, s, g, warm, make([]time.Duration, len(warm))); st.firstErr != nil {
		b.Logf("warm-up: %d failed calls, first: %v", st.errors(), st.firstErr)
	}
	keys := freshKeys("cycle:"+l.name, b.N)
	acq := make([]time.Duration, b.N)
	cpu0, cpuOK := processCPU()
	srv0, srvErr := nodes.CPU(ns)

	b.ResetTimer()
	st := runCycles(ctx, s, g, keys, acq)
	b.StopTimer()

	if st.firstErr != nil {
		// A node slower than the library's timeout on a loaded box, for example.
		b.Logf("%d failed acquires, %d failed releases of %d cycles; first: %v", st.acquireErrs, st.releaseErrs, b.N, st.firstErr)
	}
	b.ReportMetric(float64(st.errors()), "errors")
	reportCycles(b, st.elapsed, acq)
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "client-cpu-us/cycle")
	}
	if srv1, err := nodes.CPU(ns); err == nil && srvErr == nil {
		b.ReportMetric(float64((srv1-srv0).Microseconds())/float64(b.N), "server-cpu-us/cycle")
	}
}

// reportCycles reports the rate and acquire latencies of an uncontended run. Skipped
// keys (failed acquires) have no latency and are left out.
func reportCycles(b *testing.B, elapsed time.Duration, acq []time.Duration) {
	acq = slices.DeleteFunc(acq, func(d time.Duration) bool { return d == 0 })
	slices.Sort(acq)
	b.ReportMetric(float64(len(acq))/elapsed.Seconds(), "cycles/s")
	b.ReportMetric(ms(percentile(acq, 0.50)), "acq-p50-ms")
	b.ReportMetric(ms(percentile(acq, 0.99)), "acq-p99-ms")
}

// BenchmarkHotKey: 8 workers loop on one key (acquire, hold ~100 µs, release,
// straight back); b.N is the number of acquisitions. Reports real hand-overs per
// second (the holder changed), the share of self re-acquisitions, the wait of the
// acquisitions that were hand-overs, and mutual-exclusion violations.
func BenchmarkHotKey(b *testing.B) {
	for _, l := range libs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("lib=%s/G=8/N=%d", l.name, n), func(b *testing.B) {
			s := open(b, l, startNodes(b, n))
			key := freshKeys("hot:"+l.name, 1)[0]
			b.ResetTimer()
			st := runHotKey(s, key, hotConfig{
				workers:      8,
				hold:         hotHold,
				acquisitions: b.N,
				maxDuration:  *hotMax,
				waitTimeout:  10 * time.Second,
			})
			b.StopTimer()
			reportHot(b, st)
			if st.violations > 0 || st.releaseErrs > 0 {
				b.Errorf("%d mutual-exclusion violations, %d failed releases (first error: %v)", st.violations, st.releaseErrs, st.firstErr)
			}
		})
	}
}

// reportHot reports the metrics of a hot-key run.
func reportHot(b *testing.B, st hotStats) {
	secs := st.elapsed.Seconds()
	b.ReportMetric(float64(st.handovers)/secs, "handovers/s")
	b.ReportMetric(float64(st.acquisitions)/secs, "acq/s")
	if st.acquisitions > 1 {
		b.ReportMetric(100*float64(st.self)/float64(st.acquisitions-1), "self-%")
	}
	b.ReportMetric(ms(percentile(st.waits, 0.50)), "wait-p50-ms")
	b.ReportMetric(ms(percentile(st.waits, 0.99)), "wait-p99-ms")
	b.ReportMetric(ms(percentile(st.waits, 1)), "wait-max-ms")
	b.ReportMetric(float64(st.violations), "violations")
	b.ReportMetric(float64(st.gaveUp), "gaveup")
}
