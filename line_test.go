package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// lineOf returns the Client line ids in key's line on its line node, the head first.
func (c *cluster) lineOf(key string) []string {
	c.t.Helper()
	order, _, _ := redlock.LineKeys(key)
	ids, err := c.admin[c.client.LineNode(key)].ZRange(c.t.Context(), order, 0, -1).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	return ids
}

// TestLineGrantsInArrivalOrder: four Clients (polling once an hour) start waiting for a
// held key one after another. Each release names the head of the key's line, whose
// Client attempts at once while the line node keeps the key for it: they get the key
// in the order in which they came, one per release. Without the line the winner of
// each release is whichever Client reaches the nodes first (all 24 orders possible).
func TestLineGrantsInArrivalOrder(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, noPolling)
	key := "line-order"
	holder, err := c.client.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // else a waiter's first attempt may win the line node, and take no place
	var ids []string
	var results []<-chan result
	for i := range 4 {
		w := c.newClient(noPolling)
		ids = append(ids, w.LineID())
		results = append(results, acquireAsync(t.Context(), w, key, time.Minute))
		eventually(t, "the waiter's place in the line", func() bool { return len(c.lineOf(key)) == i+1 })
		// Its first attempt over (it listens once refused): a first attempt asks every
		// node at once, and one still out at a release could win the nodes other than
		// the line node during the head's turn (the line does not order it).
		eventually(t, "the waiter's subscriptions", func() bool { return w.Listening(key) == len(c.servers) })
	}
	if got := c.lineOf(key); !slices.Equal(got, ids) {
		t.Fatalf("line %q, want the arrival order %q", got, ids)
	}
	lock := holder
	for i, res := range results {
		released := time.Now()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := wantGrantWithin(t, "waiter "+ids[i], res, released, 2*time.Second)
		for j, other := range results[i+1:] {
			select {
			case o := <-other:
				t.Fatalf("waiter %d got the key (%v) before waiter %d, which came first", i+j+2, o.err, i+1)
			default:
			}
		}
		lock = r.lock
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls() // the release takes the releasing Client out of the line
	if got := c.lineOf(key); len(got) != 0 {
		t.Errorf("line %q left after every waiter got the key", got)
	}
}

// TestLineDeadHeadSkipped: the head of the line belongs to a Client that died while
// waiting (closed without a word to the nodes: its place stays until its lease ends).
// The release names it all the same; the Client behind it, which polls once an hour,
// waits one turn for an announcement that does not come, then attempts and gets the
// key, once the line node no longer keeps it for the dead head.
func TestLineDeadHeadSkipped(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-dead-head"
	holder, err := c.client.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	dead := c.newClient(noPolling)
	deadResult := acquireAsync(t.Context(), dead, key, time.Minute)
	eventually(t, "the first waiter's place", func() bool { return len(c.lineOf(key)) == 1 })
	waiter := c.newClient(noPolling)
	results := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the second waiter's place", func() bool { return len(c.lineOf(key)) == 2 })
	dead.Close() // a closing Client does not stop to take its place out
	<-deadResult
	if got := c.lineOf(key); len(got) != 2 || got[0] != dead.LineID() {
		t.Fatalf("line %q, want the dead Client %q still first", got, dead.LineID())
	}
	released := time.Now()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The turn lasts NodeTimeout/4 (250 ms here); the waiter then attempts.
	r := wantGrantWithin(t, "the waiter behind a dead head", results, released, 3*time.Second)
	if took := r.at.Sub(released); took < 200*time.Millisecond {
		t.Errorf("the waiter got the key %v after the release, inside the dead head's turn", took)
	}
	_ = r.lock.Release(t.Context())
}

// TestLineTurnRefusesOnlyAcquire: while the line node keeps a released key for the
// line's head, an Acquire of a Client that waited for the key lately is refused there
// and joins the line behind the head; its first attempt asks the line node first, so
// it wins no other node either. TryAcquire does not queue, and takes the key if it is
// free. (A Client new to the key asks every node at once, and can win the others.)
func TestLineTurnRefusesOnlyAcquire(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-turn"
	line := c.client.LineNode(key)
	order, _, turn := redlock.LineKeys(key)
	admin := c.admin[line]
	ctx := t.Context()
	// A head in the line that never comes: a Client id nobody uses.
	if err := admin.ZAdd(ctx, order, redis.Z{Score: 1, Member: "absent"}).Err(); err != nil {
		t.Fatal(err)
	}
	_, leases, _ := redlock.LineKeys(key)
	if err := admin.ZAdd(ctx, leases, redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "absent"}).Err(); err != nil {
		t.Fatal(err)
	}
	holder, err := c.client.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	other := c.newClient(noPolling)
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	if _, err := other.Acquire(wctx, key, time.Minute); err == nil {
		t.Fatal("an Acquire took a held key")
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // Release returns at a majority: the line node may come later
	if got, err := admin.Get(ctx, turn).Result(); err != nil || got != "turn:absent" {
		t.Fatalf("turn %q (%v) after the release, want the line's head", got, err)
	}
	actx, acancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer acancel()
	refused := acquireAsync(actx, other, key, time.Minute)
	eventually(t, "the refused Client's place behind the head", func() bool {
		got := c.lineOf(key)
		return len(got) == 2 && got[1] == other.LineID()
	})
	if vals := c.values(key); slices.ContainsFunc(vals, func(v string) bool { return v != "" }) {
		t.Errorf("the refused Acquire left values %q on the nodes", vals)
	}
	if r := <-refused; r.err == nil {
		_ = r.lock.Release(ctx)
		t.Fatal("an Acquire took the key during the head's turn")
	}
	l, err := c.newClient(redlock.Options{}).TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("TryAcquire during the turn: %v", err)
	}
	_ = l.Release(ctx)
}

// TestLineLeftOnGivingUp: a Client whose only waiter for a key gives up takes its
// place out of the key's line, and ends its turn if a release had named it. While
// another waiter of the same Client still waits, the place stays: the next release
// names that Client.
func TestLineLeftOnGivingUp(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-leave"
	holder, err := c.client.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	heard := c.admin[c.client.LineNode(key)].Subscribe(t.Context(), redlock.ReleaseChannel(key))
	defer heard.Close()
	if _, err := heard.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	quitter := c.newClient(noPolling)
	ctx1, cancel1 := context.WithCancel(t.Context())
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	first := acquireAsync(ctx1, quitter, key, time.Minute)
	eventually(t, "the quitter's place", func() bool { return len(c.lineOf(key)) == 1 })
	second := acquireAsync(ctx2, quitter, key, time.Minute)
	eventually(t, "the quitter's second waiter", func() bool { return quitter.Waiting(key) == 2 })
	cancel1()
	<-first
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	msg, err := heard.ReceiveMessage(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := "!" + holder.Token() + " " + quitter.LineID(); msg.Payload != want {
		t.Errorf("release announced %q, want %q: the quitter's place kept for its other waiter", msg.Payload, want)
	}
	r := wantResult(t, "the quitter's second waiter", second)
	holder = r.lock
	// Now the quitter waits again, once, and gives up.
	quitter2 := c.newClient(noPolling)
	ctx3, cancel3 := context.WithCancel(t.Context())
	third := acquireAsync(ctx3, quitter2, key, time.Minute)
	eventually(t, "the second quitter's place", func() bool { return slices.Contains(c.lineOf(key), quitter2.LineID()) })
	cancel3()
	<-third
	eventually(t, "the second quitter's place to go", func() bool { return !slices.Contains(c.lineOf(key), quitter2.LineID()) })
	_ = holder.Release(t.Context())
}
