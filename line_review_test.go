package redlock_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Faults in the line (line.go) that an adversarial review of it found; each test
// failed before its fix.

// slowScripts is a go-redis hook that, while on, delays every script call (plain and
// pipelined) by d: a node whose deletes land late. With detach, the call is sent after
// the delay even if its context has ended meanwhile (a command sent in time that
// reaches the node late, say after TCP retransmissions).
type slowScripts struct {
	on     *atomic.Bool
	d      time.Duration
	detach bool
}

func (slowScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slowScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			time.Sleep(h.d)
			if h.detach {
				ctx = context.WithoutCancel(ctx)
			}
		}
		return next(ctx, cmd)
	}
}

func (h slowScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(h.d)
			if h.detach {
				ctx = context.WithoutCancel(ctx)
			}
		}
		return next(ctx, cmds)
	}
}

// clientSlowOffLine returns a Client (polling once an hour) whose calls to every node
// but key's line node are delayed by d while *on is set.
func (c *cluster) clientSlowOffLine(key string, on *atomic.Bool, d time.Duration) *redlock.Client {
	return c.clientHookedOffLine(key, slowScripts{on: on, d: d})
}

// clientHookedOffLine returns a Client (polling once an hour) with hook h on its
// clients of every node but key's line node.
func (c *cluster) clientHookedOffLine(key string, h redis.Hook) *redlock.Client {
	line := c.client.LineNode(key)
	return c.clientTuned(func(i int, o *redis.Options) redis.Hook {
		if i == line {
			return nil
		}
		return h
	})
}

// clientTuned returns a Client (polling once an hour) over new clients of the nodes,
// node i's with the options tune(i, o) sets and the hook it returns (nil: none).
func (c *cluster) clientTuned(tune func(i int, o *redis.Options) redis.Hook) *redlock.Client {
	c.t.Helper()
	rdbs := make([]redis.UniversalClient, len(c.servers))
	for i, s := range c.servers {
		o := &redis.Options{Addr: s.Addr()}
		h := tune(i, o)
		rdb := redis.NewClient(o)
		if h != nil {
			rdb.AddHook(h)
		}
		c.t.Cleanup(func() { rdb.Close() })
		rdbs[i] = rdb
	}
	client, err := redlock.New(rdbs, noPolling)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { client.Close() })
	return client
}

