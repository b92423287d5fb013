package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFenceSurvivesClientKind: the same servers, the same key, first through plain
// clients (as redis.NewFailoverClient gives), then through *redis.ClusterClient values
// over the very same non-cluster servers (as redis.NewFailoverClusterClient gives for a
// Sentinel-managed master: a cluster client whose slot map names the master). Fence
// promises a strictly greater token to a lock whose Acquire started after another's
// returned, so the counter's name must not follow the Go type of the client (it did,
// and the second lock got token 1 after token 3).
func TestFenceSurvivesClientKind(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	opts := redlock.Options{Fencing: true}
	rdbs := redistest.Clients(servers)
	plain, err := redlock.New(rdbs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx := t.Context()
	var high uint64
	for range 3 {
		lock, err := plain.Acquire(ctx, "orders", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		high = lock.Fence()
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var members []redis.UniversalClient
	for _, addr := range redistest.Addrs(servers) {
		members = append(members, redis.NewClusterClient(&redis.ClusterOptions{
			MaxRetries: -1,
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
				return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr}}}}, nil
			},
		}))
	}
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	switched, err := redlock.New(members, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer switched.Close()
	lock, err := switched.Acquire(ctx, "orders", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	t.Logf("counter names: %q, then %q", redlock.FenceKeys(rdbs[0], "orders"), redlock.FenceKeys(members[0], "orders"))
	if lock.Fence() <= high {
		t.Fatalf("token %d after token %d on the same servers: the members' client type changed, and with it the counter's name", lock.Fence(), high)
	}
}

// tracedCluster is a type that embeds a Cluster client, as instrumentation wrappers
// do; New, CheckNodes and the address check see through it (they look for an
// Options() *redis.ClusterOptions method), the counter naming does not.
type tracedCluster struct{ *redis.ClusterClient }

// TestFenceKeyOfWrappedCluster: a member that embeds *redis.ClusterClient is a Cluster
// member for the counter's names too: it must not be given the older name KEY:fence,
// which is in another hash slot than KEY for most keys (every fenced step on it would
// fail with CROSSSLOT).
func TestFenceKeyOfWrappedCluster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	wrapped := tracedCluster{cc}
	if got, want := redlock.FenceKeys(wrapped, "orders"), redlock.FenceKeys(cc, "orders"); !slices.Equal(got, want) {
		t.Errorf("FenceKeys of a wrapped cluster client = %q, of the client itself %q", got, want)
	}
}

// TestFenceKeepsOlderCounters: a plain node's counter kept under its older name
// KEY:fence (the only name before Cluster members were handled) still counts: the next
// token is above it, and both names are raised to that token.
func TestFenceKeepsOlderCounters(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	ctx := t.Context()
	for _, s := range servers {
		if err := s.Client().Set(ctx, "orders:fence", 41, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client, err := redlock.New(redistest.Clients(servers), redlock.Options{Fencing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	lock, err := client.Acquire(ctx, "orders", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lock.Fence() != 42 {
		t.Fatalf("token %d after a counter of 41 under the older name, want 42", lock.Fence())
	}
	lock.WaitForCalls()
	names := redlock.FenceKeys(servers[0].Client(), "orders")
	if len(names) != 2 || names[1] != "orders:fence" {
		t.Fatalf("FenceKeys on a plain node: %q, want a name in the key's slot and orders:fence", names)
	}
	for i, s := range servers {
		for _, name := range names {
			if v, _ := s.Client().Get(ctx, name).Int(); v != 42 {
				t.Errorf("node %d: %s = %d, want 42", i+1, name, v)
			}
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
