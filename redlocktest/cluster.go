package redlocktest

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

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
	clients := make([]*redis.Client, n)
	for i, m := range c.Masters {
		clients[i] = m.Client()
		first := i * clusterSlots / n
		last := (i+1)*clusterSlots/n - 1
		if err := clients[i].ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			t.Fatalf("redlocktest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", first, last, m.Addr(), err)
		}
	}
	for _, m := range c.Masters[1:] {
		// MEET with the cluster bus port, which is not port+10000 here.
		err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", m.Port(), m.busPort).Err()
		if err != nil {
			t.Fatalf("redlocktest: CLUSTER MEET %s from %s: %v", m.Addr(), c.Masters[0].Addr(), err)
		}
	}
	for i, cl := range clients {
		waitFor(t, ctx, "cluster node "+c.Masters[i].Addr()+" to be ready", func() error {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n") {
				return fmt.Errorf("CLUSTER INFO: %s", strings.Join(strings.Fields(info), " "))
			}
			return nil
		})
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
