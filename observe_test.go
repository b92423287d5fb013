package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// eventLog is an Observer that keeps every event and signals each one.
type eventLog struct {
	mu     sync.Mutex
	events []redlock.Event
	got    chan struct{} // buffered 1: an event arrived
}

func newEventLog() *eventLog { return &eventLog{got: make(chan struct{}, 1)} }

func (r *eventLog) Observe(_ context.Context, e redlock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
}

// take returns the events so far and forgets them.
func (r *eventLog) take() []redlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// one returns the single event recorded since the last take, failing otherwise.
func (r *eventLog) one(t *testing.T) redlock.Event {
	t.Helper()
	es := r.take()
	if len(es) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(es), es)
	}
	return es[0]
}

// results counts the node replies of e by result.
func results(e redlock.Event) map[redlock.Result]int {
	m := map[redlock.Result]int{}
	for _, n := range e.Nodes {
		m[n.Result]++
	}
	return m
}

// TestObserverReportsEachStep: one event per call, with its op, outcome, attempts,
// the last round's node replies, and Ended exactly on the step that ends the lock.
func TestObserverReportsEachStep(t *testing.T) {
	rec := newEventLog()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: rec})
	ctx := context.Background()

	lock, err := c.client.TryAcquire(ctx, "obs:a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e := rec.one(t)
	if e.Op != redlock.OpAcquire || e.Outcome != redlock.OutcomeOK || e.Attempts != 1 || e.Key != "obs:a" ||
		e.TTL != 10*time.Second || len(e.Nodes) != 3 || results(e)[redlock.ResultYes] < 2 || e.Ended || e.Duration <= 0 {
		t.Fatalf("acquire event: %+v", e)
	}
	for _, n := range e.Nodes {
		if n.Node == "" || (n.Result == redlock.ResultYes && (n.At <= 0 || n.At > e.Duration)) {
			t.Fatalf("node reply %+v in %+v", n, e)
		}
	}

	if _, err := c.client.TryAcquire(ctx, "obs:a", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Outcome != redlock.OutcomeNotAcquired || e.Attempts != 1 || results(e)[redlock.ResultNo] < 2 || e.Err == nil {
		t.Fatalf("contended acquire event: %+v", e)
	}

	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Op != redlock.OpExtend || e.Outcome != redlock.OutcomeOK || e.Renewal || e.Ended || results(e)[redlock.ResultYes] < 2 {
		t.Fatalf("extend event: %+v", e)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Op != redlock.OpRelease || e.Outcome != redlock.OutcomeOK || !e.Ended || e.Lost {
		t.Fatalf("release event: %+v", e)
	}
	if err := lock.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Outcome != redlock.OutcomeLost || e.Ended {
		t.Fatalf("second release: want lost, not ended again: %+v", e)
	}

	if _, err := c.client.TryAcquire(ctx, "obs:a", 0); err == nil {
		t.Fatal("ttl 0 accepted")
	}
	if e := rec.one(t); e.Outcome != redlock.OutcomeInvalid || e.Attempts != 0 || e.Nodes != nil {
		t.Fatalf("invalid acquire: %+v", e)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.client.Acquire(done, "obs:b", time.Second); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Outcome != redlock.OutcomeCanceled {
		t.Fatalf("cancelled acquire: %+v", e)
	}
}

// TestObserverLossEndsOnce: an Extend that finds the token gone ends the lock as
// lost; the Release that follows does not end it again.
func TestObserverLossEndsOnce(t *testing.T) {
	rec := newEventLog()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: rec})
	ctx := context.Background()
	lock, err := c.client.Acquire(ctx, "obs:lost", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	rec.take()
	for _, a := range c.admin {
		a.Del(ctx, "obs:lost")
	}
	if err := lock.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatal(err)
	}
	if e := rec.one(t); e.Outcome != redlock.OutcomeLost || !e.Ended || !e.Lost || results(e)[redlock.ResultNo] < 2 {
		t.Fatalf("extend that proved the loss: %+v", e)
	}
	_ = lock.Release(ctx)
	if e := rec.one(t); e.Op != redlock.OpRelease || e.Ended || e.Lost {
		t.Fatalf("release after the loss: %+v", e)
	}
}

// TestObserverHandoff: a Release that hands the lock to a waiter of the same Client
// says so, and so does the waiter's Acquire.
func TestObserverHandoff(t *testing.T) {
	rec := newEventLog()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: rec})
	ctx := context.Background()
	lock, err := c.client.Acquire(ctx, "obs:h", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan *redlock.Lock)
	go func() {
		l, err := c.client.Acquire(ctx, "obs:h", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		handed <- l
	}()
	eventually(t, "the waiter's offer", func() bool { return c.client.Offered("obs:h") })
	rec.take()
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-handed
	if next == nil {
		t.FailNow()
	}
	defer next.Release(ctx)
	var release, acquire redlock.Event
	for _, e := range rec.take() {
		switch e.Op {
		case redlock.OpRelease:
			release = e
		case redlock.OpAcquire:
			acquire = e
		}
	}
	if !release.Handoff || !release.Ended || release.Outcome != redlock.OutcomeOK {
		t.Errorf("release: %+v", release)
	}
	if !acquire.Handoff || acquire.Outcome != redlock.OutcomeOK || results(acquire)[redlock.ResultYes] < 2 {
		t.Errorf("waiter's acquire: %+v", acquire)
	}
}

