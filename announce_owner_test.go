package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// listenOn subscribes a plain Redis client to key's release channel on every node, so
// that release.lua's count shows another listener and the releasing Client announces.
func listenOn(t *testing.T, c *cluster, key string) {
	t.Helper()
	for _, s := range c.servers {
		ps := s.Client().Subscribe(t.Context(), redlock.ReleaseChannel(key))
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOwnWaiterWokenAfterLateMajority: the releasing Client has a waiter of its own
// for the key (another owner's Acquire, or a plain one). Two of three nodes are busy
// for 600 ms, three node timeouts: Release returns ErrUnavailable, its own waiter is
// woken at once and its attempt fails, the deletes not having landed. When they land
// the Client's waiter is woken again, by the Client itself: its own announcement is
// ignored, and with nobody else listening ("owner-alone") none is sent. Before, the
// waiter slept for RetryDelay (an hour here) on a free key.
func TestOwnWaiterWokenAfterLateMajority(t *testing.T) {
	for _, kind := range []string{"owner", "plain", "owner-alone"} {
		t.Run(kind, func(t *testing.T) {
			opts := noPolling
			opts.NodeTimeout = 200 * time.Millisecond
			c := newCluster(t, 3, redistest.Options{}, opts)
			key := "own-late-" + kind
			c.loadScripts()
			warmOwner(t, c)
			if kind != "owner-alone" {
				listenOn(t, c, key)
			}
			hctx, wctx := t.Context(), t.Context()
			if kind != "plain" { // no handoff for an owner's lock
				hctx, wctx = redlock.WithOwner(hctx, "x"), redlock.WithOwner(wctx, "y")
			}
			holder, err := c.client.Acquire(hctx, key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			holder.WaitForCalls()
			results := acquireAsync(wctx, c.client, key, time.Minute)
			eventually(t, "the waiter's subscriptions", func() bool { return c.client.Listening(key) == 3 })
			time.Sleep(100 * time.Millisecond)
			for _, a := range c.admin[1:] {
				go a.Eval(context.Background(), busyLua, nil, 600)
			}
			time.Sleep(50 * time.Millisecond)
			if err := holder.Release(hctx); err == nil {
				t.Log("Release returned nil with two of three nodes busy")
			} else {
				t.Log(err)
			}
			c.gone(key, holder.Token())
			r := wantGrantWithin(t, "own waiter", results, time.Now(), 3*time.Second)
			_ = r.lock.Release(wctx)
		})
	}
}

// warmOwner loads the owner scripts on every node (loadScripts does the plain ones), so
// that no EVALSHA answered NOSCRIPT is sent again as EVAL past its deadline.
func warmOwner(t *testing.T, c *cluster) {
	t.Helper()
	ctx := redlock.WithOwner(t.Context(), "warm")
	warm, err := c.client.TryAcquire(ctx, "warm-owner", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	warm.WaitForCalls()
}

// TestCleanupsNotAnnounced: a plain lock holds the key on two of three nodes (the third
// lost it), and two owners wait for it in two Clients. Each failed attempt sets the key
// on the free node and its clean-up deletes it there, which is no release: nothing is
// announced. (A check sent for an owner's delete short of a majority, tried in
// 0e69f9f, made the waiters attempt again and again, 471 messages in a second.)
func TestCleanupsNotAnnounced(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	c.loadScripts()
	warmOwner(t, c)
	heard := releaseMessages(t, c)
	key := "quiet-storm"
	holder := heldLostOnNode1(t, c, t.Context(), key)
	x, y := c.newClient(noPolling), c.newClient(noPolling)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rx := acquireAsync(redlock.WithOwner(ctx, "x"), x, key, time.Minute)
	ry := acquireAsync(redlock.WithOwner(ctx, "y"), y, key, time.Minute)
	eventually(t, "the subscriptions", func() bool { return x.Listening(key) == 3 && y.Listening(key) == 3 })
	time.Sleep(time.Second)
	if n := messages(heard()); n > 0 {
		t.Errorf("%d messages published in a second while the key stayed held and nothing was released", n)
	}
	cancel()
	<-rx
	<-ry
	_ = holder.Release(t.Context())
}

// TestAttemptsKeptWhileHeld: in the same setting an owner's waiter with MaxAttempts 5,
// which polls once an hour, is still waiting 2 s later: nothing woke it, as nothing
// was released. (With 0e69f9f's checks it gave up within 24 ms.)
func TestAttemptsKeptWhileHeld(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	c.loadScripts()
	warmOwner(t, c)
	key := "quiet-max"
	listenOn(t, c, key) // another listener: the releases are announced
	holder := heldLostOnNode1(t, c, t.Context(), key)
	opts := noPolling
	opts.MaxAttempts = 5
	x := c.newClient(opts)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	rx := acquireAsync(redlock.WithOwner(ctx, "x"), x, key, time.Minute)
	select {
	case r := <-rx:
		t.Errorf("the waiter gave up after %v with nothing released (RetryDelay 1 h, MaxAttempts 5): %v", r.at.Sub(start), r.err)
	case <-time.After(2 * time.Second):
		cancel()
		<-rx
	}
	_ = holder.Release(t.Context())
}

// TestNestedReleasesNotAnnounced: an owner holds the key on two of three nodes (the
// third lost it, as after a restart without persistence) and runs nested sections in a
// loop. Each nested hold creates the key on the third node alone and its release
// deletes it there, answering −2 on the others: 50 such releases announce nothing,
// and a waiter in another Client with MaxAttempts 5 keeps waiting for the outer hold.
func TestNestedReleasesNotAnnounced(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	c.loadScripts()
	warmOwner(t, c)
	heard := releaseMessages(t, c)
	key := "quiet-nested"
	octx := redlock.WithOwner(t.Context(), "job")
	outer := heldLostOnNode1(t, c, octx, key)
	opts := noPolling
	opts.MaxAttempts = 5
	x := c.newClient(opts)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rx := acquireAsync(ctx, x, key, time.Minute)
	eventually(t, "the subscriptions", func() bool { return x.Listening(key) == 3 })
	time.Sleep(100 * time.Millisecond)
	for range 50 {
		h, err := c.client.TryAcquire(octx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Release(octx); err != nil {
			t.Fatal(err)
		}
		h.WaitForCalls()
	}
	time.Sleep(100 * time.Millisecond)
	if n := messages(heard()); n > 0 {
		t.Errorf("50 nested releases, the outer hold kept: %d messages published", n)
	}
	select {
	case r := <-rx:
		t.Errorf("the waiter gave up with the outer hold never released: %v", r.err)
	default:
		cancel()
		<-rx
	}
	_ = outer.Release(octx)
}

// TestCloseNotHeldByAnnouncement: an owner's nested release deletes the key on node 1
// (which lacks the outer hold) and answers −2 on the two others, which are busy for
// 600 ms; node 1 stalls after its reply. No majority of deletes comes, so nothing is
// sent to the stalled node, and Close returns once the busy nodes have answered. (With
// 0e69f9f's checks it sent one there and waited for go-redis to give up: 5.4 s.)
func TestCloseNotHeldByAnnouncement(t *testing.T) {
	opts := noPolling
	opts.NodeTimeout = 200 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, opts)
	c.loadScripts()
	warmOwner(t, c)
	key := "quiet-close"
	listenOn(t, c, key)
	octx := redlock.WithOwner(t.Context(), "job")
	heldLostOnNode1(t, c, octx, key) // the outer hold, kept
	inner, err := c.client.TryAcquire(octx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner.WaitForCalls()
	for _, a := range c.admin[1:] {
		go a.Eval(context.Background(), busyLua, nil, 600)
	}
	time.Sleep(50 * time.Millisecond)
	_ = inner.Release(octx) // node 1 deleted; nodes 2 and 3 busy
	c.servers[0].Pause()
	defer c.servers[0].Resume()
	start := time.Now()
	c.client.Close()
	took := time.Since(start)
	t.Logf("Close took %v", took)
	if took > 1500*time.Millisecond {
		t.Errorf("Close took %v: it waited for a message sent to a stalled node", took)
	}
}

// messages counts what releaseMessages' listener heard on all the nodes.
func messages(heard [][]string) int {
	n := 0
	for _, node := range heard {
		n += len(node)
	}
	return n
}

// heldLostOnNode1 takes key with c's Client under ctx (an owner's, or none), waits for
// its calls, and deletes the key on node 1, as a restart without persistence would:
// the lock is held on the two other nodes, a majority of three.
func heldLostOnNode1(t *testing.T, c *cluster, ctx context.Context, key string) *redlock.Lock {
	t.Helper()
	l, err := c.client.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	l.WaitForCalls()
	if err := c.admin[0].Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	return l
}
