package redlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// sendGate holds every command of a go-redis client before it is sent, while armed,
// until open is closed.
type sendGate struct {
	armed atomic.Bool
	held  chan struct{}
	open  chan struct{}
}

func newSendGate() *sendGate {
	return &sendGate{held: make(chan struct{}, 100), open: make(chan struct{})}
}

func (g *sendGate) wait() {
	if g.armed.Load() {
		g.held <- struct{}{}
		<-g.open
	}
}

func (g *sendGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *sendGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g.wait()
		return next(ctx, cmd)
	}
}
func (g *sendGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		g.wait()
		return next(ctx, cmds)
	}
}

// TestConcurrentHoldReleasesChecked: one owner's two holds, h1 in Client A1 and h2 in
// Client A2, are released at the same time, and the nodes see the two releases in
// different orders: nodes 1 and 2 get h2's first, nodes 3 and 4 h1's (A1's calls to
// nodes 1 and 2 are held back a moment). Each node answers −2 to the first and
// deletes the key on the second, so the key is gone from all four nodes, but each
// Release saw it gone on two of four, below the majority of three. Each releaser then
// sends a check ("?<hold>"), and the waiter of a third Client, polling once an hour,
// gets the lock. (With the nodes' own notices before 10d8a30 it did not either: two of
// four nodes announced each hold.)
func TestConcurrentHoldReleasesChecked(t *testing.T) {
	servers := redistest.StartN(t, 4, redistest.Options{})
	c := &cluster{t: t, servers: servers}
	for _, s := range servers {
		c.admin = append(c.admin, s.Client())
	}
	c.client = c.newClient(noPolling) // A2
	rdbs := redistest.Clients(servers)
	gate := newSendGate()
	rdbs[0].AddHook(gate)
	rdbs[1].AddHook(gate)
	a1, err := redlock.New(rdbs, noPolling)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a1.Close() })
	t.Cleanup(func() { // first: Close must not wait for a held call
		if gate.armed.Swap(false) {
			close(gate.open)
		}
	})
	c.loadScripts()
	warmOwner(t, c)
	key := "concurrent-holds"
	octx := redlock.WithOwner(t.Context(), "job")
	h1, err := a1.TryAcquire(octx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h1.WaitForCalls()
	h2, err := c.client.TryAcquire(octx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h2.WaitForCalls()
	waiter := c.newClient(noPolling)
	results := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == 4 })
	time.Sleep(200 * time.Millisecond)

	gate.armed.Store(true)
	r1 := make(chan error, 1)
	go func() { r1 <- h1.Release(octx) }()
	<-gate.held
	<-gate.held // h1's calls to nodes 1 and 2 wait
	eventually(t, "h1's release on nodes 3 and 4", func() bool {
		v := c.values(key)
		return !strings.Contains(v[2], h1.Token()) && !strings.Contains(v[3], h1.Token())
	})
	if err := h2.Release(octx); err != nil { // -2 on nodes 1 and 2, deleted on 3 and 4
		t.Fatal(err)
	}
	h2.WaitForCalls()
	gate.armed.Store(false)
	close(gate.open)
	released := time.Now()
	if err := <-r1; err != nil {
		t.Fatal(err)
	}
	t.Logf("values once both releases returned: %q", c.values(key))
	r := wantGrantWithin(t, "waiter", results, released, 3*time.Second)
	_ = r.lock.Release(t.Context())
}
