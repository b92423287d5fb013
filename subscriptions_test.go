package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// releaseChannels returns how many release channels have subscribers on each node.
func releaseChannels(ctx context.Context, t *testing.T, admins []*redis.Client) []int {
	t.Helper()
	counts := make([]int, len(admins))
	for i, a := range admins {
		chans, err := a.PubSubChannels(ctx, redlock.ReleaseChannel("*")).Result()
		if err != nil {
			t.Fatalf("PUBSUB CHANNELS on node %d: %v", i+1, err)
		}
		counts[i] = len(chans)
	}
	return counts
}

// TestSubscriptionsDropped (#11 item 5): after contention on 30 keys between two
// Clients, the waiting Client's 30 release subscriptions are dropped on every node once
// their linger is over, on a timer: no later Acquire comes to sweep them.
func TestSubscriptionsDropped(t *testing.T) {
	ctx := t.Context()
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	waiter := c.newClient(noPolling)
	const lingerFor = 200 * time.Millisecond
	waiter.SetLinger(lingerFor)

	const keys = 30
	var held []*redlock.Lock
	var results []<-chan result
	for i := range keys {
		key := fmt.Sprintf("contended-%d", i)
		l, err := c.client.TryAcquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		l.WaitForCalls() // on every node, so the waiter is refused and subscribes
		held = append(held, l)
		results = append(results, acquireAsync(ctx, waiter, key, time.Minute))
	}
	for i := range keys {
		key := fmt.Sprintf("contended-%d", i)
		eventually(t, "the waiter's subscription to "+key, func() bool { return subscribed(ctx, c.admin, key) })
	}
	if got := releaseChannels(ctx, t, c.admin); got[0] != keys {
		t.Fatalf("release channels subscribed per node: %v, want %d", got, keys)
	}
	for i, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, "waiter", results[i]) // woken by the announcement
		if err := r.lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r.lock.WaitForCalls()
	}
	last := time.Now()
	// No Acquire from here on: only the Client's timer can drop the subscriptions.
	eventually(t, "the subscriptions dropped", func() bool {
		for _, n := range releaseChannels(ctx, t, c.admin) {
			if n != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("30 subscriptions dropped on every node %v after the last waiter left (linger %v)",
		time.Since(last).Round(time.Millisecond), lingerFor)
}
