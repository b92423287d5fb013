package redlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// fairRounds counts the fair rounds among recorded calls: TryAcquire-mode tries
// (fair_acquire.lua with no waiter id) and a waiter's attempts (with one), each told
// apart by its token, on whichever nodes their calls were sent to, and ticket draws
// (fair_ticket.lua: 4 keys, 3 arguments), the most any node was sent.
func fairRounds(calls []sentCall) (tries, draws, attempts int) {
	tokens := map[string]bool{}
	drawsOn := map[int]int{}
	for _, call := range calls {
		switch {
		case len(call.args) == 10: // evalsha, sha, 4, 4 keys, the counter's TTL, id, lease
			drawsOn[call.node]++
			draws = max(draws, drawsOn[call.node])
		case len(call.args) == 12 && !tokens[fmt.Sprint(call.args[7])]:
			tokens[fmt.Sprint(call.args[7])] = true
			if call.args[9] == "" {
				tries++
			} else {
				attempts++
			}
		}
	}
	return tries, draws, attempts
}

// TestFairRequeueRounds: a Client that releases a fair lock while another Client waits
// for it, and at once calls Acquire again (a worker in a loop on a hot key), knows that
// someone is queued: it skips the TryAcquire-mode try, which could only fail, and makes
// two rounds in all (the ticket, which queues it behind the other waiter, and the
// attempt that wins after the other's release), not four as before: a try, the ticket,
// an attempt that only queued it, and the one that wins; and its own release, which
// names the other waiter the head, does not make it attempt before its turn.
func TestFairRequeueRounds(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	rec := &recorder{}
	a, err := redlock.New(rec.clients(c.servers), fairOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	first, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, a, "k", 5*time.Second) // a waits once, and so subscribes
	c.waitQueued("k", 1)
	eventually(t, "a listening on every node", func() bool { return listening(len(c.admin), a) })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held := wantResult(t, "a's first lock", got).lock
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 100*time.Millisecond, 2) // behind a's entry
	eventually(t, "both subscriptions", func() bool { return subscribers(ctx, c.admin, "k") >= 2 })
	// The nodes' ticket counters may differ by now (one drew a number above the
	// ticket its draw's majority agreed on; seen once in 60 runs), and a draw that
	// meets different numbers attempts at once (TestFairDrawQueuesBehind): make
	// them alike, above every ticket queued.
	_, _, counter := redlock.FairKeys("k")
	for _, admin := range c.admin {
		if err := admin.Set(ctx, counter, 100, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := len(rec.sent())
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := a.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	calls := rec.sent()[before:]
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	tries, draws, attempts := fairRounds(calls)
	t.Logf("after its release: %d tries, %d draws, %d attempts", tries, draws, attempts)
	if tries != 0 {
		t.Errorf("%d TryAcquire-mode tries with another Client queued: it cannot win them", tries)
	}
	if draws != 1 || attempts != 1 {
		t.Errorf("%d draws and %d attempts, want 1 and 1 (the draw queues it, then it wins)", draws, attempts)
	}
	if len(g.order) != 1 {
		t.Errorf("the other waiter was granted %d times, want once, before a", len(g.order))
	}
}
