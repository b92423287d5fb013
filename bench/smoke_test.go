package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestSmoke runs every workload of every library for a moment on real nodes and
// checks the harness's numbers add up: no errors, no violations, latencies
// recorded and ordered. It measures nothing.
func TestSmoke(t *testing.T) {
	for _, l := range libs {
		n := nodesOf(l, *nodeCount)
		for _, g := range []int{1, 8} {
			t.Run(fmt.Sprintf("Uncontended/lib=%s/G=%d/N=%d", l.name, g, n), func(t *testing.T) {
				checkCycles(t, l, g, n, 64)
			})
		}
		t.Run(fmt.Sprintf("HotKey/lib=%s/G=8/N=%d", l.name, n), func(t *testing.T) {
			checkHotKey(t, l, n)
		})
	}
	for _, n := range []int{1, 3, 7} {
		for _, l := range libs {
			if l.single {
				continue
			}
			t.Run(fmt.Sprintf("Scaling/lib=%s/G=8/N=%d", l.name, n), func(t *testing.T) {
				checkCycles(t, l, 8, n, 32)
			})
		}
	}
}

func checkCycles(t *testing.T, l lib, g, n, cycles int) {
	s := open(t, l, startNodes(t, n))
	keys := freshKeys("smoke:"+l.name, cycles)
	acq := make([]time.Duration, len(keys))
	st := runCycles(context.Background(), s, g, keys, acq)
	if st.errors() != 0 {
		t.Fatalf("%d failed acquires, %d failed releases; first: %v", st.acquireErrs, st.releaseErrs, st.firstErr)
	}
	elapsed := st.elapsed
	if elapsed <= 0 {
		t.Errorf("elapsed = %v, want > 0", elapsed)
	}
	for i, d := range acq {
		if d <= 0 {
			t.Fatalf("cycle %d: acquire took %v, want > 0 (not recorded?)", i, d)
		}
	}
	slices.Sort(acq)
	if p50, p99 := percentile(acq, 0.5), percentile(acq, 0.99); p50 > p99 || p99 > elapsed {
		t.Errorf("acquire p50 %v, p99 %v, run %v: want p50 ≤ p99 ≤ run", p50, p99, elapsed)
	}
	// Every lock was released: the same keys can be taken again at once.
	if st := runCycles(context.Background(), s, g, keys, acq); st.errors() != 0 {
		t.Fatalf("keys not released: %v", st.firstErr)
	}
}

func checkHotKey(t *testing.T, l lib, n int) {
	s := open(t, l, startNodes(t, n))
	const want = 40
	st := runHotKey(s, freshKeys("smoke-hot:"+l.name, 1)[0], hotConfig{
		workers:      8,
		hold:         hotHold,
		acquisitions: want,
		maxDuration:  20 * time.Second,
		waitTimeout:  10 * time.Second,
	})
	if st.violations != 0 || st.releaseErrs != 0 {
		t.Fatalf("%d violations, %d failed releases (first error: %v)", st.violations, st.releaseErrs, st.firstErr)
	}
	if st.acquisitions < want {
		t.Fatalf("%d acquisitions in %v, want %d (gave up %d times; first error: %v)", st.acquisitions, st.elapsed, want, st.gaveUp, st.firstErr)
	}
	// Only the very first acquisition has no previous holder.
	if st.handovers+st.self != st.acquisitions-1 {
		t.Errorf("hand-overs %d + self %d != acquisitions %d − 1", st.handovers, st.self, st.acquisitions)
	}
	if len(st.waits) != st.handovers {
		t.Errorf("%d waits recorded for %d hand-overs", len(st.waits), st.handovers)
	}
	if !slices.IsSorted(st.waits) {
		t.Error("waits not sorted")
	}
	if p50, p99, top := percentile(st.waits, 0.5), percentile(st.waits, 0.99), percentile(st.waits, 1); p50 > p99 || p99 > top || top > st.elapsed+10*time.Second {
		t.Errorf("wait p50 %v, p99 %v, max %v: want ordered and within the run", p50, p99, top)
	}
	if !l.single && l.name != "redsync" && st.gaveUp != 0 {
		t.Errorf("%s gave up %d times (first error: %v)", l.name, st.gaveUp, st.firstErr)
	}
	t.Logf("%d acquisitions in %v: %d hand-overs, %d self, wait p99 %v", st.acquisitions, st.elapsed.Round(time.Millisecond), st.handovers, st.self, percentile(st.waits, 0.99))
}

func TestPercentile(t *testing.T) {
	ds := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x)
		}
		return out
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	for _, c := range []struct {
		xs   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ds(7), 0.99, 7},
		{ds(1, 2, 3, 4), 0.5, 2},
		{ds(1, 2, 3, 4), 1, 4},
		{hundred, 0.5, 50},
		{hundred, 0.99, 99},
		{hundred, 1, 100},
	} {
		if got := percentile(c.xs, c.q); got != c.want {
			t.Errorf("percentile(%d values, %v) = %v, want %v", len(c.xs), c.q, got, c.want)
		}
	}
}

// chanLocker is an in-process lock (a one-slot channel), to check the harness
// without Redis.
type chanLocker struct{ slot chan struct{} }

func (c chanLocker) lock(ctx context.Context, _ string) error {
	select {
	case c.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c chanLocker) unlock(context.Context) error { <-c.slot; return nil }

// noLocker excludes nobody.
type noLocker struct{}

func (noLocker) lock(context.Context, string) error { return nil }
func (noLocker) unlock(context.Context) error       { return nil }

func TestHotKeyHarnessCountsViolationsAndHandOvers(t *testing.T) {
	cfg := hotConfig{workers: 8, hold: hotHold, acquisitions: 400, maxDuration: 20 * time.Second, waitTimeout: 10 * time.Second}

	slot := make(chan struct{}, 1)
	st := runHotKey(&setup{newLocker: func() locker { return chanLocker{slot} }}, "k", cfg)
	if st.violations != 0 {
		t.Errorf("a real lock: %d violations, want 0", st.violations)
	}
	if st.handovers == 0 || st.handovers+st.self != st.acquisitions-1 {
		t.Errorf("a real lock with 8 waiters: %d hand-overs, %d self of %d acquisitions; want hand-overs > 0 adding up", st.handovers, st.self, st.acquisitions)
	}

	st = runHotKey(&setup{newLocker: func() locker { return noLocker{} }}, "k", cfg)
	if st.violations == 0 {
		t.Errorf("no lock at all: 0 violations in %d acquisitions by 8 workers holding %v each", st.acquisitions, hotHold)
	}
}
