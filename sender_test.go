package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The order in which one node's calls leave (sender.go), tested with node 3's replies
// held by a hook: the command runs on the server, its reply comes when the test says.

// gatedCluster starts 3 nodes and a Client whose connections to node 3 pass through
// the returned gate, and those to nodes 1 and 2 through others, with every node
// dialled and its scripts cached (so that a held call is one EVALSHA). The attempts
// below wait a node timeout of 500 ms for node 3.
func gatedCluster(t *testing.T) (c *cluster, gate, others *replyGate) {
	t.Helper()
	return gatedClusterWith(t, nil)
}

// gatedClusterWith is gatedCluster with an extra hook on node 3's connections, before
// the gate (nil: none).
func gatedClusterWith(t *testing.T, extra redis.Hook) (c *cluster, gate, others *replyGate) {
	t.Helper()
	servers := redistest.StartN(t, 3, redistest.Options{})
	rdbs := redistest.Clients(servers)
	gate, others = newReplyGate(), newReplyGate()
	rdbs[0].AddHook(others)
	rdbs[1].AddHook(others)
	if extra != nil {
		rdbs[2].AddHook(extra)
	}
	rdbs[2].AddHook(gate)
	client, err := redlock.New(rdbs, redlock.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	t.Cleanup(func() { // first, so that Close does not wait for a held reply
		gate.release()
		others.release()
	})
	c = &cluster{t: t, servers: servers, client: client}
	for _, s := range servers {
		c.admin = append(c.admin, s.Client())
	}
	c.loadScripts()
	return c, gate, others
}

// holdNext arms the gate for the call f makes, and returns once node 3 has run that
// call and its reply is held. f's call to node 3 must not be dropped unsent (a failed
// attempt that gave up before sending it would drop it): then it fails the test.
func holdNext(t *testing.T, gate *replyGate, f func()) {
	t.Helper()
	gate.armed.Store(true)
	f()
	waitHeld(t, gate)
	gate.armed.Store(false)
}

// waitHeld waits until node 3 has run a call and its reply is held, failing the test
// after 10 s.
func waitHeld(t *testing.T, gate *replyGate) {
	t.Helper()
	select {
	case <-gate.held:
	case <-time.After(10 * time.Second):
		t.Fatal("node 3 never ran the call")
	}
}

// tryAsync runs TryAcquire in the background.
func tryAsync(c *cluster, key string) <-chan result {
	out := make(chan result, 1)
	go func() {
		lock, err := c.client.TryAcquire(c.t.Context(), key, time.Minute)
		out <- result{lock, err, time.Now()}
	}()
	return out
}

// TestCleanupReadsLateAnswers: the clean-up of a failed attempt decides per node from
// that node's own answer, also when the answer comes after the attempt gave up. Every
// node holds the key for another token; nodes 1 and 2 say so at once and the attempt
// ends, while node 3's "no" is held. Once it comes, node 3 gets no release: it runs one
// script, the acquire. A clean-up that decided before node 3's answer came would send
// a release too.
func TestCleanupReadsLateAnswers(t *testing.T) {
	c, gate, others := gatedCluster(t)
	ctx := t.Context()
	for _, a := range c.admin {
		a.Set(ctx, "late", "foreign", time.Minute)
	}
	if err := c.admin[2].ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Nodes 1 and 2 answer only once node 3 has run the call: else the attempt could
	// end, and drop node 3's call unsent, before the test sees anything there.
	gate.armed.Store(true)
	others.armed.Store(true)
	attempt := tryAsync(c, "late")
	waitHeld(t, gate)
	gate.armed.Store(false)
	others.armed.Store(false)
	others.release()
	if r := <-attempt; !errors.Is(r.err, redlock.ErrNotAcquired) {
		t.Fatalf("got %v, want ErrNotAcquired (nodes 1 and 2 hold the key for another token)", r.err)
	}
	gate.release()
	c.client.Close() // every call has returned, and whatever followed node 3's answer
	stats := c.admin[2].Info(ctx, "commandstats").Val()
	if calls := scriptCalls(stats); calls != 1 {
		t.Fatalf("node 3 ran %d scripts, want 1 (the acquire; no release after its no):\n%s", calls, stats)
	}
	c.wantValues("late", "foreign", "foreign", "foreign")
}

// TestCleanupGoesBeforeLaterCalls: a clean-up parked behind an answer that came after
// the node timeout is sent before the calls queued while it waited. Attempt X finds
// node 1 taken, wins node 2, and its SET lands on node 3, whose reply is held until X
// gives up; X's clean-up DEL for node 3 is parked behind that SET. Attempt Y, made
// next, needs node 3: its SET queues there while the reply is held. Once the reply
// comes, the DEL must go first; if Y's SET went first it would meet X's key and Y would
// fail although the key is free on a majority.
func TestCleanupGoesBeforeLaterCalls(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	if err := c.admin[0].Set(ctx, "parked", "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	holdNext(t, gate, func() {
		_, err := c.client.TryAcquire(ctx, "parked", time.Minute)
		if !errors.Is(err, redlock.ErrUnavailable) {
			t.Errorf("attempt X: got %v, want ErrUnavailable (node 3 silent)", err)
		}
	})
	y := tryAsync(c, "parked")
	eventually(t, "attempt Y's call in node 3's queue", func() bool { return c.client.Queued(2) > 0 })
	gate.release()
	wantGranted(c, "parked", <-y)
}

