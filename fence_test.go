package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/fencecheck"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFencingIncreases: tokens from 2 Clients and 6 goroutines, with locks that are
// released and locks left to expire, and a minority killed and restarted (with
// appendfsync always), are unique and strictly increase in real-time order.
func TestFencingIncreases(t *testing.T) {
	opts := redlock.Options{Fencing: true, RetryDelay: redlock.ExponentialJitter(time.Millisecond, 4*time.Millisecond)}
	c := newCluster(t, 5, redistest.Options{Persistent: true}, opts)
	clients := []*redlock.Client{c.client, c.newClient(opts)}
	var (
		mu     sync.Mutex
		grants []fencecheck.Grant
		base   = time.Now()
	)
	phase := func(name string) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func(client *redlock.Client) {
				defer wg.Done()
				for i := range 25 {
					start := time.Now()
					lock, err := client.Acquire(ctx, "fenced", 100*time.Millisecond)
					end := time.Now()
					if err != nil {
						t.Errorf("%s: %v", name, err)
						return
					}
					mu.Lock()
					grants = append(grants, fencecheck.Grant{Start: start.Sub(base), End: end.Sub(base), Fence: lock.Fence()})
					mu.Unlock()
					if (w+i)%5 != 0 { // every fifth lock is left to expire
						lock.Release(ctx)
					}
				}
			}(clients[w%2])
		}
		wg.Wait()
	}
	phase("all nodes up")
	c.servers[0].Kill()
	c.servers[1].Kill()
	phase("two of five killed")
	c.servers[0].Restart()
	c.servers[1].Restart()
	phase("restarted with their data")
	if err := fencecheck.Violation(grants); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d grants, tokens %d..%d", len(grants), grants[0].Fence, grants[len(grants)-1].Fence)
}

// TestFencingNeedsDurableCounters replays the counterexample of docs/safety.md on
// N = 3: A wins nodes {1,2} with token 5 while node 3's counter is 4; node 2 restarts;
// B, who cannot reach node 1, reads {2,3}. Without persistence node 2 comes back empty
// and B gets token 5 again: the duplicate must be seen (negative control). With
// appendfsync always, node 2 keeps A's key and counter, and B gets no lock.
func TestFencingNeedsDurableCounters(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		t.Run(fmt.Sprintf("persistent=%v", persistent), func(t *testing.T) {
			opts := redlock.Options{Fencing: true, NodeTimeout: 200 * time.Millisecond}
			c := newCluster(t, 3, redistest.Options{Persistent: persistent}, opts)
			for _, a := range c.admin {
				a.Set(t.Context(), "res:fence", 4, 0)
			}
			c.admin[2].Set(t.Context(), "res", "someone", time.Minute)
			a, err := c.client.TryAcquire(t.Context(), "res", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			a.WaitForCalls()
			if a.Fence() != 5 {
				t.Fatalf("A's token %d, want 5", a.Fence())
			}
			c.servers[1].Restart()
			c.admin[2].Del(t.Context(), "res")
			c.servers[0].Pause()
			defer c.servers[0].Resume()

			b, err := c.newClient(opts).TryAcquire(t.Context(), "res", time.Minute)
			switch {
			case !persistent:
				if err != nil {
					t.Fatalf("without persistence B should win on {2,3}: %v", err)
				}
				if b.Fence() != a.Fence() {
					t.Fatalf("B's token %d, A's %d: the negative control expects a duplicate", b.Fence(), a.Fence())
				}
				t.Logf("duplicate token %d detected, as expected without durable counters", b.Fence())
			case err == nil:
				t.Fatalf("with durable counters B got the lock (token %d) while A holds it (token %d)", b.Fence(), a.Fence())
			case !errors.Is(err, redlock.ErrNotAcquired) && !errors.Is(err, redlock.ErrUnavailable):
				t.Fatalf("B: %v", err)
			}
		})
	}
}
