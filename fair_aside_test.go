package redlock_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFairLateStepAsideRemoval: a waiter cut off to node 1 steps aside (its removal
// reaches node 1), comes back and queues again. A late copy of that removal landing on
// node 1 afterwards must not take the live waiter's entry out: the removal belongs to
// a stay that is over. With one id for the whole Acquire it did, and the waiter behind
// could become node 1's head until the waiter's next renewal.
func TestFairLateStepAsideRemoval(t *testing.T) {
	for _, opts := range []redlock.Options{
		{Fair: true, FairLease: 2 * time.Second},
		{Fair: true, Fencing: true, FairLease: 2 * time.Second},
	} {
		t.Run(fmt.Sprintf("fencing %v", opts.Fencing), func(t *testing.T) {
			lateStepAsideRemoval(t, opts)
		})
	}
}

func lateStepAsideRemoval(t *testing.T, opts redlock.Options) {
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	link := &severed{}
	rdbs := rec.clients(c.servers)
	rdbs[1].AddHook(link)
	rdbs[2].AddHook(link)
	w, err := redlock.New(rdbs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	res := acquireAsync(ctx, w, "k", 5*time.Second)
	c.waitQueued("k", 1)
	link.cut.Store(true)
	q, l, _ := redlock.FairKeys("k")
	eventually(t, "the cut-off waiter stepping aside on node 1", func() bool {
		return c.admin[0].ZCard(ctx, q).Val() == 0
	})
	var removal *sentCall
	for _, call := range rec.sent() {
		if fc, _ := parseFairCall(call.args); call.node == 0 && fc.kind == "release" && fc.token == "" {
			removal = &call
		}
	}
	if removal == nil {
		t.Fatal("no step-aside removal was sent to node 1")
	}
	link.cut.Store(false)
	var back string // the id the waiter came back with
	eventually(t, "the waiter back on node 1", func() bool {
		ids := c.admin[0].ZRange(ctx, q, 0, -1).Val()
		if len(ids) == 1 {
			back = ids[0]
		}
		return back != ""
	})
	eventually(t, "the waiter back on every node", func() bool {
		for _, a := range c.admin {
			if a.ZScore(ctx, q, back).Err() != nil {
				return false
			}
		}
		return true
	})
	// Its entries from before the cut (renewed then, a lease ago at most) are out too.
	if lens := c.queueLens("k"); slices.Max(lens) != 1 {
		t.Errorf("queues once the waiter is back: %v, want its entry only", lens)
	}
	c.deliverAgain(*removal, scriptSources(t))
	if n, m := c.admin[0].ZCard(ctx, q).Val(), c.admin[0].ZCard(ctx, l).Val(); n != 1 || m != 1 {
		t.Errorf("node 1 holds %d entries and %d leases after a late copy of the step-aside removal, want the waiter's 1 and 1", n, m)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the waiter that came back", res)
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