// waitInLine starts waiter's Acquire of key and returns once the line node holds the
// waiter's place and the waiter listens on every node: a release now names it.
func (c *cluster) waitInLine(ctx context.Context, waiter *redlock.Client, key string) <-chan result {
	c.t.Helper()
	res := acquireAsync(ctx, waiter, key, time.Minute)
	eventually(c.t, "the waiter's place", func() bool { return slices.Contains(c.lineOf(key), waiter.LineID()) })
	eventually(c.t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	return res
}

// TestLineTurnRetriedWhenOver: a Client that waited for a key lately releases it and
// asks again at once; the release gave the turn to a Client that died in the line. The
// line node refuses the free key for that turn, and nothing will announce its end:
// the Acquire (polling once an hour) attempts again when the turn is over, instead of
// sleeping on a free key.
func TestLineTurnRetriedWhenOver(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-turn-over"
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	a := c.newClient(noPolling)
	res := acquireAsync(ctx, a, key, time.Minute)
	eventually(t, "A's place", func() bool { return len(c.lineOf(key)) == 1 })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lock := wantResult(t, "A", res).lock
	lock.WaitForCalls() // the dead Client's attempt is refused by the line node
	dead := c.newClient(noPolling)
	deadRes := acquireAsync(ctx, dead, key, time.Minute)
	eventually(t, "the dead Client's place", func() bool { return slices.Contains(c.lineOf(key), dead.LineID()) })
	dead.Close() // its place stays until its lease ends
	<-deadRes
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	again, err := a.Acquire(actx, key, time.Minute)
	if err != nil {
		t.Fatalf("A's Acquire of a key kept for a dead Client's turn: %v after %v", err, time.Since(start))
	}
	t.Logf("A got the key again %v after the release", time.Since(start))
	_ = again.Release(ctx)
}

// TestLineEarlyAnnouncementRetried: the line node announces a release as it deletes
// the key there, and the other nodes' deletes land 300 ms later (the releasing
// Client's calls to them are slow). The named waiter's attempt finds the released
// token still there on those nodes; it comes again soon, until the deletes have
// landed, rather than waiting for its RetryDelay (an hour).
func TestLineEarlyAnnouncementRetried(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-early"
	var slow atomic.Bool
	h := c.clientSlowOffLine(key, &slow, 300*time.Millisecond)
	holder, err := h.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	waiter := c.newClient(noPolling)
	results := c.waitInLine(t.Context(), waiter, key)
	slow.Store(true)
	released := time.Now()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	slow.Store(false)
	r := wantGrantWithin(t, "the named waiter", results, released, 3*time.Second)
	_ = r.lock.Release(t.Context())
}

// TestLineSlowLineNodeNotAwaited: with the key's line node paused, two Clients hand
// the key back and forth. Their releases have a majority without it, and once a
// Client has found the line node slow it does not wait for that node's reply (whether
// it announced the release) before announcing the release itself: after the first
// hand-overs each one takes milliseconds, not half a node timeout.
func TestLineSlowLineNodeNotAwaited(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-node-paused"
	a, b := c.newClient(noPolling), c.newClient(noPolling)
	line := c.client.LineNode(key)
	lock, err := a.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	c.servers[line].Pause()
	defer c.servers[line].Resume()
	clients := []*redlock.Client{a, b}
	for i := range 5 {
		next := clients[(i+1)%2]
		res := acquireAsync(t.Context(), next, key, time.Minute)
		// Its first attempt must have ended: one still out when the release lands meets
		// a split with the paused node and waits out the node timeout, as in any Redlock.
		eventually(t, "the waiter in its queue", func() bool { return next.Waiting(key) == 1 })
		eventually(t, "the waiter's subscriptions", func() bool { return next.Listening(key) >= 2 })
		released := time.Now()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := wantResult(t, "waiter", res)
		took := r.at.Sub(released)
		t.Logf("hand-over %d: %v", i+1, took)
		if i >= 2 && took > 200*time.Millisecond {
			t.Errorf("hand-over %d took %v with the line node paused", i+1, took)
		}
		lock = r.lock
	}
	_ = lock.Release(t.Context())
}

// TestLineWinnerLeavesAtRelease: a Client that wins the key without the line node
// (the line node refused it for another Client's turn, and put it in the line) holds
// a place it no longer needs. Its release takes that place out even though the line
// node never had its key, so the release after it does not name it and leave the next
// waiter a turn's wait.
func TestLineWinnerLeavesAtRelease(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-winner"
	ctx := t.Context()
	line := c.client.LineNode(key)
	order, leases, turn := redlock.LineKeys(key)
	admin := c.admin[line]
	// The line node keeps the free key for a Client that never comes.
	if err := admin.Set(ctx, turn, "turn:absent", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	y := c.newClient(noPolling)
	ylock, err := y.Acquire(ctx, key, time.Minute) // a first attempt asks every node at once
	if err != nil {
		t.Fatal(err)
	}
	ylock.WaitForCalls()
	if got := c.lineOf(key); len(got) != 1 || got[0] != y.LineID() {
		t.Fatalf("line %q, want the winner %q, which the line node refused", got, y.LineID())
	}
	if err := admin.Del(ctx, turn).Err(); err != nil {
		t.Fatal(err)
	}
	if err := ylock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ylock.WaitForCalls()
	if got := c.lineOf(key); len(got) != 0 {
		t.Errorf("line %q after the winner released, want it gone", got)
	}
	if n, err := admin.ZCard(ctx, leases).Result(); err != nil || n != 0 {
		t.Errorf("%d leases left (%v)", n, err)
	}
	_ = order
}

// TestLineLeaseNeverShortened: a refusal with a 1 s lease does not cut short the
// line's life, or another Client's 1-hour place, and a late copy of an older attempt
// with a shorter lease does not shorten the Client's own.
func TestLineLeaseNeverShortened(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	key := "line-lease"
	line := c.client.LineNode(key)
	order, leases, _ := redlock.LineKeys(key)
	admin := c.admin[line]
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	defer holder.Release(ctx)
	long := float64(time.Now().Add(time.Hour).UnixMilli())
	admin.ZAdd(ctx, order, redis.Z{Score: 1, Member: "long"})
	admin.ZAdd(ctx, leases, redis.Z{Score: long, Member: "long"})
	admin.PExpire(ctx, order, time.Hour)
	admin.PExpire(ctx, leases, time.Hour)
	w := c.newClient(redlock.Options{})
	// The Client's own place, with a long lease, as an hour-long RetryDelay gives.
	admin.ZAdd(ctx, leases, redis.Z{Score: long, Member: w.LineID()})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := w.Acquire(wctx, key, time.Minute); err == nil {
		t.Fatal("acquired a held key")
	}
	for _, k := range []string{order, leases} {
		if ttl := admin.PTTL(ctx, k).Val(); ttl < 59*time.Minute {
			t.Errorf("%s: TTL %v after a refusal with a 1 s lease, was an hour", k, ttl)
		}
	}
	if got := admin.ZScore(ctx, leases, "long").Val(); got != long {
		t.Errorf("the other Client's lease moved from %v to %v", long, got)
	}
}

// TestLineCompanionNamesLeftAlone: a lock whose key happens to be the name of another
// key's line turn is neither deleted nor overwritten by that key's release (the turn's
// value carries a tag the scripts check), and it does not make the line node refuse
// that key's Acquires as if it were a turn.
func TestLineCompanionNamesLeftAlone(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	key := "{t}a"
	_, _, turn := redlock.LineKeys(key)
	l, err := c.newClient(redlock.Options{}).Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l.WaitForCalls()
	other, err := c.client.Acquire(t.Context(), turn, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other.WaitForCalls()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.WaitForCalls()
	for i, v := range c.values(turn) {
		if v != other.Token() {
			t.Errorf("node %d: the lock %q holds %q, want its token %q", i+1, turn, v, other.Token())
		}
	}
	again, err := c.newClient(redlock.Options{}).Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	again.WaitForCalls()
	for i, v := range c.values(key) {
		if v != again.Token() {
			t.Errorf("node %d: %q holds %q after an Acquire beside the lock %q, want its token", i+1, key, v, turn)
		}
	}
	_ = again.Release(t.Context())
}

// Faults a second review found.

// TestLineLateMajorityAnnounced: the releasing Client's deletes reach the nodes other
// than the line node 2 s late, past the node timeout (1 s here), and land then. The
// line node announced the release as it deleted the key, and its named waiter gave
// up meeting the release elsewhere after a node timeout; once the deletes make a
// majority the releasing Client announces the release again, and the waiter (polling
// once an hour) gets the key.
func TestLineLateMajorityAnnounced(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-late-majority"
	var late atomic.Bool
	h := c.clientHookedOffLine(key, slowScripts{on: &late, d: 2 * time.Second, detach: true})
	warm, err := h.Acquire(t.Context(), key, time.Minute) // every node has the scripts
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	warm.WaitForCalls()
	holder, err := h.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	waiter := c.newClient(noPolling)
	results := c.waitInLine(t.Context(), waiter, key)
	late.Store(true)
	released := time.Now()
	err = holder.Release(t.Context())
	late.Store(false)
	t.Logf("Release returned %v after %v", err, time.Since(released))
	r := wantGrantWithin(t, "the named waiter", results, released, 5*time.Second)
	_ = r.lock.Release(t.Context())
}

// TestLineLeftAfterOneAttempt: an Acquire whose only attempt (MaxAttempts 1) the line
// node refused takes its Client's place out of the line as it returns, so that the
// next release names the Client that does wait, at once.
func TestLineLeftAfterOneAttempt(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-one-attempt"
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Else the holder's SET may reach the line node after the attempts below: one
	// that wins the line node takes no place in the line.
	holder.WaitForCalls()
	once := c.newClient(redlock.Options{MaxAttempts: 1, NodeTimeout: time.Second})
	if _, err := once.Acquire(ctx, key, time.Minute); err == nil {
		t.Fatal("acquired a held key")
	}
	once.WaitForCalls()
	if got := c.lineOf(key); slices.Contains(got, once.LineID()) {
		t.Errorf("line %q still holds the Client %q, whose only Acquire gave up", got, once.LineID())
	}
	waiter := c.newClient(noPolling)
	res := c.waitInLine(ctx, waiter, key)
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "the only waiter", res, released, 150*time.Millisecond)
	_ = r.lock.Release(ctx)
}

// wonAfterWait returns the lock of key that waiter's Client got after waiting for
// c.client's: the Client stays subscribed for the key (its subscriptions linger).
func (c *cluster) wonAfterWait(waiter *redlock.Client, key string) *redlock.Lock {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := acquireAsync(ctx, waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return wantResult(t, "the waiter", res).lock
}

// subscribedAndHeld makes waiter's Client win key once after a wait, so that it stays
// subscribed for the key (its subscriptions linger), and returns the key held again
// by c.client on every node: waiter's next Acquire is refused by the line node and
// takes a place there, and no check wake-up comes.
func (c *cluster) subscribedAndHeld(waiter *redlock.Client, key string) *redlock.Lock {
	t, ctx := c.t, c.t.Context()
	t.Helper()
	won := c.wonAfterWait(waiter, key)
	if err := won.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Every node is free again before c.client asks (else its SET may miss the line
	// node, and the waiter's next attempt win there and take no place).
	won.WaitForCalls()
	holder, err := c.client.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	return holder
}

// TestLineFirstPlaceOutlastsPacing: a Client that waited for the key a moment ago
// waits again; its first attempt, refused, puts it in the line before its own pacing
// chose a wait, and no check wake-up follows (its subscriptions stand). Its place
// must last as long as the waits its Client chose (an hour, capped at a minute), not
// the 1 s floor: a Client that came after it, and polls, must not pass it.
func TestLineFirstPlaceOutlastsPacing(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-first-lease"
	ctx := t.Context()
	_, leases, _ := redlock.LineKeys(key)
	admin := c.admin[c.client.LineNode(key)]
	b := c.newClient(noPolling)
	holder := c.subscribedAndHeld(b, key)
	resB := acquireAsync(ctx, b, key, time.Minute)
	eventually(t, "B's place", func() bool { return slices.Contains(c.lineOf(key), b.LineID()) })
	ms, err := admin.ZScore(ctx, leases, b.LineID()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(time.UnixMilli(int64(ms))); left < 30*time.Second {
		t.Errorf("B's place lasts %v, while its Client waits an hour between polls", left)
	}
	_ = holder.Release(ctx)
	_ = wantResult(t, "B", resB).lock.Release(ctx)
}

// TestLineCompanionTTLUntouched: a lock named like another key's line order keeps its
// own TTL when an Acquire of that other key is refused and renews its place: the
// line's scripts set a TTL only on their own sorted sets.
func TestLineCompanionTTLUntouched(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	key := "{c}k"
	order, _, _ := redlock.LineKeys(key)
	admin := c.admin[c.client.LineNode(key)]
	holder, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls() // every node has the key before another Client attempts
	defer holder.Release(ctx)
	other, err := c.newClient(redlock.Options{}).TryAcquire(ctx, order, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	other.WaitForCalls()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := c.newClient(redlock.Options{}).Acquire(wctx, key, time.Minute); err == nil {
		t.Fatal("acquired a held key")
	}
	if ttl := admin.PTTL(ctx, order).Val(); ttl > 300*time.Millisecond {
		t.Errorf("the lock %q has %v to live on the line node, more than its 300 ms TTL", order, ttl)
	}
}

// TestLineLeaseRenewedForALongWait: a waiter whose pacing first waits 10 ms and then an
// hour (its Client is subscribed already, so no check wake-up comes in between)
// lengthens its place's lease before the long wait: its attempts took the place with
// the 1 s floor, which would lapse while it sleeps.
func TestLineLeaseRenewedForALongWait(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "line-renew"
	ctx := t.Context()
	_, leases, _ := redlock.LineKeys(key)
	admin := c.admin[c.client.LineNode(key)]
	x := c.newClient(redlock.Options{NodeTimeout: time.Second, RetryDelay: func(attempt int) time.Duration {
		if attempt <= 1 {
			return 10 * time.Millisecond
		}
		return time.Hour
	}})
	holder := c.subscribedAndHeld(x, key)
	second := acquireAsync(ctx, x, key, time.Minute)
	eventually(t, "a lease that outlasts x's hour-long wait", func() bool {
		ms, err := admin.ZScore(ctx, leases, x.LineID()).Result()
		return err == nil && time.Until(time.UnixMilli(int64(ms))) > 30*time.Second
	})
	_ = holder.Release(ctx)
	_ = wantResult(t, "x", second).lock.Release(ctx)
}
