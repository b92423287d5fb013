package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// drawGate is a go-redis hook on one node of a waiter's Client. The first ticket draw
// (fair_ticket.lua: EVALSHA or EVAL with 4 keys and 3 arguments) runs on the node,
// but its reply is lost (the step sees a failure). The second draw waits until open
// is closed.
type drawGate struct {
	mu    *sync.Mutex
	draws *int // draws that ran on this node
	first chan<- struct{}
	ran   chan<- struct{}
	open  <-chan struct{}
	node  int
	armed *atomic.Bool
}

var errReplyLost = errors.New("reply lost")

func isDraw(cmd redis.Cmder) bool {
	fc, _ := parseFairCall(cmd.Args())
	return fc.kind == "draw"
}

func (drawGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g drawGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !g.armed.Load() || !isDraw(cmd) {
			return next(ctx, cmd)
		}
		g.mu.Lock()
		n := *g.draws
		g.mu.Unlock()
		if n == 1 {
			<-g.open
		}
		err := next(ctx, cmd)
		if err != nil {
			return err // NOSCRIPT: go-redis sends EVAL next
		}
		g.mu.Lock()
		*g.draws++
		n = *g.draws
		g.mu.Unlock()
		switch n {
		case 1:
			g.first <- struct{}{}
			cmd.SetErr(errReplyLost)
			return errReplyLost
		case 2:
			g.ran <- struct{}{}
		}
		return nil
	}
}
func (drawGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFairRedrawKeepsStaleScore: a waiter W whose first ticket draw ran on every node
// but whose replies were lost (a timeout on a majority, say) draws again. Meanwhile X
// arrived and drew behind W's first entries. W's second draw finds W queued already,
// with the first draw's number: it must answer so that W attempts at once (which sets
// W's ticket, behind X). When it answered the new number as "queued behind others",
// W skipped its attempt while the nodes ordered it ahead of X; the key's release named
// W, whose attempt then moved it behind X, and nobody told X, the head of a free key:
// the key stayed free until X's renewal, 0.83 s here (found in review).
func TestFairRedrawKeepsStaleScore(t *testing.T) {
	const lease = 3 * time.Second
	opts := redlock.Options{Fair: true, FairLease: lease}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	q, _, _ := redlock.FairKeys("k")

	// W's Client, whose draws can be gated (armed below).
	first, ran := make(chan struct{}, 3), make(chan struct{}, 3)
	open := make(chan struct{})
	armed := &atomic.Bool{}
	rdbs := redistest.Clients(c.servers)
	for i, r := range rdbs {
		r.AddHook(drawGate{mu: &sync.Mutex{}, draws: new(int), first: first, ran: ran, open: open, node: i, armed: armed})
	}
	wopts := opts
	wopts.NodeTimeout = 200 * time.Millisecond // the gated second draw waits within its step
	wc, err := redlock.New(rdbs, wopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	// Warm-up: W's Client waits for the key once, so that its channel (one for all its
	// keys, kept until Close) is subscribed when W comes: a subscription confirmed
	// during W's wait would make W attempt once anyway.
	warm, err := c.client.TryAcquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	warmed := acquireAsync(ctx, wc, "k", time.Second)
	c.waitQueued("k", 1)
	eventually(t, "W's Client listening on every node", func() bool { return listening(len(c.admin), wc) })
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := wantResult(t, "warm-up", warmed).lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitQueued("k", 0)
	armed.Store(true)

	holder, err := c.client.TryAcquire(ctx, "k", 10*time.Second) // no queue entry
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	granted := map[string]time.Time{}
	var order []string
	var hReleased time.Time
	var wg sync.WaitGroup
	wait := func(name string, client *redlock.Client, hold time.Duration) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			l, err := client.Acquire(actx, "k", 10*time.Second)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				return
			}
			mu.Lock()
			granted[name] = time.Now()
			order = append(order, name)
			mu.Unlock()
			time.Sleep(hold)
			if err := l.Release(context.WithoutCancel(ctx)); err != nil {
				t.Errorf("%s: release: %v", name, err)
			}
			if name == "H" {
				mu.Lock()
				hReleased = time.Now()
				mu.Unlock()
			}
		}()
	}
	lens := func() []int64 { return c.queueLens("k") }
	waitLens := func(what string, n int64) {
		t.Helper()
		eventually(t, what, func() bool {
			l := lens()
			return slices.Min(l) == n && slices.Max(l) == n
		})
	}

	// H: the head, behind the held key.
	wait("H", c.newClient(opts), 50*time.Millisecond)
	waitLens("H queued", 1)

	// W: its first draw runs everywhere, its replies are lost.
	wait("W", wc, 0)
	for range 3 {
		<-first
	}
	before := lens()
	dump := func(when string) {
		_, _, counter := redlock.FairKeys("k")
		for i, a := range c.admin {
			z, _ := a.ZRangeWithScores(ctx, q, 0, -1).Result()
			var b strings.Builder
			for _, e := range z {
				b.WriteString(fmt.Sprintf(" %s@%v", e.Member.(string)[:4], e.Score))
			}
			t.Logf("%s: node %d queue:%s, counter %s", when, i+1, b.String(), a.Get(ctx, counter).Val())
		}
	}
	dump("after W's first draw")

	// X arrives after W's first draw ran on every node.
	wait("X", c.newClient(opts), 0)
	eventually(t, "X queued on every node", func() bool {
		l := lens()
		for i := range l {
			if l[i] != before[i]+1 {
				return false
			}
		}
		return true
	})
	dump("after X's draw")
	// W draws again.
	close(open)
	for range 3 {
		<-ran
	}
	// W's attempt, which the draw's answer calls for, goes out now; nothing signals
	// it (or its absence) to the test: give it time to land before the release.
	time.Sleep(100 * time.Millisecond)
	dump("after W's second draw")

	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("grants in order %v", order)
	if len(order) != 3 {
		t.Fatalf("granted %v", order)
	}
	next := order[1]
	gap := granted[next].Sub(hReleased)
	t.Logf("H released; %s granted %v later", next, gap)
	if gap > lease/6 {
		t.Errorf("the key stayed free %v after H's release before %s got it (a renewal period is %v): the head was not told", gap, next, lease/3)
	}
}

// TestFairDrawQueuedThenCancelled: a waiter of a subscribed Client that the draw
// queued behind others (so it skips its attempt), whose context then ends, takes its
// entries out of every node; so does one whose Client closes.
func TestFairDrawQueuedThenCancelled(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	holder, err := c.client.TryAcquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g := &grants{}
	g.queueWaiter(ctx, c, "k", 1, 0, 1)
	for _, closeIt := range []bool{false, true} {
		wc := c.newClient(fairOpts)
		// Warm-up wait, so that the next one's Client is subscribed already.
		wctx, cancel := context.WithCancel(ctx)
		warm := acquireAsync(wctx, wc, "k", time.Second)
		c.waitQueued("k", 2)
		eventually(t, "wc listening on every node", func() bool { return listening(len(c.admin), wc) })
		cancel()
		<-warm
		c.waitQueued("k", 1)
		wctx, cancel = context.WithCancel(ctx)
		w := acquireAsync(wctx, wc, "k", time.Second)
		c.waitQueued("k", 2) // queued by its draw, on every node
		if closeIt {
			wc.Close()
		} else {
			cancel()
		}
		<-w
		cancel()
		if lens := c.queueLens("k"); slices.Max(lens) != 1 {
			t.Errorf("close %v: queues %v after the waiter left, want 1 (the head) on every node", closeIt, lens)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	g.wg.Wait()
}
