// Package benchload runs the benchmark workloads of docs/performance.md against any
// lock library: uncontended cycles (G goroutines, a fresh key per cycle) and a hot key
// (workers looping on one key, holding it ~100 µs by spinning). `redlock bench` runs
// them on this library; the bench module runs them on this library and its peers, so
// that both measure the same thing.
package benchload

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock"
)

// Locker is one worker goroutine's handle on a library: it holds at most one lock at a
// time. Lock waits (retrying as the library does) until the lock is held or ctx ends;
// Unlock releases the lock taken by the last successful Lock.
type Locker interface {
	Lock(ctx context.Context, key string) error
	Unlock(ctx context.Context) error
}

// CycleConfig describes an uncontended run.
type CycleConfig struct {
	Goroutines int
	// Key returns the key of cycle i (0, 1, ...). Every key must be fresh, so that no
	// cycle waits for another.
	Key func(i int) string
	// Cycles stops the run after this many cycles; 0 runs until ctx ends.
	Cycles int
	// Done, if not nil, is incremented after every cycle (for a progress display).
	Done *atomic.Int64
}

// CycleStats is what an uncontended run observed.
type CycleStats struct {
	Elapsed     time.Duration   // wall time of the whole run
	Cycles      int             // cycles whose acquire succeeded
	AcquireErrs int             // acquires that failed (the key was skipped); not those cut short by ctx
	ReleaseErrs int             // releases that failed
	FirstErr    error           // the first failure, for the log
	Acquire     []time.Duration // time inside each successful acquire, sorted
}

// Errors returns the number of failed calls.
func (c CycleStats) Errors() int { return c.AcquireErrs + c.ReleaseErrs }

