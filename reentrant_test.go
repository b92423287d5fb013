package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Reentrant locks (WithOwner), on real redis-server processes: holds of one owner
// share the key, every hold must be released before anyone else gets it, and the hold
// counts stay right when nodes miss an increment or a decrement, restart empty or heal.

// ownerHead is the prefix the nodes keep an owner's holds under (see owner.go).
func ownerHead(owner string) string { return fmt.Sprintf("owner %d:%s|", len(owner), owner) }

// holds returns the hold ids that node i lists for owner on key, and false when the
// key is absent or belongs to someone else.
func (c *cluster) holds(i int, key, owner string) ([]string, bool) {
	v := c.values(key)[i]
	rest, ok := strings.CutPrefix(v, ownerHead(owner))
	if !ok {
		return nil, false
	}
	if strings.HasPrefix(rest, "#") { // a fenced lease: "#<token>|" comes first
		_, rest, _ = strings.Cut(rest, "|")
	}
	return strings.FieldsFunc(rest, func(r rune) bool { return r == '|' }), true
}

// wantHolds fails the test unless every node lists exactly the given holds of owner
// (nil: the key is absent there).
func (c *cluster) wantHolds(key, owner string, want ...[]*redlock.Lock) {
	c.t.Helper()
	for i, locks := range want {
		got, ok := c.holds(i, key, owner)
		var ids []string
		for _, l := range locks {
			ids = append(ids, l.Token())
		}
		switch {
		case locks == nil && c.values(key)[i] != "":
			c.t.Errorf("node %d: key %q is %q, want it absent", i+1, key, c.values(key)[i])
		case locks != nil && (!ok || !sameHolds(got, ids)):
			c.t.Errorf("node %d: holds %q (owner's key: %v), want %q", i+1, got, ok, ids)
		}
	}
}

// sameHolds reports whether two lists of hold ids hold the same ids: a node lists the
// holds in the order their calls reached it, which holds taken at once from different
// Clients do not fix.
func sameHolds(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// reach makes sure that client's connections to every node work again after restarts:
// it takes and releases a scratch lock until every node took it (a call on a
// connection the restart broke fails once, and go-redis then dials afresh).
func (c *cluster) reach(client *redlock.Client) {
	c.t.Helper()
	ctx := c.t.Context()
	eventually(c.t, "every node to answer the Client", func() bool {
		l, err := client.TryAcquire(ctx, "reach", time.Second)
		if err != nil {
			return false
		}
		l.WaitForCalls()
		all := !slices.Contains(c.values("reach"), "")
		_ = l.Release(ctx)
		l.WaitForCalls()
		return all
	})
}

// each returns the same holds for n nodes.
func each(n int, locks ...*redlock.Lock) [][]*redlock.Lock {
	out := make([][]*redlock.Lock, n)
	for i := range out {
		out[i] = locks
	}
	return out
}

// wantHeldElsewhere fails unless a TryAcquire of key by client under ctx finds the key
// held elsewhere (ErrNotAcquired, not a failure). It returns once the failed attempt
// has been cleaned up on every node: a node that took the key for it meanwhile (one
// where key was free) lists client's hold until then, and a heal sent there would find
// the key held by another owner.
func wantHeldElsewhere(t *testing.T, ctx context.Context, client *redlock.Client, who, key string) {
	t.Helper()
	l, err := client.TryAcquire(ctx, key, time.Second)
	client.WaitForCalls()
	if err == nil {
		_ = l.Release(ctx)
		t.Fatalf("%s got %q while it is held", who, key)
	}
	if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("%s: %v, want ErrNotAcquired", who, err)
	}
}