// TestAbandonedCallsAreNotSent: an attempt's call that is still queued, unsent, when the
// attempt gives up is dropped, not sent later. Node 3's sender is busy with another
// lock's call, whose reply is held. Attempt X finds node 1 taken, wins node 2, and its
// SET for node 3 waits in the queue until X gives up; attempt Y's SET queues behind it.
// If X's SET were still sent, Y's would meet X's key on node 3 and Y would fail
// although the key is free on a majority.
func TestAbandonedCallsAreNotSent(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	if err := c.admin[0].Set(ctx, "queued", "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	other := busyNode3(t, c, gate)
	_, err := c.client.TryAcquire(ctx, "queued", time.Minute)
	if !errors.Is(err, redlock.ErrUnavailable) {
		t.Fatalf("attempt X: got %v, want ErrUnavailable (node 3 silent)", err)
	}
	y := tryAsync(c, "queued")
	eventually(t, "X's and Y's calls in node 3's queue", func() bool { return c.client.Queued(2) >= 2 })
	gate.release()
	wantGranted(c, "queued", <-y)
	release(t, other)
}

// busyNode3 keeps node 3's sender busy: it takes a lock on key "other", which nodes 1
// and 2 grant, and returns once node 3 has run its call and the reply is held (until
// gate.release).
func busyNode3(t *testing.T, c *cluster, gate *replyGate) *redlock.Lock {
	t.Helper()
	var other *redlock.Lock
	holdNext(t, gate, func() {
		var err error
		if other, err = c.client.TryAcquire(t.Context(), "other", time.Minute); err != nil {
			t.Error(err)
		}
	})
	if other == nil {
		t.FailNow()
	}
	return other
}

// wantEverywhere fails the test unless attempt Y got the lock and, once its calls and
// those of the earlier lock l have returned, every node holds it; then releases it.
func wantEverywhere(c *cluster, key string, y result, l *redlock.Lock) {
	c.t.Helper()
	if y.err != nil {
		c.t.Fatalf("attempt Y: %v", y.err)
	}
	y.lock.WaitForCalls()
	l.WaitForCalls()
	tok := y.lock.Token()
	c.wantValues(key, tok, tok, tok)
	release(c.t, y.lock)
}

// release releases locks, failing the test on an error.
func release(t *testing.T, locks ...*redlock.Lock) {
	t.Helper()
	for _, l := range locks {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// wantGranted fails the test unless attempt Y got the lock and holds it on nodes 2 and
// 3 (node 1 holds the key for another token), then releases it.
func wantGranted(c *cluster, key string, y result) {
	c.t.Helper()
	if y.err != nil {
		c.t.Fatalf("attempt Y: %v", y.err)
	}
	y.lock.WaitForCalls()
	c.wantValues(key, "foreign", y.lock.Token(), y.lock.Token())
	if err := y.lock.Release(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
}

// TestFailedHandoffWithUnsentCall: a handoff that fails while its call to node 3 is
// still queued, unsent (node 3's sender is busy with another lock's call), drops that
// call, so the old token stays on node 3 and the plain release that follows deletes
// it: Release succeeds. Node 1's key was replaced behind the holder's back, so the
// handoff cannot win. Were the dropped call sent late, it would replace the old
// token on node 3 and the release would find it gone there.
func TestFailedHandoffWithUnsentCall(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	// One successful handoff first, so that the Client is subscribed to the key's
	// channel already: a new subscription wakes the waiting head, which withdraws its
	// offer for a moment, and a Release in that moment would not try a handoff.
	first, err := c.client.TryAcquire(ctx, "baton", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	second := acquireAsync(ctx, c.client, "baton", time.Minute)
	eventually(t, "the subscriptions", func() bool { return c.client.Wakes("baton") > 0 })
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holder := wantResult(t, "the first handoff", second).lock
	holder.WaitForCalls()
	waiter := acquireAsync(ctx, c.client, "baton", time.Minute)
	eventually(t, "the waiter's offer", func() bool { return c.client.Offered("baton") })
	if err := c.admin[0].Set(ctx, "baton", "foreign", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	other := busyNode3(t, c, gate)
	released := make(chan error, 1)
	go func() { released <- holder.Release(ctx) }()
	// The handoff gave up: its clean-up removed the new token from node 2, where
	// the handoff had replaced the old one.
	eventually(t, "the failed handoff's clean-up on node 2", func() bool {
		return c.admin[1].Exists(ctx, "baton").Val() == 0
	})
	gate.release()
	if err := <-released; err != nil {
		t.Fatalf("Release after a failed handoff: %v", err)
	}
	r := wantResult(t, "the waiter", waiter) // by its own attempts
	r.lock.WaitForCalls()
	c.wantValues("baton", "foreign", r.lock.Token(), r.lock.Token())
	release(t, r.lock, other)
}

// TestParkedCallsGoBeforeItsBatch: a release parked behind its lock's acquire call,
// which had not left yet, reaches the node before a later lock's SET that queued
// behind that acquire call. Node 3's sender is busy with another lock's call, whose
// reply is held. Lock L is granted by nodes 1 and 2 while its SET waits in node 3's
// queue; L's release there is parked behind that SET; attempt Y's SET queues behind
// it. Once the reply comes, L's SET must go out alone, then the release, then Y's SET;
// had Y's SET gone out with L's, it would have met L's key there, and node 3 would be
// left empty once the release landed.
func TestParkedCallsGoBeforeItsBatch(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	other := busyNode3(t, c, gate)
	l, err := c.client.TryAcquire(ctx, "batched", time.Minute)
	if err != nil {
		t.Fatal(err) // nodes 1 and 2 grant it
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err) // nodes 1 and 2 delete it; node 3's delete is parked
	}
	y := tryAsync(c, "batched")
	eventually(t, "L's and Y's SETs in node 3's queue", func() bool { return c.client.Queued(2) >= 2 })
	gate.release()
	wantEverywhere(c, "batched", <-y, l)
	release(t, other)
}

// TestNoScriptKeepsTheOrder: calls to one key that leave in one pipeline run on the
// node in their order, also when the node has lost the first call's script. Node 3
// forgot its scripts (SCRIPT FLUSH, as after a restart) and then ran the acquire
// script again, so it knows that one but not the release script. Its sender is busy
// with another call; lock L's release and then attempt Y's SET for the same key queue
// behind it and leave together. Sent as EVALSHA, the release would fail with NOSCRIPT
// and run again on its own after Y's SET had met L's key there: node 3 would be left
// empty.
func TestNoScriptKeepsTheOrder(t *testing.T) {
	c, gate, _ := gatedCluster(t)
	ctx := t.Context()
	l, err := c.client.TryAcquire(ctx, "order", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l.WaitForCalls()
	if err := c.admin[2].ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	warm, err := c.client.TryAcquire(ctx, "warm-acquire", time.Minute) // loads acquire.lua only
	if err != nil {
		t.Fatal(err)
	}
	warm.WaitForCalls()
	other := busyNode3(t, c, gate)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err) // nodes 1 and 2 delete it; node 3's delete waits in its queue
	}
	y := tryAsync(c, "order")
	eventually(t, "L's release and Y's SET in node 3's queue", func() bool { return c.client.Queued(2) >= 2 })
	gate.release()
	wantEverywhere(c, "order", <-y, l)
	release(t, other, warm)
}

// tripCounter counts the round trips (plain commands and pipelines) to a node.
type tripCounter struct{ trips atomic.Int64 }

func (*tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		p.trips.Add(1)
		return next(ctx, cmd)
	}
}
func (p *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.trips.Add(1)
		return next(ctx, cmds)
	}
}

// TestSlowNodeDrainsInFewBatches: a lagging node still drains its backlog in a few
// batches when calls have releases parked behind them. Node 3's sender is busy with a
// held reply; K locks on K different keys are granted by nodes 1 and 2 and released,
// so node 3's queue holds K SETs, each with a release parked behind it. No two share a
// key, so no batch needs to end early (batchEnd); a cut after every such call, as
// first written (found by review), took K+1 round trips for the backlog: one lock per
// round trip, so a node under load could fall behind for good. Each lock is extended
// before its release (the extend parks behind the SET, the release behind the
// extend): a lock released straight after its grant, its SET still queued, would skip
// node 3 altogether (TestReleaseSkipsUnsentAcquires).
func TestSlowNodeDrainsInFewBatches(t *testing.T) {
	const K = 20
	var trips tripCounter
	c, gate, _ := gatedClusterWith(t, &trips)
	client := c.client
	ctx := t.Context()
	warm, err := client.TryAcquire(ctx, "warm-extend", time.Minute) // loads extend.lua on every node
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	warm.WaitForCalls()
	release(t, warm)
	warm.WaitForCalls()
	other := busyNode3(t, c, gate)
	locks := make([]*redlock.Lock, K)
	for k := range locks {
		l, err := client.TryAcquire(ctx, fmt.Sprintf("cut-%d", k), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Extend(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil { // parked behind its SET on node 3
			t.Fatal(err)
		}
		locks[k] = l
	}
	eventually(t, "the SETs in node 3's queue", func() bool { return client.Queued(2) >= K })
	before := trips.trips.Load()
	gate.release()
	for _, l := range locks {
		l.WaitForCalls()
	}
	got := trips.trips.Load() - before
	t.Logf("node 3 took %d round trips for %d SETs, %d extends and %d releases on distinct keys", got, K, K, K)
	if got > 8 { // 5 measured: SETs, extends, releases, and the split-off batches of freed calls
		t.Errorf("%d round trips for a backlog of %d independent locks, want at most 8 (about 5 without any cut): "+
			"the batch is cut after every call with a parked call, whatever its key", got, K)
	}
	release(t, other)
}
