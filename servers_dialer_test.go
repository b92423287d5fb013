package redlock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestNewAcceptsSameAddrOtherDialers: New compares the addresses the members
// options name, but a client with its own Dialer decides itself where it connects (a
// tunnel, a bastion, a service mesh per region, each member's "redis:6379" being
// another server). Here three members named by one address dial three different
// servers: they are three votes, and New must not refuse them as one server.
func TestNewAcceptsSameAddrOtherDialers(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	var members []redis.UniversalClient
	for _, addr := range redistest.Addrs(servers) {
		members = append(members, redis.NewClient(&redis.Options{
			Addr:       "redis.internal:6379",
			MaxRetries: -1,
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		}))
	}
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	c, err := redlock.New(members, redlock.Options{})
	if err != nil {
		t.Fatalf("three servers behind one name and their own dialers: %v", err)
	}
	defer c.Close()
	if err := c.CheckNodes(t.Context()); err != nil {
		t.Logf("CheckNodes: %v", err)
	}
	lock, err := c.Acquire(t.Context(), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = lock.Release(t.Context())
}
