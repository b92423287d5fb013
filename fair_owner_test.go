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

// Reentrant fair locks (WithOwner with Options.Fair): an owner that holds the key adds
// a hold at once, ahead of the queue; an owner that does not queues like any waiter;
// the key, and the turn of the next waiter, go with the owner's last hold.

// ownerAheadOfWaiter takes key for ctx's owner on the cluster's Client, then queues a
// waiter without owner (a Client of its own) behind it and returns both. The hold's
// last call lands before the waiter queues: a first try that finds the waiter's entry
// on a node is refused there, which would leave the owner a bare majority.
func (c *cluster) ownerAheadOfWaiter(ctx context.Context, key string) (*redlock.Lock, <-chan result) {
	c.t.Helper()
	l, err := c.client.Acquire(ctx, key, 10*time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	l.WaitForCalls()
	waiter := acquireAsync(c.t.Context(), c.newClient(fairOpts), key, 5*time.Second) // without owner
	c.waitQueued(key, 1)
	return l, waiter
}

// TestFairOwnerReentersAheadOfQueue: owner job holds the key (Client A); a waiter
// without owner queues (Client W); another Client of job (B) gets a hold at once,
// ahead of the waiter. Releasing A's hold leaves the key job's and the waiter
// waiting; releasing B's, the last, hands the key to the waiter at once.
func TestFairOwnerReentersAheadOfQueue(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	job := redlock.WithOwner(ctx, "job")
	a, waiter := c.ownerAheadOfWaiter(job, "k")

	start := time.Now()
	b, err := c.newClient(fairOpts).Acquire(job, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("the owner's second hold, from another Client: %v", err)
	}
	// At once: one attempt, not a renewal period (FairLease/3 = 333 ms) in the queue.
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("the owner's second hold took %v behind a queued waiter", took)
	}
	b.WaitForCalls()
	c.wantHolds("k", "job", each(3, a, b)...)
	if got := c.queueLens("k"); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Errorf("queue lengths %v, want the waiter's entry alone (the hold did not queue)", got)
	}

	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a.WaitForCalls()
	c.wantHolds("k", "job", each(3, b)...)
	select {
	case r := <-waiter:
		t.Fatalf("the waiter got the key while the owner still holds it: %v, %v", r.lock, r.err)
	case <-time.After(100 * time.Millisecond): // a release that wrongly freed the key would have told it by now
	}

	released := time.Now()
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the waiter after the owner's last release", waiter)
	if took := r.at.Sub(released); took > 250*time.Millisecond {
		t.Errorf("the waiter got the key %v after the owner's last release: it was not told", took)
	}
	// A majority holds the waiter's token once b's release has landed everywhere
	// (it returned after a majority) and the waiter's calls are done. A node may
	// instead have handed the key to an older registration of the waiter (about 1
	// run in 80): the waiter's release frees that key too.
	b.WaitForCalls()
	r.lock.WaitForCalls()
	if got := c.values("k"); len(slices.DeleteFunc(slices.Clone(got), func(v string) bool { return v != r.lock.Token() })) < 2 {
		t.Fatalf("values of k on the nodes: %q; want the waiter's token %q on a majority", got, r.lock.Token())
	}
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r.lock.WaitForCalls()
	c.wantValues("k", "", "", "")
	c.waitQueued("k", 0)
}

// TestFairOwnerQueuesInArrivalOrder: an owner that does not hold the key waits its
// turn like any waiter: behind the waiter that came first, ahead of the one after it.
func TestFairOwnerQueuesInArrivalOrder(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 2*time.Millisecond, 1)
	c.waitScoresAlike("k")
	g.queue(redlock.WithOwner(ctx, "job"), c, c.newClient(fairOpts), "k", 2, 2*time.Millisecond, 2)
	c.waitScoresAlike("k")
	g.queueWaiter(ctx, c, "k", 3, 2*time.Millisecond, 3)
	c.waitScoresAlike("k")
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
	if want := []int{1, 2, 3}; !slices.Equal(g.order, want) {
		t.Fatalf("granted in order %v, want %v (the owner, second, in its place)", g.order, want)
	}
	c.waitQueued("k", 0)
	c.wantValues("k", "", "", "")
}

