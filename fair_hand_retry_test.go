package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// extendWatch is an Observer that sends every failed Extend on failed.
type extendWatch struct{ failed chan redlock.Event }

func (o *extendWatch) Observe(_ context.Context, e redlock.Event) {
	if e.Op == redlock.OpExtend && e.Outcome != redlock.OutcomeOK {
		select {
		case o.failed <- e:
		default:
		}
	}
}

// switchedDelay is a RetryDelay that is long until fast is set: a fair waiter then
// waits for the nodes' hand-over instead of attempting (as in handedLock), and what
// retries after the grant retries soon.
func switchedDelay(fast *atomic.Bool) func(int) time.Duration {
	return func(int) time.Duration {
		if fast.Load() {
			return 50 * time.Millisecond
		}
		return 10 * time.Second
	}
}

// TestFairHandFinishRetries: a fair Acquire for 30 s that the nodes hand over holds
// the key for the hand TTL (about the 2 s lease) until finishHand extends it, at half
// its validity. When a majority misses that Extend, finishHand tries again while the
// lock is valid: with one try (found in review), a blip of 2 nodes of 3 left the 30 s
// lock to expire 2 s after its grant, and another Client took the key.
func TestFairHandFinishRetries(t *testing.T) {
	watch := &extendWatch{failed: make(chan redlock.Event, 1)}
	c, lock := handedFor(t, 30*time.Second, watch)
	defer lock.Release(context.Background())
	granted := lock.Until()
	c.servers[0].Pause()
	c.servers[1].Pause()
	select {
	case <-watch.failed: // finishHand's first try, at half the validity
	case <-time.After(time.Until(granted)):
		t.Fatal("no Extend failed while a majority was paused")
	}
	c.servers[0].Resume()
	c.servers[1].Resume()
	eventually(t, "the handed lock extended to its TTL", func() bool {
		return time.Until(lock.Until()) > 20*time.Second || time.Now().After(granted)
	})
	if left := time.Until(lock.Until()); left < 20*time.Second {
		t.Fatalf("a 30 s lock handed over is valid for %v more after a majority missed one Extend", left)
	}
	if _, err := c.client.TryAcquire(context.Background(), "k", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Errorf("another Client's TryAcquire = %v, want ErrNotAcquired", err)
	}
}

// TestFairHandedKeepAliveGivesUpInTime: KeepAlive of a lock the nodes handed over
// with less than its TTL first extends it to its TTL (finishHanded). While every node
// hangs, it gives up as the keeper's renewals do: the work's context ends at least
// V/10 before Until, with a cause matching ErrLockLost. It used to retry until
// Until − NodeTimeout and end the work with the last Extend's ErrUnavailable, a
// RetryDelay or less before Until (found in review).
func TestFairHandedKeepAliveGivesUpInTime(t *testing.T) {
	var fast atomic.Bool
	opts := redlock.Options{Fair: true, NodeTimeout: 50 * time.Millisecond, RetryDelay: switchedDelay(&fast)}
	const lease = time.Second // the default FairLease
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, NodeTimeout: 50 * time.Millisecond})
	lock := c.handOver(c.newClient(opts), 5*time.Second, lease)
	fast.Store(true)
	until := lock.Until()
	ended, cause := keptAliveWhileHung(c, lock)
	margin := until.Sub(ended)
	// The hand TTL is at least 2/3 of the lease (the waiter renews its entry every
	// lease/3), so V/10 is at least 65 ms here.
	if margin < 65*time.Millisecond {
		t.Errorf("the work heard of the loss %v before Until; KeepAlive promises V/10 (≥ 65 ms here)", margin)
	}
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("cause %v, want one matching ErrLockLost", cause)
	}
	var qe *redlock.QuorumError
	if !errors.As(cause, &qe) {
		t.Errorf("cause %v carries no *QuorumError of the failed renewals", cause)
	}
}

// okAfterEnded returns the successful events of events after the first Ended one.
func okAfterEnded(events []redlock.Event) []redlock.Event {
	var after []redlock.Event
	for i, e := range events {
		if e.Ended {
			for _, f := range events[i+1:] {
				if f.Outcome == redlock.OutcomeOK {
					after = append(after, f)
				}
			}
			break
		}
	}
	return after
}

