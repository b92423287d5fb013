package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
)

// burst has every locker call Lock on key at once, hold it for hotHold and release it,
// once each, and returns how long after the start the last of them got the key.
func burst(lockers []locker, key string) (time.Duration, error) {
	var (
		holders atomic.Int32
		wg      sync.WaitGroup
		mu      sync.Mutex
		last    time.Duration
		first   error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	start := make(chan struct{})
	for _, lk := range lockers {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			t0 := time.Now()
			if err := lk.Lock(ctx, key); err != nil {
				fail(fmt.Errorf("lock: %w", err))
				return
			}
			wait := time.Since(t0)
			if holders.Add(1) != 1 {
				fail(fmt.Errorf("two holders of %s", key))
			}
			benchload.Hold(hotHold)
			holders.Add(-1)
			mu.Lock()
			last = max(last, wait)
			mu.Unlock()
			if err := lk.Unlock(context.WithoutCancel(ctx)); err != nil {
				fail(fmt.Errorf("unlock: %w", err))
			}
		})
	}
	close(start)
	wg.Wait()
	return last, first
}

// BenchmarkBurst: the K=8 Clients of BenchmarkClients, each with one worker, call Lock
// on a fresh key at the same moment, hold it ~100 µs and release it, once each; b.N is
// the number of such bursts. It isolates what the hot key's synchronized start costs
// (its longest wait, wait-max-ms, is often the start's): last-ms is the time from the
// start until the last of the 8 workers got the key, reported as its median, 90th percentile and maximum
// over the bursts, and per-grant-ms the median of last-ms over the 8 grants, to hold
// against the hot key's cycle. The libraries alternate.
func BenchmarkBurst(b *testing.B) {
	for _, l := range clientLibs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("lib=%s/K=%d/N=%d", l.name, clientsK, n), func(b *testing.B) {
			ns := startNodes(b, n)
			run := prepareClients(b, l, ns, clientsK)
			run.warmHot(b)
			lockers := make([]locker, clientsK) // one per Client (roundRobin), kept across bursts
			for i := range lockers {
				lockers[i] = run.all.newLocker()
			}
			lasts := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				last, err := burst(lockers, freshKeys("burst:"+l.name, 1)[0])
				if err != nil {
					b.Fatal(err)
				}
				lasts = append(lasts, last)
			}
			b.StopTimer()
			slices.Sort(lasts)
			med := benchload.Percentile(lasts, 0.50)
			b.ReportMetric(ms(med), "last-p50-ms")
			b.ReportMetric(ms(benchload.Percentile(lasts, 0.90)), "last-p90-ms")
			b.ReportMetric(ms(lasts[len(lasts)-1]), "last-max-ms")
			b.ReportMetric(ms(med)/clientsK, "per-grant-ms")
		})
	}
}
