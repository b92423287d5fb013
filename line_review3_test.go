package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Faults in the line (line.go) that a third adversarial review found; each test
// failed before its fix.

// keyOnLineNode returns a key, named after prefix, whose line node is node i of
// client's nodes.
func keyOnLineNode(t *testing.T, client *redlock.Client, prefix string, i int) string {
	t.Helper()
	for n := range 1000 {
		if key := fmt.Sprintf("%s-%d", prefix, n); client.LineNode(key) == i {
			return key
		}
	}
	t.Fatalf("no key of %d tries has node %d as its line node", 1000, i+1)
	return ""
}

// clientWithDialGate returns a Client (polling once an hour) whose clients of the
// nodes i for which gated(i) holds cannot dial a new connection while *cut is set;
// the connections they have keep working.
func (c *cluster) clientWithDialGate(cut *atomic.Bool, gated func(i int) bool) *redlock.Client {
	return c.clientTuned(func(i int, o *redis.Options) redis.Hook {
		if gated(i) {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if cut.Load() {
					return nil, errors.New("cut off by the test")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
		}
		return nil
	})
}

// TestLineReleaseAnnouncedDespiteStaleOwnSubscription: the releasing Client X still
// lingers subscribed for the key, as it believes, but its subscription on the key's
// line node is gone (the connection was cut, and X cannot dial that node again), while
// Client B, which waits and never polls, is subscribed there. The line node must still
// announce X's release: before, release.lua left X's supposed subscriber out of the
// count, found nobody else, stayed silent, and X announced nothing either, since the
// line node's reply showed the delete: B slept on a free key.
func TestLineReleaseAnnouncedDespiteStaleOwnSubscription(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()
	key := "line-stale-own"
	line := c.client.LineNode(key)
	var cut atomic.Bool // X cannot dial the line node while set
	x := c.clientWithDialGate(&cut, func(i int) bool { return i == line })
	x.SetLinger(time.Minute)
	// X waits once and wins: it stays subscribed on every node, and its pool keeps a
	// connection to the line node for commands.
	xl := c.wonAfterWait(x, key)
	xl.WaitForCalls()
	b := c.newClient(noPolling)
	resB := c.waitInLine(ctx, b, key)

	cut.Store(true)
	admin := c.admin[line]
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	channel := "redlock:released:" + key
	eventually(t, "B subscribed again, X not", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] == 1 && b.Listening(key) == len(c.servers)
	})
	if got := x.Listening(key); got != len(c.servers) {
		t.Logf("X counts %d nodes listening (the stale entry this test is about is gone)", got)
	}
	time.Sleep(300 * time.Millisecond) // B's check attempt after its resubscription (refused: X holds the key)
	released := time.Now()
	if err := xl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "B, which never polls", resB, released, 2*time.Second)
	_ = r.lock.Release(ctx)
}

// TestLineTurnRefusalsNotCounted: the releasing Client has a NodeTimeout of 2 s, so
// its release gives the line's head a turn of 500 ms; the head's Client is dead. The
// waiter behind it has a NodeTimeout of 50 ms, so it comes back every 12.5 ms during
// that turn, and MaxAttempts 5. The turn's refusals meet a free key kept for another
// Client: they must not count toward MaxAttempts, and the waiter gets the key once
// the turn is over, instead of ErrNotAcquired within 100 ms.
func TestLineTurnRefusalsNotCounted(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()
	key := "line-turn-free"
	releaser := c.newClient(redlock.Options{NodeTimeout: 2 * time.Second, RetryDelay: noPolling.RetryDelay})
	holder, err := releaser.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	dead := c.newClient(noPolling)
	deadRes := c.waitInLine(ctx, dead, key)
	waiter := c.newClient(redlock.Options{NodeTimeout: 50 * time.Millisecond, MaxAttempts: 5, RetryDelay: noPolling.RetryDelay})
	res := c.waitInLine(ctx, waiter, key)
	dead.Close() // keeps its place, first in line, until its lease ends
	<-deadRes
	if got := c.lineOf(key); len(got) != 2 || got[0] != dead.LineID() {
		t.Fatalf("line %q, want the dead Client %q first", got, dead.LineID())
	}
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "the waiter behind a dead head", res, released, 3*time.Second)
	if took := r.at.Sub(released); took < 400*time.Millisecond {
		t.Errorf("the waiter got the key %v after the release, inside the dead head's 500 ms turn", took)
	}
	_ = r.lock.Release(ctx)
}