// TestFairHandKeptAliveStaysLost: KeepAlive takes over finishHand's work on a handed
// lock. When a majority is paused, KeepAlive gives the lock up as lost (Until − V/10);
// finishHand must not go on trying behind it: in review, its Extend still out when the
// keeper gave up succeeded once the majority was back, and the lock the work was told
// it lost held the key for its whole 30 s TTL.
func TestFairHandKeptAliveStaysLost(t *testing.T) {
	events := newEventLog()
	c, lock := handedFor(t, 30*time.Second, events)
	until := lock.Until()
	c.servers[0].Pause()
	c.servers[1].Pause()
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	<-kctx.Done()
	c.servers[0].Resume()
	c.servers[1].Resume()
	if cause := context.Cause(kctx); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("KeepAlive ended with %v, want a cause matching ErrLockLost", cause)
	}
	lock.WaitForCalls()
	if now := lock.Until(); now.After(until) {
		t.Errorf("the lock given up as lost was extended afterwards: valid for %v more", time.Until(now).Round(time.Millisecond))
	}
	if after := okAfterEnded(events.take()); len(after) > 0 {
		t.Errorf("%d successful steps after the lock's Ended event, the first %v", len(after), after[0].Op)
	}
	<-time.After(time.Until(until)) // the hand validity is over
	if l, err := c.client.Acquire(t.Context(), "k", time.Second); err != nil {
		t.Errorf("after the lost lock's validity another Client could not take the key: %v", err)
	} else {
		_ = l.Release(context.Background())
	}
}

// TestFairHandedKeepAliveMargin: with finishHand started, KeepAlive of a handed lock
// while every node hangs still ends the work V/10 before Until at the latest: in review
// the keeper's last try waited behind one of finishHand's and the work heard of the
// loss late (82–180 ms before Until, V/10 being 197 ms).
func TestFairHandedKeepAliveMargin(t *testing.T) {
	c, lock := handedFor(t, 30*time.Second, nil)
	until := lock.Until()
	v := time.Until(until) // at most the lock's validity V
	ended, cause := keptAliveWhileHung(c, lock)
	if margin := until.Sub(ended); margin < v/10 {
		t.Errorf("the work heard of the loss %v before Until; KeepAlive promises V/10 (≥ %v)", margin.Round(time.Millisecond), (v / 10).Round(time.Millisecond))
	}
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Errorf("cause %v, want one matching ErrLockLost", cause)
	}
}

// keptAliveWhileHung pauses every node of c, keeps lock alive until KeepAlive gives
// up, resumes the nodes, and returns when and why the work's context ended.
func keptAliveWhileHung(c *cluster, lock *redlock.Lock) (ended time.Time, cause error) {
	defer c.hangAll()()
	kctx, stop := lock.KeepAlive(context.Background())
	defer stop()
	<-kctx.Done()
	return time.Now(), context.Cause(kctx)
}

// handedFor returns the cluster and a lock that its nodes handed over to a fair Client
// (NodeTimeout 200 ms, FairLease 2 s, observed by ob if not nil) for ttl. The Client's
// retry delay is long until the grant, so that its waiter waits for the hand-over, and
// 50 ms after it (switchedDelay).
func handedFor(t *testing.T, ttl time.Duration, ob redlock.Observer) (*cluster, *redlock.Lock) {
	t.Helper()
	var fast atomic.Bool
	opts := redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond,
		RetryDelay: switchedDelay(&fast), Observer: ob}
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond})
	lock := c.handOver(c.newClient(opts), ttl, 2*time.Second)
	fast.Store(true)
	return c, lock
}

// hangAll pauses every node of c (SIGSTOP: each call hangs until the node resumes) and
// returns the function that resumes them.
func (c *cluster) hangAll() (resume func()) {
	for _, s := range c.servers {
		s.Pause()
	}
	return func() {
		for _, s := range c.servers {
			s.Resume()
		}
	}
}
