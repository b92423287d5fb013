package redlocktest

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestProxyLatency(t *testing.T) {
	node := Start(t, Options{})
	p := NewNetwork(t).Proxy(node.Addr())
	if p.Upstream() != node.Addr() {
		t.Errorf("Upstream() = %q, want %q", p.Upstream(), node.Addr())
	}
	c := p.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Ping(ctx).Err(); err != nil { // connect before the fault
		t.Fatalf("PING through the proxy: %v", err)
	}

	const latency, jitter = 100 * time.Millisecond, 20 * time.Millisecond
	p.Latency(Replies, latency, jitter)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with latency: %v", err)
	}
	if rtt := time.Since(start); rtt < latency-jitter || rtt > 2*time.Second {
		t.Errorf("PING with %v±%v of reply latency took %v", latency, jitter, rtt)
	}

	// Both ways: a round trip pays the latency twice. Replacing the toxic keeps one
	// per direction.
	p.Latency(BothWays, latency, 0)
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with latency both ways: %v", err)
	}
	if rtt := time.Since(start); rtt < 2*latency {
		t.Errorf("PING with %v each way took %v, want at least %v", latency, rtt, 2*latency)
	}

	p.Heal()
	start = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Heal: %v", err)
	}
	if rtt := time.Since(start); rtt >= latency {
		t.Errorf("PING after Heal took %v, want well under %v", rtt, latency)
	}
}

func TestProxyBlackholeReplies(t *testing.T) {
	node := Start(t, Options{})
	p := NewNetwork(t).Proxy(node.Addr())
	c := timeoutClient(t, p.Addr())
	direct := node.Client()
	// Connect first: a new connection's handshake would wait for a reply too.
	if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	// Replies are dropped, requests go through: the SET lands, the client times out.
	p.Blackhole(Replies)
	if err := c.Set(ctxTimeout(t, 200*time.Millisecond), "k", "v", 0).Err(); !isTimeout(err) {
		t.Errorf("SET with replies blackholed = %v, want a timeout", err)
	}
	ctx := ctxTimeout(t, 5*time.Second)
	waitFor(t, ctx, "the blackholed SET to land", func() error {
		return direct.Get(ctx, "k").Err()
	})

	// Requests dropped: the server never sees the command.
	p.Heal()
	p.Blackhole(Requests)
	if err := c.Set(ctxTimeout(t, 200*time.Millisecond), "k2", "v", 0).Err(); !isTimeout(err) {
		t.Errorf("SET with requests blackholed = %v, want a timeout", err)
	}
	p.Heal()
	// The server still answers through a new proxied connection, and k2 never landed.
	c2 := p.Client()
	if err := c2.Get(ctx, "k2").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k2 after a blackholed SET = %v, want redis.Nil", err)
	}
}

func TestProxyResetDownUp(t *testing.T) {
	node := Start(t, Options{})
	p := NewNetwork(t).Proxy(node.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}

	p.ResetPeer()
	if err := c.Ping(ctx).Err(); err == nil || isTimeout(err) {
		t.Errorf("PING after ResetPeer = %v, want a connection error", err)
	}
	p.Heal()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Heal: %v", err)
	}

	p.Down()
	p.Down() // a no-op
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial while the proxy is down = %v, want connection refused", err)
	}
	p.Up()
	p.Up() // a no-op
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Up: %v", err)
	}
}

// TestPerClientPartition shows two clients different partitions of the same nodes:
// each has its own proxies, and only A's path to node 0 is cut.
func TestPerClientPartition(t *testing.T) {
	nodes := StartN(t, 2, Options{})
	network := NewNetwork(t)
	viewA, viewB := Proxies(network, nodes), Proxies(network, nodes)
	viewA[0].Blackhole(BothWays)

	a := timeoutClient(t, viewA[0].Addr())
	b := timeoutClient(t, viewB[0].Addr())
	if err := a.Ping(ctxTimeout(t, 200*time.Millisecond)).Err(); !isTimeout(err) {
		t.Errorf("A's PING to node 0 = %v, want a timeout", err)
	}
	if err := b.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("B's PING to node 0: %v", err)
	}
	if err := timeoutClient(t, viewA[1].Addr()).Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("A's PING to node 1: %v", err)
	}
}
