package redlock

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redistest"
)

// plainNodes starts n redis-server processes and returns clients for them without
// retries, as New wants them, and a second client of each for the test's own checks;
// everything is stopped when the test ends.
func plainNodes(t testing.TB, n int) (nodes []redis.UniversalClient, admin []*redis.Client) {
	t.Helper()
	for _, s := range redistest.StartN(t, n, redistest.Options{}) {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
		admin = append(admin, s.Client())
	}
	return nodes, admin
}

// keyState returns the sizes of the Client's per-key maps.
func (c *Client) keyState() (keys, chans, held, yields, fences int) {
	c.queues.mu.Lock()
	keys, chans, held, yields = len(c.queues.keys), len(c.queues.chans), len(c.queues.held), len(c.queues.yields)
	c.queues.mu.Unlock()
	c.fences.mu.Lock()
	fences = len(c.fences.seen)
	c.fences.mu.Unlock()
	return
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestPerKeyStateBounded (#11 item 5): a Client that meets 100,000 distinct contended
// keys, one after another, keeps no state for them once they are quiet. Each key goes
// through the bookkeeping a contended Acquire does (queue, subscription, notices, a
// lock recorded and released, a yield, a fencing counter) plus a lock dropped without a
// Release.
func TestPerKeyStateBounded(t *testing.T) {
	nodes, _ := plainNodes(t, 1)
	c, err := New(nodes, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const lingerFor = 5 * time.Millisecond
	c.queues.linger = lingerFor
	// No listeners: the bookkeeping alone, which is what could grow with the keys
	// (TestSubscriptionsDropped covers the subscriptions themselves on real nodes;
	// go-redis's PubSub deletes an unsubscribed channel from its own map).
	c.queues.start.Do(func() {})

	// A key whose waiter is still queued keeps its subscription however long it waits.
	busy := c.queues.join("busy")
	busy.subscribe()

	var peakKeys, peakHeld int
	var slowest time.Duration // from a batch's last leave to its state dropped
	// settle waits until only the busy key is left, and returns how long that took.
	settle := func() time.Duration {
		start := time.Now()
		for {
			if k, ch, _, _, _ := c.keyState(); k == 1 && ch == 1 {
				return time.Since(start)
			}
			if time.Since(start) > 10*time.Second {
				k, ch, _, _, _ := c.keyState()
				t.Fatalf("10 s after the last key went quiet: %d keys and %d channels remain, want only the busy one", k, ch)
			}
			time.Sleep(lingerFor / 4)
		}
	}

	// drive takes the keys from..to-1 through the bookkeeping, a thousand at a time
	// (as if contended at once). Each batch lingers out before the next: the peak is
	// the same for every batch.
	drive := func(from, to int) {
		const batch = 1000
		tickets := make([]*ticket, 0, batch)
		for b := from; b < to; b += batch {
			tickets = tickets[:0]
			for i := b; i < min(b+batch, to); i++ {
				tk := c.queues.join(fmt.Sprintf("key-%d", i))
				tk.subscribe()
				tickets = append(tickets, tk)
			}
			for i, tk := range tickets {
				now := time.Now()
				l := &Lock{c: c, key: tk.key, token: "t", until: now.Add(time.Minute)}
				c.queues.granted(l)
				c.queues.notice(0, releaseChannel(tk.key), "a dead token")
				c.queues.released(l, 0, 3, time.Millisecond, now)                   // heard by another Client: a yield
				c.queues.granted(&Lock{c: c, key: tk.key + "/dropped", until: now}) // expired, never released
				c.fences.raise(tk.key, int64(b+i+1))
			}
			k, _, h, _, _ := c.keyState()
			peakKeys, peakHeld = max(peakKeys, k), max(peakHeld, h)
			for _, tk := range tickets {
				tk.leave()
			}
			slowest = max(slowest, settle())
		}
	}
	// The first 20,000 keys warm up everything that is sized by the peak (Go maps keep
	// their largest size); the next 80,000 must not add to it.
	const warm, keys = 20_000, 100_000
	start := time.Now()
	drive(0, warm)
	warmHeap := heapInUse()
	drive(warm, keys)
	drove := time.Since(start)
	afterHeap := heapInUse()
	keysLeft, chans, held, yields, fences := c.keyState()
	if c.queues.keys["busy"] == nil || c.queues.chans[releaseChannel("busy")] == "" {
		t.Fatal("the key with a waiter still queued lost its state or its subscription")
	}
	if held > 128 || yields > maxYields || fences > fenceCacheSize {
		t.Fatalf("after %d keys: held %d (want ≤ 128), yields %d (≤ %d), fences %d (≤ %d)",
			keys, held, yields, maxYields, fences, fenceCacheSize)
	}
	growth := int64(afterHeap) - int64(warmHeap)
	t.Logf("%d keys driven in %v, each batch's state dropped at most %v after it went quiet (linger %v); peak queued or lingering keys %d, peak held %d; left: keys %d, chans %d, held %d, yields %d, fence counters %d; heap %.2f MB after %d keys, %+.2f MB over the next %d (%.1f B per key)",
		keys, drove.Round(time.Millisecond), slowest.Round(time.Millisecond), lingerFor, peakKeys, peakHeld,
		keysLeft, chans, held, yields, fences, float64(warmHeap)/(1<<20), warm, float64(growth)/(1<<20), keys-warm, float64(growth)/(keys-warm))
	// State kept per key would cost hundreds of bytes each: tens of MB here.
	if growth > 1<<20 {
		t.Fatalf("heap grew by %.1f MB over %d more keys", float64(growth)/(1<<20), keys-warm)
	}
	busy.leave()
}
