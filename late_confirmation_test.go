package redlock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// slowDialClient returns a Client over c's nodes whose connections to node slowNode
// (from 0) dial delay late once slow is called. The command connection to every node
// not in down is dialled before (a ping), so from then on only slowNode's pub/sub
// connection dials.
func (c *cluster) slowDialClient(opts redlock.Options, slowNode int, delay time.Duration, down ...int) (w *redlock.Client, slow func()) {
	c.t.Helper()
	var late atomic.Bool
	rdbs := make([]redis.UniversalClient, len(c.servers))
	for i, s := range c.servers {
		o := &redis.Options{Addr: s.Addr()}
		if i == slowNode {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if late.Load() {
					time.Sleep(delay)
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
		}
		rdb := redis.NewClient(o)
		c.t.Cleanup(func() { rdb.Close() })
		if !slices.Contains(down, i) {
			if err := rdb.Ping(c.t.Context()).Err(); err != nil { // its command connection, dialled now
				c.t.Fatal(err)
			}
		}
		rdbs[i] = rdb
	}
	w, err := redlock.New(rdbs, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { w.Close() })
	return w, func() { late.Store(true) }
}

// TestLateConfirmationWakesPlainWaiter: a plain lock held on a bare majority (nodes 2
// and 3) is released. The waiter's subscription is confirmed by nodes 1 and 2 and, its
// pub/sub connection slow to dial, by node 3 only after the release. When every node
// that deleted the key announced it, node 3's notice went unheard, one of three did not
// count, and the waiter waited for RetryDelay (905 ms of 1 s, 5 runs of 5); node 3's
// confirmation, the last, now wakes it. (The releasing Client announces the release
// on the key's lead node now, which may or may not be node 3; the rule that the
// announcing node's late confirmation is checked is TestAnnouncementAfterLateConfirmation.)
func TestLateConfirmationWakesPlainWaiter(t *testing.T) {
	opts := redlock.Options{RetryDelay: func(int) time.Duration { return time.Second }}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns at a majority: a SET still on its way to node 1 would land after
	// the DEL and put the key back there; one still on its way to node 2 or 3 could
	// lose to the waiter's first attempt, leaving the holder a single node.
	holder.WaitForCalls()
	if err := c.admin[0].Del(ctx, "k").Err(); err != nil { // held on nodes 2 and 3 only
		t.Fatal(err)
	}
	const dialDelay = 300 * time.Millisecond
	w, slow := c.slowDialClient(opts, 2, dialDelay)
	slow() // from now on only node 3's pub/sub connection dials
	res := acquireAsync(ctx, w, "k", 10*time.Second)
	eventually(t, "the subscription confirmed by nodes 1 and 2", func() bool { return w.Listening("k") == 2 })
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", res)
	defer r.lock.Release(ctx)
	took := r.at.Sub(start)
	t.Logf("the waiter got the lock %v after the release (node 3 dials %v late)", took, dialDelay)
	if took > dialDelay+300*time.Millisecond {
		t.Errorf("the waiter got the lock %v after the release: it waited for RetryDelay", took)
	}
}

// TestAnnouncementAfterLateConfirmation: the releasing Client announces the release
// on one node that deleted the key, the key's lead first. The waiter's subscription is
// confirmed by three of five nodes, then by the lead, whose pub/sub connection dials
// late, after the release; a fourth node is down and never confirms, and a fifth is
// paused during the release, so that the release's majority, and the announcement,
// include the lead. The lead's confirmation is not the last one, which never comes,
// but it is checked all the same: the waiter gets the lock at once instead of after
// RetryDelay (1 s).
func TestAnnouncementAfterLateConfirmation(t *testing.T) {
	opts := redlock.Options{RetryDelay: func(int) time.Duration { return time.Second }}
	c := newCluster(t, 5, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	lead := c.client.Lead("k")
	down := (lead + 1) % len(c.servers)
	c.servers[down].Kill()
	const dialDelay = 300 * time.Millisecond
	w, slow := c.slowDialClient(opts, lead, dialDelay, down)
	slow() // from now on only the lead's pub/sub connection dials
	res := acquireAsync(ctx, w, "k", 10*time.Second)
	eventually(t, "the subscription confirmed by three nodes", func() bool { return w.Listening("k") == 3 })
	paused := (lead + 2) % len(c.servers) // the release waits for the lead's reply
	c.servers[paused].Pause()
	defer c.servers[paused].Resume()
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter", res)
	defer r.lock.Release(ctx)
	took := r.at.Sub(start)
	t.Logf("the waiter got the lock %v after the release (the lead dials %v late)", took, dialDelay)
	if took > dialDelay+300*time.Millisecond {
		t.Errorf("the waiter got the lock %v after the release: it waited for RetryDelay", took)
	}
}

// TestMaxAttemptsNotSpentOnChecks: a waiter that finds the key held subscribes, and the
// nodes' confirmations (the majority's and the last one's) make it attempt again in
// case a release was announced before them. Those checks do not count toward
// MaxAttempts: with 4 attempts and a retry delay of 200 ms, Acquire gives up after
// three delays, not after one as it did when they counted (about 200 ms).
func TestMaxAttemptsNotSpentOnChecks(t *testing.T) {
	const delay = 200 * time.Millisecond
	opts := redlock.Options{MaxAttempts: 4, RetryDelay: func(int) time.Duration { return delay }}
	c := newCluster(t, 5, redistest.Options{}, opts)
	held, err := c.client.Acquire(t.Context(), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns at a majority: a SET still on its way could lose to the other
	// Client's first attempt, which then wins a node and comes back soon (a lost race).
	held.WaitForCalls()
	other := c.newClient(opts)
	start := time.Now()
	_, err = other.Acquire(t.Context(), "k", time.Second)
	took := time.Since(start)
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("Acquire: %v, want ErrNotAcquired", err)
	}
	if took < 3*delay-delay/4 {
		t.Errorf("gave up after %v, want about %v (three retry delays)", took, 3*delay)
	}
	if got := other.Listening("k"); got != 5 {
		t.Errorf("%d of 5 nodes confirmed the subscription: the checks did not all happen", got)
	}
}
