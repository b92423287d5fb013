package redlocktest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Direction selects which traffic of a proxied connection a network fault affects.
type Direction int

const (
	// BothWays affects requests and replies.
	BothWays Direction = iota
	// Requests affects the traffic from the client to the server (Toxiproxy's
	// "upstream"): a delayed or dropped request reaches the server late or never.
	Requests
	// Replies affects the traffic from the server to the client ("downstream"): the
	// server has executed the command, but the client hears of it late or never.
	Replies
)

// streams returns Toxiproxy's stream names for d.
func (d Direction) streams() []string {
	switch d {
	case Requests:
		return []string{"upstream"}
	case Replies:
		return []string{"downstream"}
	}
	return []string{"upstream", "downstream"}
}

// Network is an in-process Toxiproxy server: a set of TCP proxies, each in front of
// one node, whose traffic can be delayed, dropped, reset or refused. It has no HTTP
// API; the proxies are driven through their methods.
//
// Put one proxy in front of each node and give every client the proxies' addresses to
// fault a node for everyone; give each client its own proxies (call Proxies once per
// client) to show two clients different partitions.
type Network struct {
	t      T
	server *toxiproxy.ApiServer

	mu sync.Mutex
	n  int // proxies made so far, for unique names
}

// NewNetwork returns an empty Network whose proxies are closed when the test ends.
func NewNetwork(t T) *Network {
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	n := &Network{t: t, server: server}
	t.Cleanup(func() {
		// Removing the toxics first ends their goroutines; stopping a proxy closes
		// its listener and connections, which ends the rest.
		for _, p := range server.Collection.Proxies() {
			p.Toxics.ResetToxics(context.Background())
		}
		if err := server.Collection.Clear(); err != nil {
			t.Errorf("redlocktest: closing proxies: %v", err)
		}
	})
	return n
}

// Proxy starts a proxy on a free loopback port that forwards every connection to
// upstream ("host:port"). Connections are made to upstream when a client connects, so
// upstream may be down (the client's connection is then closed at once).
func (n *Network) Proxy(upstream string) *Proxy {
	n.t.Helper()
	n.mu.Lock()
	n.n++
	name := fmt.Sprintf("proxy%d-%s", n.n, upstream)
	n.mu.Unlock()

	p := toxiproxy.NewProxy(n.server, name, "127.0.0.1:0", upstream)
	if err := n.server.Collection.Add(p, true); err != nil {
		n.t.Fatalf("redlocktest: starting a proxy to %s: %v", upstream, err)
	}
	proxy := &Proxy{t: n.t, p: p, addr: p.Listen}
	proxy.record(EventProxy, "")
	return proxy
}

// Proxies starts one proxy in front of each node, in the same order.
func Proxies[N Node](n *Network, nodes []N) []*Proxy {
	n.t.Helper()
	ps := make([]*Proxy, len(nodes))
	for i, node := range nodes {
		ps[i] = n.Proxy(node.Addr())
	}
	return ps
}

// Proxy is one Toxiproxy proxy. Its fault methods replace any earlier fault of the same
// kind and direction and act on open connections too. Heal removes them all.
type Proxy struct {
	t    T
	p    *toxiproxy.Proxy
	addr string
}

// Addr returns the proxy's address, "127.0.0.1:PORT", for clients to dial instead of
// the node's. It stays the same across Down and Up.
func (p *Proxy) Addr() string { return p.addr }

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.p.Upstream }

// Client returns a new go-redis client with default options connected through the
// proxy. It is closed when the test ends.
func (p *Proxy) Client() *redis.Client { return newClient(p.t, p.addr) }

// Latency delays the traffic in direction d by latency ± jitter (uniformly drawn for
// each chunk of data). With BothWays a round trip takes about 2 × latency longer.
func (p *Proxy) Latency(d Direction, latency, jitter time.Duration) {
	p.t.Helper()
	p.add("latency", d, map[string]any{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()})
	p.record(EventLatency, fmt.Sprintf("%v ± %v, %s", latency, jitter, d))
}

// Blackhole drops the traffic in direction d and keeps the connections open, as a
// network partition does: the client waits until its own timeout. Blackhole(Replies)
// lets requests through, so the server executes commands whose replies are lost.
func (p *Proxy) Blackhole(d Direction) {
	p.t.Helper()
	p.add("timeout", d, map[string]any{"timeout": 0})
	p.record(EventBlackhole, d.String())
}

// Timeout drops the traffic in direction d and closes each connection after it has
// seen traffic for the given time.
func (p *Proxy) Timeout(d Direction, after time.Duration) {
	p.t.Helper()
	p.add("timeout", d, map[string]any{"timeout": after.Milliseconds()})
	p.record(EventTimeout, fmt.Sprintf("after %v, %s", after, d))
}

// ResetPeer resets (TCP RST) each connection as soon as the client sends data on it,
// before the data reaches the server. New connections are accepted, then reset on
// their first request.
func (p *Proxy) ResetPeer() {
	p.t.Helper()
	p.add("reset_peer", Requests, map[string]any{"timeout": 0})
	p.record(EventResetPeer, "")
}

// Down closes the proxy's listener and every open connection: clients get "connection
// refused" until Up, as if the node's host were gone. It does nothing when down.
func (p *Proxy) Down() {
	p.p.Stop()
	p.record(EventDown, "")
}

// Up listens again on the same address after Down. It does nothing when up.
func (p *Proxy) Up() {
	p.t.Helper()
	if err := p.p.Start(); err != nil && err != toxiproxy.ErrProxyAlreadyStarted {
		p.t.Fatalf("redlocktest: restarting the proxy on %s: %v", p.addr, err)
	}
	p.record(EventUp, "")
}

// Heal removes every fault added with the methods above. It does not undo Down.
func (p *Proxy) Heal() {
	p.p.Toxics.ResetToxics(context.Background())
	p.record(EventHeal, "")
}

// record reports an event of this proxy to its test's Recorder, if any.
func (p *Proxy) record(kind EventKind, detail string) {
	record(p.t, Event{Kind: kind, Node: p.p.Upstream, Proxy: p.addr, Detail: detail})
}

// add installs one toxic per stream of d, replacing one of the same kind and stream.
func (p *Proxy) add(kind string, d Direction, attrs map[string]any) {
	p.t.Helper()
	for _, stream := range d.streams() {
		name := kind + "_" + stream
		if p.p.Toxics.GetToxic(name) != nil {
			if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
				p.t.Fatalf("redlocktest: replacing %s on %s: %v", name, p.addr, err)
			}
		}
		body, err := json.Marshal(map[string]any{
			"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attrs,
		})
		if err != nil {
			p.t.Fatalf("redlocktest: %v", err)
		}
		if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			p.t.Fatalf("redlocktest: adding %s on %s: %v", name, p.addr, err)
		}
	}
}
