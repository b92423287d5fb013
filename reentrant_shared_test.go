package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The shared Until of an owner's holds in one Client (docs/reentrant.md): an Extend of
// one hold moves the Until of the others only where a majority of the nodes listed
// them all.

// TestReentrantSharedUntilNeedsEveryHoldListed is the counterexample to pushing an
// Extend's validity to every hold. Inner missed node 1 (down during its acquire), so
// node 1 lists outer only. Outer's Extend, with node 2 down, gets yes from node 1
// (outer only) and node 3 (both): a majority for outer, but only node 3 for inner.
// Inner's Until must stay as proven before: once outer is released node 1 drops the
// key, node 2 comes back with the key until the earlier TTL, and owner y then gets
// nodes 1 and 2 long before outer's new end. (Before node 2 went down, an Extend of
// outer that nodes 2 and 3 answered while listing both holds did move inner's Until.)
func TestReentrantSharedUntilNeedsEveryHoldListed(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	const ttl = 2 * time.Second
	outer, err := c.client.Acquire(x, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	outer.WaitForCalls()
	c.servers[0].Kill()
	inner, err := c.client.Acquire(x, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	inner.WaitForCalls()
	c.servers[0].Restart()
	c.reach(c.client)
	c.wantHolds("k", "x", [][]*redlock.Lock{{outer}, {outer, inner}, {outer, inner}}...)
	// With every node up, nodes 2 and 3 list both holds: a majority, so inner's Until
	// follows outer's Extend (node 1's reply, 1, may or may not be among those counted).
	first := inner.Until()
	if err := outer.Extend(ctx, ttl+time.Second); err != nil {
		t.Fatal(err)
	}
	before := inner.Until()
	if !before.After(first.Add(500 * time.Millisecond)) {
		t.Fatalf("inner's Until went from %v to %v: it did not follow outer's Extend on nodes that list both", first, before)
	}
	outer.WaitForCalls()
	c.servers[1].Kill()
	if err := outer.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("outer's Extend with nodes 1 and 3 listing it: %v", err)
	}
	if got := inner.Until(); !got.Equal(before) {
		t.Fatalf("inner's Until went from %v to %v, though only node 3 of outer's majority lists inner", before, got)
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	outer.WaitForCalls()
	c.servers[1].Restart()
	c.wantHolds("k", "x", [][]*redlock.Lock{nil, {outer, inner}, {inner}}...)
	yCtx, cancel := context.WithTimeout(redlock.WithOwner(ctx, "y"), 5*ttl)
	defer cancel()
	y, err := c.newClient(redlock.Options{NodeTimeout: 200 * time.Millisecond}).Acquire(yCtx, "k", ttl)
	if err != nil {
		t.Fatalf("owner y, once the acquires' TTL ran out on node 2: %v", err)
	}
	if got, until := time.Now(), inner.Until(); got.Before(until) {
		t.Fatalf("owner y got the key at %v, before inner's Until %v", got, until)
	}
	_ = y.Release(ctx)
	if err := inner.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Release of inner past its Until: %v, want ErrLockLost", err)
	}
}

// TestReentrantSharedUntilNeverLowered: a hold whose own validity is longer than the
// one another hold's Extend proves keeps it; the other way round it follows.
func TestReentrantSharedUntilNeverLowered(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	long, err := c.client.Acquire(x, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.client.Acquire(x, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	longUntil, shortUntil := long.Until(), short.Until()
	if err := short.Extend(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := long.Until(); !got.Equal(longUntil) {
		t.Fatalf("long hold's Until went from %v to %v after the short hold's 2 s Extend", longUntil, got)
	}
	if err := long.Extend(ctx, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := short.Until(); !got.After(shortUntil.Add(time.Minute)) {
		t.Fatalf("short hold's Until %v (at first %v) did not follow the long hold's 90 s Extend", got, shortUntil)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantSharedUntilBothKeptAlive: two holds of one owner in one Client, each
// with its own KeepAlive, move each other's Until from two goroutines (run with -race:
// each Until is written under its own hold's mutex, never two at once). Neither
// KeepAlive gives up, another owner never gets the key, and both Releases succeed.
func TestReentrantSharedUntilBothKeptAlive(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	const ttl = time.Second
	var holds []*redlock.Lock
	var kept []context.Context
	for range 2 {
		h, err := c.client.Acquire(x, "k", ttl)
		if err != nil {
			t.Fatal(err)
		}
		lockCtx, stop := h.KeepAlive(ctx)
		defer stop()
		holds, kept = append(holds, h), append(kept, lockCtx)
	}
	end := time.Now().Add(2 * ttl)
	for time.Now().Before(end) { // the point is time passing: renewals on both holds
		if l, err := c.client.TryAcquire(redlock.WithOwner(ctx, "y"), "k", ttl); err == nil {
			t.Fatalf("owner y took the key while x keeps two holds alive: %s", l.Token())
		}
		for i, lockCtx := range kept {
			if lockCtx.Err() != nil {
				t.Fatalf("KeepAlive of hold %d gave up: %v", i+1, context.Cause(lockCtx))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, h := range holds {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReentrantSharedUntilRandomFaults is a randomized run with a checker. Each round
// of five persistent nodes: outer is taken everywhere; inner misses a random set A of
// up to two nodes (down during its acquire, back with outer only); outer is extended
// with a random set E of up to two nodes down, then released, and E comes back. The
// checker: inner's Until moved iff the nodes outside A ∪ E (those that replied 2) are
// a majority, and owner y, on another Client, gets the key no earlier than inner's
// Until. Rounds alternate between sets that leave a majority listing both holds and
// sets that do not. The seed is logged.
func TestReentrantSharedUntilRandomFaults(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{Persistent: true}, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	y := c.newClient(redlock.Options{NodeTimeout: 200 * time.Millisecond})
	defer func() { c.t = t }()
	for round := range 6 {
		missed, down := faultSets(rng, round%2 == 0)
		ok := t.Run(fmt.Sprintf("round %d: inner missed %v, down in extend %v", round+1, missed, down), func(t *testing.T) {
			c.t = t
			sharedUntilRound(t, c, y, fmt.Sprintf("k%d", round), missed, down)
		})
		if !ok {
			break // the nodes may be left down: the next round would not mean much
		}
	}
}

// faultSets returns two random sets of up to two of five nodes: the nodes a hold
// misses and the nodes down during an Extend. With shared, fewer than three nodes are
// in either; without, three or more.
func faultSets(rng *rand.Rand, shared bool) (missed, down []int) {
	for {
		missed, down = rng.Perm(5)[:rng.IntN(3)], rng.Perm(5)[:rng.IntN(3)]
		in := map[int]bool{}
		for _, i := range append(append([]int{}, missed...), down...) {
			in[i] = true
		}
		if (len(in) < 3) == shared {
			return missed, down
		}
	}
}

// sharedUntilRound is one round of TestReentrantSharedUntilRandomFaults on key.
func sharedUntilRound(t *testing.T, c *cluster, y *redlock.Client, key string, missed, down []int) {
	const ttl, longer = time.Second, 2 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 30*longer) // a failed round must not block
	defer cancel()
	x := redlock.WithOwner(ctx, "x")
	outer, err := c.client.Acquire(x, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	outer.WaitForCalls()
	inner := acquireMissing(t, c, x, key, ttl, missed)
	twos := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true}
	for _, i := range append(append([]int{}, missed...), down...) {
		delete(twos, i)
	}
	before := inner.Until()
	downNow := true
	defer func() {
		for _, i := range down {
			if downNow {
				c.servers[i].Restart()
			}
		}
	}()
	for _, i := range down {
		c.servers[i].Kill()
	}
	if err := outer.Extend(ctx, longer); err != nil {
		t.Fatalf("outer's Extend with %d nodes down: %v", len(down), err)
	}
	if moved, want := inner.Until().After(before), len(twos) >= 3; moved != want {
		t.Fatalf("inner's Until moved: %v, want %v (%d nodes list both holds and were up)", moved, want, len(twos))
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
	outer.WaitForCalls()
	for _, i := range down {
		c.servers[i].Restart()
	}
	downNow = false
	c.reach(c.client)
	yCtx, cancel := context.WithTimeout(redlock.WithOwner(ctx, "y"), 10*longer)
	defer cancel()
	l, err := y.Acquire(yCtx, key, ttl)
	if err != nil {
		t.Fatalf("owner y: %v", err)
	}
	if got, until := time.Now(), inner.Until(); got.Before(until) {
		t.Fatalf("owner y got %q at %v, before inner's Until %v", key, got, until)
	}
	_ = l.Release(ctx)
	_ = inner.Release(ctx) // past its Until: ErrLockLost
	inner.WaitForCalls()
}

// acquireMissing takes a hold of x's owner on key with the nodes missed down, then
// brings them back (persistent: with what they had) and waits until the Client
// reaches every node again.
func acquireMissing(t *testing.T, c *cluster, x context.Context, key string, ttl time.Duration, missed []int) *redlock.Lock {
	for _, i := range missed {
		c.servers[i].Kill()
	}
	defer func() {
		for _, i := range missed {
			c.servers[i].Restart()
		}
		c.reach(c.client)
	}()
	inner, err := c.client.Acquire(x, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	inner.WaitForCalls()
	return inner
}
