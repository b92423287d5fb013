package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// embedded is a user type that embeds a go-redis client: its options are read too.
type embedded struct{ *redis.Client }

// TestReadClientSettings (#11 item 6c): the settings are read from every kind of
// go-redis client without a round trip, after go-redis applied its defaults (no
// server listens on these addresses).
func TestReadClientSettings(t *testing.T) {
	addr := "127.0.0.1:1"
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		want clientSettings
	}{
		{"plain, defaults", redis.NewClient(&redis.Options{Addr: addr}), clientSettings{known: true, retries: true}},
		{"plain, MaxRetries -1", redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}), clientSettings{known: true}},
		{"plain, context timeouts", redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true}),
			clientSettings{known: true, contextTimeout: true}},
		{"sentinel-managed, defaults", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{addr}}),
			clientSettings{known: true, retries: true}},
		{"sentinel-managed, MaxRetries -1", redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{addr}, MaxRetries: -1}),
			clientSettings{known: true}},
		// A Cluster client's node clients do not retry by default (its redirect loop
		// re-sends after network errors, which cannot be turned off without MOVED).
		{"cluster, defaults", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}}), clientSettings{known: true}},
		{"cluster, MaxRetries 2, context timeouts", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, MaxRetries: 2, ContextTimeoutEnabled: true}),
			clientSettings{known: true, retries: true, contextTimeout: true}},
		{"ring, defaults", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}}), clientSettings{known: true, retries: true}},
		{"ring, MaxRetries -1", redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, MaxRetries: -1}), clientSettings{known: true}},
		{"embedding a client", embedded{redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})},
			clientSettings{known: true, retries: true, contextTimeout: true}},
		{"wrapping the interface", wrapped{redis.NewClient(&redis.Options{Addr: addr}), nil}, clientSettings{}},
	}
	for _, tt := range tests {
		t.Cleanup(func() { tt.rdb.Close() })
		if got := readClientSettings(tt.rdb); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
		problems := strings.Join(clientProblems(tt.rdb), "; ")
		if strings.Contains(problems, "MaxRetries") != tt.want.retries ||
			strings.Contains(problems, "ContextTimeoutEnabled") != tt.want.contextTimeout {
			t.Errorf("%s: problems %q for %+v", tt.name, problems, tt.want)
		}
	}
}

// TestNewRefusesContextTimeouts (#11 item 6c): New refuses a client with
// ContextTimeoutEnabled, of any kind, and says why; it accepts default clients.
func TestNewRefusesContextTimeouts(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	timeouts := []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: "127.0.0.1:2", ContextTimeoutEnabled: true}),
		redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:3"}, ContextTimeoutEnabled: true}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:4"}, ContextTimeoutEnabled: true}),
		redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:5"}, ContextTimeoutEnabled: true}),
	}
	t.Cleanup(func() {
		a.Close()
		for _, rdb := range timeouts {
			rdb.Close()
		}
	})
	for _, rdb := range timeouts {
		c, err := New([]redis.UniversalClient{a, rdb}, Options{})
		if c != nil {
			c.Close()
		}
		if c != nil || !errors.Is(err, ErrNodeConfig) || !strings.Contains(err.Error(), "node 2") ||
			!strings.Contains(err.Error(), "ContextTimeoutEnabled is on") {
			t.Errorf("%T with ContextTimeoutEnabled: New = %v, %v", rdb, c, err)
		}
	}
	c, err := New([]redis.UniversalClient{a}, Options{}) // MaxRetries 3: accepted
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
