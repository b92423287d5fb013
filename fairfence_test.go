package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Fair locks with fencing tokens (Options.Fair with Options.Fencing), on real
// redis-server processes, every Client with its own connections as separate processes
// would have: the queue's order and head-only grant, and the fencing guarantees of a
// plain fenced lock.

var fairFenced = redlock.Options{Fair: true, Fencing: true}

// wantRising fails the test unless the tokens strictly increase, each above after.
func wantRising(t *testing.T, what string, after uint64, fences []uint64) {
	t.Helper()
	for i, f := range fences {
		if f <= after {
			t.Fatalf("%s: token %d (lock %d of %d) not above the one before, %d: %v", what, f, i+1, len(fences), after, fences)
		}
		after = f
	}
}

// TestFairFencedArrivalOrder: four Clients queued one after another behind a held
// lock get it in that order, and their tokens rise strictly in that order, above the
// holder's.
func TestFairFencedArrivalOrder(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairFenced)
	ctx := t.Context()
	last := uint64(0)
	for round := range 2 {
		holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wantRising(t, "the holder", last, []uint64{holder.Fence()})
		g := &grants{}
		for i := 1; i <= 4; i++ {
			g.queue(ctx, c, c.newClient(fairFenced), "k", i, 2*time.Millisecond, int64(i))
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g.wg.Wait()
		if want := []int{1, 2, 3, 4}; !slices.Equal(g.order, want) {
			t.Fatalf("round %d: granted in order %v, want %v", round+1, g.order, want)
		}
		wantRising(t, "the waiters", holder.Fence(), g.fences)
		t.Logf("round %d: holder's token %d, the waiters' %v", round+1, holder.Fence(), g.fences)
		last = g.fences[len(g.fences)-1]
	}
}

// TestFairFencedContention: four Clients take the key ten times each; no two are ever
// inside at once, and the tokens rise strictly in the order the locks were held.
func TestFairFencedContention(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairFenced)
	counts, fences := c.contend("k", 10, fairFenced, fairFenced, fairFenced, fairFenced)
	wantRising(t, "the locks in the order held", 0, fences)
	t.Logf("acquisitions per Client: %v; tokens %d..%d", counts, fences[0], fences[len(fences)-1])
}

// TestFairFencedBehindDeadHead: the head check holds with fencing. While a dead
// waiter's entry heads the queue of a free key, neither the waiter behind it nor a
// TryAcquire gets the key; the waiter does once that entry's lease ran out.
func TestFairFencedBehindDeadHead(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairFenced)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dead, link := c.severableClient(fairFenced)
	dctx, die := context.WithCancel(ctx)
	dres := acquireAsync(dctx, dead, "k", 5*time.Second)
	c.waitQueued("k", 1)
	link.cut.Store(true)
	killed := time.Now()
	die()
	if r := <-dres; r.err == nil {
		t.Fatal("the dead waiter got the lock")
	}
	next := acquireAsync(ctx, c.newClient(fairFenced), "k", 5*time.Second)
	c.waitQueued("k", 2)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	if l, err := c.newClient(fairFenced).TryAcquire(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a free key with waiters queued: %v, %v; want ErrNotAcquired", l, err)
	}
	r := wantResult(t, "the waiter behind the dead head", next)
	defer r.lock.Release(ctx)
	waited := r.at.Sub(killed)
	t.Logf("granted %v after the head died, token %d (the holder's %d)", waited, r.lock.Fence(), holder.Fence())
	if waited < redlock.DefaultFairLease/2 {
		t.Errorf("granted %v after the head died: before its entry's lease (%v) ran out", waited, redlock.DefaultFairLease)
	}
	wantRising(t, "the waiter", holder.Fence(), []uint64{r.lock.Fence()})
}

