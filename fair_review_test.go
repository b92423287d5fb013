package redlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Adversarial tests of the fair lock (Options.Fair), from the review of #13 §2's first
// increment: the waiting loop's bookkeeping when nodes fail or waiters leave, and the
// availability cost of the queue.

// TestFairHeadAfterMinorityYes: the head waiter whose attempt got yes from a minority
// and failures from the rest (no node said "no") still attempts as soon as a release
// is announced. It used to read the yes (1) as "2^40 − 1 entries ahead" and then ignore
// every wake-up, waiting for its renewal (a third of the lease: here 1 s).
func TestFairHeadAfterMinorityYes(t *testing.T) {
	opts := redlock.Options{Fair: true, FairLease: 3 * time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	c.wantValues("k", repeat(holder.Token(), 3)...)
	a, link := c.severableClient(opts, 1, 2)
	res := acquireAsync(ctx, a, "k", 5*time.Second)
	c.waitQueued("k", 1)
	eventually(t, "the waiter's Client listening on every node", func() bool { return listening(len(c.admin), a) })
	// Node 1 lost the holder's key (a restart, say): the waiter, head of the queue,
	// gets yes there, and fails on nodes 2 and 3, which it cannot reach for a moment.
	if err := c.admin[0].Del(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	link.cut.Store(true)
	// Its attempt (two calls) and the attempt's clean-up (two more) failed.
	eventually(t, "an attempt cut off from nodes 2 and 3", func() bool { return link.failed.Load() >= 4 })
	link.cut.Store(false)
	start := time.Now()
	if err := holder.Release(ctx); err != nil { // announced by nodes 2 and 3
		t.Fatal(err)
	}
	r := wantResult(t, "the head waiter", res)
	defer r.lock.Release(ctx)
	took := r.at.Sub(start)
	t.Logf("the head got the lock %v after the release", took)
	if took > 300*time.Millisecond {
		t.Errorf("the head got the lock %v after an announced release: it ignored the wake-up", took)
	}
}

// TestFairLeaversMidQueueAnnounced: waiters that give up from the middle of the queue
// while the key is held do not make the waiter behind them miss its turn: the release
// after them names it the head. (When waiters counted releases, a leaver's removal
// had to be announced, or the next waiter's count of those ahead stayed too high and
// it missed its turn until its renewal, a third of the lease: here 1 s.)
func TestFairLeaversMidQueueAnnounced(t *testing.T) {
	opts := redlock.Options{Fair: true, FairLease: 3 * time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	first, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The holder must have a queue entry, as every lock granted to a waiter has.
	hres := acquireAsync(ctx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 1)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder := wantResult(t, "the holder", hres).lock
	ares := acquireAsync(ctx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 2)
	var leavers []<-chan result
	var cancels []context.CancelFunc
	for i := range 2 {
		lctx, cancel := context.WithCancel(ctx)
		cancels = append(cancels, cancel)
		leavers = append(leavers, acquireAsync(lctx, c.newClient(opts), "k", 10*time.Second))
		c.waitQueued("k", int64(3+i))
	}
	cres := acquireAsync(ctx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 5)
	for i, cancel := range cancels {
		cancel()
		if r := <-leavers[i]; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("leaver %d: %v, want context.Canceled", i+1, r.err)
		}
	}
	c.waitQueued("k", 3) // the holder's entry, A's and C's
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := wantResult(t, "waiter A", ares).lock
	start := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "waiter C", cres)
	defer r.lock.Release(ctx)
	took := r.at.Sub(start)
	t.Logf("C got the lock %v after A's release", took)
	if took > 300*time.Millisecond {
		t.Errorf("C got the lock %v after A's release: it missed its turn", took)
	}
}

// TestFairWaiterOnMinorityStepsAside: a waiter that can reach only a minority of the
// nodes, ahead in the queue, takes its entries out once its attempts have failed for
// a renewal period, so that it does not stay the head of the nodes it reaches. With
// one more node down for the waiter behind it, that waiter gets the lock (on nodes 1
// and 2) while the cut-off one still waits. It used to stay the head of node 1, and
// the key was blocked for as long as it waited. Once it reaches a majority again it
// queues again with its ticket, and gets the lock after the holder.
//
// The hook that cuts the waiter off cuts its commands, not its subscriptions: with
// hand-over on, the nodes would hand it the key and it would hold the lock. The test
// is about a waiter that cannot win, so hand-over is off.
func TestFairWaiterOnMinorityStepsAside(t *testing.T) {
	t.Cleanup(redlock.SetHandsOver(false))
	opts := redlock.Options{Fair: true, FairLease: 500 * time.Millisecond}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stuck, link := c.severableClient(opts, 1, 2)
	sres := acquireAsync(ctx, stuck, "k", 10*time.Second)
	c.waitQueued("k", 1)
	behind, down := c.severableClient(opts, 2)
	bres := acquireAsync(ctx, behind, "k", 10*time.Second)
	c.waitQueued("k", 2)
	link.cut.Store(true) // the first waiter reaches node 1 only
	down.cut.Store(true) // and node 3 is down for the waiter behind it (no dial fails:
	// a killed node leaves go-redis's dial retry sleeping past the test)
	cut := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-bres:
		if r.err != nil {
			t.Fatalf("the waiter behind: %v", r.err)
		}
	case <-time.After(4 * opts.FairLease):
		t.Fatalf("the waiter behind one cut off to a minority got nothing in %v: the cut-off waiter still blocks node 1", 4*opts.FairLease)
	}
	t.Logf("the waiter behind got the lock %v after the cut", r.at.Sub(cut))
	if n, _ := c.admin[0].ZCard(ctx, mustFairQueue("k")).Result(); n != 1 {
		t.Errorf("node 1 holds %d entries while the cut-off waiter is away, want the holder's only", n)
	}
	select {
	case s := <-sres:
		t.Fatalf("the cut-off waiter returned %v, %v; want it still waiting", s.lock, s.err)
	default:
	}
	link.cut.Store(false)
	down.cut.Store(false)
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s := wantResult(t, "the waiter that was cut off", sres)
	_ = s.lock.Release(ctx)
}

