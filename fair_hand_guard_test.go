package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// teeObserver sends each event to every observer in it.
type teeObserver []redlock.Observer

func (t teeObserver) Observe(ctx context.Context, e redlock.Event) {
	for _, o := range t {
		o.Observe(ctx, e)
	}
}

// lateHand sets up a lock handed over for 30 s (NodeTimeout nt, FairLease 2 s) whose
// finishHand makes its first try at half the validity and its second at
// lastStart - 60 ms, where lastStart = Until - V/10 - 2 nt (finishHand's last start).
// Every node is paused before the first try (which fails). It returns the cluster,
// the lock, Until, v (≤ V), and the moment of finishHand's second check.
func lateHand(t *testing.T, nt time.Duration, ob redlock.Observer) (*cluster, *redlock.Lock, time.Time, time.Duration, time.Time) {
	t.Helper()
	watch := &extendWatch{failed: make(chan redlock.Event, 1)}
	var target atomic.Int64
	var fast atomic.Bool
	delay := func(int) time.Duration {
		if !fast.Load() {
			return 10 * time.Second
		}
		if at := target.Load(); at != 0 {
			return max(time.Until(time.Unix(0, at)), 0)
		}
		return 50 * time.Millisecond
	}
	obs := teeObserver{watch}
	if ob != nil {
		obs = append(obs, ob)
	}
	opts := redlock.Options{Fair: true, NodeTimeout: nt, RetryDelay: delay, Observer: obs}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, NodeTimeout: nt})
	lock := c.handOver(c.newClient(opts), 30*time.Second, 2*time.Second)
	until := lock.Until()
	v := time.Until(until)
	check := until.Add(-v/10 - 2*nt - 60*time.Millisecond)
	target.Store(check.UnixNano())
	fast.Store(true)
	t.Cleanup(c.hangAll())
	select {
	case <-watch.failed: // finishHand's first try
	case <-time.After(5 * time.Second):
		t.Fatal("finishHand's first Extend did not fail")
	}
	return c, lock, until, v, check
}

// TestFairHandTryBehindCallerExtendDoesNotDelayKeeper: every node hangs; a caller's
// Extend holds the lock's op when finishHand's retry comes, a moment before its last
// start, and the caller then starts a KeepAlive. finishHand's try, which runs only
// after the caller's Extend, must not run late and make the keeper's last try wait
// behind it: the work hears of the loss by Until − V/10 (in review, the try checked
// its conditions before waiting for the op, and the work heard of it 129 ms late).
func TestFairHandTryBehindCallerExtendDoesNotDelayKeeper(t *testing.T) {
	const nt = 200 * time.Millisecond
	events := newEventLog()
	_, lock, until, v, check := lateHand(t, nt, events)
	defer func() {
		for _, e := range events.take() {
			t.Logf("event %v renewal=%v ttl=%v start=Until-%v took %v outcome=%v", e.Op, e.Renewal, e.TTL, until.Sub(e.Start).Round(time.Millisecond), e.Duration.Round(time.Millisecond), e.Outcome)
		}
	}()
	promise := until.Add(-v / 10)
	time.Sleep(time.Until(check.Add(-15 * time.Millisecond)))
	callerDone := make(chan error, 1)
	go func() { callerDone <- lock.Extend(context.Background(), 30*time.Second) }() // holds op for nt
	time.Sleep(time.Until(check.Add(30 * time.Millisecond)))                        // finishHand's try waits for op
	keepAliveEndsBy(t, lock, until, promise)
	t.Logf("caller's Extend: %v", <-callerDone)
}

// keepAliveEndsBy starts a KeepAlive of lock (valid until until), waits until the
// work's context ends, and fails t if that came after promise (Until − V/10).
func keepAliveEndsBy(t *testing.T, lock *redlock.Lock, until, promise time.Time) {
	t.Helper()
	called := time.Now()
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	<-kctx.Done()
	ended := time.Now()
	t.Logf("KeepAlive called %v before Until − V/10; the work ended %v before Until; cause %v",
		promise.Sub(called).Round(time.Millisecond), until.Sub(ended).Round(time.Millisecond), context.Cause(kctx))
	if ended.After(promise) {
		t.Errorf("the work heard of the loss %v after Until − V/10 (%v before Until)",
			ended.Sub(promise).Round(time.Millisecond), until.Sub(ended).Round(time.Millisecond))
	}
}

