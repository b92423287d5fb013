package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
	"github.com/redlock-go/redlock/redlocktest"
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
	measureCycles(b, l.name, open(b, l, ns), g, ns)
}

// measureCycles measures b.N uncontended cycles of s, a library called name opened on
// nodes ns, with g goroutines, each with a locker from s.newLocker.
func measureCycles(b *testing.B, name string, s *setup, g int, ns []*redlocktest.Process) {
	ctx := context.Background()
	// Warm up: open the connections every goroutine will use.
	warm := freshKeys("warm:"+name, 4*g)
	if st := runCycles(ctx, s, g, warm); st.FirstErr != nil {
		b.Logf("warm-up: %d failed calls, first: %v", st.Errors(), st.FirstErr)
	}
	keys := freshKeys("cycle:"+name, b.N)
	cpu0, cpuOK := processCPU()
	srv0, srvErr := serverCPU(ns)

	b.ResetTimer()
	st := runCycles(ctx, s, g, keys)
	b.StopTimer()

	if st.FirstErr != nil {
		// A node slower than the library's timeout on a loaded box, for example.
		b.Logf("%d failed acquires, %d failed releases of %d cycles; first: %v", st.AcquireErrs, st.ReleaseErrs, b.N, st.FirstErr)
	}
	b.ReportMetric(float64(st.Errors()), "errors")
	reportCycles(b, st)
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "client-cpu-us/cycle")
	}
	if srv1, err := serverCPU(ns); err == nil && srvErr == nil {
		b.ReportMetric(float64((srv1-srv0).Microseconds())/float64(b.N), "server-cpu-us/cycle")
	}
}

// serverCPU returns the CPU time the processes of nodes have used so far, together.
func serverCPU(nodes []*redlocktest.Process) (time.Duration, error) {
	var sum time.Duration
	for _, n := range nodes {
		d, err := procCPU(n.PID())
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// runCycles runs benchload.Cycles of s with g goroutines over keys, one cycle each.
func runCycles(ctx context.Context, s *setup, g int, keys []string) benchload.CycleStats {
	return benchload.Cycles(ctx, s.newLocker, benchload.CycleConfig{
		Goroutines: g,
		Key:        func(i int) string { return keys[i] },
		Cycles:     len(keys),
	})
}

// reportCycles reports the rate and acquire latencies of an uncontended run. Skipped
// keys (failed acquires) have no latency and are left out.
func reportCycles(b *testing.B, st benchload.CycleStats) {
	b.ReportMetric(float64(st.Cycles)/st.Elapsed.Seconds(), "cycles/s")
	b.ReportMetric(ms(benchload.Percentile(st.Acquire, 0.50)), "acq-p50-ms")
	b.ReportMetric(ms(benchload.Percentile(st.Acquire, 0.99)), "acq-p99-ms")
}

// ms converts d to milliseconds as a float.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkHotKey: 8 workers loop on one key (acquire, hold ~100 µs, release,
// straight back); b.N is the number of acquisitions. Reports real handoffs per
// second (the holder changed), the share of self re-acquisitions, the wait of the
// acquisitions that were handoffs, and mutual-exclusion violations.
func BenchmarkHotKey(b *testing.B) {
	for _, l := range libs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("lib=%s/G=8/N=%d", l.name, n), func(b *testing.B) {
			s := open(b, l, startNodes(b, n))
			key := freshKeys("hot:"+l.name, 1)[0]
			b.ResetTimer()
			st := benchload.HotKey(context.Background(), s.newLocker, key, benchload.HotConfig{
				Workers:      8,
				Hold:         hotHold,
				Acquisitions: b.N,
				MaxDuration:  *hotMax,
				WaitTimeout:  10 * time.Second,
			})
			b.StopTimer()
			reportHot(b, st)
			if st.Violations > 0 || st.ReleaseErrs > 0 {
				b.Errorf("%d mutual-exclusion violations, %d failed releases (first error: %v)", st.Violations, st.ReleaseErrs, st.FirstErr)
			}
		})
	}
}

// reportHot reports the metrics of a hot-key run.
func reportHot(b *testing.B, st benchload.HotStats) {
	secs := st.Elapsed.Seconds()
	b.ReportMetric(float64(st.Handoffs)/secs, "handoffs/s")
	b.ReportMetric(float64(st.Acquisitions)/secs, "acq/s")
	if st.Acquisitions > 1 {
		b.ReportMetric(st.SelfPercent(), "self-%")
	}
	b.ReportMetric(ms(benchload.Percentile(st.Waits, 0.50)), "wait-p50-ms")
	b.ReportMetric(ms(benchload.Percentile(st.Waits, 0.99)), "wait-p99-ms")
	b.ReportMetric(ms(benchload.Percentile(st.Waits, 1)), "wait-max-ms")
	b.ReportMetric(float64(st.Violations), "violations")
	b.ReportMetric(float64(st.GaveUp), "gaveup")
}
