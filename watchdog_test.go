package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestKeepAliveHoldsPastTTL: a kept-alive lock outlives several TTLs, nobody else gets
// it meanwhile, and Release ends the renewal and the work's context.
func TestKeepAliveHoldsPastTTL(t *testing.T) {
	const ttl = 300 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{NodeTimeout: ttl / 20}) // KeepAlive needs ttl ≥ 20 × NodeTimeout
	lock, err := acquireRetrying(t, c.client, "kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	first := lock.Until()

	select { // the work: 4 TTLs
	case <-work.Done():
		t.Fatalf("work context ended while the nodes were healthy: %v", context.Cause(work))
	case <-time.After(4 * ttl):
	}
	if !lock.Until().After(first.Add(2 * ttl)) {
		t.Fatalf("Until moved from %v only to %v in 4 TTLs", first, lock.Until())
	}
	if _, err := c.newClient(redlock.Options{}).TryAcquire(t.Context(), "kept", ttl); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("another client while kept alive: got %v, want ErrNotAcquired", err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-work.Done()
	if cause := context.Cause(work); errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("released lock reported as lost: %v", cause)
	}
}

// TestKeepAliveLossBeforeValidityEnds: with every node hung, the work's context ends
// before the lock's validity does, with a cause matching ErrLockLost.
func TestKeepAliveLossBeforeValidityEnds(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	const ttl = time.Second
	lock, err := c.client.TryAcquire(t.Context(), "hung", ttl)
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	for _, s := range c.servers {
		s.Pause()
	}
	<-work.Done()
	ended := time.Now()
	for _, s := range c.servers {
		s.Resume()
	}
	until := lock.Until()
	t.Logf("work context ended %v after acquisition, %v before the validity end", ended.Sub(acquired), until.Sub(ended))
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if !ended.Before(until) {
		t.Fatalf("work context ended at %v, not before the validity end %v", ended, until)
	}
	if ended.Sub(acquired) < ttl/2 {
		t.Fatalf("gave up after %v: renewal should keep trying while validity remains", ended.Sub(acquired))
	}
}

// TestKeepAliveTakenOver: when the nodes say our token is gone, the work's context ends
// at the next renewal.
func TestKeepAliveTakenOver(t *testing.T) {
	const ttl = 600 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{NodeTimeout: ttl / 20}) // KeepAlive needs ttl ≥ 20 × NodeTimeout
	lock, err := acquireRetrying(t, c.client, "stolen", 10*ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(t.Context(), ttl); err != nil { // the keeper renews with the latest TTL
		t.Fatal(err)
	}
	lock.WaitForCalls()
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	for _, a := range c.admin {
		a.Set(t.Context(), "stolen", "intruder", time.Minute)
	}
	start := time.Now()
	<-work.Done()
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if took := time.Since(start); took > ttl/3+200*time.Millisecond {
		t.Fatalf("loss noticed after %v, want about one renewal period (%v)", took, ttl/3)
	}
	c.wantValues("stolen", "intruder", "intruder", "intruder")
}

// TestKeepAliveStops: the renewal ends with the caller's context and with stop, and a
// second KeepAlive on the same lock is refused.
func TestKeepAliveStops(t *testing.T) {
	const ttl = 300 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{NodeTimeout: ttl / 20}) // KeepAlive needs ttl ≥ 20 × NodeTimeout
	lock, err := acquireRetrying(t, c.client, "stops", ttl)
	if err != nil {
		t.Fatal(err)
	}
	parent, cancel := context.WithCancel(t.Context())
	work, stop := lock.KeepAlive(parent)
	second, _ := lock.KeepAlive(t.Context())
	if second.Err() == nil || !strings.Contains(context.Cause(second).Error(), "already running") {
		t.Fatalf("second KeepAlive: context %v, cause %v; want it cancelled", second.Err(), context.Cause(second))
	}
	cancel()
	<-work.Done()
	stop() // waits for the goroutine; a no-op after it ended
	// No renewal after the stop: the lock runs out at its last Until.
	deadline := lock.Until()
	other := c.newClient(redlock.Options{RetryDelay: redlock.ExponentialJitter(time.Millisecond, 5*time.Millisecond)})
	ctx, done := context.WithTimeout(t.Context(), 5*ttl)
	defer done()
	next, err := other.Acquire(ctx, "stops", ttl)
	if err != nil {
		t.Fatalf("lock still renewed after its KeepAlive stopped: %v", err)
	}
	if time.Now().Before(deadline) {
		t.Fatal("another client got the lock before the old validity ended")
	}
	next.Release(t.Context())

	// A new KeepAlive after the first ended is allowed.
	lock2, err := acquireRetrying(t, c.client, "stops-2", ttl)
	if err != nil {
		t.Fatal(err)
	}
	w1, stop1 := lock2.KeepAlive(t.Context())
	stop1()
	w2, stop2 := lock2.KeepAlive(t.Context())
	defer stop2()
	if w1.Err() == nil || w2.Err() != nil {
		t.Fatalf("after stop: first %v, second %v; want first cancelled, second running", w1.Err(), w2.Err())
	}
	if err := lock2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDo: the work runs under the lock, the lock is released after, fn's error comes