// Cycles runs cfg.Goroutines goroutines, each with its own Locker from newLocker,
// that take the next key, acquire it, release it at once, and go on, until
// cfg.Cycles cycles were started or ctx ends. Failed calls are counted and the run
// goes on. A release is never cut short by ctx.
func Cycles(ctx context.Context, newLocker func() Locker, cfg CycleConfig) CycleStats {
	var (
		next             atomic.Int64
		wg               sync.WaitGroup
		first            firstError
		acqErrs, relErrs atomic.Int64
		mu               sync.Mutex
		acquire          []time.Duration
	)
	start := time.Now()
	for range cfg.Goroutines {
		lk := newLocker()
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				acquire = append(acquire, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if cfg.Cycles > 0 && i >= cfg.Cycles {
					return
				}
				key := cfg.Key(i)
				t0 := time.Now()
				if err := lk.Lock(ctx, key); err != nil {
					if ctx.Err() == nil {
						acqErrs.Add(1)
						first.set(fmt.Errorf("acquire %s: %w", key, err))
					}
					continue
				}
				mine = append(mine, time.Since(t0))
				if err := unlock(lk); err != nil {
					relErrs.Add(1)
					first.set(fmt.Errorf("release %s: %w", key, err))
				}
				if cfg.Done != nil {
					cfg.Done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(acquire)
	return CycleStats{
		Elapsed:     time.Since(start),
		Cycles:      len(acquire),
		AcquireErrs: int(acqErrs.Load()),
		ReleaseErrs: int(relErrs.Load()),
		FirstErr:    first.get(),
		Acquire:     acquire,
	}
}

// unlockTimeout bounds a release, which runs on a context of its own.
const unlockTimeout = 10 * time.Second

func unlock(lk Locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	return lk.Unlock(ctx)
}

// HotConfig describes a hot-key run.
type HotConfig struct {
	Workers      int           // goroutines looping on the key
	Hold         time.Duration // time spent holding the lock each time, spinning
	Acquisitions int           // the run stops after this many acquisitions in total (0: no limit)...
	MaxDuration  time.Duration // ...or after this long, whichever comes first
	WaitTimeout  time.Duration // bound on one Lock call
	Done         *atomic.Int64 // if not nil, incremented after every acquisition
}

// HotStats is what a hot-key run observed.
type HotStats struct {
	Elapsed      time.Duration
	Acquisitions int             // successful Lock calls
	Handoffs     int             // acquisitions whose previous holder was another worker
	Self         int             // acquisitions whose previous holder was the same worker
	GaveUp       int             // Lock calls that failed before the run ended (tries or WaitTimeout ran out)
	Violations   int             // acquisitions that found another holder inside the critical section
	ReleaseErrs  int             // failed Unlock calls
	FirstErr     error           // the first failure, for the log
	Acquire      []time.Duration // time inside every successful Lock, sorted
	Waits        []time.Duration // time inside Lock of the handoff acquisitions, sorted
}

// SelfPercent returns the share of acquisitions, after the first, whose previous
// holder was the same worker: a releaser that took its own lock back.
func (h HotStats) SelfPercent() float64 {
	if h.Acquisitions < 2 {
		return 0
	}
	return 100 * float64(h.Self) / float64(h.Acquisitions-1)
}

// HotKey runs cfg.Workers goroutines that loop on key: Lock (bounded by
// cfg.WaitTimeout), check they are the only holder (a counter that must go 0→1), note
// who held the lock before, hold it for cfg.Hold, Unlock, and go straight back. It
// stops once cfg.Acquisitions acquisitions were made, cfg.MaxDuration passed or ctx
// ended; Lock calls still waiting then are cancelled and not counted.
func HotKey(ctx context.Context, newLocker func() Locker, key string, cfg HotConfig) HotStats {
	runCtx, stop := context.WithTimeout(ctx, cfg.MaxDuration)
	defer stop()

	var (
		holders   atomic.Int32
		last      atomic.Int32 // the worker that acquired last, -1 before the first
		acquired  atomic.Int64
		handoffs  atomic.Int64
		self      atomic.Int64
		gaveUp    atomic.Int64
		violated  atomic.Int64
		relErrs   atomic.Int64
		stopOnce  sync.Once
		stoppedAt time.Time
		mu        sync.Mutex // guards waits and acquire
		waits     []time.Duration
		acquire   []time.Duration
		first     firstError
		wg        sync.WaitGroup
	)
	last.Store(-1)
	start := time.Now()
	for id := range int32(cfg.Workers) {
		lk := newLocker()
		wg.Go(func() {
			var myWaits, myAcq []time.Duration
			defer func() {
				mu.Lock()
				waits = append(waits, myWaits...)
				acquire = append(acquire, myAcq...)
				mu.Unlock()
			}()
			for runCtx.Err() == nil {
				lctx, cancel := context.WithTimeout(runCtx, cfg.WaitTimeout)
				t0 := time.Now()
				err := lk.Lock(lctx, key)
				wait := time.Since(t0)
				cancel()
				if err != nil {
					if runCtx.Err() == nil {
						gaveUp.Add(1)
						first.set(fmt.Errorf("acquire: %w", err))
					}
					continue
				}
				if holders.Add(1) != 1 {
					violated.Add(1)
				}
				myAcq = append(myAcq, wait)
				switch prev := last.Swap(id); {
				case prev == id:
					self.Add(1)
				case prev >= 0:
					handoffs.Add(1)
					myWaits = append(myWaits, wait)
				}
				n := acquired.Add(1)
				if cfg.Done != nil {
					cfg.Done.Add(1)
				}
				if cfg.Acquisitions > 0 && n >= int64(cfg.Acquisitions) {
					stopOnce.Do(func() { stoppedAt = time.Now(); stop() })
				}
				Hold(cfg.Hold)
				holders.Add(-1)
				if err := unlock(lk); err != nil {
					relErrs.Add(1)
					first.set(fmt.Errorf("release: %w", err))
				}
			}
		})
	}
	<-runCtx.Done()
	stopOnce.Do(func() { stoppedAt = time.Now() })
	wg.Wait()
	slices.Sort(waits)
	slices.Sort(acquire)
	return HotStats{
		Elapsed:      stoppedAt.Sub(start),
		Acquisitions: int(acquired.Load()),
		Handoffs:     int(handoffs.Load()),
		Self:         int(self.Load()),
		GaveUp:       int(gaveUp.Load()),
		Violations:   int(violated.Load()),
		ReleaseErrs:  int(relErrs.Load()),
		FirstErr:     first.get(),
		Acquire:      acquire,
		Waits:        waits,
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

// Percentile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the nearest-rank
// method, or 0 for an empty slice.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Hold keeps the caller busy for d by spinning: time.Sleep of 100 µs parks the
// goroutine in the runtime's poller, whose timeouts have millisecond granularity on
// some machines, and would turn a 100 µs critical section into about 1 ms.
func Hold(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// Redlock returns a function that makes Lockers over c, each taking locks with the
// given TTL through Client.Acquire and releasing them with Lock.Release.
func Redlock(c *redlock.Client, ttl time.Duration) func() Locker {
	return func() Locker { return &redlockLocker{c: c, ttl: ttl} }
}

type redlockLocker struct {
	c   *redlock.Client
	ttl time.Duration
	l   *redlock.Lock
}

func (r *redlockLocker) Lock(ctx context.Context, key string) error {
	l, err := r.c.Acquire(ctx, key, r.ttl)
	r.l = l
	return err
}

func (r *redlockLocker) Unlock(ctx context.Context) error { return r.l.Release(ctx) }
