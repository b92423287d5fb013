package redlock

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// One server must not vote twice, whatever it is called: New compares the addresses
// the members dial, after normalising IP literals and resolving host names, and
// refuses two members that share one. A server behind addresses that do not resolve
// to each other (a proxy, another interface of the host, a NAT) is found by
// CheckNodes, which compares the servers' run_id.

// resolveTimeout bounds the host name lookups of New. A name that is not resolved in
// time stands for itself, so New works while DNS is down.
const resolveTimeout = 500 * time.Millisecond

// lookupNetIP resolves host names (a variable for the tests).
var lookupNetIP = net.DefaultResolver.LookupNetIP

// ownDialer reports whether a client was given a Dialer of its own: one that is not
// go-redis's (the default that every client without one gets, or a Sentinel client's).
// Only the function's package can tell them apart: go-redis's default is a closure,
// and inlining gives copies of it different code pointers.
func ownDialer(d func(context.Context, string, string) (net.Conn, error)) bool {
	if d == nil {
		return false
	}
	fn := runtime.FuncForPC(reflect.ValueOf(d).Pointer())
	return fn == nil || !strings.HasPrefix(fn.Name(), "github.com/redis/go-redis/v9.")
}

// dialTarget is one address a member dials: a TCP host and port, or something that
// stands for itself (a unix socket path, a member whose addresses are not known).
type dialTarget struct {
	host, port string // TCP: host is an IP literal or a name; port as given
	opaque     string // otherwise
}

// dialTargets returns the addresses a member's client dials: its address for a plain
// client, its seed addresses for a Cluster client, its shards for a Ring. A
// Sentinel-managed client and unknown types stand for themselves (by name); a client
// with its own Dialer has none.
func dialTargets(rdb redis.UniversalClient, name string) []dialTarget {
	tcp := func(addr string) dialTarget {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return dialTarget{opaque: addr}
		}
		return dialTarget{host: host, port: port}
	}
	// A client with its own Dialer decides itself where it connects (a tunnel, a
	// bastion, a mesh): its address says nothing, and only CheckNodes' run_id can tell.
	switch c := rdb.(type) {
	case interface{ Options() *redis.Options }:
		o := c.Options()
		switch {
		case o.Addr == "FailoverClient": // go-redis's placeholder for Sentinel clients
			return []dialTarget{{opaque: name}}
		case ownDialer(o.Dialer):
			return nil
		case o.Network == "unix":
			return []dialTarget{{opaque: "unix:" + filepath.Clean(o.Addr)}}
		}
		return []dialTarget{tcp(o.Addr)}
	case interface{ Options() *redis.ClusterOptions }:
		o := c.Options()
		return each(o.Dialer, slices.Values(o.Addrs), tcp)
	case interface{ Options() *redis.RingOptions }:
		o := c.Options()
		return each(o.Dialer, maps.Values(o.Addrs), tcp)
	}
	return []dialTarget{{opaque: name}}
}

// each returns the targets of a Cluster's seeds or a Ring's shards, none when the
// client dials with a Dialer of its own.
func each(d func(context.Context, string, string) (net.Conn, error), addrs iter.Seq[string], tcp func(string) dialTarget) []dialTarget {
	if ownDialer(d) {
		return nil
	}
	var out []dialTarget
	for addr := range addrs {
		out = append(out, tcp(addr))
	}
	return out
}

// serverKeys returns the keys that identify the servers behind the targets: for TCP,
// each address the host stands for (an IP literal normalised, a name resolved through
// the lookup table) with the port; otherwise the target itself.
func serverKeys(targets []dialTarget, resolved map[string][]netip.Addr) []string {
	var keys []string
	for _, t := range targets {
		if t.opaque != "" {
			keys = append(keys, t.opaque)
			continue
		}
		port := t.port
		if p, err := strconv.ParseUint(port, 10, 16); err == nil {
			port = strconv.FormatUint(p, 10) // "06379" is 6379
		}
		addrs, ok := literalAddr(t.host)
		if !ok {
			addrs = resolved[hostName(t.host)]
		}
		if len(addrs) == 0 { // not resolved: the name stands for itself
			keys = append(keys, net.JoinHostPort(hostName(t.host), port))
			continue
		}
		for _, a := range addrs {
			keys = append(keys, net.JoinHostPort(a.String(), port))
		}
	}
	return keys
}

// literalAddr parses an IP literal and normalises it: an IPv4-mapped IPv6 address is
// the IPv4 address, and the unspecified address (which a connection reaches as this
// host) is the loopback address of its family.
func literalAddr(host string) ([]netip.Addr, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return nil, false
	}
	return []netip.Addr{normalAddr(a)}, true
}

func normalAddr(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.IsUnspecified() {
		if a.Is4() {
			return netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		return netip.IPv6Loopback()
	}
	return a
}

// hostName normalises a host name: DNS names are case-insensitive, and a trailing
// dot only makes the name absolute.
func hostName(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// resolve looks up every host name among the targets, all at once, for at most
// resolveTimeout. Names that fail or time out are left out.
func resolve(targets [][]dialTarget) map[string][]netip.Addr {
	names := make(map[string]bool)
	for _, ts := range targets {
		for _, t := range ts {
			if _, literal := literalAddr(t.host); t.opaque == "" && !literal {
				names[hostName(t.host)] = true
			}
		}
	}
	resolved := make(map[string][]netip.Addr, len(names))
	if len(names) == 0 {
		return resolved
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range names {
		wg.Go(func() {
			addrs, err := lookupNetIP(ctx, "ip", name)
			if err != nil {
				return
			}
			for i, a := range addrs {
				addrs[i] = normalAddr(a)
			}
			mu.Lock()
			defer mu.Unlock()
			resolved[name] = addrs
		})
	}
	wg.Wait()
	return resolved
}

// distinctServers returns an error if two members reach one server: their server keys
// share one.
func distinctServers(nodes []node) error {
	targets := make([][]dialTarget, len(nodes))
	for i, n := range nodes {
		targets[i] = dialTargets(n.rdb, n.name)
	}
	resolved := resolve(targets)
	owner := make(map[string]int) // server key → the first member that reaches it
	for i := range nodes {
		for _, key := range serverKeys(targets[i], resolved) {
			j, seen := owner[key]
			switch {
			case !seen:
				owner[key] = i
			case j != i:
				if nodes[i].name == key && nodes[j].name == key {
					return fmt.Errorf("redlock: nodes %d and %d are the same server %s", j+1, i+1, key)
				}
				return fmt.Errorf("redlock: nodes %d and %d are the same server %s (%s and %s)",
					j+1, i+1, key, nodes[j].name, nodes[i].name)
			}
		}
	}
	return nil
}
