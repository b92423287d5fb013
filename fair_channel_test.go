package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// subscribeCalls returns how many SUBSCRIBE commands node a has run (INFO
// commandstats).
func subscribeCalls(ctx context.Context, t *testing.T, a *redis.Client) int {
	t.Helper()
	info, err := a.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_subscribe:calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// TestFairOneChannelPerClient: a fair Client hears the head notices of all its keys
// on one channel, subscribed once. Its waiters for keys it has not waited for before
// send no SUBSCRIBE and are still told when they are the head. Before, each new key
// cost a SUBSCRIBE on every node and a wait for the confirmations before the draw
// (in BenchmarkClients the measured key's first grants were the run's longest waits).
func TestFairOneChannelPerClient(t *testing.T) {
	opts := noPolling // notices only
	opts.Fair = true
	c := newCluster(t, 3, redistest.Options{}, opts)
	waiters := c.newClient(opts)
	ctx := t.Context()
	take := func(key string) {
		t.Helper()
		holder, err := c.client.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		holder.WaitForCalls() // on every node, so that each release there names the head
		results := acquireAsync(ctx, waiters, key, time.Minute)
		eventually(t, "the waiter queued on every node for "+key, func() bool { return queuedEverywhere(ctx, c.admin, key, 1) })
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, key, results)
		if err := r.lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	take("k0")
	before := make([]int, len(c.admin))
	for i, a := range c.admin {
		before[i] = subscribeCalls(ctx, t, a)
	}
	for i := 1; i <= 5; i++ {
		take(fmt.Sprintf("k%d", i))
	}
	for i, a := range c.admin {
		if got := subscribeCalls(ctx, t, a); got != before[i] {
			t.Errorf("node %d: %d SUBSCRIBE calls after 5 more keys, %d before: want none", i+1, got, before[i])
		}
		chans, err := a.PubSubChannels(ctx, "redlock:fair:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(chans) != 1 {
			t.Errorf("node %d: fair channels %v, want the waiters' Client's one", i+1, chans)
		}
	}
}

// queuedEverywhere reports whether key's queue holds n entries on every node.
func queuedEverywhere(ctx context.Context, admins []*redis.Client, key string, n int64) bool {
	queue, _, _ := redlock.FairKeys(key)
	for _, a := range admins {
		if got, err := a.ZCard(ctx, queue).Result(); err != nil || got != n {
			return false
		}
	}
	return true
}

// TestFairDownNodeCostsSettleOnce: a fair waiter waits, before its draw, for every
// node to confirm its Client's channel, at most NodeTimeout/5 (settle). A node that is
// down never confirms; the first waiter pays that cap, the ones after it (for any key)
// do not. Before, every contended fair Acquire paid it for as long as the node was down
// (10 ms each with the default NodeTimeout).
func TestFairDownNodeCostsSettleOnce(t *testing.T) {
	opts := redlock.Options{Fair: true, NodeTimeout: 2500 * time.Millisecond} // cap: 500 ms
	const settleCap = 500 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	c.servers[2].Kill()
	live := c.admin[:2]
	waiters := c.newClient(opts)
	queuedAfter := func(key string) (time.Duration, <-chan result, *redlock.Lock) {
		t.Helper()
		holder, err := c.client.Acquire(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		results := acquireAsync(ctx, waiters, key, time.Minute)
		eventually(t, "the waiter queued on the live nodes for "+key, func() bool { return queuedEverywhere(ctx, live, key, 1) })
		return time.Since(start), results, holder
	}
	first, res1, h1 := queuedAfter("k1")
	if first < settleCap {
		t.Fatalf("the first waiter queued %v after its Acquire, before settle's cap (%v): the test measures nothing", first, settleCap)
	}
	second, res2, h2 := queuedAfter("k2")
	if second >= settleCap/2 {
		t.Errorf("the second waiter queued %v after its Acquire: it waited for the down node again (cap %v)", second, settleCap)
	}
	for i, h := range []*redlock.Lock{h1, h2} {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, fmt.Sprintf("waiter %d", i+1), []<-chan result{res1, res2}[i])
		if err := r.lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Back, so that Close need not wait out go-redis's dial retries to a refused node
	// (seconds with its default options) for the releases still out to it.
	c.servers[2].Restart()
}

// TestFairSettledLateConfirmationRechecks: once a waiter of the Client waited out
// settle's cap (a node down), later waiters draw before every node confirmed the
// channel. Here, of five nodes, node 5 is down and node 4's pub/sub connection dials
// 3 s late; W2 draws while node 4 has not confirmed, and only node 4 names it at the
// release, a notice nobody heard. Node 4's confirmation, the 4th of 5, is neither the
// majority's nor the last, and it must still make W2 attempt; before, W2 slept until
// its RetryDelay (10 s here). Found in review of the fairSettled change.
func TestFairSettledLateConfirmationRechecks(t *testing.T) {
	opts := redlock.Options{Fair: true, NodeTimeout: 5 * time.Second, FairLease: time.Minute,
		RetryDelay: func(int) time.Duration { return 10 * time.Second }} // settle's cap: 1 s
	c := newCluster(t, 5, redistest.Options{}, opts)
	ctx := t.Context()
	h1, err := c.client.Acquire(ctx, "k1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.client.Acquire(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()
	h.WaitForCalls()
	c.servers[4].Kill()
	w, slow := c.slowDialClient(opts, 3, 3*time.Second, 4)
	t.Cleanup(func() { c.servers[4].Restart() }) // before the Closes: no dial retries to wait out
	slow()                                       // from now on only node 4's pub/sub connection dials
	live := c.admin[:4]
	w1ctx, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	acquireAsync(w1ctx, w, "k1", time.Minute) // W1 waits out the cap
	eventually(t, "W1 queued", func() bool { return queuedEverywhere(ctx, live, "k1", 1) })
	res := acquireAsync(ctx, w, "k", time.Minute)
	eventually(t, "W2 queued", func() bool { return queuedEverywhere(ctx, live, "k", 1) })
	if w.Listening("") != 3 {
		t.Fatalf("%d nodes confirmed when W2 had drawn, want 3 (node 4 late, node 5 down): the test measures nothing", w.Listening(""))
	}
	q, _, _ := redlock.FairKeys("k")
	ids, err := c.admin[3].ZRange(ctx, q, 0, -1).Result()
	if err != nil || len(ids) != 1 {
		t.Fatalf("queue on node 4: %v, %v", ids, err)
	}
	for _, a := range c.admin[:3] { // only node 4 will name W2
		if err := a.ZRem(ctx, q, ids[0]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	released := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "W2", res, released, 6*time.Second) // not its RetryDelay, 10 s
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cancel1()
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