// back, and a lock lost during the work is reported as ErrLockLost.
func TestDo(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	other := c.newClient(redlock.Options{})
	errWork := errors.New("work failed")
	err := c.client.Do(t.Context(), "job", time.Second, func(ctx context.Context) error {
		if _, err := other.TryAcquire(ctx, "job", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			t.Errorf("another client during Do: got %v, want ErrNotAcquired", err)
		}
		return errWork
	})
	if !errors.Is(err, errWork) || errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: got %v, want the work's error only", err)
	}
	if l, err := other.TryAcquire(t.Context(), "job", time.Second); err != nil {
		t.Fatalf("after Do: %v", err)
	} else {
		l.Release(t.Context())
		l.WaitForCalls()
	}

	err = c.client.Do(t.Context(), "job", time.Second, func(ctx context.Context) error {
		for _, a := range c.admin {
			a.Set(ctx, "job", "intruder", time.Minute)
		}
		<-ctx.Done() // the keeper notices at its next renewal
		return ctx.Err()
	})
	if !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do with the lock taken: got %v, want ErrLockLost and the work's context error", err)
	}
	c.wantValues("job", "intruder", "intruder", "intruder")
}

// acquireRetrying acquires key, retrying failed attempts for up to 5 s: with a node
// timeout of a few milliseconds, a first attempt over cold connections (dial, script
// load) can time out.
func acquireRetrying(t *testing.T, c *redlock.Client, key string, ttl time.Duration) (*redlock.Lock, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	return c.Acquire(ctx, key, ttl)
}

// stackShows reports whether some goroutine's stack holds every one of the given
// function names: the way to see that a call is blocked where the test wants it.
func stackShows(names ...string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		all := true
		for _, name := range names {
			all = all && bytes.Contains(g, []byte(name))
		}
		if all {
			return true
		}
	}
	return false
}

// heldExtend starts an Extend of lock (to its TTL again: a minute) in the background
// and returns once every node of a gatedCluster has run it and holds its reply, until
// the gates are released; the Extend's error comes on the channel then.
func heldExtend(t *testing.T, lock *redlock.Lock, gate, others *replyGate) <-chan error {
	t.Helper()
	lock.WaitForCalls()
	gate.armed.Store(true)
	others.armed.Store(true)
	extended := make(chan error, 1)
	go func() { extended <- lock.Extend(t.Context(), time.Minute) }()
	waitHeld(t, gate)
	waitHeld(t, others)
	waitHeld(t, others)
	gate.armed.Store(false)
	others.armed.Store(false)
	return extended
}

// TestKeepAliveDuringRelease: a KeepAlive called while a Release waits for the lock's
// step in progress (an Extend whose replies are held) must not outlive the Release:
// its context ends no later than Release returns.
func TestKeepAliveDuringRelease(t *testing.T) {
	c, gate, others := gatedCluster(t)
	ctx := t.Context()
	lock, err := c.client.TryAcquire(ctx, "releasing", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	extended := heldExtend(t, lock, gate, others)
	released := make(chan error, 1)
	go func() { released <- lock.Release(ctx) }()
	eventually(t, "Release waiting for the Extend", func() bool {
		return stackShows("(*Lock).Release", "(*Lock).begin")
	})
	work, stop := lock.KeepAlive(ctx)
	defer stop()
	gate.release()
	others.release()
	if err := <-extended; err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("Release: %v", err)
	}
	if work.Err() == nil {
		t.Fatal("a KeepAlive started during Release still runs after Release returned")
	}
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost (already released)", cause)
	}
}

// TestKeepAliveEndsWithClose: Close ends every KeepAlive before it returns, with a
// cause matching ErrClosed, and a KeepAlive after Close is refused the same way.
func TestKeepAliveEndsWithClose(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	lock, err := c.client.TryAcquire(t.Context(), "closing", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := c.client.Close(); err != nil {
		t.Fatal(err)
	}
	if work.Err() == nil {
		t.Fatal("KeepAlive still runs after Close returned")
	}
	if cause := context.Cause(work); !errors.Is(cause, redlock.ErrClosed) {
		t.Fatalf("cause %v, want ErrClosed", cause)
	}
	late, _ := lock.KeepAlive(t.Context())
	if cause := context.Cause(late); !errors.Is(cause, redlock.ErrClosed) {
		t.Fatalf("KeepAlive after Close: cause %v, want ErrClosed", cause)
	}
}
