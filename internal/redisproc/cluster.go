package redisproc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// ClusterMember is a cluster-enabled redis-server with no slots yet.
type ClusterMember struct {
	Client  *redis.Client // a client of the member
	Port    int           // its client port
	BusPort int           // its cluster bus port (not Port+10000 here)
}

// FormCluster makes one Redis Cluster of masters without replicas from members: it
// splits the 16384 slots between them in equal ranges in the given order (members[0]
// serves slot 0), introduces them to each other with CLUSTER MEET, and returns once
// every member reports cluster_state:ok and knows all of them, or ctx ends.
func FormCluster(ctx context.Context, members []ClusterMember) error {
	n := len(members)
	if n < 1 {
		return fmt.Errorf("a cluster needs at least one node, got %d", n)
	}
	for i, m := range members {
		first, last := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := m.Client.ClusterAddSlotsRange(ctx, first, last).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", first, last, Loopback(m.Port), err)
		}
	}
	for _, m := range members[1:] {
		err := members[0].Client.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", m.Port, m.BusPort).Err()
		if err != nil {
			return fmt.Errorf("CLUSTER MEET %s from %s: %w", Loopback(m.Port), Loopback(members[0].Port), err)
		}
	}
	for _, m := range members {
		if err := waitClusterOK(ctx, m.Client, n); err != nil {
			return fmt.Errorf("waiting for cluster node %s to be ready: %w", Loopback(m.Port), err)
		}
	}
	return nil
}

// waitClusterOK polls CLUSTER INFO until c reports cluster_state:ok with n known nodes.
func waitClusterOK(ctx context.Context, c *redis.Client, n int) error {
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && (!strings.Contains(info, "cluster_state:ok") ||
			!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)+"\r\n")) {
			err = fmt.Errorf("CLUSTER INFO: %s", strings.Join(strings.Fields(info), " "))
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