// TestFairCloseTakesEntriesOut: Close of a Client whose Acquire waits in the queue
// takes the waiter's entries off every node before it returns; they used to stay
// until their lease ran out, holding up the waiters behind.
func TestFairCloseTakesEntriesOut(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	// A generous node timeout: a removal that times out (a loaded machine) is left
	// to the lease, which is not what this test is about.
	client, err := redlock.New(redistest.Clients(c.servers), redlock.Options{Fair: true, NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, client, "k", 5*time.Second)
	c.waitQueued("k", 1)
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if lens := c.queueLens("k"); slices.Max(lens) != 0 {
		t.Errorf("queues once Close returned: %v, want empty", lens)
	}
	if r := <-res; !errors.Is(r.err, redlock.ErrClosed) {
		t.Errorf("the waiter of the closed Client: %v, %v; want ErrClosed", r.lock, r.err)
	}
}

// mustFairQueue returns the name of key's fair queue.
func mustFairQueue(key string) string {
	q, _, _ := redlock.FairKeys(key)
	return q
}

// TestFairBesidePlainClients: Clients without Fair on the same key ignore the queue
// (unsupported: they only spoil the order), but cannot break mutual exclusion: fair
// and plain Clients taking the key in turns never overlap.
func TestFairBesidePlainClients(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	counts, _ := c.contend("k", 10, fairOpts, redlock.Options{}, fairOpts, redlock.Options{})
	t.Logf("acquisitions per Client (fair, plain, fair, plain): %v", counts)
}

// TestFairMaxAttempts: with MaxAttempts, every round of a fair waiter counts, its
// renewals too (each may win): behind a held lock it gives up after MaxAttempts rounds
// with ErrNotAcquired, and takes its entries off every node.
func TestFairMaxAttempts(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	rec := &recorder{}
	client, err := redlock.New(rec.clients(c.servers), redlock.Options{Fair: true, MaxAttempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if l, err := client.Acquire(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("Acquire behind a held lock with MaxAttempts 4: %v, %v; want ErrNotAcquired", l, err)
	}
	if lens := c.queueLens("k"); slices.Max(lens) != 0 {
		t.Errorf("queues after the waiter gave up: %v, want empty", lens)
	}
	rounds := map[string]bool{} // by token: one per round (an EVAL may follow NOSCRIPT)
	for _, call := range rec.sent() {
		if fc, _ := parseFairCall(call.args); fc.kind == "acquire" {
			rounds[fc.token] = true
		}
	}
	attempts := len(rounds)
	if attempts != 4 {
		t.Errorf("%d fair_acquire.lua rounds, want MaxAttempts = 4 (the try with no queue included)", attempts)
	}
}
