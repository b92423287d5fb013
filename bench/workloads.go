package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// cycleStats is what an uncontended run observed.
type cycleStats struct {
	elapsed     time.Duration // wall time of the whole run
	acquireErrs int           // lock calls that failed (the key was then skipped)
	releaseErrs int           // unlock calls that failed
	firstErr    error
}

// runCycles runs g goroutines that share the keys: each takes the next unused key,
// acquires it, releases it at once, and records the time spent in lock in acq at
// the key's index (acq must have len(keys)). Every key is fresh, so no cycle ever
// waits for another. Failed calls are counted, and the run goes on.
func runCycles(ctx context.Context, s *setup, g int, keys []string, acq []time.Duration) cycleStats {
	var (
		next             atomic.Int64
		wg               sync.WaitGroup
		first            firstError
		acqErrs, relErrs atomic.Int64
	)
	start := time.Now()
	for range g {
		lk := s.newLocker()
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				t0 := time.Now()
				if err := lk.lock(ctx, keys[i]); err != nil {
					acqErrs.Add(1)
					first.set(fmt.Errorf("acquire %s: %w", keys[i], err))
					continue
				}
				acq[i] = time.Since(t0)
				if err := lk.unlock(ctx); err != nil {
					relErrs.Add(1)
					first.set(fmt.Errorf("release %s: %w", keys[i], err))
				}
			}
		})
	}
	wg.Wait()
	return cycleStats{
		elapsed:     time.Since(start),
		acquireErrs: int(acqErrs.Load()),
		releaseErrs: int(relErrs.Load()),
		firstErr:    first.get(),
	}
}

// errors returns the number of failed calls.
func (c cycleStats) errors() int { return c.acquireErrs + c.releaseErrs }

// hotConfig describes a hot-key run.
type hotConfig struct {
	workers      int           // goroutines looping on the key
	hold         time.Duration // time spent holding the lock each time
	acquisitions int           // the run stops after this many acquisitions in total...
	maxDuration  time.Duration // ...or after this long, whichever comes first
	waitTimeout  time.Duration // bound on one lock call
}

// hotStats is what a hot-key run observed.
type hotStats struct {
	elapsed      time.Duration
	acquisitions int // successful lock calls
	handovers    int // acquisitions whose previous holder was another worker
	self         int // acquisitions whose previous holder was the same worker
	gaveUp       int // lock calls that failed before the run ended (e.g. tries or waitTimeout ran out)
	violations   int // acquisitions that found another holder inside the critical section
	releaseErrs  int
	firstErr     error
	waits        []time.Duration // time inside lock of the hand-over acquisitions, sorted
}

// runHotKey runs cfg.workers goroutines that loop on key: lock (bounded by
// cfg.waitTimeout), check they are the only holder (a counter that must go 0→1),
// note who held the lock before, hold it for cfg.hold, release it, and go straight
// back. It stops once cfg.acquisitions acquisitions were made or cfg.maxDuration
// passed; lock calls still waiting then are cancelled and not counted.
func runHotKey(s *setup, key string, cfg hotConfig) hotStats {
	runCtx, stop := context.WithTimeout(context.Background(), cfg.maxDuration)
	defer stop()

	var (
		holders   atomic.Int32
		last      atomic.Int32 // the worker that acquired last, -1 before the first
		acquired  atomic.Int64
		handovers atomic.Int64
		self      atomic.Int64
		gaveUp    atomic.Int64
		violated  atomic.Int64
		relErrs   atomic.Int64
		stopOnce  sync.Once
		stoppedAt time.Time
		mu        sync.Mutex // guards waits
		waits     []time.Duration
		firstErr  firstError
		wg        sync.WaitGroup
	)
	last.Store(-1)
	start := time.Now()
	for id := range int32(cfg.workers) {
		lk := s.newLocker()
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				waits = append(waits, mine...)
				mu.Unlock()
			}()
			for runCtx.Err() == nil {
				ctx, cancel := context.WithTimeout(runCtx, cfg.waitTimeout)
				t0 := time.Now()
				err := lk.lock(ctx, key)
				wait := time.Since(t0)
				cancel()
				if err != nil {
					if runCtx.Err() == nil {
						gaveUp.Add(1)
						firstErr.set(fmt.Errorf("acquire: %w", err))
					}
					continue
				}
				if holders.Add(1) != 1 {
					violated.Add(1)
				}
				switch prev := last.Swap(id); {
				case prev == id:
					self.Add(1)
				case prev >= 0:
					handovers.Add(1)
					mine = append(mine, wait)
				}
				if acquired.Add(1) >= int64(cfg.acquisitions) {
					stopOnce.Do(func() { stoppedAt = time.Now(); stop() })
				}
				hold(cfg.hold)
				holders.Add(-1)
				rctx, rcancel := context.WithTimeout(context.Background(), cfg.waitTimeout)
				if err := lk.unlock(rctx); err != nil {
					relErrs.Add(1)
					firstErr.set(fmt.Errorf("release: %w", err))
				}
				rcancel()
			}
		})
	}
	<-runCtx.Done()
	stopOnce.Do(func() { stoppedAt = time.Now() })
	wg.Wait()
	slices.Sort(waits)
	return hotStats{
		elapsed:      stoppedAt.Sub(start),
		acquisitions: int(acquired.Load()),
		handovers:    int(handovers.Load()),
		self:         int(self.Load()),
		gaveUp:       int(gaveUp.Load()),
		violations:   int(violated.Load()),
		releaseErrs:  int(relErrs.Load()),
		firstErr:     firstErr.get(),
		waits:        waits,
	}
}

// firstError keeps the first error reported by any goroutine.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the nearest-rank
// method, or 0 for an empty slice.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// ms converts d to milliseconds as a float.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// hold keeps the lock for d by spinning: time.Sleep of 100 µs parks the goroutine in the
// runtime's poller, whose timeouts have millisecond granularity here, and would turn a
// 100 µs critical section into about 1 ms.
func hold(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
