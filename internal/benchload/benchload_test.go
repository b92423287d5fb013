package benchload

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memLocks is an in-process lock per key; with broken it excludes nobody.
type memLocks struct {
	mu     sync.Mutex
	keys   map[string]chan struct{}
	broken bool
}

func (m *memLocks) sem(key string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]chan struct{}{}
	}
	if m.keys[key] == nil {
		m.keys[key] = make(chan struct{}, 1)
	}
	return m.keys[key]
}

type memLocker struct {
	m    *memLocks
	held chan struct{}
}

func (l *memLocker) Lock(ctx context.Context, key string) error {
	if l.m.broken {
		return nil
	}
	s := l.m.sem(key)
	select {
	case s <- struct{}{}:
		l.held = s
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *memLocker) Unlock(context.Context) error {
	if l.m.broken {
		return nil
	}
	if l.held == nil {
		return errors.New("not held")
	}
	<-l.held
	l.held = nil
	return nil
}

func (m *memLocks) newLocker() Locker { return &memLocker{m: m} }

func TestCycles(t *testing.T) {
	m := &memLocks{}
	var done atomic.Int64
	st := Cycles(context.Background(), m.newLocker, CycleConfig{Goroutines: 4, Key: strconv.Itoa, Cycles: 500, Done: &done})
	if st.Cycles != 500 || st.Errors() != 0 || len(st.Acquire) != 500 || done.Load() != 500 {
		t.Fatalf("%d cycles, %d errors, %d latencies, %d done; want 500, 0, 500, 500", st.Cycles, st.Errors(), len(st.Acquire), done.Load())
	}
	if p50, p99 := Percentile(st.Acquire, 0.5), Percentile(st.Acquire, 0.99); p50 > p99 || p99 > st.Elapsed {
		t.Errorf("p50 %v, p99 %v, elapsed %v", p50, p99, st.Elapsed)
	}
	// Until the context ends: stops soon after, and a cut-short acquire is no error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st = Cycles(ctx, m.newLocker, CycleConfig{Goroutines: 2, Key: func(i int) string { return "t" + strconv.Itoa(i) }})
	if st.Cycles == 0 || st.Errors() != 0 || st.Elapsed > time.Second {
		t.Errorf("timed run: %d cycles, %d errors in %v", st.Cycles, st.Errors(), st.Elapsed)
	}
}

func TestHotKey(t *testing.T) {
	cfg := HotConfig{Workers: 8, Hold: 100 * time.Microsecond, Acquisitions: 300, MaxDuration: 10 * time.Second, WaitTimeout: time.Second}
	st := HotKey(context.Background(), (&memLocks{}).newLocker, "hot", cfg)
	if st.Violations != 0 || st.Acquisitions < 300 || st.GaveUp != 0 || st.ReleaseErrs != 0 {
		t.Fatalf("%+v", st)
	}
	if st.Handoffs == 0 || st.Handoffs+st.Self != st.Acquisitions-1 || len(st.Waits) != st.Handoffs || len(st.Acquire) != st.Acquisitions {
		t.Errorf("handoffs %d + self %d vs acquisitions %d; %d waits, %d latencies", st.Handoffs, st.Self, st.Acquisitions, len(st.Waits), len(st.Acquire))
	}
	if p := st.SelfPercent(); p < 0 || p > 100 {
		t.Errorf("self %% = %v", p)
	}
	// A lock that excludes nobody is caught.
	cfg.Acquisitions = 2000
	if st := HotKey(context.Background(), (&memLocks{broken: true}).newLocker, "hot", cfg); st.Violations == 0 {
		t.Errorf("no violation seen with a lock that excludes nobody (%d acquisitions)", st.Acquisitions)
	}
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
		{ds(1, 2, 3, 4), 0, 1},
		{ds(1, 2, 3, 4), 0.5, 2},
		{ds(1, 2, 3, 4), 1, 4},
		{hundred, 0.5, 50},
		{hundred, 0.99, 99},
		{hundred, 1, 100},
	} {
		if got := Percentile(c.xs, c.q); got != c.want {
			t.Errorf("Percentile(%d values, %v) = %v, want %v", len(c.xs), c.q, got, c.want)
		}
	}
}

func TestHold(t *testing.T) {
	start := time.Now()
	Hold(300 * time.Microsecond)
	if d := time.Since(start); d < 300*time.Microsecond {
		t.Errorf("held %v", d)
	}
}
