package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// heldWithWaiter takes key with c's Client, waits until every node has the holder's
// key, and starts a waiter in another Client (polling once an hour) whose
// subscription every node has confirmed.
func heldWithWaiter(t *testing.T, c *cluster, key string) (*redlock.Lock, <-chan result) {
	t.Helper()
	holder, err := c.client.Acquire(t.Context(), key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	c.wantValues(key, repeat(holder.Token(), len(c.servers))...)
	waiter := c.newClient(noPolling)
	results := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	// The attempts the confirmations make find the key held; let them end.
	time.Sleep(100 * time.Millisecond)
	return holder, results
}

// gone waits until no node holds token for key.
func (c *cluster) gone(key, token string) {
	c.t.Helper()
	eventually(c.t, "the deletes", func() bool { return !strings.Contains(strings.Join(c.values(key), ","), token) })
}

// TestAnnouncedDespiteDeadLead: the key's lead, where the announcement goes first,
// is killed or paused after the lock was taken, so the releasing Client has not seen
// it fail. The release wins on the other two nodes and is announced on one of them:
// the waiter gets the lock after its lead-first attempt gives up on the lead (half
// the node timeout), not after RetryDelay. When the announcement went to the lead
// whatever the replies said, the waiter was not woken in 10 s.
func TestAnnouncedDespiteDeadLead(t *testing.T) {
	for _, how := range []string{"killed", "paused"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t, 3, redistest.Options{}, noPolling)
			key := "lead-down"
			holder, results := heldWithWaiter(t, c, key)
			lead := c.client.Lead(key)
			if lead < 0 {
				t.Fatal("the key has no lead")
			}
			if how == "killed" {
				c.servers[lead].Kill()
			} else {
				c.servers[lead].Pause()
				defer c.servers[lead].Resume()
			}
			released := time.Now()
			if err := holder.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			r := wantGrantWithin(t, "waiter", results, released, 3*time.Second)
			_ = r.lock.Release(t.Context())
		})
	}
}

// TestAnnouncedAfterReleaseCtxEnded: a Release whose context has ended returns its
// error, and its deletes are sent all the same. Once they make a majority the release
// is announced: the waiter, which only waited for the announcement (an hour's
// RetryDelay), gets the lock. Before, the announcement needed the Release's own reading
// of the replies to show a majority, which an ended context cut short.
func TestAnnouncedAfterReleaseCtxEnded(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	key := "ctx-ended"
	holder, results := heldWithWaiter(t, c, key)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	released := time.Now()
	if err := holder.Release(ctx); err == nil {
		t.Log("Release with an ended context returned nil")
	}
	c.gone(key, holder.Token())
	r := wantGrantWithin(t, "waiter", results, released, 3*time.Second)
	_ = r.lock.Release(t.Context())
}

// TestAnnouncedAfterLateMajority: two of three nodes are busy in a script for 600 ms,
// three node timeouts: Release returns ErrUnavailable, and its deletes land when the
// nodes are free again. The release is announced then, and the waiter gets the lock
// at once; before, nobody announced it and the waiter slept on.
func TestAnnouncedAfterLateMajority(t *testing.T) {
	opts := noPolling
	opts.NodeTimeout = 200 * time.Millisecond
	c := newCluster(t, 3, redistest.Options{}, opts)
	key := "late"
	c.loadScripts() // else the release's EVAL after NOSCRIPT would go out past its deadline
	holder, results := heldWithWaiter(t, c, key)
	for _, a := range c.admin[1:] {
		go a.Eval(context.Background(), busyLua, nil, 600)
	}
	time.Sleep(50 * time.Millisecond) // the scripts have begun
	if err := holder.Release(t.Context()); err == nil {
		t.Fatal("Release returned nil with two of three nodes busy")
	} else {
		t.Log(err)
	}
	c.gone(key, holder.Token())
	r := wantGrantWithin(t, "waiter", results, time.Now(), 3*time.Second)
	_ = r.lock.Release(t.Context())
}

// busyLua keeps a node busy for ARGV[1] ms: other clients' commands wait.
const busyLua = `local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + ARGV[1] * 1000
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= stop
return 1`

