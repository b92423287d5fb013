package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFailedHandoffReleaseBeforeWaiter: after a failed handoff, Release queues the
// plain release (both tokens) and only then tells the waiter, so that the waiter's
// calls go behind that release on every node and do not meet our stale keys. That must
// also hold while the handoff call to a node is still queued, not sent: the sender
// drops the abandoned call and frees the release parked behind it, which must go out
// before the waiter's SET taken in the same batch (it went one batch later). Here node
// 3's sender is busy (a reply held), so its handoff call is still queued when the
// waiter attempts. The waiter may attempt twice in all (MaxAttempts 2): once before it
// queued, once after it was told.
func TestFailedHandoffReleaseBeforeWaiter(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	rdbs := redistest.Clients(servers)
	gate := newReplyGate()
	rdbs[2].AddHook(gate)
	client, err := redlock.New(rdbs, redlock.Options{NodeTimeout: 500 * time.Millisecond, MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	t.Cleanup(gate.release) // first, so that Close does not wait for a held reply
	c := &cluster{t: t, servers: servers, client: client}
	for _, s := range servers {
		c.admin = append(c.admin, s.Client())
	}
	c.loadScripts()
	ctx := t.Context()

	holder, err := client.Acquire(ctx, "ho", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	waiter := acquireAsync(ctx, client, "ho", time.Minute)
	eventually(t, "the waiter's offer", func() bool { return client.Offered("ho") })
	// Its subscriptions first: their connections' set-up goes through the gate too.
	eventually(t, "the waiter's subscriptions", func() bool { return subscribed(ctx, c.admin, "ho") })
	// Node 3's sender is busy: a call on another key whose reply is held.
	holdNext(t, gate, func() { tryAsync(c, "other") })
	// The handoff fails at once: Release's context is already done (a deferred
	// Release after the caller's deadline). Its call to node 3 is still queued.
	done, cancel := context.WithCancel(ctx)
	cancel()
	_ = holder.Release(done)
	eventually(t, "the waiter's attempt queued on node 3 behind the handoff call",
		func() bool { return client.Queued(2) >= 2 })
	gate.release()
	r := wantResult(t, "the waiter", waiter)
	if r.err != nil {
		t.Fatalf("the waiter's attempt after the failed handoff: %v", r.err)
	}
	r.lock.WaitForCalls()
	eventually(t, "the old token gone from node 3", func() bool { return c.values("ho")[2] != holder.Token() })
	if got := c.values("ho")[2]; got != r.lock.Token() {
		t.Errorf("node 3 holds %q after the waiter's attempt, want the waiter's token %q: "+
			"its SET was sent before the release of the failed handoff", got, r.lock.Token())
	}
	_ = r.lock.Release(ctx)
}
