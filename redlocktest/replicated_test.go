package redlocktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newRedlock returns a redlock client over members, closed when the test ends.
func newRedlock(t *testing.T, members []redis.UniversalClient, opts redlock.Options) *redlock.Client {
	t.Helper()
	c, err := redlock.New(members, opts)
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// quorumWith returns a redlock client over member and two plain process nodes, one of
// which is killed: no majority forms without member, so every grant needed its vote.
func quorumWith(t *testing.T, member redis.UniversalClient) *redlock.Client {
	t.Helper()
	plain := redlocktest.StartN(t, 2, redlocktest.Options{})
	members := append([]redis.UniversalClient{member}, redlocktest.Clients(plain)...)
	// A generous node timeout: a failover client may have to ask a sentinel first.
	rl := newRedlock(t, members, redlock.Options{NodeTimeout: 500 * time.Millisecond})
	plain[0].Kill()
	return rl
}

// TestSentinelFailover kills the master of a replicated node and checks that the
// sentinels promote the replica, and that a FailoverClient in a redlock quorum keeps
// working across it.
func TestSentinelFailover(t *testing.T) {
	t.Parallel() // mostly waiting for sentinels
	setup := time.Now()
	r := redlocktest.StartReplicated(t, redlocktest.Options{})
	t.Logf("replicated node ready in %v", time.Since(setup))
	rl := quorumWith(t, r.FailoverClient())

	ctx := ctxTimeout(t, 60*time.Second)
	lock, err := rl.Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire with a replicated member: %v", err)
	}
	// The key reached the replicated member's master.
	if got, err := r.Master.Client().Get(ctx, "job").Result(); err != nil || got != lock.Token() {
		t.Fatalf("GET job on the master = %q, %v; want the lock's token", got, err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	oldMaster := r.Master.Addr()
	start := time.Now()
	newMaster, err := r.WaitFailover(ctx, r.Master.Kill)
	if err != nil {
		t.Fatalf("WaitFailover: %v", err)
	}
	t.Logf("failover from %s to %s took %v", oldMaster, newMaster, time.Since(start))
	if newMaster != r.Replica.Addr() {
		t.Fatalf("new master %s, want the replica %s", newMaster, r.Replica.Addr())
	}
	role, err := r.Replica.Client().Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "master" {
		t.Fatalf("ROLE on the old replica = %v, %v; want master", role, err)
	}
	if addr, err := r.MasterAddr(ctx); err != nil || addr != newMaster {
		t.Errorf("MasterAddr after failover = %q, %v; want %q", addr, err, newMaster)
	}

	// The failover client follows the new master: the quorum member works again.
	lock, err = rl.Acquire(ctx, "job", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after failover: %v", err)
	}
	if got, err := r.Replica.Client().Get(ctx, "job").Result(); err != nil || got != lock.Token() {
		t.Errorf("GET job on the promoted replica = %q, %v; want the lock's token", got, err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Errorf("Release after failover: %v", err)
	}
}

// TestClusterMember uses a Redis Cluster as one member of a redlock quorum.
func TestClusterMember(t *testing.T) {
	t.Parallel() // mostly waiting for the cluster to agree
	cluster := redlocktest.StartCluster(t, 3, redlocktest.Options{})
	cc := cluster.ClusterClient()
	rl := quorumWith(t, cc)

	ctx := ctxTimeout(t, 30*time.Second)
	// Keys spread over the masters' slot ranges; each must lock and unlock.
	for _, key := range []string{"alpha", "bravo", "charlie", "delta", "echo"} {
		lock, err := rl.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("Acquire %s with a cluster member: %v", key, err)
		}
		if got, err := cc.Get(ctx, key).Result(); err != nil || got != lock.Token() {
			t.Errorf("GET %s through the cluster = %q, %v; want the lock's token", key, got, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Errorf("Release %s: %v", key, err)
		}
		if err := cc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("GET %s after Release = %v, want redis.Nil", key, err)
		}
	}

	// The cluster really is one: its three masters split the slots.
	slots, err := cc.ClusterSlots(ctx).Result()
	if err != nil || len(slots) != 3 {
		t.Errorf("CLUSTER SLOTS = %d ranges, %v; want 3", len(slots), err)
	}
	info, err := cluster.Masters[1].Client().ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Errorf("CLUSTER INFO on a master: %q, %v", info, err)
	}
}