// TestFairHandTryNotOutWhenKeeperGivesUp: as above, with the KeepAlive started just
// after the keeper's last start, so that it gives the lock up at once (Ended, a cause
// matching ErrLockLost). No try of finishHand may be out then: in review one was,
// delayed behind the caller's Extend, and once the nodes came back it extended the
// lock the work had been told it lost, for 30 s.
func TestFairHandTryNotOutWhenKeeperGivesUp(t *testing.T) {
	const nt = 200 * time.Millisecond
	events := newEventLog()
	c, lock, until, v, check := lateHand(t, nt, events)
	keeperLast := until.Add(-v/10 - nt)
	time.Sleep(time.Until(check.Add(-15 * time.Millisecond)))
	callerDone := make(chan error, 1)
	go func() { callerDone <- lock.Extend(context.Background(), 2*time.Second) }() // holds op for nt
	time.Sleep(time.Until(keeperLast.Add(15 * time.Millisecond)))
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	<-kctx.Done()
	gaveUp := time.Now()
	cause := context.Cause(kctx)
	for _, s := range c.servers {
		s.Resume()
	}
	t.Logf("caller's Extend: %v", <-callerDone)
	t.Logf("KeepAlive gave up %v before Until: %v", until.Sub(gaveUp).Round(time.Millisecond), cause)
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("KeepAlive ended with %v, want ErrLockLost", cause)
	}
	time.Sleep(2 * nt)
	lock.WaitForCalls()
	if now := lock.Until(); now.After(until) {
		t.Errorf("the lock KeepAlive gave up as lost was extended afterwards: valid for %v more", time.Until(now).Round(time.Millisecond))
	}
	if after := okAfterEnded(events.take()); len(after) > 0 {
		t.Errorf("%d successful steps after the lock's Ended event, the first %v (renewal %v, TTL %v)", len(after), after[0].Op, after[0].Renewal, after[0].TTL)
	}
}

// TestFairHandNoBusyLoopWhileKept: with a RetryDelay of 0 (ExponentialJitter never
// gives that, but Options allows it), finishHand, waiting while a keeper runs (every
// node hangs), still pauses between its looks (in review it polled l.mu tens of
// thousands of times in 300 ms).
func TestFairHandNoBusyLoopWhileKept(t *testing.T) {
	var fast atomic.Bool
	delay := func(int) time.Duration {
		if fast.Load() {
			return 0
		}
		return 10 * time.Second
	}
	clk := &countingClock{}
	opts := redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond, RetryDelay: delay, Clock: clk}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond})
	lock := c.handOver(c.newClient(opts), 30*time.Second, 2*time.Second)
	fast.Store(true)
	defer c.hangAll()()
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	time.Sleep(time.Until(lock.Until())/2 + 100*time.Millisecond) // finishHand's first look is at half the validity
	before := clk.zero.Load()
	time.Sleep(300 * time.Millisecond)
	n := clk.zero.Load() - before
	t.Logf("After(d <= 0) calls in 300 ms while the keeper runs: %d (work ctx done: %v)", n, kctx.Err() != nil)
	if n > 100 {
		t.Errorf("finishHand polled %d times in 300 ms while a keeper ran: a busy loop", n)
	}
}

// countingClock is the system clock, counting the calls of After with d <= 0.
type countingClock struct{ zero atomic.Int64 }

func (c *countingClock) Now() time.Time { return time.Now() }
func (c *countingClock) After(d time.Duration) <-chan time.Time {
	if d <= 0 {
		c.zero.Add(1)
	}
	return time.After(d)
}

