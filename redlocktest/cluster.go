package redlocktest

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisproc"
)

// Cluster is a small Redis Cluster of masters without replicas, built by hand (CLUSTER
// ADDSLOTSRANGE and CLUSTER MEET), whose ClusterClient can be one member of a redlock
// quorum. Each key lives on exactly one of its masters, so the cluster as a whole is
// as safe as one node: losing the master of a key's slot loses the lock key.
type Cluster struct {
	// Masters are the cluster's nodes, in slot order: Masters[0] serves slot 0.
	Masters []*Process

	t T
}

// StartCluster starts n cluster-enabled redis-servers (with opts), splits the 16384
// slots between them in equal ranges, introduces them to each other, and returns once
// every node reports cluster_state:ok and knows all n nodes. Everything is stopped
// when the test ends.
func StartCluster(t T, n int, opts Options) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("redlocktest: StartCluster needs at least one node, got %d", n)
	}
	opts.Cluster = true
	c := &Cluster{t: t, Masters: StartN(t, n, opts)}

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	members := make([]redisproc.ClusterMember, n)
	for i, m := range c.Masters {
		members[i] = redisproc.ClusterMember{Client: m.Client(), Port: m.Port(), BusPort: m.busPort}
	}
	if err := redisproc.FormCluster(ctx, members); err != nil {
		t.Fatalf("redlocktest: StartCluster: %v", err)
	}
	return c
}

// Addrs returns the masters' addresses.
func (c *Cluster) Addrs() []string { return Addrs(c.Masters) }

// ClusterClient returns a new go-redis cluster client seeded with every master. It is
// closed when the test ends. Pass it to redlock.New as one member of the quorum.
func (c *Cluster) ClusterClient() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}
