package redlock

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFairKeySlots: the fair queue's keys lie in their lock key's Cluster hash slot,
// differ from each other and from the fencing counter, and no two lock keys share one.
func TestFairKeySlots(t *testing.T) {
	owner := make(map[string]string)
	for _, key := range sampleKeys(rand.New(rand.NewPCG(7, 8)), 20000) {
		q, l, n := FairKeys(key)
		for _, name := range []string{q, l, n} {
			if hashSlot(name) != hashSlot(key) {
				t.Fatalf("%q of key %q: slot %d, the key's %d", name, key, hashSlot(name), hashSlot(key))
			}
			if name == key || name == fenceName(key) {
				t.Fatalf("key %q: fair name %q is the key or its counter", key, name)
			}
			if other, ok := owner[name]; ok && other != key {
				t.Fatalf("keys %q and %q share %q", key, other, name)
			}
			owner[name] = key
		}
		if q == l || l == n || q == n {
			t.Fatalf("key %q: names %q, %q, %q not distinct", key, q, l, n)
		}
	}
}

// TestFairOnClusterMember: a fair Acquire that queues, and its Release, run on a Redis
// Cluster member without CROSSSLOT, for keys with and without a hash tag; with
// Fencing too, and then the waiter's token is above the holder's, and the counter
// (in the key's slot) holds it.
func TestFairOnClusterMember(t *testing.T) {
	cc := redistest.StartCluster(t, 1, redistest.Options{}).ClusterClient()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, opts := range []Options{{Fair: true}, {Fair: true, Fencing: true}} {
		newFair := func() *Client {
			c, err := New([]redis.UniversalClient{cc}, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		a, b := newFair(), newFair()
		for _, key := range []string{"job", "{user1000}.lock", "a}b"} {
			held, err := a.Acquire(ctx, key, 5*time.Second)
			if err != nil {
				t.Fatalf("%q (fencing %v): %v", key, opts.Fencing, err)
			}
			got := make(chan *Lock, 1)
			go func() {
				l, err := b.Acquire(ctx, key, 5*time.Second)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					t.Errorf("%q (fencing %v): the waiter: %v", key, opts.Fencing, err)
				}
				got <- l
			}()
			q, _, _ := FairKeys(key)
			for cc.ZCard(ctx, q).Val() != 1 { // b queued
				if ctx.Err() != nil {
					t.Fatalf("%q: the waiter never queued", key)
				}
				time.Sleep(time.Millisecond)
			}
			if err := held.Release(ctx); err != nil {
				t.Fatalf("%q: release: %v", key, err)
			}
			l := <-got
			if !opts.Fencing || l == nil {
				continue
			}
			counter, _ := cc.Get(ctx, fenceName(key)).Int64()
			if l.Fence() <= held.Fence() || counter != int64(l.Fence()) {
				t.Errorf("%q: tokens %d then %d, counter %d", key, held.Fence(), l.Fence(), counter)
			}
		}
	}
}