// TestReentrantHolds: holds of owner X from the same Client and from another Client
// share the key; another owner and a lock without owner find it held until the last
// hold is released, and then take it.
func TestReentrantHolds(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	other := c.newClient(redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "job-7")
	a, err := c.client.Acquire(x, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.client.TryAcquire(x, "k", 10*time.Second) // the same Client
	if err != nil {
		t.Fatalf("a second hold of the same owner: %v", err)
	}
	d, err := other.Acquire(x, "k", 10*time.Second) // another Client, the same owner
	if err != nil {
		t.Fatalf("a hold of the same owner from another Client: %v", err)
	}
	if a.Owner() != "job-7" || a.Token() == b.Token() || b.Token() == d.Token() {
		t.Fatalf("owners %q, tokens %q %q %q: want job-7 and one hold id each", a.Owner(), a.Token(), b.Token(), d.Token())
	}
	for _, l := range []*redlock.Lock{a, b, d} {
		l.WaitForCalls()
	}
	c.wantHolds("k", "job-7", each(3, a, b, d)...)
	for _, l := range []*redlock.Lock{b, a} { // any order
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l.WaitForCalls() // Release returns at a majority: the third node may list l still
		wantHeldElsewhere(t, redlock.WithOwner(ctx, "job-8"), other, "another owner", "k")
		wantHeldElsewhere(t, ctx, other, "a lock without owner", "k")
	}
	c.wantHolds("k", "job-7", each(3, d)...)
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d.WaitForCalls()
	c.wantValues("k", "", "", "")
	l, err := other.TryAcquire(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("a lock without owner after the last hold's release: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// And the other way round: an owner finds a lock without owner held elsewhere.
	plain, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantHeldElsewhere(t, x, other, "an owner", "k")
	if err := plain.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantEmptyOwner: an empty owner is an error, before any node is contacted.
func TestReentrantEmptyOwner(t *testing.T) {
	c := newCluster(t, 1, redistest.Options{}, redlock.Options{})
	ctx := redlock.WithOwner(t.Context(), "")
	if _, err := c.client.Acquire(ctx, "k", time.Second); err == nil || !strings.Contains(err.Error(), "empty owner") {
		t.Fatalf("Acquire: %v, want the empty owner refused", err)
	}
	if _, err := c.client.TryAcquire(ctx, "k", time.Second); err == nil || !strings.Contains(err.Error(), "empty owner") {
		t.Fatalf("TryAcquire: %v, want the empty owner refused", err)
	}
	c.wantValues("k", "")
}

// TestReentrantSharedLease: the TTL on the nodes is the owner's: extending one hold
// keeps the others' key alive, a shorter hold never cuts the lease, and holds that are
// never released end with the lease.
func TestReentrantSharedLease(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "job")
	long, err := c.client.Acquire(x, "k", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.client.Acquire(x, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	short.WaitForCalls()
	for i, a := range c.admin {
		if ttl := a.PTTL(ctx, "k").Val(); ttl < 19*time.Second {
			t.Errorf("node %d: the 300 ms hold cut the lease to %v", i+1, ttl)
		}
	}
	if err := short.Extend(ctx, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	short.WaitForCalls()
	for i, a := range c.admin {
		if ttl := a.PTTL(ctx, "k").Val(); ttl < 39*time.Second {
			t.Errorf("node %d: extending one hold left the lease at %v", i+1, ttl)
		}
	}
	if err := short.Release(ctx); err != nil {
		t.Fatal(err)
	}
	short.WaitForCalls()
	for i, a := range c.admin {
		if ttl := a.PTTL(ctx, "k").Val(); ttl < 39*time.Second {
			t.Errorf("node %d: releasing one hold left the lease at %v", i+1, ttl)
		}
	}
	// Not released: the lease ends with its TTL (here set short by hand on every node).
	for _, a := range c.admin {
		a.PExpire(ctx, "k", 200*time.Millisecond)
	}
	eventually(t, "the lease to expire", func() bool { return strings.Join(c.values("k"), "") == "" })
	if err := long.Extend(ctx, time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend after the lease expired: %v, want ErrLockLost", err)
	}
}

// TestReentrantUnderFaults: 5 nodes; a node that missed an increment, one that missed
// a decrement (both down while it was sent, with their data kept on disk), one
// restarted empty. The lock counts as held by the owner while a majority lists the
// owner with at least one hold; nobody else gets it before.
func TestReentrantUnderFaults(t *testing.T) {
	c := &cluster{t: t}
	for i := range 5 {
		// Node 1 keeps nothing over a restart; the others keep every write.
		c.servers = append(c.servers, redistest.Start(t, redistest.Options{Persistent: i > 0}))
		c.admin = append(c.admin, c.servers[i].Client())
	}
	opts := redlock.Options{NodeTimeout: 200 * time.Millisecond}
	c.client = c.newClient(opts)
	other := c.newClient(opts)
	ctx := t.Context()
	x, y := redlock.WithOwner(ctx, "x"), redlock.WithOwner(ctx, "y")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()

	// Node 5 misses the increment of h2.
	c.servers[4].Kill()
	h2, err := c.client.TryAcquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatalf("a second hold with node 5 down: %v", err)
	}
	h2.WaitForCalls()
	c.servers[4].Restart()
	c.reach(c.client)
	c.wantHolds("k", "x", [][]*redlock.Lock{{h1, h2}, {h1, h2}, {h1, h2}, {h1, h2}, {h1}}...)

	// h1 goes: node 5 had only h1 and frees its key; the majority still lists h2.
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()
	c.wantHolds("k", "x", [][]*redlock.Lock{{h2}, {h2}, {h2}, {h2}, nil}...)
	wantHeldElsewhere(t, y, other, "owner y with 4 of 5 nodes listing x", "k")

	// Extending h2 proves its majority and heals node 5.
	if err := h2.Extend(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	h2.WaitForCalls()
	c.wantHolds("k", "x", each(5, h2)...)

	// Node 1 restarts empty; node 2 misses the increment of h3.
	c.servers[0].Restart()
	c.reach(other)
	c.servers[1].Kill()
	h3, err := other.TryAcquire(x, "k", 30*time.Second) // another Client, the same owner
	if err != nil {
		t.Fatalf("a hold with node 1 restarted empty and node 2 down: %v", err)
	}
	h3.WaitForCalls()
	c.servers[1].Restart()
	c.reach(c.client)
	c.reach(other)
	// Node 1 came back empty and took h3 afresh: the owner's key there lists h3 alone.
	c.wantHolds("k", "x", [][]*redlock.Lock{{h3}, {h2}, {h2, h3}, {h2, h3}, {h2, h3}}...)

	// Node 3 misses the decrement of h2: it keeps listing a hold that is over.
	c.servers[2].Kill()
	if err := h2.Release(ctx); err != nil {
		t.Fatalf("releasing h2 with node 3 down: %v", err)
	}
	h2.WaitForCalls()
	c.servers[2].Restart()
	c.reach(other)
	c.wantHolds("k", "x", [][]*redlock.Lock{{h3}, nil, {h2, h3}, {h3}, {h3}}...)
	wantHeldElsewhere(t, y, other, "owner y while h3 is held", "k")

	// h3 goes: the key is free on a majority (node 3 keeps the stale hold until the
	// lease's TTL ends), and owner y takes it.
	if err := h3.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h3.WaitForCalls()
	c.wantHolds("k", "x", [][]*redlock.Lock{nil, nil, {h2}, nil, nil}...)
	ly, err := other.TryAcquire(y, "k", 30*time.Second)
	if err != nil {
		t.Fatalf("owner y after every hold of x was released: %v", err)
	}
	if err := ly.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantQuorum: a hold needs a majority like every grant, also when its owner
// holds the key already.
func TestReentrantQuorum(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.servers[3].Kill()
	c.servers[4].Kill()
	h2, err := c.client.TryAcquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatalf("a hold with 3 of 5 nodes up: %v", err)
	}
	c.servers[2].Kill()
	if l, err := c.client.TryAcquire(x, "k", 30*time.Second); !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("a hold with 2 of 5 nodes up: %v, %v; want ErrUnavailable", l, err)
	}
	c.servers[2].Restart()
	c.servers[3].Restart()
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantWaiters: a waiter of another owner, in the same Client or in another,
// gets the lock only once every hold is released; and the owner taking the lock again
// does not queue behind that waiter (which would wait for the owner forever).
func TestReentrantWaiters(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	other := c.newClient(noPolling)
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	h1, err := c.client.Acquire(x, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	here := acquireAsync(redlock.WithOwner(ctx, "y"), c.client, "k", 10*time.Second)
	eventually(t, "the waiter in the holder's Client", func() bool { return c.client.Waiting("k") == 1 })
	there := acquireAsync(ctx, other, "k", 10*time.Second)
	eventually(t, "the other Client's subscription", func() bool { return subscribed(ctx, c.admin, "k") })
	soon, cancel := context.WithTimeout(x, 5*time.Second)
	defer cancel()
	h2, err := c.client.Acquire(soon, "k", 10*time.Second) // a waiter queued or not: at once
	if err != nil {
		t.Fatalf("the owner again, with a waiter queued: %v", err)
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-here:
		t.Fatalf("the waiter of owner y got the lock with a hold left: %v", r.err)
	case r := <-there:
		t.Fatalf("the other Client's waiter got the lock with a hold left: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// One of the two waiters gets it, on the release's wake-up (polling is off); then
	// the other.
	var first result
	var rest <-chan result
	select {
	case first = <-here:
		rest = there
	case first = <-there:
		rest = here
	case <-time.After(10 * time.Second):
		t.Fatal("no waiter got the lock 10 s after the last hold's release")
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	if err := first.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := wantResult(t, "the second waiter", rest)
	if err := second.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantDo: Do under an owner that holds the key runs at once, and its Release
// leaves the owner's other hold in place.
func TestReentrantDo(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	outer, err := c.client.Acquire(x, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	err = c.client.Do(x, "k", 5*time.Second, func(ctx context.Context) error {
		ran = true
		return nil
	}, redlock.TryOnce())
	if err != nil || !ran {
		t.Fatalf("Do under the holding owner: ran %v, %v", ran, err)
	}
	// Do's Release returns at a majority: its call to the third node may still be out,
	// and outer's lock knows nothing of it.
	c.client.WaitForCalls()
	c.wantHolds("k", "x", each(3, outer)...)
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantWaiterAfterPlainLock: a waiter with an owner behind a lock without owner
// of the same Client is not handed that lock's plain token (a handoff): it gets a hold
// of its owner.
func TestReentrantWaiterAfterPlainLock(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()
	plain, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(redlock.WithOwner(ctx, "y"), c.client, "k", 10*time.Second)
	eventually(t, "the waiter", func() bool { return c.client.Waiting("k") == 1 })
	// The waiter makes no attempt while this Client's plain lock holds the key
	// (ticket.heldHere), so its next attempt is queued on each node behind the release.
	// Every node is left holding the waiter's hold: on each, the release's call goes
	// first, also where the node has not run the release script yet and the two calls
	// leave in one pipeline (TestNoScriptKeepsTheOrder; before that fix 8 runs in 120
	// here, three -race processes at once, left a node empty).
	if err := plain.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := wantResult(t, "the waiter of owner y", waiter).lock
	w.WaitForCalls()
	if w.Owner() != "y" {
		t.Errorf("the waiter's lock has owner %q, want y", w.Owner())
	}
	c.wantHolds("k", "y", each(3, w)...)
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantExtendNeedsItsHold: Extend counts only the nodes that list its own
// hold. A node that has the owner's key without the hold (it missed the increment)
// would lose the key when the other hold is released, so it must not count for this
// hold's validity.
func TestReentrantExtendNeedsItsHold(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()
	c.servers[2].Kill()
	h2, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h2.WaitForCalls()
	c.servers[2].Restart()
	c.wantHolds("k", "x", [][]*redlock.Lock{{h1, h2}, {h1, h2}, {h1}}...)
	c.servers[1].Kill()
	if err := h2.Extend(ctx, 30*time.Second); err == nil {
		t.Fatal("h2 extended with only node 1 listing it (node 2 down, node 3 without h2)")
	}
	c.servers[1].Restart()
}

// TestReentrantFencing: every hold of a lease gets the lease's fencing token, from any
// Client; the next owner's lease gets a higher one; a node restarted empty (it begins
// the lease afresh with a higher proposal) does not change the token a majority
// agrees on; and an owner's lease taken without fencing gives no token.
func TestReentrantFencing(t *testing.T) {
	// A second per node: the checks below assume that the first holds reached every
	// node, which a call slower than the node timeout on a loaded machine breaks: then
	// a node begins the lease afresh with a higher token, and a later hold can rightly
	// get it (the likely cause of one CI failure, "hold 3 ... has token 2").
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fencing: true, NodeTimeout: time.Second})
	other := c.newClient(redlock.Options{Fencing: true, NodeTimeout: time.Second})
	ctx := t.Context()
	x, y := redlock.WithOwner(ctx, "x"), redlock.WithOwner(ctx, "y")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns at a majority: h1's call to the third node may still be on its
	// way. Before it lands, other's proposal (one above the counters it reads, 1 by
	// then) begins the lease there afresh, with 2, and h1's call joins that one (CI
	// failure: node 3 held "#2|" while nodes 1 and 2 held the lease with token 1).
	h1.WaitForCalls()
	h2, err := other.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if h1.Fence() < 1 || h2.Fence() != h1.Fence() {
		t.Fatalf("fencing tokens %d and %d, want the lease's, twice", h1.Fence(), h2.Fence())
	}
	wantHeldElsewhere(t, y, other, "owner y", "k")

	// Node 3 restarts empty: a new hold finds the lease there gone and begins it afresh
	// with a higher proposal; nodes 1 and 2 still agree on the lease's token.
	h1.WaitForCalls()
	h2.WaitForCalls()
	lease := fmt.Sprintf("#%d|", h1.Fence())
	for i, v := range c.values("k") {
		if !strings.Contains(v, lease) {
			t.Fatalf("setup: node %d holds %q, not the lease with token %d (a call failed)", i+1, v, h1.Fence())
		}
	}
	c.servers[2].Restart()
	c.reach(c.client)
	// Eight holds: in most of them node 3's reply is among the first two, and the
	// replies counted disagree.
	holds := []*redlock.Lock{h1, h2}
	for i := range 8 {
		h, err := c.client.TryAcquire(x, "k", 30*time.Second) // one attempt
		if err != nil {
			t.Fatalf("hold %d with node 3 restarted empty: %v", i+3, err)
		}
		holds = append(holds, h)
		if h.Fence() != h1.Fence() {
			t.Fatalf("hold %d after node 3's restart has token %d, want the lease's %d", i+3, h.Fence(), h1.Fence())
		}
	}
	for _, l := range holds {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range holds {
		l.WaitForCalls()
	}
	c.wantValues("k", "", "", "") // the last hold's release deletes the fenced lease
	var ly *redlock.Lock
	for range 3 { // y's token goes above any guess of other's
		var err error
		if ly, err = c.client.Acquire(y, "k", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if ly.Fence() <= h1.Fence() {
			t.Fatalf("owner y's lease after x's: token %d, want above %d", ly.Fence(), h1.Fence())
		}
		if err := ly.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// x again, from the Client that saw only x's first tokens: its guess is stale, and
	// the nodes make it propose above y's.
	hx, err := other.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if hx.Fence() <= ly.Fence() {
		t.Fatalf("owner x's lease after y's: token %d, want above %d", hx.Fence(), ly.Fence())
	}
	if err := hx.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A lease begun without fencing has no token for a fenced hold.
	plain := c.newClient(redlock.Options{})
	lp, err := plain.Acquire(x, "k2", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.client.Acquire(x, "k2", 30*time.Second)
	if !errors.Is(err, redlock.ErrUnavailable) || !strings.Contains(err.Error(), "no fencing token") {
		t.Fatalf("a fenced hold of a lease without fencing: %v, want ErrUnavailable naming the missing token", err)
	}
	if err := lp.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantFencingSplit: node 3 is down and node 2 restarted empty, so the two
// nodes that answer a new hold report different tokens for the lease (node 2 begins it
// afresh with a proposal of its own). No token has a majority: the hold is refused,
// with an error that says why, and cleaned up, rather than given a token that the
// lease never had on a majority.
func TestReentrantFencingSplit(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fencing: true, NodeTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()
	c.servers[1].Restart()
	c.servers[2].Kill()
	// The first attempts may find the connection to node 2 broken by its restart.
	eventually(t, "an attempt that node 2 answers", func() bool {
		l, err := c.client.TryAcquire(x, "k", 30*time.Second)
		if err == nil {
			t.Fatalf("a hold with nodes 1 and 2 reporting different tokens got token %d (the lease's is %d)", l.Fence(), h1.Fence())
		}
		if strings.Contains(err.Error(), "no fencing token") {
			if !errors.Is(err, redlock.ErrUnavailable) || errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("split tokens: %v, want ErrUnavailable only", err)
			}
			return true
		}
		return false
	})
	want := fmt.Sprintf("%s#%d|%s|", ownerHead("x"), h1.Fence(), h1.Token())
	if v := c.admin[0].Get(ctx, "k").Val(); v != want {
		t.Errorf("node 1 keeps %q after the refused hold, want h1's lease alone, %q", v, want)
	}
	if v := c.admin[1].Get(ctx, "k").Val(); v != "" {
		t.Errorf("node 2 keeps %q after the refused hold's clean-up, want nothing", v)
	}
	c.servers[2].Restart()
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestReentrantKeepAlive: two holds of owner x in one Client, KeepAlive on the later
// one only. Three TTLs later the other hold, never renewed itself, is still listed on
// the nodes, another owner still cannot take the key, and its Until has moved on with
// every renewal (each renewal's nodes listed both holds), never past the kept hold's.
// Its Extend then works, long after its own Acquire's validity ran out. Once the kept
// hold is released, owner y gets the key only after the other hold's Until.
func TestReentrantKeepAlive(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	const ttl = time.Second
	idle, err := c.client.Acquire(x, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.client.Acquire(x, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := idle.Until()
	lockCtx, stop := kept.KeepAlive(ctx)
	defer stop()
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) { // the point is time passing: three TTLs of it
		if l, err := c.client.TryAcquire(redlock.WithOwner(ctx, "y"), "k", ttl); err == nil {
			t.Fatalf("owner y took the key while x's lease is kept alive: %s", l.Token())
		}
		if lockCtx.Err() != nil {
			t.Fatalf("KeepAlive gave up: %v", context.Cause(lockCtx))
		}
		// kept's Until only grows, so reading it second bounds idle's from above.
		if iu, ku := idle.Until(), kept.Until(); iu.After(ku) {
			t.Fatalf("idle hold valid until %v, past the kept hold's %v", iu, ku)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	kept.WaitForCalls()
	c.wantHolds("k", "x", each(3, idle, kept)...)
	if now := time.Now(); !idle.Until().After(now) || !idle.Until().After(first.Add(2*ttl)) {
		t.Fatalf("idle hold valid until %v (at first %v, now %v): its Until did not follow the renewals", idle.Until(), first, now)
	}
	if err := idle.Extend(ctx, ttl); err != nil {
		t.Fatalf("Extend of the idle hold within its shared Until: %v", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}
	kept.WaitForCalls()
	c.wantHolds("k", "x", each(3, idle)...)
	yCtx, cancel := context.WithTimeout(redlock.WithOwner(ctx, "y"), 10*ttl)
	defer cancel()
	y, err := c.newClient(redlock.Options{}).Acquire(yCtx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Now(); got.Before(idle.Until()) {
		t.Fatalf("owner y got the key at %v, before x's idle hold's Until %v", got, idle.Until())
	}
	_ = y.Release(ctx)
	if err := idle.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Release of a hold past its Until: %v, want ErrLockLost", err)
	}
}

// TestReentrantOwnerNeverQueuesBehindItsWaiters: with two holds of owner x in a Client
// and a waiter of owner y queued there, releasing the later hold leaves the earlier
// one recorded: x's next Acquire, whose first attempt fails (two nodes down), retries
// beside the queue instead of joining it behind y's waiter, which waits for x's lock
// (it would wait until x's lease ended).
func TestReentrantOwnerNeverQueuesBehindItsWaiters(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{NodeTimeout: 200 * time.Millisecond})
	ctx := t.Context()
	x := redlock.WithOwner(ctx, "x")
	h1, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := c.client.Acquire(x, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(redlock.WithOwner(ctx, "y"), c.client, "k", 30*time.Second)
	eventually(t, "owner y's waiter", func() bool { return c.client.Waiting("k") == 1 })
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	h2.WaitForCalls()
	c.servers[1].Kill()
	c.servers[2].Kill()
	soon, cancel := context.WithTimeout(x, 5*time.Second)
	defer cancel()
	again := acquireAsync(soon, c.client, "k", 30*time.Second)
	// The first attempt fails within the node timeout (200 ms; nothing signals its end),
	// then a later one succeeds once the nodes are back.
	time.Sleep(600 * time.Millisecond)
	if n := c.client.Waiting("k"); n != 1 {
		t.Errorf("%d Acquires queued for k, want owner y's alone", n)
	}
	c.servers[1].Restart()
	c.servers[2].Restart()
	h3 := wantResult(t, "owner x's Acquire while y waits", again).lock
	select {
	case r := <-waiter:
		t.Fatalf("owner y's waiter got the lock while x holds it: %v", r.err)
	default:
	}
	for _, l := range []*redlock.Lock{h3, h1} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if r := wantResult(t, "owner y's waiter after x's last hold", waiter); r.lock != nil {
		_ = r.lock.Release(ctx)
	}
}
