package redlock_test

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// fairRounds counts the fair steps a list of recorded calls made on node 0: TryAcquire-
// mode tries (fair_acquire.lua with no waiter id), ticket draws (fair_ticket.lua: 4
// keys, 1 argument) and a waiter's attempts (fair_acquire.lua with a waiter id).
func fairRounds(calls []sentCall) (tries, draws, attempts int) {
	for _, call := range calls {
		switch {
		case call.node != 0:
		case len(call.args) == 8: // evalsha, sha, 4, 4 keys, the counter's TTL
			draws++
		case len(call.args) == 12 && call.args[9] == "":
			tries++
		case len(call.args) == 12:
			attempts++
		}
	}
	return tries, draws, attempts
}

// TestFairRequeueRounds: a Client that releases a fair lock while another Client waits
// for it, and at once calls Acquire again (a worker in a loop on a hot key), knows that
// someone is queued: it skips the TryAcquire-mode try, which could only fail, and makes
// three rounds in all (the ticket, the enqueue, the attempt that wins after the
// other's release), not four.
func TestFairRequeueRounds(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	rec := &recorder{}
	a, err := redlock.New(rec.clients(c.servers), fairOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	held, err := a.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 100*time.Millisecond, 1)
	eventually(t, "the waiter's subscription", func() bool { return subscribed(ctx, c.admin, "k") })
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
	t.Logf("after its release: %d tries, %d draws, %d attempts on node 1", tries, draws, attempts)
	if tries != 0 {
		t.Errorf("%d TryAcquire-mode tries with another Client queued: it cannot win them", tries)
	}
	if draws != 1 || attempts != 2 {
		t.Errorf("%d draws and %d attempts, want 1 and 2 (enqueue, then win)", draws, attempts)
	}
	if g.order[0] != 1 {
		t.Errorf("granted to %v first", g.order)
	}
}