// TestAnnouncementRacesClose: a Release that another Client waits for, while its own
// Client closes (NewFromURLs: Close closes the go-redis clients). The announcement is
// a node call: Close waits for it, so no PUBLISH goes to a closed client, the race
// detector sees nothing and no goroutine is left (goleak in TestMain). When Release
// won, the waiter is woken.
func TestAnnouncementRacesClose(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	var urls []string
	for _, s := range servers {
		urls = append(urls, "redis://"+s.Addr())
	}
	waiting, err := redlock.NewFromURLs(urls, noPolling)
	if err != nil {
		t.Fatal(err)
	}
	defer waiting.Close()
	won := 0
	for i := range 20 {
		key := fmt.Sprintf("k%d", i) // a key that Close left held does not hold up the next run
		c, err := redlock.NewFromURLs(urls, noPolling)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Acquire(t.Context(), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		res := acquireAsync(ctx, waiting, key, time.Minute)
		eventually(t, "the waiter's subscriptions", func() bool { return waiting.Listening(key) == 3 })
		var wg sync.WaitGroup
		var relErr error
		wg.Add(2)
		go func() { defer wg.Done(); relErr = l.Release(context.Background()) }()
		go func() { defer wg.Done(); _ = c.Close() }()
		wg.Wait()
		if relErr != nil { // Close came first: nothing was deleted, nothing announced
			cancel()
			<-res
			continue
		}
		won++
		r := wantGrantWithin(t, "waiter", res, time.Now(), 3*time.Second)
		_ = r.lock.Release(t.Context())
		cancel()
	}
	t.Logf("Release won the race in %d runs of 20", won)
}

// TestReleaseAnnouncedAsCloseBegins: a Release wins on nodes 2 and 3 of 3 (200 ms
// each), while the key's line node, which lost the key, answers at 400 ms: its
// release.lua deletes nothing there and announces nothing. The releasing Client waits
// for that reply in the background and then announces the release itself; the test
// closes that Client as soon as Release returns. Before, a Client that had begun to
// close announced nothing (it took the release for a late majority, which Close need
// not wait for), and the waiter in another Client, which never polls, slept on a key
// free on a majority (TestAnnouncementRacesClose failed about 1 run in 100 so).
func TestReleaseAnnouncedAsCloseBegins(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := t.Context()
	key := "close-begins"
	c.loadScripts() // else each delayed EVALSHA is followed by a delayed EVAL
	line := c.client.LineNode(key)
	var slow atomic.Bool
	releaser := c.clientTuned(func(i int, _ *redis.Options) redis.Hook {
		if i == line {
			return slowScripts{on: &slow, d: 400 * time.Millisecond}
		}
		return slowScripts{on: &slow, d: 200 * time.Millisecond}
	})
	holder, err := releaser.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder.WaitForCalls()
	if err := c.admin[line].Del(ctx, key).Err(); err != nil { // the line node loses the key
		t.Fatal(err)
	}
	waiter := c.newClient(noPolling)
	res := acquireAsync(ctx, waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	time.Sleep(100 * time.Millisecond) // the waiter's check after subscribing: refused by nodes 2 and 3
	releaseAsCloseBegins(t, releaser, holder, &slow, res)
}

// releaseAsCloseBegins releases l with its Client's scripts slowed (*slow set), closes
// that Client as soon as Release returns nil, and wants the waiter whose Acquire
// returns on res to get the lock within 3 s.
func releaseAsCloseBegins(t *testing.T, releaser *redlock.Client, l *redlock.Lock, slow *atomic.Bool, res <-chan result) {
	t.Helper()
	slow.Store(true)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := releaser.Close(); err != nil {
		t.Fatal(err)
	}
	slow.Store(false)
	r := wantGrantWithin(t, "waiter", res, released, 3*time.Second)
	_ = r.lock.Release(t.Context())
}

// TestOwnerReleaseAnnouncedAsCloseBegins: as TestReleaseAnnouncedAsCloseBegins, for
// an owner's last hold A, while node 1 still keeps a stale hold X of the same owner
// (nodes 2 and 3 lost the key before A was taken): node 1 answers that a hold is left
// and node 2 deletes the key, so Release returns nil before a majority has deleted
// it; node 3 deletes it 300 ms later, and the key is free on a majority then. The
// Client announces that in the background, also once Close has begun; before, it
// took the release for a failed one and announced nothing, and the waiter in another
// Client, which never polls, slept on a free key.
func TestOwnerReleaseAnnouncedAsCloseBegins(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	ctx := redlock.WithOwner(t.Context(), "job")
	// Node 2 is the key's lead, which a woken waiter asks first: on node 1, the stale
	// hold X would make it take the announcement for a race lost to another waiter
	// (it polls at RetryDelay then).
	key := keyOnLineNode(t, c.client, "owner-close-begins", 1)
	c.loadScripts()
	if _, err := c.client.TryAcquire(ctx, key, time.Minute); err != nil { // X, never released
		t.Fatal(err)
	}
	c.client.WaitForCalls()
	for _, a := range c.admin[1:] {
		if err := a.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var slow atomic.Bool
	releaser := c.clientTuned(func(i int, _ *redis.Options) redis.Hook {
		if i == 2 {
			return slowScripts{on: &slow, d: 300 * time.Millisecond}
		}
		return nil
	})
	a, err := releaser.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a.WaitForCalls()
	waiter := c.newClient(noPolling)
	res := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == len(c.servers) })
	time.Sleep(100 * time.Millisecond) // the waiter's check after subscribing begins ...
	waiter.WaitForCalls()              // ... and ends, refused
	releaseAsCloseBegins(t, releaser, a, &slow, res)
}

// TestOwnerHoldsLeftNotAnnounced: an owner holds the key with holds A and B, and
// node 3 lost the key and was given B only (as after a restart without persistence
// before B was taken). Releasing B leaves A holding the key on nodes 1 and 2, a
// majority: nothing was released, nothing may be announced, and the waiter in another
// Client is not woken. reentrant_release.lua answered 1 for a hold removed with others
// left, the same as a delete that nobody listened to; with node 1 answering last
// (busy for 100 ms) Release's majority was nodes 2 and 3, and the Client announced
// "!B". It answers −2 now, and only nodes where the key is gone count.
func TestOwnerHoldsLeftNotAnnounced(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, noPolling)
	heard := releaseMessages(t, c)
	key := "owner-left"
	ctx := redlock.WithOwner(t.Context(), "job")
	a, err := c.client.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a.WaitForCalls()
	if err := c.admin[2].Del(ctx, key).Err(); err != nil { // node 3 loses the key
		t.Fatal(err)
	}
	b, err := c.client.TryAcquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b.WaitForCalls()
	c.wantHolds(key, "job", []*redlock.Lock{a, b}, []*redlock.Lock{a, b}, []*redlock.Lock{b})

	waiter := c.newClient(noPolling)
	results := acquireAsync(t.Context(), waiter, key, time.Minute)
	eventually(t, "the waiter's subscriptions", func() bool { return waiter.Listening(key) == 3 })
	time.Sleep(200 * time.Millisecond) // the confirmations' attempts end
	wakes := waiter.Wakes(key)
	c.loadScripts()
	// Node 1 answers last (busy for 100 ms): Release's majority is nodes 2 and 3.
	go c.admin[0].Eval(context.Background(), busyLua, nil, 100)
	time.Sleep(20 * time.Millisecond)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.client.WaitForCalls()
	time.Sleep(200 * time.Millisecond)
	c.wantHolds(key, "job", []*redlock.Lock{a}, []*redlock.Lock{a}, nil)
	for i, msgs := range heard() {
		if len(msgs) > 0 {
			t.Errorf("node %d published %q while hold A still holds the key on a majority", i+1, msgs)
		}
	}
	if got := waiter.Wakes(key); got != wakes {
		t.Errorf("the waiter was woken %d times while the key stayed held", got-wakes)
	}
	released := time.Now()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantGrantWithin(t, "waiter", results, released, 3*time.Second)
	_ = r.lock.Release(t.Context())
}
