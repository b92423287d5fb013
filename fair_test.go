package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Fair locks across processes (Options.Fair), on real redis-server processes. Every
// waiter is its own Client, with its own connections, as separate processes would be.

var fairOpts = redlock.Options{Fair: true}

// queueLens returns the length of key's fair queue on every node.
func (c *cluster) queueLens(key string) []int64 {
	c.t.Helper()
	q, _, _ := redlock.FairKeys(key)
	lens := make([]int64, len(c.admin))
	for i, a := range c.admin {
		lens[i] = a.ZCard(context.Background(), q).Val()
	}
	return lens
}

// waitQueued waits until key's queue holds n entries on every node.
func (c *cluster) waitQueued(key string, n int64) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lens := c.queueLens(key)
		if slices.Max(lens) == n && slices.Min(lens) == n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %d waiters queued on every node: %v", n, lens)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitScoresAlike waits until key's queue holds the same entries with the same scores
// on every node: each waiter's arrival is complete (its ticket is its score on every
// node). Between a waiter's draw and its first attempt, its score on a node may still
// be the number that node drew; a waiter that draws then overlaps with it, and the
// two may go in either order (docs/design.md, "Why a later arrival gets a later
// ticket").
func (c *cluster) waitScoresAlike(key string) {
	c.t.Helper()
	q, _, _ := redlock.FairKeys(key)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var first, differs string
		for i, a := range c.admin {
			z := fmt.Sprint(a.ZRangeWithScores(context.Background(), q, 0, -1).Val())
			if i == 0 {
				first = z
			} else if z != first {
				differs = z
			}
		}
		if differs == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for the same queue on every node: %s, %s", first, differs)
		}
		time.Sleep(time.Millisecond)
	}
}

// severed is a go-redis hook that fails every command once cut, as a process that died
// or a network partition would, and counts the commands it failed.
type severed struct {
	cut    atomic.Bool
	failed atomic.Int64
}

var errSevered = errors.New("severed")

func (*severed) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *severed) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if s.cut.Load() {
			s.failed.Add(1)
			cmd.SetErr(errSevered)
			return errSevered
		}
		return next(ctx, cmd)
	}
}
func (s *severed) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if s.cut.Load() {
			s.failed.Add(int64(len(cmds)))
			for _, cmd := range cmds {
				cmd.SetErr(errSevered)
			}
			return errSevered
		}
		return next(ctx, cmds)
	}
}

// severableClient returns a Client whose connections to the given nodes (0-based; all
// of them when none is given) can be cut; it reaches the other nodes throughout.
func (c *cluster) severableClient(opts redlock.Options, nodes ...int) (*redlock.Client, *severed) {
	c.t.Helper()
	s := &severed{}
	rdbs := redistest.Clients(c.servers)
	if len(nodes) == 0 {
		nodes = make([]int, len(rdbs))
		for i := range nodes {
			nodes[i] = i
		}
	}
	for _, i := range nodes {
		rdbs[i].AddHook(s)
	}
	client, err := redlock.New(rdbs, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { client.Close() })
	return client, s
}

// grants records the order in which waiters got the lock, and their fencing tokens.
type grants struct {
	mu     sync.Mutex
	order  []int
	fences []uint64
	wg     sync.WaitGroup
}

// queueWaiter starts waiter number i (a new Client) on key: once granted, it records
// its number, holds the lock for hold and releases it. It returns once the waiter is
// queued on every node (the queue then holds queuedAfter entries).
func (g *grants) queueWaiter(ctx context.Context, c *cluster, key string, i int, hold time.Duration, queuedAfter int64) {
	c.t.Helper()
	g.queue(ctx, c, c.newClient(fairOpts), key, i, hold, queuedAfter)
}