// TestFairHandTryAfterCallerExtendSkipped: a caller's Extend to 3 s that succeeds
// while a try of finishHand waits for the lock's op ends that try: the TTL the caller
// chose stays (in review the try, checked before the wait, then extended the lock to
// the hand TTL of 30 s).
func TestFairHandTryAfterCallerExtendSkipped(t *testing.T) {
	const nt = 200 * time.Millisecond
	c, lock, _, _, check := lateHand(t, nt, nil)
	time.Sleep(time.Until(check.Add(-15 * time.Millisecond)))
	callerDone := make(chan error, 1)
	go func() { callerDone <- lock.Extend(context.Background(), 3*time.Second) }()
	time.Sleep(time.Until(check.Add(60 * time.Millisecond))) // finishHand's try waits for op
	for _, s := range c.servers {
		s.Resume()
	}
	if err := <-callerDone; err != nil {
		t.Fatalf("caller's Extend: %v", err)
	}
	t.Logf("after the caller's Extend to 3 s: valid for %v", time.Until(lock.Until()).Round(time.Millisecond))
	time.Sleep(2 * nt)
	lock.WaitForCalls()
	if left := time.Until(lock.Until()); left > 5*time.Second {
		t.Errorf("after the caller's successful Extend to 3 s, the lock is valid for %v: finishHand extended it to the hand TTL", left.Round(time.Millisecond))
	}
	_ = lock.Release(context.Background())
}

var _ = fmt.Sprint
var _ sync.Mutex

// TestFairHandTryAfterReleaseReportsNoExtend: a try of finishHand waits for the lock's
// op behind the caller's Extend; meanwhile the caller releases the lock. The try then
// finds the lock released: it sends nothing and reports no Extend event either (in
// review it reported a lost Extend the caller never made).
func TestFairHandTryAfterReleaseReportsNoExtend(t *testing.T) {
	const nt = 200 * time.Millisecond
	events := newEventLog()
	c, lock, _, _, check := lateHand(t, nt, events)
	time.Sleep(time.Until(check.Add(-15 * time.Millisecond)))
	events.take() // finishHand's first try
	callerDone := make(chan error, 1)
	go func() { callerDone <- lock.Extend(context.Background(), 30*time.Second) }() // holds op for nt
	time.Sleep(time.Until(check.Add(30 * time.Millisecond)))                        // finishHand's try waits for op
	relDone := make(chan error, 1)
	go func() { relDone <- lock.Release(context.Background()) }()
	t.Logf("caller's Extend: %v", <-callerDone)
	for _, s := range c.servers {
		s.Resume()
	}
	t.Logf("caller's Release: %v", <-relDone)
	time.Sleep(2 * nt)
	lock.WaitForCalls()
	extends := 0
	for _, e := range events.take() {
		t.Logf("event %v outcome=%v renewal=%v err=%v", e.Op, e.Outcome, e.Renewal, e.Err)
		if e.Op == redlock.OpExtend {
			extends++
		}
	}
	if extends != 1 {
		t.Errorf("%d Extend events, want 1 (the caller's): finishHand's try reported one the caller never made", extends)
	}
}

// TestFairHandKeeperKeepsCallerTTL: KeepAlive's first extension of a handed lock (to
// the Acquire's TTL) that waits for the lock's op behind the caller's own Extend to
// 3 s, which succeeds, leaves the TTL the caller chose (in review it extended the lock
// to the Acquire's 30 s).
func TestFairHandKeeperKeepsCallerTTL(t *testing.T) {
	c, lock := handedFor(t, 30*time.Second, nil)
	resume := c.hangAll()
	callerDone := make(chan error, 1)
	go func() { callerDone <- lock.Extend(context.Background(), 3*time.Second) }() // holds the op
	time.Sleep(20 * time.Millisecond)
	_, stop := lock.KeepAlive(context.Background()) // its first Extend waits for the op
	defer stop()
	time.Sleep(50 * time.Millisecond)
	resume() // the caller's Extend is answered within its node timeout
	if err := <-callerDone; err != nil {
		t.Fatalf("the caller's Extend: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the keeper's first Extend has run, or been skipped
	lock.WaitForCalls()
	if left := time.Until(lock.Until()); left > 5*time.Second {
		t.Errorf("after the caller's Extend to 3 s the lock is valid for %v: KeepAlive extended it to the Acquire's TTL", left.Round(time.Millisecond))
	}
}