// TestFairOwnerTryAcquire: with a waiter queued, TryAcquire for the owner that holds
// the key adds a hold; for another owner, or without owner, it is refused and leaves
// nothing behind (it does not queue).
func TestFairOwnerTryAcquire(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	job := redlock.WithOwner(ctx, "job")
	a, waiter := c.ownerAheadOfWaiter(job, "k")
	other := c.newClient(fairOpts)
	b, err := other.TryAcquire(job, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire for the owner that holds the key: %v", err)
	}
	wantHeldElsewhere(t, redlock.WithOwner(ctx, "other"), other, "another owner", "k")
	wantHeldElsewhere(t, ctx, other, "a TryAcquire without owner", "k")
	c.wantHolds("k", "job", each(3, a, b)...)
	if got := c.queueLens("k"); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Errorf("queue lengths %v, want the waiter's entry alone", got)
	}
	for _, l := range []*redlock.Lock{b, a} {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r := wantResult(t, "the waiter", waiter)
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The key free and nobody queued: an owner's TryAcquire takes it.
	l, err := other.TryAcquire(redlock.WithOwner(ctx, "other"), "k", time.Second)
	if err != nil {
		t.Fatalf("TryAcquire of a free key with nobody queued: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitQueued("k", 0)
	// Release returns at a majority: the last node's delete may land later.
	eventually(t, "the key gone from every node", func() bool { return !slices.ContainsFunc(c.values("k"), func(v string) bool { return v != "" }) })
}

// TestFairOwnerReleaseKeepsMinorityHold: a node that missed the owner's second hold
// (its call failed there) still lists the first; releasing the first there must not
// free the key on that node while the owner holds it on the majority, and the last
// release frees it everywhere and tells the waiter.
func TestFairOwnerReleaseKeepsMinorityHold(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	job := redlock.WithOwner(ctx, "job")
	a, waiter := c.ownerAheadOfWaiter(job, "k")
	b, err := c.newClient(fairOpts).Acquire(job, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.WaitForCalls()
	// Node 3 loses b's hold (as if its call had not landed there).
	if err := c.admin[2].Set(ctx, "k", ownerHead("job")+a.Token()+"|", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a.WaitForCalls()
	// Node 3 is free now (or handed to the waiter, its queue's head), the others list
	// b: the owner still holds a majority, and the waiter, told or handed the key by
	// node 3 alone, must not get the lock.
	c.wantHolds("k", "job", []*redlock.Lock{b}, []*redlock.Lock{b})
	if _, owners := c.holds(2, "k", "job"); owners {
		t.Errorf("node 3 still lists a hold of the owner: %q", c.values("k")[2])
	}
	select {
	case r := <-waiter:
		t.Fatalf("the waiter got the key from a minority: %v, %v", r.lock, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the waiter", waiter)
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFairRefusesFencedOwners: an owner's Acquire or TryAcquire (WithOwner) on a fair
// Client with fencing is refused with an error that says so, and leaves nothing on
// the nodes: a fenced owner's lease has no fair script yet.
func TestFairRefusesFencedOwners(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{Fair: true, Fencing: true})
	ctx := redlock.WithOwner(t.Context(), "job-1")
	want := "not supported with Options.Fair and Options.Fencing"
	if l, err := c.client.Acquire(ctx, "k", 5*time.Second); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Acquire with an owner: %v, %v; want the refusal", l, err)
	}
	if l, err := c.client.TryAcquire(ctx, "k", 5*time.Second); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("TryAcquire with an owner: %v, %v; want the refusal", l, err)
	}
	for i, n := range c.queueLens("k") {
		if n != 0 {
			t.Errorf("node %d: %d queue entries after the refusals", i+1, n)
		}
	}
	if got := c.values("k"); strings.Join(got, "") != "" {
		t.Errorf("the key was set: %q", got)
	}
}

// fairOwnerLateSteps end allLateSteps (TestLateCopiesOfEveryCommand) with every call of
// a reentrant fair lock: an owner's first try, a waiter queued, the owner's second hold
// ahead of it, the releases of both holds, the waiter's grant, and the owner taking
// the key again, held to the end (so that copies of its earlier holds' calls meet a
// held key of the same owner).
var fairOwnerLateSteps = []lateStep{
	{"fair owner: a hold ahead of a waiter, both released", func(w *lateWorld, ctx context.Context) error {
		fo := redlock.WithOwner(ctx, "fo")
		first, err := w.recordedClient(fairOpts).Acquire(fo, "kfo", 5*time.Second)
		if err != nil {
			return err
		}
		res := acquireAsync(ctx, w.recordedClient(fairOpts), "kfo", 10*time.Second)
		w.c.waitQueued("kfo", 1)
		second, err := w.recordedClient(fairOpts).Acquire(fo, "kfo", 5*time.Second)
		if err != nil {
			return err
		}
		if err := second.Extend(ctx, 8*time.Second); err != nil {
			return err
		}
		for _, l := range []*redlock.Lock{first, second} {
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
		r := wantResult(w.t, "the fair waiter behind an owner", res)
		w.held["FW"] = r.lock
		return r.lock.Extend(ctx, 20*time.Second)
	}},
	{"fair owner: the owner takes it again", func(w *lateWorld, ctx context.Context) error {
		l := w.held["FW"]
		delete(w.held, "FW")
		if err := l.Release(ctx); err != nil {
			return err
		}
		fo := redlock.WithOwner(ctx, "fo")
		again, err := w.recordedClient(fairOpts).TryAcquire(fo, "kfo", 10*time.Second)
		if err != nil {
			return err
		}
		w.held["FO"] = again
		if l, err := w.recordedClient(fairOpts).TryAcquire(ctx, "kfo", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			return fmt.Errorf("a lock without owner on kfo held by fo: %v, %v", l, err)
		}
		return again.Extend(ctx, 30*time.Second)
	}},
}

// TestFairOwnerQueuedHoldSharesUntil: a hold the queue granted (the outer one) is one of
// its Client's holds of the owner: the Extend of a hold taken after it (re-entering),
// answered by nodes that list both, moves the outer hold's Until too, as it does for
// a lock without Fair. (The queue's grants were not recorded for that until the
// review of 74328be.)
func TestFairOwnerQueuedHoldSharesUntil(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			opts := redlock.Options{Fair: fair}
			c := newCluster(t, 3, redistest.Options{}, opts)
			ctx := t.Context()
			job := redlock.WithOwner(ctx, "job")
			blocker, err := c.newClient(opts).Acquire(ctx, "k", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			blocker.WaitForCalls()
			outerCh := acquireAsync(job, c.client, "k", 2*time.Second)
			if fair {
				c.waitQueued("k", 1)
			} else {
				eventually(t, "the outer hold's wait", func() bool { return subscribed(ctx, c.admin, "k") })
			}
			if err := blocker.Release(ctx); err != nil {
				t.Fatal(err)
			}
			outer := wantResult(t, "the outer hold", outerCh).lock
			// A node where the blocker's release landed after outer's call is healed.
			if err := outer.Extend(ctx, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			outer.WaitForCalls()
			inner, err := c.client.Acquire(job, "k", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			inner.WaitForCalls()
			c.wantHolds("k", "job", each(3, outer, inner)...)
			before := outer.Until()
			if err := inner.Extend(ctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if got := outer.Until(); !got.After(before.Add(10 * time.Second)) {
				t.Errorf("the outer hold's Until went from %v to %v: the inner hold's Extend, listed with it on every node, did not move it",
					before.Format(time.StampMilli), got.Format(time.StampMilli))
			}
			for _, l := range []*redlock.Lock{inner, outer} {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestFairOwnerReleaseAnswers runs fair_release.lua for an owner's hold "a" directly
// on one node and checks its answer in each state the key and the queue can be in,
// with a subscriber on the channel of the waiters' Client "c", so that the answer
// says whether the head was told (1 + the clients that heard: 2 told, 1 silent).
//   - A late copy that finds nothing of its own (no key, a key of the owner without
//     the hold, the lock's entry gone) answers 0 and tells nobody.
//   - A key of anyone else answers -1 and is left alone, even a bare key equal to the
//     hold's id; the lock's own entry still goes.
//   - A hold that is not the owner's last keeps the key and its TTL and tells nobody;
//     the last one deletes the key and tells the head.
//   - A release that takes out the lock's own entry removed something, so with the key
//     free or the head gone it tells the new head.
func TestFairOwnerReleaseAnswers(t *testing.T) {
	c := newCluster(t, 1, redistest.Options{}, fairOpts)
	ctx := t.Context()
	admin := c.admin[0]
	script := fairScripts(t, nil).release
	q, l, n := redlock.FairKeys("k")
	head := ownerHead("job")
	ps := admin.Subscribe(ctx, "redlock:fair:c")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	const own, other = "c:a", "c:x" // the lock's entry, another waiter's
	for _, tc := range []struct {
		name, key string   // the key's value before, "" for no key
		queue     []string // the queue before, head first
		id        string   // the entry the release names ("" for none)
		want      int64
		after     string   // the key's value after, "" for no key
		left      []string // the queue after
	}{
		{"no key", "", nil, "", 0, "", nil},
		{"no key, a waiter queued", "", []string{other}, "", 0, "", []string{other}},
		{"a late copy: the entry gone", "", []string{other}, own, 0, "", []string{other}},
		{"the owner's key without the hold", head + "b|", []string{other}, "", 0, head + "b|", []string{other}},
		{"another token's key", "t", nil, "", -1, "t", nil},
		{"another token's key, the entry queued", "t", []string{own, other}, own, -1, "t", []string{other}},
		{"another owner's key", ownerHead("other") + "a|", nil, "", -1, ownerHead("other") + "a|", nil},
		{"another owner's key, the entry queued", ownerHead("other") + "a|", []string{own}, own, -1, ownerHead("other") + "a|", nil},
		{"a bare key equal to the hold's id", "a", []string{other}, "", -1, "a", []string{other}},
		{"one of two holds", head + "a|b|", []string{other}, "", 1, head + "b|", []string{other}},
		{"one of two holds, the entry behind", head + "a|b|", []string{other, own}, own, 1, head + "b|", []string{other}},
		{"the last hold", head + "a|", []string{other}, "", 2, "", []string{other}},
		{"the last hold, the entry at the head", head + "a|", []string{own, other}, own, 2, "", []string{other}},
		{"no key, the entry queued alone", "", []string{own}, own, 1, "", nil},
		{"no key, the entry at the head", "", []string{own, other}, own, 2, "", []string{other}},
		{"the owner's key without the hold, the entry at the head", head + "b|", []string{own, other}, own, 2, head + "b|", []string{other}},
	} {
		if err := admin.Del(ctx, "k", q, l).Err(); err != nil {
			t.Fatal(err)
		}
		lease := float64(time.Now().Add(time.Minute).UnixMilli())
		for i, id := range tc.queue {
			if err := admin.ZAdd(ctx, q, redis.Z{Score: float64(i + 1), Member: id}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := admin.ZAdd(ctx, l, redis.Z{Score: lease, Member: id}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if tc.key != "" {
			if err := admin.Set(ctx, "k", tc.key, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := script.Run(ctx, admin, []string{"k", q, l, n}, "a", tc.id, head).Int64()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after, err := admin.Get(ctx, "k").Result()
		if errors.Is(err, redis.Nil) {
			after, err = "", nil
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want || after != tc.after {
			t.Errorf("%s: answered %d, key %q; want %d, key %q", tc.name, got, after, tc.want, tc.after)
		}
		if after != "" {
			// A minute set, a few ms gone: a TTL under 50 s was shortened.
			if ttl, err := admin.PTTL(ctx, "k").Result(); err != nil || ttl < 50*time.Second {
				t.Errorf("%s: the key's TTL went from 1m to %v (%v)", tc.name, ttl, err)
			}
		}
		queue, err := admin.ZRange(ctx, q, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		leases, err := admin.ZRange(ctx, l, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(leases)
		if !slices.Equal(queue, tc.left) || !slices.Equal(leases, tc.left) {
			t.Errorf("%s: queue %q, leases %q left; want %q for both", tc.name, queue, leases, tc.left)
		}
		if got == 2 { // the notice the subscriber heard names the release and the head
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			m, err := ps.ReceiveMessage(rctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if want := "a " + other; m.Payload != want {
				t.Errorf("%s: the head was told %q, want %q", tc.name, m.Payload, want)
			}
		}
	}
}