// queue is queueWaiter with a Client of the caller's.
func (g *grants) queue(ctx context.Context, c *cluster, client *redlock.Client, key string, i int, hold time.Duration, queuedAfter int64) {
	c.t.Helper()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := client.Acquire(ctx, key, 5*time.Second)
		if err != nil {
			c.t.Errorf("waiter %d: %v", i, err)
			return
		}
		g.mu.Lock()
		g.order = append(g.order, i)
		g.fences = append(g.fences, l.Fence())
		g.mu.Unlock()
		time.Sleep(hold) // the critical section
		if err := l.Release(context.WithoutCancel(ctx)); err != nil {
			c.t.Errorf("waiter %d: release: %v", i, err)
		}
	}()
	c.waitQueued(key, queuedAfter)
}

// TestFairArrivalOrder: four Clients queued one after another behind a held lock get
// it in that order, each right after the previous one's release. Each comes once the
// previous one's arrival is complete (waitScoresAlike), which is what design.md
// promises an order for. With a wait for its entries alone, the order came out
// [1 2 4 3] once (on a loaded box; the cause was not found, and 200 runs
// since passed).
func TestFairArrivalOrder(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	for round := range 3 {
		holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		g := &grants{}
		for i := 1; i <= 4; i++ {
			g.queueWaiter(ctx, c, "k", i, 2*time.Millisecond, int64(i))
			c.waitScoresAlike("k") // arrived: the next one comes after it
		}
		start := time.Now()
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		g.wg.Wait()
		took := time.Since(start)
		if want := []int{1, 2, 3, 4}; !slices.Equal(g.order, want) {
			t.Fatalf("round %d: granted in order %v, want %v", round+1, g.order, want)
		}
		// Each release wakes the next waiter: four hand-overs in far less than one
		// renewal period each (FairLease/3 = 333 ms).
		if took > 600*time.Millisecond {
			t.Errorf("round %d: four hand-overs took %v", round+1, took)
		}
		t.Logf("round %d: four hand-overs in %v", round+1, took)
	}
	c.waitQueued("k", 0)
}

