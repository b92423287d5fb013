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
// Cluster member without CROSSSLOT, for keys with and without a hash tag.
func TestFairOnClusterMember(t *testing.T) {
	cc := redistest.StartCluster(t, 1, redistest.Options{}).ClusterClient()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	newFair := func() *Client {
		c, err := New([]redis.UniversalClient{cc}, Options{Fair: true})
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
			t.Fatalf("%q: %v", key, err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := b.Acquire(ctx, key, 5*time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
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
		if err := <-got; err != nil {
			t.Fatalf("%q: the waiter: %v", key, err)
		}
	}
}
