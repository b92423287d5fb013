package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFenceSurvivesClientKind (review): the same servers, the same key, first through
// plain clients (as redis.NewFailoverClient gives), then through *redis.ClusterClient
// values over the very same non-cluster servers (as redis.NewFailoverClusterClient
// gives for a Sentinel-managed master: a cluster client whose slot map names the
// master). docs/safety.md says "a counter never changes its name, so none goes back to
// 0", and Fence promises a strictly greater token to a lock whose Acquire started
// after another's returned. The counter's name follows the Go type of the client, so
// the second lock reads fresh counters and gets a smaller token.
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
	t.Logf("counter names: %s, then %s", redlock.FenceKey(rdbs[0], "orders"), redlock.FenceKey(members[0], "orders"))
	if lock.Fence() <= high {
		t.Fatalf("token %d after token %d on the same servers: the members' client type changed, and with it the counter's name", lock.Fence(), high)
	}
}

// tracedCluster is a type that embeds a Cluster client, as instrumentation wrappers
// do; New, CheckNodes and the address check see through it (they look for an
// Options() *redis.ClusterOptions method), the counter naming does not.
type tracedCluster struct{ *redis.ClusterClient }

// TestFenceKeyOfWrappedCluster (review): isCluster asserts the concrete type, so a
// member that embeds *redis.ClusterClient gets the plain name KEY:fence, which is in
// another hash slot than KEY for most keys: every fenced step on that member fails
// with CROSSSLOT (permanent: on a majority Acquire stops at once), and the name
// differs from the one the same cluster gets when passed unwrapped.
func TestFenceKeyOfWrappedCluster(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cc.Close()
	wrapped := tracedCluster{cc}
	if got, want := redlock.FenceKey(wrapped, "orders"), redlock.FenceKey(cc, "orders"); got != want {
		t.Errorf("FenceKey of a wrapped cluster client = %q, of the client itself %q", got, want)
	}
}