// TestFairFencedRefusals: a waiter that becomes the head with a proposal below the
// counters is refused and proposes again above them, at once. With the counters raised
// on a majority (by hand: an earlier version, another Client kind), its token is one
// above them. With a node restarted empty, whose counter fell to 0, the proposal that
// node accepts is still refused by the others: B, who remembers token 1, proposes 2,
// which A already has, and must get 3.
func TestFairFencedRefusals(t *testing.T) {
	t.Run("counters raised on a majority", func(t *testing.T) {
		c := newCluster(t, 3, redistest.Options{}, fairFenced)
		ctx := t.Context()
		holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		w := acquireAsync(ctx, c.newClient(fairFenced), "k", 5*time.Second)
		c.waitQueued("k", 1)
		for i, v := range []int{1000, 1000, 5} {
			for _, name := range redlock.FenceKeys(c.admin[i], "k") {
				c.admin[i].Set(ctx, name, v, 0)
			}
		}
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, "the waiter", w)
		defer r.lock.Release(ctx)
		if r.lock.Fence() != 1001 {
			t.Fatalf("the waiter's token %d, want 1001: one above the counters of nodes 1 and 2", r.lock.Fence())
		}
	})
	t.Run("a node restarted empty", func(t *testing.T) {
		c := newCluster(t, 3, redistest.Options{}, fairFenced)
		ctx := t.Context()
		b := c.newClient(fairFenced)
		first, err := b.Acquire(ctx, "k", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Else A may be refused where the release lands late, and hold two nodes only.
		first.WaitForCalls()
		a, err := c.client.Acquire(ctx, "k", 5*time.Second) // reads 1, proposes 2
		if err != nil {
			t.Fatal(err)
		}
		a.WaitForCalls()
		wantRising(t, "A", first.Fence(), []uint64{a.Fence()})
		res := acquireAsync(ctx, b, "k", 5*time.Second) // remembers 1
		c.waitQueued("k", 1)
		c.servers[2].Restart() // its key, queue and counter are gone
		c.waitQueued("k", 1)   // B's renewals put its entry back
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, "B", res)
		defer r.lock.Release(ctx)
		t.Logf("tokens: B %d, A %d, B %d", first.Fence(), a.Fence(), r.lock.Fence())
		wantRising(t, "B after A", a.Fence(), []uint64{r.lock.Fence()})
	})
}

// allLateSteps are the steps of TestLateCopiesOfEveryCommand.
var allLateSteps = slices.Concat(lateSteps, fairFencedLateSteps, fairOwnerLateSteps)

// fairFencedLateSteps end lateSteps (TestLateCopiesOfEveryCommand) with every call of
// a fair fenced lock: a first try that takes a free key, a waiter's ticket and queued
// attempts, a refused proposal and the one above it, a TryAcquire, extends and
// releases. The last lock (FF2) is extended past its acquire's TTL, so a copy of its
// own acquire that set the TTL back would be seen.
var fairFencedLateSteps = []lateStep{
	{"fair fenced: a waiter refused once, then granted", func(w *lateWorld, ctx context.Context) error {
		a, b := w.recordedClient(fairFenced), w.recordedClient(fairFenced)
		first, err := a.Acquire(ctx, "kff", 5*time.Second)
		if err != nil {
			return err
		}
		res := acquireAsync(ctx, b, "kff", 10*time.Second)
		w.c.waitQueued("kff", 1)
		for _, adm := range w.c.admin[:2] {
			for _, name := range redlock.FenceKeys(adm, "kff") {
				if err := adm.Set(ctx, name, 1000, 0).Err(); err != nil {
					return err
				}
			}
		}
		if err := first.Release(ctx); err != nil {
			return err
		}
		r := wantResult(w.t, "the fair fenced waiter", res)
		w.held["FF"] = r.lock
		if r.lock.Fence() != 1001 {
			return fmt.Errorf("the waiter's token %d, want 1001 after the refusal", r.lock.Fence())
		}
		return nil
	}},
	{"fair fenced: extend, release, take it again", func(w *lateWorld, ctx context.Context) error {
		l := w.held["FF"]
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
		delete(w.held, "FF")
		l2, err := w.recordedClient(fairFenced).TryAcquire(ctx, "kff", 10*time.Second)
		if err != nil {
			return err
		}
		w.held["FF2"] = l2
		if l2.Fence() <= l.Fence() {
			return fmt.Errorf("token %d after %d", l2.Fence(), l.Fence())
		}
		return l2.Extend(ctx, 30*time.Second)
	}},
}

// recordedClient returns a new Client with opts whose calls w records.
func (w *lateWorld) recordedClient(opts redlock.Options) *redlock.Client {
	w.t.Helper()
	client, err := redlock.New(w.rec.clients(w.c.servers), opts)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { client.Close() })
	return client
}

// TestFairOptions: a lease too short to renew, or not whole milliseconds, is refused;
// Fair with Fencing is accepted (fairfence_test.go tests the pair).
func TestFairOptions(t *testing.T) {
	rdbs := []redis.UniversalClient{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})}
	defer rdbs[0].Close()
	for _, tc := range []struct {
		opts redlock.Options
		want string
	}{
		{redlock.Options{Fair: true, FairLease: 400 * time.Millisecond}, "at least 10 × NodeTimeout"},
		{redlock.Options{Fair: true, FairLease: 1500*time.Millisecond + 1}, "whole milliseconds"},
	} {
		c, err := redlock.New(rdbs, tc.opts)
		if err == nil {
			c.Close()
			t.Errorf("New(%+v) accepted", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want %q", tc.opts, err, tc.want)
		}
	}
	c, err := redlock.New(rdbs, redlock.Options{Fair: true, Fencing: true})
	if err != nil {
		t.Fatalf("New with Fair and Fencing: %v", err)
	}
	c.Close()
}
