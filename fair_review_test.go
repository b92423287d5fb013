package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Adversarial tests of the fair lock (Options.Fair), from the review of #13 §2's first
// increment: the waiting loop's bookkeeping when nodes fail or waiters leave, and the
// availability cost of the queue.

// partLink is a go-redis hook on some of a Client's node connections: once cut, every
// command on them fails, as across a network partition. It counts the commands it
// failed.
type partLink struct {
	cut    atomic.Bool
	failed atomic.Int64
}

func (*partLink) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *partLink) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.cut.Load() {
			p.failed.Add(1)
			cmd.SetErr(errSevered)
			return errSevered
		}
		return next(ctx, cmd)
	}
}
func (p *partLink) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.cut.Load() {
			p.failed.Add(int64(len(cmds)))
			for _, cmd := range cmds {
				cmd.SetErr(errSevered)
			}
			return errSevered
		}
		return next(ctx, cmds)
	}
}

// partedClient returns a Client whose connections to the given nodes (0-based) can be
// cut; it reaches the other nodes throughout.
func (c *cluster) partedClient(opts redlock.Options, nodes ...int) (*redlock.Client, *partLink) {
	c.t.Helper()
	p := &partLink{}
	rdbs := redistest.Clients(c.servers)
	for _, i := range nodes {
		rdbs[i].AddHook(p)
	}
	client, err := redlock.New(rdbs, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { client.Close() })
	return client, p
}

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
	a, link := c.partedClient(opts, 1, 2)
	res := acquireAsync(ctx, a, "k", 5*time.Second)
	c.waitQueued("k", 1)
	eventually(t, "the waiter's subscription", func() bool { return subscribed(ctx, c.admin, "k") })
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
// while the key is held take their entries out with an announcement, so the waiters
// behind them count them as gone and attempt on the right release. Before, only a
// leaving head was announced: the next waiter's count of those ahead stayed too high,
// and it missed its turn until its renewal (a third of the lease: here 1 s).
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
