package redlock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFairHeadLeavesWhileHeldThenLockExpires: the head of the queue gives up while the
// key is held, and the holder never releases (it died: its key expires). The waiter
// behind, now the head, was told by nobody: at its last attempt it had one entry
// ahead, so it renews only every FairLease/3 (here 2 s) and not every RetryDelay as a
// head does, and gets the key long after it expired. (Before head notices, the
// leaver's removal was announced and counted, so the waiter attempted at once, found
// itself the head and polled the expired key at RetryDelay.)
func TestFairHeadLeavesWhileHeldThenLockExpires(t *testing.T) {
	opts := redlock.Options{Fair: true, FairLease: 6 * time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	// Never released; its key is cut short by hand once A has left, so that it is
	// surely held until then however slow the box.
	if _, err := c.client.TryAcquire(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	actx, cancelA := context.WithCancel(ctx)
	ares := acquireAsync(actx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 1)
	bres := acquireAsync(ctx, c.newClient(opts), "k", 10*time.Second)
	c.waitQueued("k", 2)
	cancelA() // the head leaves while the key is held: nobody is told
	if r := <-ares; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("A: %v, want context.Canceled", r.err)
	}
	const left = 300 * time.Millisecond
	expires := time.Now().Add(left) // on every node at this moment or later
	for _, a := range c.admin {
		if err := a.PExpire(ctx, "k", left).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := wantResult(t, "B", bres)
	defer r.lock.Release(ctx)
	late := r.at.Sub(expires)
	t.Logf("B got the lock %v after the holder's key expired", late)
	if late > 500*time.Millisecond {
		t.Errorf("B, the head once A left, got the expired lock %v late: it waited for its renewal (FairLease/3)", late)
	}
}

// TestFairOldVersionHeadTold: during a rolling upgrade, waiters of earlier versions
// are queued beside this one's, and a release of this version that leaves one at the
// head of a free key must tell it where it listens, or it waits for its renewal (a
// third of its lease) at every hand-over to it.
//   - The first fair version: ids are plain UUIDs, and the waiters listen on
//     redlock:released:KEY for the token (fairNotify once found no Client in such an
//     id and told nobody).
//   - The version before 2026-12-04: ids "<client>/<waiter>", and a channel per
//     Client and key, redlock:fair:<client>:KEY, for "<token> <id>".
func TestFairOldVersionHeadTold(t *testing.T) {
	const client, waiter = "5f0c9a52-6d1e-4b8e-9c33-0f6f2d6f9a10", "0b9e3c1d-2a4f-4e8b-8c7d-6e5f4a3b2c1d"
	for _, tc := range []struct {
		name, id, channel string
		withID            bool // the message is "<token> <id>", not the token alone
	}{
		{"first version", waiter, redlock.ReleaseChannel("k"), false},
		{"channel per key", client + "/" + waiter, "redlock:fair:" + client + ":k", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3, redistest.Options{}, fairOpts)
			ctx := t.Context()
			holder, err := c.client.TryAcquire(ctx, "k", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			holder.WaitForCalls() // on every node, so that each release there names the head
			queue, leases, _ := redlock.FairKeys("k")
			var subs []*redis.PubSub
			for _, a := range c.admin {
				if err := a.ZAdd(ctx, queue, redis.Z{Score: 1, Member: tc.id}).Err(); err != nil {
					t.Fatal(err)
				}
				end := time.Now().Add(time.Minute).UnixMilli()
				if err := a.ZAdd(ctx, leases, redis.Z{Score: float64(end), Member: tc.id}).Err(); err != nil {
					t.Fatal(err)
				}
				ps := a.Subscribe(ctx, tc.channel) // as the old waiter's Client
				defer ps.Close()
				if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
					t.Fatal(err)
				}
				subs = append(subs, ps)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			want := holder.Token()
			if tc.withID {
				want += " " + tc.id
			}
			for i, ps := range subs {
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				m, err := ps.ReceiveMessage(rctx)
				cancel()
				if err != nil {
					t.Errorf("node %d: no announcement on %s: %v", i+1, tc.channel, err)
					continue
				}
				if m.Payload != want {
					t.Errorf("node %d announced %q, want %q", i+1, m.Payload, want)
				}
			}
		})
	}
}

// TestFairPreviousVersionReleaseBounded: the other direction of a rolling upgrade
// from the version before 2026-12-04. Its release runs its own fair_queue.lua, which
// tells a head whose id has no "/" the first version's way (the token on
// redlock:released:KEY), where this version's Clients do not listen: this version's
// head is not told, and attempts at its renewal (a third of FairLease at most: 333 ms
// by default). A hand-over from an old Client to a new one costs that, not more
// (docs/design.md, "Fair locks across processes").
func TestFairPreviousVersionReleaseBounded(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", time.Minute) // as the old Client's lock
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	wc := c.newClient(fairOpts)
	res := acquireAsync(ctx, wc, "k", time.Minute)
	c.waitQueued("k", 1)
	// Listening on every node: a release of today's script would be heard, so the
	// check below that nobody heard this one shows the splice took.
	eventually(t, "the waiter's Client listening on every node", func() bool { return listening(len(c.admin), wc) })
	start := time.Now()
	c.releasePrevious("k", holder.Token(), "")                   // the old Client's Release
	r := wantGrantWithin(t, "the head", res, start, time.Second) // its renewal: 333 ms at most
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFairPreviousVersionReleaseBehindEntry: as TestFairPreviousVersionReleaseBounded,
// with the previous version's waiter A holding the key and its entry ahead of this
// version's waiter B. A's release removes A's entry and tells B nothing; B, which
// counted an entry ahead at its latest attempt, attempts at its renewal, a third of
// FairLease (333 ms here), and not later.
func TestFairPreviousVersionReleaseBehindEntry(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.TryAcquire(ctx, "k", time.Minute) // A's lock
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	q, l, n := redlock.FairKeys("k")
	const a = "5f0c9a52-6d1e-4b8e-9c33-0f6f2d6f9a10/0b9e3c1d-2a4f-4e8b-8c7d-6e5f4a3b2c1d" // the previous id form
	for _, admin := range c.admin {                                                       // A's entry, first in line
		end := float64(time.Now().Add(time.Minute).UnixMilli())
		if err := admin.ZAdd(ctx, q, redis.Z{Score: 1, Member: a}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.ZAdd(ctx, l, redis.Z{Score: end, Member: a}).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Set(ctx, n, 1, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	wc := c.newClient(fairOpts)
	res := acquireAsync(ctx, wc, "k", time.Minute)
	c.waitQueued("k", 2)
	eventually(t, "B's Client listening on every node", func() bool { return listening(len(c.admin), wc) })
	start := time.Now()
	c.releasePrevious("k", holder.Token(), a)
	r := wantGrantWithin(t, "B", res, start, time.Second) // its renewal: 333 ms
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// releasePrevious runs on every node the release of the version before 2026-12-04
// (its fair_queue.lua with today's fair_release.lua) for token and waiter id, and
// fails unless each node removed something and its notice reached nobody: this
// version's Clients do not hear that version's notices.
func (c *cluster) releasePrevious(key, token, id string) {
	c.t.Helper()
	script := redis.NewScript(previousFairQueue(c.t) + readFile(c.t, "scripts/fair_release.lua"))
	q, l, n := redlock.FairKeys(key)
	for i, a := range c.admin {
		heard, err := script.Run(c.t.Context(), a, []string{key, q, l, n}, token, id).Int()
		if err != nil {
			c.t.Fatal(err)
		}
		if heard != 1 { // 1 + the clients that heard the notice
			c.t.Fatalf("node %d: the previous version's release answered %d, want 1 (nobody heard it)", i+1, heard)
		}
	}
}

// previousFairQueue returns scripts/fair_queue.lua as it was before 2026-12-04: today's
// with the lines of fairNotify that choose the channel put back as they were.
func previousFairQueue(t *testing.T) string {
	t.Helper()
	script := readFile(t, "scripts/fair_queue.lua")
	from := strings.Index(script, "  local heard\n")
	to := strings.Index(script, "  if type(heard) ~= 'number' then")
	if from < 0 || to < from {
		t.Fatal("fair_queue.lua: fairNotify's channel choice not found")
	}
	return script[:from] + readFile(t, "testdata/fair_notify_before_2026-12-04.lua") + script[to:]
}

// readFile returns the file's text.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFairCloseDoesNotWaitForPartialNotice: a notice from one node of three arms a
// timer for NodeTimeout/5 (partialNotice); Close must not wait for it, since it would
// only find the Client closed. Before, Close waited the timer out, as it does not for
// the sweeper's: here 1 s, with a 5 s NodeTimeout.
func TestFairCloseDoesNotWaitForPartialNotice(t *testing.T) {
	opts := redlock.Options{Fair: true, NodeTimeout: 5 * time.Second, FairLease: time.Minute}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns at a majority: a SET still on its way to node 1 could lose to the
	// waiter's first attempt, and node 1 would then have no key to release and name
	// nobody (as in TestFairHeadNamedByMinority).
	holder.WaitForCalls()
	ac := c.newClient(opts)
	ares := acquireAsync(context.WithoutCancel(ctx), ac, "k", 10*time.Second)
	c.waitQueued("k", 1)
	queue, _, _ := redlock.FairKeys("k")
	ids, err := c.admin[0].ZRange(ctx, queue, 0, -1).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("queue on node 1: %v, %v", ids, err)
	}
	for _, admin := range c.admin[1:] { // only node 1 will name the waiter
		if err := admin.ZRem(ctx, queue, ids[0]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the waiter's Client listening on every node", func() bool { return listening(len(c.admin), ac) })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node 1's notice arming the timer", func() bool { return ac.PartialNotices() == 1 })
	start := time.Now()
	if err := ac.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	<-ares
	t.Logf("Close took %v", took)
	if took > 500*time.Millisecond {
		t.Errorf("Close took %v: it waited for the partial notice's timer (%v)", took, opts.NodeTimeout/5)
	}
}
