package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFairLateCopies is TestLateCopiesOfEveryCommand for the fair scripts: a run
// that sends each of them (a TryAcquire, a first attempt, a ticket draw, queued
// attempts, a waiter leaving, a release that wakes the next waiter, an extend), then
// every recorded call delivered again as sent, reversed and shuffled. No copy may
// replace the held lock's token or shorten its TTL, another Client must not get the
// held key, and once it is released the copies (entries of waiters that are gone)
// hold the queue up for no more than about a lease, plus the TTL of a dead key.
func TestFairLateCopies(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	c := &cluster{t: t, servers: servers}
	for _, s := range servers {
		c.admin = append(c.admin, s.Client())
	}
	rec := &recorder{}
	fair := func() *redlock.Client {
		client, err := redlock.New(rec.clients(servers), fairOpts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		return client
	}
	a, b, x := fair(), fair(), fair()
	ctx := t.Context()
	first, err := a.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := a.TryAcquire(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v, %v", l, err)
	}
	waiter := acquireAsync(ctx, b, "k", 500*time.Millisecond)
	c.waitQueued("k", 1)
	xctx, leave := context.WithCancel(ctx)
	leaver := acquireAsync(xctx, x, "k", time.Second)
	c.waitQueued("k", 2)
	leave()
	<-leaver
	c.waitQueued("k", 1)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := wantResult(t, "the waiter", waiter).lock
	if err := w.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	w.WaitForCalls()

	world := &lateWorld{t: t, c: c, held: map[string]*redlock.Lock{"W": w}}
	calls := rec.sent()
	reversed := slices.Clone(calls)
	slices.Reverse(reversed)
	shuffled := slices.Clone(calls)
	rand.New(rand.NewPCG(13, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	sources := scriptSources(t)
	for _, order := range []struct {
		name  string
		calls []sentCall
	}{{"as sent", calls}, {"reversed", reversed}, {"shuffled", shuffled}} {
		prev := world.read(ctx)
		for i, call := range order.calls {
			c.deliverAgain(call, sources)
			now := world.read(ctx)
			compare(t, fmt.Sprintf("%s, copy %d (%v to node %d)", order.name, i+1, call.args[3:], call.node+1), prev, now)
			prev = now
		}
	}
	other := c.newClient(redlock.Options{})
	if l, err := other.TryAcquire(ctx, "k", time.Second); err == nil {
		t.Errorf("another Client took the held key")
		_ = l.Release(ctx)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w.WaitForCalls()
	// Now the queued attempts once more, as sent: they put back the entries of
	// waiters that are gone (W's and X's), and may set the key with a dead token for
	// its TTL (at most 1 s here). (A copy of an Extend after them could make that key
	// live for the Extend's TTL, as with the plain scripts; not sent here.)
	for _, call := range calls {
		if fc, _ := parseFairCall(call.args); fc.kind == "acquire" && fc.id != "" {
			c.deliverAgain(call, sources)
		}
	}
	if lens := c.queueLens("k"); slices.Max(lens) == 0 {
		t.Errorf("no entry of a gone waiter came back (queues %v): the test lost its point", lens)
	}
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.newClient(fairOpts).Acquire(actx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%d calls, each delivered again 3 times; the next Acquire took %v", len(calls), took)
	if limit := redlock.DefaultFairLease + redlock.DefaultFairLease/3 + time.Second + 300*time.Millisecond; took > limit {
		t.Errorf("after the copies, the next Acquire took %v (over %v)", took, limit)
	}
	_ = l.Release(ctx)
}