// TestFairTicketSameOnEveryNode: a waiter's score is the one ticket its Client drew,
// the same on every node, above the counters of every majority, even when the nodes'
// counters differ. (Behind the held key the draw queues the waiter with the number
// each node drew, 6 on node 1; when the reply of node 1 comes after the majority's,
// the waiter waits to be named and its renewal, at most a third of the lease later,
// sets the ticket there.)
func TestFairTicketSameOnEveryNode(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	_, _, counter := redlock.FairKeys("k")
	for i, v := range []int{5, 9, 9} {
		if err := c.admin[i].Set(ctx, counter, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 0, 1)
	q, _, _ := redlock.FairKeys("k")
	eventually(t, "the ticket on every node", func() bool {
		for _, a := range c.admin {
			if z := a.ZRangeWithScores(ctx, q, 0, -1).Val(); len(z) != 1 || z[0].Score != 10 {
				return false
			}
		}
		return true
	})
	var first redis.Z
	for i, a := range c.admin {
		z := a.ZRangeWithScores(ctx, q, 0, -1).Val()
		if len(z) != 1 {
			t.Fatalf("node %d: queue %v", i+1, z)
		}
		if i == 0 {
			first = z[0]
		}
		// Every majority holds a node at 9, whose draw answers 10.
		if z[0] != first || z[0].Score != 10 {
			t.Errorf("node %d: entry %v, want the same entry on every node with score 10 (node 1: %v)", i+1, z[0], first)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
}

// TestFairDrawQueuesBehind: a waiter that draws its ticket while others are queued is
// queued by the draw, with the number each node drew. Where the nodes drew different
// numbers (their counters differ) it attempts at once, which sets the one ticket on
// every node; where they drew the same it is in its place already, and the nodes tell
// it when it is the head. Either way the waiters get the key in arrival order. A
// waiter that would be the head is queued by its attempt, at once. The waiters' Clients
// are subscribed to the key's notices beforehand (a new subscription makes every
// waiter attempt once, which would hide a skipped attempt), and each of the two
// attempts must come within a second: a waiter that skipped it would put its entry
// in place only at its renewal, two seconds later with this lease.
func TestFairDrawQueuesBehind(t *testing.T) {
	opts := redlock.Options{Fair: true, FairLease: 6 * time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	q, _, counter := redlock.FairKeys("k")
	// Each Client waits for k once, so that its channel is subscribed (until Close).
	var ws []*redlock.Client
	first, err := c.client.TryAcquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pre := &grants{}
	for i := range 3 {
		ws = append(ws, c.newClient(opts))
		pre.queue(ctx, c, ws[i], "k", i, 0, int64(i+1))
	}
	eventually(t, "the Clients listening on every node", func() bool { return listening(len(c.admin), ws...) })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	pre.wg.Wait()
	c.waitQueued("k", 0)

	holder, err := c.client.TryAcquire(ctx, "k", 10*time.Second) // no queue entry
	if err != nil {
		t.Fatal(err)
	}
	g := &grants{}
	start := time.Now()
	g.queue(ctx, c, ws[0], "k", 1, 0, 1) // the head, behind the held key
	if took := time.Since(start); took > time.Second {
		t.Errorf("the head was queued %v after its Acquire began", took)
	}
	setCounters := func(vs ...int) {
		for i, a := range c.admin {
			if err := a.Set(ctx, counter, vs[i], time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	setCounters(50, 70, 90) // any two nodes draw different numbers
	scores := func(rank int64) []float64 {
		var out []float64
		for _, a := range c.admin {
			z := a.ZRangeWithScores(ctx, q, rank, rank).Val()
			if len(z) != 1 {
				return nil
			}
			out = append(out, z[0].Score)
		}
		return out
	}
	start = time.Now()
	g.queue(ctx, c, ws[1], "k", 2, 0, 2) // the draws: 51, 71, 91
	eventually(t, "waiter 2's ticket (71 or 91) on every node", func() bool {
		s := scores(1)
		return len(s) == 3 && s[0] >= 71 && s[0] == s[1] && s[1] == s[2]
	})
	if took := time.Since(start); took > time.Second {
		t.Errorf("waiter 2's ticket was set on every node %v after its Acquire began", took)
	}
	setCounters(100, 100, 100)
	g.queue(ctx, c, ws[2], "k", 3, 0, 3) // every node draws 101
	if got := scores(2); !slices.Equal(got, []float64{101, 101, 101}) {
		t.Errorf("waiter 3 queued with scores %v, want 101 on every node", got)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	if want := []int{1, 2, 3}; !slices.Equal(g.order, want) {
		t.Errorf("granted in order %v, want %v", g.order, want)
	}
}

// deadWaiter queues a waiter on key whose Client then dies (its connections are cut,
// then its context ends, so its clean-up reaches no node). It returns when the
// waiter's entries were left behind.
func deadWaiter(t *testing.T, c *cluster, key string, queuedAfter int64) (killed time.Time) {
	t.Helper()
	client, link := c.severableClient(fairOpts)
	ctx, cancel := context.WithCancel(t.Context())
	res := acquireAsync(ctx, client, key, 5*time.Second)
	c.waitQueued(key, queuedAfter)
	link.cut.Store(true)
	killed = time.Now()
	cancel()
	if r := <-res; r.err == nil {
		t.Fatal("the dead waiter got the lock")
	}
	return killed
}

// TestFairDeadWaiter: a waiter that died at the head of the queue holds up the next
// one for about its entry's lease (1 s), not longer, and not less: no node grants to
// a waiter that is not the head.
func TestFairDeadWaiter(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := c.severableClient(fairOpts)
	killed := deadWaiter(t, c, "k", 1)
	next := acquireAsync(ctx, client, "k", 5*time.Second)
	c.waitQueued("k", 2)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the waiter behind the dead one", next)
	defer r.lock.Release(ctx)
	waited := r.at.Sub(killed)
	lease := redlock.DefaultFairLease
	t.Logf("granted %v after the head died (lease %v)", waited, lease)
	// The dead entry was renewed at most min(lease/3, RetryDelay) before it died.
	if waited < lease/2 {
		t.Errorf("granted %v after the head died: before its entry's lease (%v) ran out", waited, lease)
	}
	if waited > lease+lease/3+300*time.Millisecond {
		t.Errorf("granted %v after the head died: the dead entry blocked longer than its lease (%v)", waited, lease)
	}
}

// TestFairTryAcquireBehindQueue: TryAcquire does not jump the queue. With a (dead)
// waiter queued and the key free it fails with ErrNotAcquired, and once that entry's
// lease ran out it succeeds.
func TestFairTryAcquireBehindQueue(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadWaiter(t, c, "k", 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	// The nodes may hand the key to the dead waiter (the head), for one lease at most.
	for i, a := range c.admin {
		if d := a.PTTL(ctx, "k").Val(); d > redlock.DefaultFairLease {
			t.Fatalf("node %d: the key lives %v after the release, more than the dead head's lease", i+1, d)
		}
	}
	other := c.newClient(fairOpts)
	if l, err := other.TryAcquire(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a free key with a waiter queued: %v, %v; want ErrNotAcquired", l, err)
	}
	deadline := time.Now().Add(2 * redlock.DefaultFairLease)
	for {
		l, err := other.TryAcquire(ctx, "k", time.Second)
		if err == nil {
			_ = l.Release(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("TryAcquire still fails 2 leases after the waiter died: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFairLeaveOnCancel: a waiter whose context ends takes its entries off every
// node, and the waiter behind it is not held up.
func TestFairLeaveOnCancel(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	gone := acquireAsync(wctx, c.newClient(fairOpts), "k", 5*time.Second)
	c.waitQueued("k", 1)
	next := acquireAsync(ctx, c.newClient(fairOpts), "k", 5*time.Second)
	c.waitQueued("k", 2)
	cancel()
	if r := <-gone; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", r.err)
	}
	if lens := c.queueLens("k"); !slices.Equal(lens, []int64{1, 1, 1}) {
		t.Fatalf("queues after the cancelled Acquire returned: %v, want one entry left per node", lens)
	}
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the next waiter", next)
	if took := r.at.Sub(start); took > 200*time.Millisecond {
		t.Errorf("the next waiter got the lock %v after the release", took)
	}
	_ = r.lock.Release(ctx)
}

// TestFairNodeRestartedEmpty: a node that restarts empty loses its queue; the waiters'
// renewals put their entries back with their own tickets, and the order holds, also
// for a waiter that arrives after the restart.
func TestFairNodeRestartedEmpty(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The holder must hold every node: on a bare majority, losing node 3 would lose
	// the lock (Redlock without persistence), and the waiters would rightly take it.
	for tries := 0; ; tries++ {
		holder.WaitForCalls()
		if slices.Equal(c.values("k"), repeat(holder.Token(), 3)) {
			break
		}
		if tries == 20 {
			t.Fatalf("the holder does not get back on every node: %q", c.values("k"))
		}
		if err := holder.Extend(ctx, 5*time.Second); err != nil { // heals the node it lacks
			t.Fatal(err)
		}
	}
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 2*time.Millisecond, 1)
	g.queueWaiter(ctx, c, "k", 2, 2*time.Millisecond, 2)
	c.servers[2].Restart()
	g.queueWaiter(ctx, c, "k", 3, 2*time.Millisecond, 3) // node 3 too, by the renewals
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	if want := []int{1, 2, 3}; !slices.Equal(g.order, want) {
		t.Fatalf("granted in order %v, want %v", g.order, want)
	}
}

// TestFairMutualExclusion: four Clients take a fair lock ten times each; no two are
// ever inside at once, and every one gets its turns.
func TestFairMutualExclusion(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	counts, _ := c.contend("k", 10, fairOpts, fairOpts, fairOpts, fairOpts)
	t.Logf("acquisitions per Client: %v", counts)
}

// contend runs one Client per element of opts, each taking key rounds times (holding it
// 1 ms), and fails c's test if two ever held it at once; it returns each Client's
// acquisitions and the fencing tokens of the locks in the order they were held.
func (c *cluster) contend(key string, rounds int, opts ...redlock.Options) (counts []int, fences []uint64) {
	t := c.t
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts = make([]int, len(opts))
	for i := range counts {
		client := c.newClient(opts[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := client.Acquire(ctx, key, 2*time.Second)
				if err != nil {
					t.Errorf("Client %d (fair: %v): %v", i+1, opts[i].Fair, err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				fences = append(fences, l.Fence())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				counts[i]++
				if err := l.Release(ctx); err != nil {
					t.Errorf("Client %d: release: %v", i+1, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d overlapping holds", n)
	}
	return counts, fences
}

// TestFairWakesOnlyTheNext: a release makes the next waiter attempt, not every waiter
// (no thundering herd): eight queued Clients take the lock one after another with one
// attempt per hand-over on each node, not 8 + 7 + ... + 1 = 36.
func TestFairWakesOnlyTheNext(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	rec := &recorder{}
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 8
	g := &grants{}
	for i := 1; i <= waiters; i++ {
		client, err := redlock.New(rec.clients(c.servers), fairOpts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		g.queue(ctx, c, client, "k", i, 2*time.Millisecond, int64(i))
	}
	before := len(rec.sent())
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	took := time.Since(start)
	attempts := 0
	for _, call := range rec.sent()[before:] {
		if fc, _ := parseFairCall(call.args); call.node == 0 && fc.kind == "acquire" && fc.id != "" {
			attempts++
		}
	}
	t.Logf("%d hand-overs in %v with %d attempts on node 1", waiters, took, attempts)
	if took > 400*time.Millisecond {
		t.Errorf("%d hand-overs took %v: a waiter missed its turn and waited for its renewal", waiters, took)
	}
	if !slices.Equal(g.order, []int{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("granted in order %v", g.order)
	}
	// One attempt per hand-over: each release (the first holder's too, which took the
	// key with nobody queued and has no entry) names the next waiter, and only it
	// attempts. Two more for a renewal or the head's polling on a slow box. (Before
	// the head was named, the waiters counted releases: 15 attempts here.)
	if attempts > waiters+2 {
		t.Errorf("%d attempts on node 1 for %d hand-overs: waiters that are not next attempt too", attempts, waiters)
	}
}

// TestFairFirstInLineBehindDeadHolder: the holder took a fresh key with no queue entry
// (TryAcquire) and died. A's draw finds the queue empty and the key held, and queues it
// first in line; A still attempts at once, learns that it is the head, and polls at
// RetryDelay, so it gets the key soon after the unannounced expiry. A version whose
// draw made A wait to be named left it to its first renewal, FairLease/3 (here 2 s)
// after the draw: 1.65 s after the expiry (found in review).
func TestFairFirstInLineBehindDeadHolder(t *testing.T) {
	opts := redlock.Options{Fair: true, FairLease: 6 * time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	if _, err := c.client.TryAcquire(ctx, "k", time.Minute); err != nil { // never released
		t.Fatal(err)
	}
	ares := acquireAsync(ctx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 1)
	const left = 300 * time.Millisecond
	expires := time.Now().Add(left)
	for _, a := range c.admin {
		if err := a.PExpire(ctx, "k", left).Err(); err != nil { // the holder's key runs out
			t.Fatal(err)
		}
	}
	r := wantResult(t, "A", ares)
	defer r.lock.Release(ctx)
	late := r.at.Sub(expires)
	t.Logf("A got the lock %v after the dead holder's key expired", late)
	if late > 500*time.Millisecond {
		t.Errorf("A, first in line, got the expired lock %v late: it waited for its renewal (FairLease/3), not RetryDelay", late)
	}
}
