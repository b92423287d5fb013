package redlock

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNewOneServerTwoNames (#11 item 7): New refuses two members that dial the same
// address under different spellings (host name, IPv4-mapped IPv6, unspecified address,
// leading zeros in the port, case and trailing dot of a name, unix paths), and accepts
// members that differ.
func TestNewOneServerTwoNames(t *testing.T) {
	plain := func(addr string) redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }
	unix := func(path string) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Network: "unix", Addr: path})
	}
	cluster := func(addrs ...string) redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	failover := func() redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:26379"}})
	}
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		want  string // "" means accepted
	}{
		{"localhost and 127.0.0.1", []redis.UniversalClient{plain("localhost:6379"), plain("127.0.0.1:6379")},
			"nodes 1 and 2 are the same server 127.0.0.1:6379 (localhost:6379 and 127.0.0.1:6379)"},
		{"v4-mapped v6 and v4", []redis.UniversalClient{plain("127.0.0.1:6379"), plain("[::ffff:127.0.0.1]:6379")},
			"nodes 1 and 2 are the same server 127.0.0.1:6379"},
		{"all three", []redis.UniversalClient{plain("[::ffff:127.0.0.1]:6379"), plain("10.1.1.1:6379"), plain("localhost:6379")},
			"nodes 1 and 3 are the same server 127.0.0.1:6379"},
		{"unspecified", []redis.UniversalClient{plain("0.0.0.0:6379"), plain("127.0.0.1:6379")}, "same server 127.0.0.1:6379"},
		{"port with zeros", []redis.UniversalClient{plain("127.0.0.1:06379"), plain("127.0.0.1:6379")}, "same server 127.0.0.1:6379"},
		{"name case and dot", []redis.UniversalClient{plain("LocalHost.:6379"), plain("[::ffff:7f00:1]:6379")}, "same server 127.0.0.1:6379"},
		{"unresolved name twice", []redis.UniversalClient{plain("no-such-host.invalid:1"), plain("NO-SUCH-HOST.invalid.:1")},
			"same server no-such-host.invalid:1"},
		{"unix paths", []redis.UniversalClient{unix("/run/redis/../redis/redis.sock"), unix("/run/redis/redis.sock")},
			"same server unix:/run/redis/redis.sock"},
		{"cluster seed", []redis.UniversalClient{cluster("127.0.0.1:7000", "127.0.0.1:7001"), plain("localhost:7001")},
			"same server 127.0.0.1:7001"},

		{"other ports", []redis.UniversalClient{plain("localhost:6379"), plain("127.0.0.1:6380"), plain("[::ffff:127.0.0.1]:6381")}, ""},
		{"other hosts", []redis.UniversalClient{plain("127.0.0.1:6379"), plain("127.0.0.2:6379"), plain("[::1]:6379")}, ""},
		{"unresolved name", []redis.UniversalClient{plain("no-such-host.invalid:6379"), plain("127.0.0.1:6379")}, ""},
		{"unix and tcp", []redis.UniversalClient{unix("/run/redis/redis.sock"), plain("127.0.0.1:6379")}, ""},
		{"two Sentinel-managed", []redis.UniversalClient{failover(), failover()}, ""},
		{"one cluster, seeds alike", []redis.UniversalClient{cluster("localhost:7000", "127.0.0.1:7000"), plain("127.0.0.1:7001")}, ""},
	}
	for _, tt := range tests {
		t.Cleanup(func() {
			for _, rdb := range tt.nodes {
				rdb.Close()
			}
		})
		c, err := New(tt.nodes, Options{})
		if c != nil {
			c.Close()
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: New = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestNewWhileDNSIsDown (#11 item 7): a lookup that never answers holds New up for
// resolveTimeout at most; the name then stands for itself.
func TestNewWhileDNSIsDown(t *testing.T) {
	lookupNetIP = func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	t.Cleanup(func() { lookupNetIP = net.DefaultResolver.LookupNetIP })
	a := redis.NewClient(&redis.Options{Addr: "redis-a.example:6379"})
	b := redis.NewClient(&redis.Options{Addr: "redis-b.example:6379"})
	same := redis.NewClient(&redis.Options{Addr: "REDIS-A.example:6379"})
	t.Cleanup(func() { a.Close(); b.Close(); same.Close() })
	start := time.Now()
	c, err := New([]redis.UniversalClient{a, b}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if took := time.Since(start); took > resolveTimeout+time.Second {
		t.Fatalf("New took %v with DNS down, want about %v", took, resolveTimeout)
	}
	if _, err := New([]redis.UniversalClient{a, same}, Options{}); err == nil || !strings.Contains(err.Error(), "same server redis-a.example:6379") {
		t.Fatalf("one name twice with DNS down: %v", err)
	}
}
