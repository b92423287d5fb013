package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFairSplitCleanupTellsHead: fair waiters of several Clients that call Acquire on a
// free key at the same moment split the nodes between their attempts now and then
// (each node queues first whoever reaches it first), so that every attempt fails and
// the clean-ups free the key on every node. The clean-up must tell the head of the
// queue (fair_release.lua, which also hands it the key) as a Release does: with
// release.lua nobody was told, and the head waited for its next renewal, RetryDelay
// later (10 ms at the start of BenchmarkClients' fair hot key). Here RetryDelay and
// FairLease are long, so such a wait shows as a burst that takes seconds; each burst
// must end far sooner.
func TestFairSplitCleanupTellsHead(t *testing.T) {
	// Owners and fenced waiters register no hand token: they are told, not handed.
	for _, mode := range []string{"plain", "owner", "fenced"} {
		t.Run(mode, func(t *testing.T) { splitBursts(t, mode) })
	}
}

func splitBursts(t *testing.T, mode string) {
	const clients, bursts = 6, 40
	// NodeTimeout is long so that a loaded box (-race) makes no call fail: a waiter
	// whose draw or attempt failed without contention tries again after RetryDelay,
	// by design (a failed attempt's clean-up does not tell its own waiter).
	opts := redlock.Options{Fair: true, FairLease: 30 * time.Second, NodeTimeout: 500 * time.Millisecond,
		Fencing: mode == "fenced", RetryDelay: func(int) time.Duration { return 10 * time.Second }}
	c := newCluster(t, 5, redistest.Options{}, opts)
	cs := []*redlock.Client{c.client}
	for range clients - 1 {
		cs = append(cs, c.newClient(opts))
	}
	for b := range bursts {
		key := fmt.Sprintf("burst-%d", b)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := make(chan struct{})
		for i, cl := range cs {
			wg.Go(func() {
				<-start
				actx := ctx
				if mode == "owner" {
					actx = redlock.WithOwner(ctx, fmt.Sprintf("owner-%d", i))
				}
				lock, err := cl.Acquire(actx, key, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				errs <- lock.Release(context.WithoutCancel(ctx))
			})
		}
		begin := time.Now()
		close(start)
		dump := time.AfterFunc(1500*time.Millisecond, func() { // what the nodes hold while the burst is stuck
			q, _, _ := redlock.FairKeys(key)
			for i, a := range c.admin {
				t.Logf("node %d: key %q pttl %v queue %v hands %v", i, a.Get(context.Background(), key).Val(), a.PTTL(context.Background(), key).Val(), a.ZRangeWithScores(context.Background(), q, 0, -1).Val(), a.HGetAll(context.Background(), redlock.HandKey(key)).Val())
			}
		})
		wg.Wait()
		dump.Stop()
		cancel()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("burst %d: %d Clients at once on a free key: %v after %v (a head not told that the key is free waits for RetryDelay)",
					b, clients, err, time.Since(begin).Round(time.Millisecond))
			}
		}
	}
}
