package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlocktest"
	"github.com/redlock-go/redlock/safety"
)

// members is a quorum of three members that are not all plain servers: two Redis
// Clusters of two masters each, and one plain redis-server (five processes in all).
type members struct {
	t        *testing.T
	clusters []*redlocktest.Cluster
	plain    *redistest.Server
}

func newMembers(t *testing.T) *members {
	t.Helper()
	m := &members{t: t}
	for range 2 {
		m.clusters = append(m.clusters, redlocktest.StartCluster(t, 2, redlocktest.Options{}))
	}
	m.plain = redistest.Start(t, redistest.Options{})
	return m
}

// rdbs returns fresh go-redis clients, one per member: a ClusterClient for each cluster
// and a plain client for the plain server. They are closed when the test ends.
func (m *members) rdbs() []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, c := range m.clusters {
		out = append(out, c.ClusterClient())
	}
	return append(out, m.plain.Client())
}

// newClient returns a Client over fresh clients of the members, closed at the end.
func (m *members) newClient(opts redlock.Options) *redlock.Client {
	m.t.Helper()
	c, err := redlock.New(m.rdbs(), opts)
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

// clusterKeys are lock keys that exercise Redis' hash-tag rules: no tag, a tag, a "{"
// without a "}" after it, an empty tag "{}" (the whole key is hashed), and a "}" before
// any "{".
var clusterKeys = []string{"job", "{user1000}.lock", "a{b", "a{}b", "}x{"}

// TestClusterFencing: with two of three members Redis Clusters, fenced locks work for
// keys with and without hash tags, and the tokens of two Clients are unique and
// strictly increase in real-time order.
func TestClusterFencing(t *testing.T) {
	m := newMembers(t)
	opts := redlock.Options{Fencing: true, RetryDelay: redlock.ExponentialJitter(time.Millisecond, 4*time.Millisecond)}
	clients := []*redlock.Client{m.newClient(opts), m.newClient(opts)}
	admins := m.rdbs()
	base := time.Now()
	for _, key := range clusterKeys {
		t.Run(fmt.Sprintf("key=%q", key), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var (
				mu     sync.Mutex
				grants []safety.Grant
				wg     sync.WaitGroup
			)
			for w := range 4 {
				wg.Go(func() {
					client := clients[w%2]
					for i := range 10 {
						start := time.Now()
						lock, err := client.Acquire(ctx, key, 200*time.Millisecond)
						end := time.Now()
						if err != nil {
							t.Errorf("Acquire: %v", err)
							return
						}
						mu.Lock()
						grants = append(grants, safety.Grant{Start: start.Sub(base), End: end.Sub(base), Fence: lock.Fence()})
						mu.Unlock()
						if (w+i)%4 != 0 { // every fourth lock is left to expire
							_ = lock.Release(ctx)
						}
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if err := safety.FenceViolation(grants); err != nil {
				t.Fatal(err)
			}
			// The counters are where FenceKey says, at the last token on a majority.
			var last uint64
			for _, g := range grants {
				last = max(last, g.Fence)
			}
			at := 0
			for _, rdb := range admins {
				if v, _ := rdb.Get(ctx, redlock.FenceKey(rdb, key)).Uint64(); v == last {
					at++
				}
			}
			if at < 2 {
				t.Fatalf("the last token %d is the counter on %d members, want at least 2", last, at)
			}
		})
	}
}