// TestObserverFenceRefusals: nodes whose counter refused the proposed fencing token
// are counted, although the retried round that won shows none.
func TestObserverFenceRefusals(t *testing.T) {
	rec := newEventLog()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: rec, Fencing: true})
	ctx := context.Background()
	lock, err := c.client.Acquire(ctx, "obs:f", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Another writer moved two counters on: the Client's cached proposal is refused.
	for _, a := range c.admin[:2] {
		counter := redlock.FenceKeys(a, "obs:f")[1]
		if err := a.Set(ctx, counter, 100, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rec.take()
	lock, err = c.client.TryAcquire(ctx, "obs:f", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	if e := rec.one(t); e.Outcome != redlock.OutcomeOK || e.FenceRefusals < 2 || e.Fence <= 100 || e.Fence != lock.Fence() {
		t.Fatalf("acquire after refusals: %+v", e)
	}
}

// panicker is an Observer that panics on every event.
type panicker struct{}

func (panicker) Observe(context.Context, redlock.Event) { panic("observer bug") }

// TestObserverPanicRecovered: an Observer that panics leaves every result as it was,
// the queue working (a handoff to a waiter goes through) and the locks released; each
// panic is counted and logged, rate-limited.
func TestObserverPanicRecovered(t *testing.T) {
	logs := &lineRecorder{}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: panicker{}, Logger: newLogger(logs)})
	ctx := context.Background()
	lock, err := c.client.Acquire(ctx, "obs:p", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	handed := make(chan *redlock.Lock)
	go func() {
		l, err := c.client.Acquire(ctx, "obs:p", 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		handed <- l
	}()
	eventually(t, "the waiter's offer", func() bool { return c.client.Offered("obs:p") })
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-handed
	if next == nil {
		t.FailNow()
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next.WaitForCalls() // Release returns at a majority: the third DEL may still be out
	c.wantValues("obs:p", "", "", "")
	if got := c.client.ObserverPanics(); got != 4 {
		t.Fatalf("%d panics counted, want 4 (two acquires, two releases)", got)
	}
	if got := logs.count("redlock: observer panicked"); got != 1 {
		t.Fatalf("%d panic lines within a second, want 1", got)
	}
}

// TestObserverRenewalsMarked: KeepAlive's renewals say Renewal; an Extend the work
// makes on the KeepAlive's context does not.
func TestObserverRenewalsMarked(t *testing.T) {
	rec := newEventLog()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Observer: rec})
	ctx := context.Background()
	lock, err := c.client.Acquire(ctx, "obs:r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(ctx)
	var renewal redlock.Event
	for renewal.Op != redlock.OpExtend {
		<-rec.got
		for _, e := range rec.take() {
			if e.Op == redlock.OpExtend {
				renewal = e
			}
		}
	}
	if !renewal.Renewal || renewal.Outcome != redlock.OutcomeOK {
		t.Fatalf("renewal: %+v", renewal)
	}
	if err := lock.Extend(work, time.Second); err != nil {
		t.Fatal(err)
	}
	stop()
	own := 0
	for _, e := range rec.take() {
		if !e.Renewal {
			own++
		}
	}
	if own != 1 {
		t.Fatalf("%d extends not marked as renewals, want 1 (the work's own)", own)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// lineRecorder is a slog.Handler that keeps every record, for the Logger tests.
type lineRecorder struct {
	mu    sync.Mutex
	lines []record
}

// record is one log record: its message and attributes as text.
type record struct {
	msg   string
	attrs map[string]string
}

// newLogger returns a logger writing to h.
func newLogger(h *lineRecorder) *slog.Logger { return slog.New(h) }

func (h *lineRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *lineRecorder) WithGroup(string) slog.Handler            { return h }
func (h *lineRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := record{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, rec)
	return nil
}

// with returns the records with message msg.
func (h *lineRecorder) with(msg string) []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []record
	for _, r := range h.lines {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// count returns how many records have message msg.
func (h *lineRecorder) count(msg string) int { return len(h.with(msg)) }

// all returns every record so far.
func (h *lineRecorder) all() []record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]record(nil), h.lines...)
}