// TestLineWinnerLeavesWithoutItsLineCall: a waiter whose Client took a place in the
// key's line wins the key on nodes 1 and 2 while its call to node 3, the line node,
// is still queued behind a reply node 3 holds back. Its Release drops that unsent
// call (skipUnsent), and must still take the Client's place out on node 3: before,
// node 3 got no release at all, and every later release named a Client that waited
// for nothing, costing each hand-over a turn.
func TestLineWinnerLeavesWithoutItsLineCall(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	// Three rounds: in some runs the winning call to node 3 had left the queue
	// already, and the release has nothing to skip there.
	for round := range 3 {
		key := keyOnLineNode(t, c.client, fmt.Sprintf("line-unsent-%d", round), 2)
		h := c.newClient(noPolling)
		holder, err := h.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		holder.WaitForCalls()
		res := acquireAsync(ctx, c.client, key, time.Minute)
		eventually(t, "the waiter's place", func() bool { return slices.Contains(c.lineOf(key), c.client.LineID()) })
		other := busyNode3(t, c, gate) // node 3's sender waits for a held reply from here on
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		won := wantResult(t, "the waiter", res).lock
		if err := won.Release(ctx); err != nil {
			t.Fatal(err)
		}
		gate.release()
		won.WaitForCalls()
		other.WaitForCalls()
		if got := c.lineOf(key); slices.Contains(got, c.client.LineID()) {
			t.Errorf("round %d: line %q still holds the Client %q after its lock was released", round, got, c.client.LineID())
		}
		release(t, other)
		other.WaitForCalls()
	}
}

// TestOwnerReleaseMetLateAtTheLead: an owner's last hold is released, and its delete
// reaches the key's line node 300 ms after the other four nodes'. The release is
// announced once a majority deleted the key ("!<hold id>"); a plain waiter that never
// polls hears it and asks the line node first, which still holds the owner's key.
// That node must answer that the announced hold is still there (acquire.lua's 2, as
// for a plain token), so that the waiter asks the other nodes anyway and comes back
// soon; before, it took the answer for a lost race and slept for its RetryDelay on a
// key free on four nodes of five.
func TestOwnerReleaseMetLateAtTheLead(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, noPolling)
	ctx := t.Context()
	key := "owner-late-at-lead"
	line := c.client.LineNode(key)
	var slow atomic.Bool
	owner := c.clientTuned(func(i int, _ *redis.Options) redis.Hook {
		if i != line {
			return nil
		}
		return slowScripts{on: &slow, d: 300 * time.Millisecond, detach: true}
	})
	hold, err := owner.Acquire(redlock.WithOwner(ctx, "job"), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	hold.WaitForCalls()
	waiter := c.newClient(noPolling)
	res := acquireAsync(ctx, waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	time.Sleep(100 * time.Millisecond) // the waiter's check after subscribing (refused: the hold is on every node)
	slow.Store(true)
	released := time.Now()
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	slow.Store(false)
	r := wantGrantWithin(t, "the plain waiter", res, released, 3*time.Second)
	_ = r.lock.Release(ctx)
}

// TestOwnerReleaseAnnouncedDespiteStaleOwnSubscriptions: as
// TestLineReleaseAnnouncedDespiteStaleOwnSubscription, for an owner's hold, which the
// releasing Client announces itself: X lingers subscribed for the key, as it believes,
// but its subscriptions are gone on every node and it cannot dial again, while Client
// B, which waits and never polls, is subscribed everywhere. Before, X discounted its
// own subscription from each node's count of listeners, found nobody, and announced
// nothing: B slept on a free key.
func TestOwnerReleaseAnnouncedDespiteStaleOwnSubscriptions(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()
	key := "owner-stale-own"
	var cut atomic.Bool
	x := c.clientWithDialGate(&cut, func(int) bool { return true })
	x.SetLinger(time.Minute)
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	first := acquireAsync(redlock.WithOwner(ctx, "job"), x, key, time.Minute)
	eventually(t, "X's subscriptions", func() bool { return x.Listening(key) == len(c.servers) })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// X's win may lack a node where the holder's delete landed late (a woken Client
	// attempts at once): X takes the key again, now on every node, and stays
	// subscribed (linger).
	won := wantResult(t, "X", first).lock
	if err := won.Release(ctx); err != nil {
		t.Fatal(err)
	}
	won.WaitForCalls()
	xl, err := x.TryAcquire(redlock.WithOwner(ctx, "job"), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	xl.WaitForCalls()
	b := c.newClient(noPolling)
	resB := c.waitInLine(ctx, b, key)

	cut.Store(true)
	channel := "redlock:released:" + key
	for _, a := range c.admin {
		if err := a.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "B subscribed again on every node, X on none", func() bool {
		for _, a := range c.admin {
			if a.PubSubNumSub(ctx, channel).Val()[channel] != 1 {
				return false
			}
		}
		return b.Listening(key) == len(c.servers)
	})
	time.Sleep(300 * time.Millisecond) // B's check attempt after its resubscription (refused: X holds the key)
	released := time.Now()
	if err := xl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "B, which never polls", resB, released, 2*time.Second)
	_ = r.lock.Release(ctx)
}
