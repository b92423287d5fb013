package redlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// handObserver acts on the first Extend event that KeepAlive did not make (so
// finishHand's, on a handed lock with no caller Extend): it signals entered, then
// runs act (on finishHand's goroutine, inside Observe).
type handObserver struct {
	once    sync.Once
	entered chan struct{}
	act     atomic.Pointer[func()]
	fails   bool // act only on a failed Extend
}

func (o *handObserver) Observe(_ context.Context, e redlock.Event) {
	if e.Op != redlock.OpExtend || e.Renewal || (o.fails && e.Outcome == redlock.OutcomeOK) {
		return
	}
	act := o.act.Load()
	if act == nil {
		return
	}
	o.once.Do(func() {
		close(o.entered)
		(*act)()
	})
}

// TestFairHandReleaseFromObserveWithKeeper: Observe may call back into the lock
// (observe.go). A Release called from the Observe of finishHand's Extend, while a
// KeepAlive of the lock runs, returns, and the Client closes: in review, the keeper
// waited for finishHand's goroutine, which was in that Observe, and the Release waited
// for the keeper.
func TestFairHandReleaseFromObserveWithKeeper(t *testing.T) {
	obs := &handObserver{entered: make(chan struct{})}
	var fast atomic.Bool
	opts := redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond,
		RetryDelay: switchedDelay(&fast), Observer: obs}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond})
	w, err := redlock.New(redistest.Clients(c.servers), opts) // not closed by Cleanup: Close hangs
	if err != nil {
		t.Fatal(err)
	}
	lock := c.handOver(w, 30*time.Second, 2*time.Second)
	proceed := make(chan struct{})
	released := make(chan error, 1)
	act := func() {
		<-proceed
		released <- lock.Release(context.Background())
	}
	obs.act.Store(&act)
	select {
	case <-obs.entered: // finishHand's Extend, at half the validity, is in Observe
	case <-time.After(5 * time.Second):
		t.Fatal("finishHand made no Extend")
	}
	kctx, stop := lock.KeepAlive(context.Background())
	_ = stop
	close(proceed)
	select {
	case err := <-released:
		t.Logf("Release from Observe returned %v", err)
	case <-time.After(3 * time.Second):
		t.Errorf("Release called from Observe of finishHand's Extend, with a KeepAlive registered, has not returned after 3 s (work context done: %v)", kctx.Err() != nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// TestFairHandSlowObserveDoesNotHoldKeeper: a slow Observe of finishHand's failed
// Extend (every node hangs) delays only that step: a KeepAlive begun meanwhile still
// ends the work's context before Until (in review it stayed open past Until while
// another Client took the key).
func TestFairHandSlowObserveDoesNotHoldKeeper(t *testing.T) {
	obs := &handObserver{entered: make(chan struct{}), fails: true}
	c, lock := handedFor(t, 30*time.Second, obs)
	until := lock.Until()
	slow := func() { time.Sleep(time.Until(until) + 700*time.Millisecond) } // an exporter stuck for a while
	obs.act.Store(&slow)
	for _, s := range c.servers {
		s.Pause()
	}
	select {
	case <-obs.entered: // finishHand's first try failed; its Observe is slow
	case <-time.After(5 * time.Second):
		t.Fatal("finishHand's Extend did not fail")
	}
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	select {
	case <-kctx.Done():
		t.Logf("work ended %v before Until: %v", time.Until(until).Round(time.Millisecond), context.Cause(kctx))
	case <-time.After(time.Until(until) + 50*time.Millisecond):
	}
	for _, s := range c.servers { // the nodes come back once the lock's validity is over
		s.Resume()
	}
	if kctx.Err() != nil {
		return
	}
	l, err := c.client.TryAcquire(context.Background(), "k", time.Second)
	if err == nil {
		defer l.Release(context.Background())
	}
	t.Errorf("the work's context is still open %v after Until (another Client's TryAcquire: %v)",
		time.Since(until).Round(time.Millisecond), err)
	<-kctx.Done()
	t.Logf("work ended %v after Until: %v", time.Since(until).Round(time.Millisecond), context.Cause(kctx))
}

// TestFairHandKeeperNotDelayedByLateTry: with every node hung, a KeepAlive begun just
// before Until − V/10 ends the work by Until − V/10 though finishHand's retries run
// too: finishHand starts no try later than a node timeout before the keeper's last
// one (in review, the keeper waited for a late try of finishHand and the work heard of
// the loss near Until).
func TestFairHandKeeperNotDelayedByLateTry(t *testing.T) {
	_, lock, until, v, _ := lateHand(t, 200*time.Millisecond, nil)
	promise := until.Add(-v / 10)
	time.Sleep(time.Until(promise.Add(-30 * time.Millisecond))) // a retry of finishHand is out
	keepAliveEndsBy(t, lock, until, promise)
}

// TestFairHandStoppedKeepAliveLeavesFinisher: a KeepAlive stopped before it extended
// a handed lock to its TTL (a majority missed its first try) leaves that work to
// finishHand: the 30 s lock, neither released nor extended, is extended once the
// majority is back (in review, KeepAlive had ended finishHand for good, and another
// Client took the key when the hand TTL ran out).
func TestFairHandStoppedKeepAliveLeavesFinisher(t *testing.T) {
	watch := &extendWatch{failed: make(chan redlock.Event, 1)}
	c, lock := handedFor(t, 30*time.Second, watch)
	defer lock.Release(context.Background())
	granted := lock.Until()
	c.servers[0].Pause()
	c.servers[1].Pause()
	_, stop := lock.KeepAlive(context.Background())
	select {
	case <-watch.failed: // the keeper's first try
	case <-time.After(5 * time.Second):
		t.Fatal("no Extend failed while a majority was paused")
	}
	stop() // the short work is done; the caller keeps the lock
	c.servers[0].Resume()
	c.servers[1].Resume()
	time.Sleep(time.Until(granted) + 50*time.Millisecond)
	if left := time.Until(lock.Until()); left < 20*time.Second {
		t.Errorf("a 30 s lock handed over, neither released nor extended, is valid for %v more", left.Round(time.Millisecond))
	}
	if l, err := c.client.TryAcquire(context.Background(), "k", time.Second); err == nil {
		t.Errorf("another Client took the key of the unreleased 30 s lock")
		_ = l.Release(context.Background())
	}
}

// TestFairHandCancelledKeepAliveLeavesFinisher: the same with healthy nodes, for a
// KeepAlive given a context that has already ended: its keeper extends nothing, and
// finishHand still extends the handed lock to its TTL.
func TestFairHandCancelledKeepAliveLeavesFinisher(t *testing.T) {
	_, lock, _ := handedLock(t, 30*time.Second)
	defer lock.Release(context.Background())
	granted := lock.Until()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	kctx, stop := lock.KeepAlive(ctx)
	<-kctx.Done()
	stop()
	time.Sleep(time.Until(granted) - 100*time.Millisecond)
	if left := time.Until(lock.Until()); left < 20*time.Second {
		t.Errorf("a 30 s lock handed over, neither released nor extended, is valid for %v more", left.Round(time.Millisecond))
	}
}
