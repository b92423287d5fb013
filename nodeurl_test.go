package redlock_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestParseNodeURL: every kind of node URL gets NewFromURLs's client settings unless
// the URL sets its own, and every unusable URL is an ErrBadURL that quotes no part of
// its password.
func TestParseNodeURL(t *testing.T) {
	opts := redlock.Options{NodeTimeout: 20 * time.Millisecond} // 200 ms go-redis timeouts
	n, err := redlock.ParseNodeURL("redis://u:pw@10.0.0.1:6380/2", opts)
	if err != nil || n.Server == nil || n.Cluster != nil {
		t.Fatalf("plain URL: %+v, %v", n, err)
	}
	if s := n.Server; s.Addr != "10.0.0.1:6380" || s.DB != 2 || s.MaxRetries != -1 || s.DialerRetries != 1 ||
		s.DialTimeout != 200*time.Millisecond || s.ReadTimeout != 200*time.Millisecond || s.WriteTimeout != 200*time.Millisecond {
		t.Errorf("plain URL options: %+v", s)
	}
	if n.Name != "redis://u:xxxxx@10.0.0.1:6380/2" || !slices.Equal(n.Addrs(), []string{"10.0.0.1:6380"}) {
		t.Errorf("plain URL: name %q, addrs %q", n.Name, n.Addrs())
	}
	if n, _ := redlock.ParseNodeURL("redis://h:1?max_retries=2&read_timeout=1s", opts); n.Server.MaxRetries != 2 ||
		n.Server.ReadTimeout != time.Second || n.Server.WriteTimeout != 0 {
		// WriteTimeout 0: go-redis sets it from ReadTimeout when the client is made.
		t.Errorf("the URL's own settings must win: %+v", n.Server)
	}
	if n, err := redlock.ParseNodeURL("unix:///run/redis.sock?db=1", opts); err != nil || n.Server.Network != "unix" {
		t.Errorf("unix URL: %+v, %v", n.Server, err)
	}

	n, err = redlock.ParseNodeURL("rediss+cluster://:pw@h1:7000?addr=h2:7001&addr=h3:7002", opts)
	if err != nil || n.Cluster == nil || n.Server != nil {
		t.Fatalf("cluster URL: %+v, %v", n, err)
	}
	if c := n.Cluster; !slices.Equal(c.Addrs, []string{"h1:7000", "h2:7001", "h3:7002"}) || c.MaxRetries != -1 ||
		c.DialerRetries != 1 || c.DialTimeout != 200*time.Millisecond || c.ReadTimeout != 200*time.Millisecond ||
		c.TLSConfig == nil || c.Password != "pw" {
		t.Errorf("cluster URL options: %+v", c)
	}

	for raw, want := range map[string]string{
		"http://u:Secret1@h:1":                       "scheme must be",
		"unix+cluster://u:Secret1@/x.sock":           "scheme must be",
		"redis://u:Secret1@":                         "no host",
		"redis+cluster://u:Secret1@h:1/2":            "only database 0",
		"redis+cluster://u:Secret1@h:1?addr=h:70000": "port 70000 outside 1..65535",
		"redis://u:Secret1@h:99999":                  "port 99999 outside 1..65535",
		"redis+cluster://u:Sec%zzret1@h:1":           "password does not parse",
		"redis://u:Sec%zzret1@h:1":                   "password does not parse",
	} {
		_, err := redlock.ParseNodeURL(raw, opts)
		if !errors.Is(err, redlock.ErrBadURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrBadURL saying %q", redlock.RedactURL(raw), err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "Secret1") || strings.Contains(err.Error(), "Sec%zz") ||
			strings.Contains(err.Error(), "ret1")) {
			t.Errorf("%s: the error quotes the password: %v", redlock.RedactURL(raw), err)
		}
	}
}

// TestNewFromURLsClusterMember: a redis+cluster:// URL makes a whole Redis Cluster one
// member of the quorum, and the lock key lands on the master of its slot.
func TestNewFromURLsClusterMember(t *testing.T) {
	cluster := redistest.StartCluster(t, 2, redistest.Options{})
	plain := redistest.StartN(t, 2, redistest.Options{})
	urls := []string{"redis+cluster://" + cluster.Masters[0].Addr() + "?addr=" + cluster.Masters[1].Addr()}
	for _, s := range plain {
		urls = append(urls, "redis://"+s.Addr())
	}
	client, err := redlock.NewFromURLs(urls, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()
	if err := client.CheckNodes(ctx); err != nil {
		t.Fatalf("CheckNodes: %v", err)
	}
	for _, key := range []string{"alpha", "beta", "{x}gamma"} {
		lock, err := client.TryAcquire(ctx, key, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		// TryAcquire returns at a majority (2 of 3): the Cluster member's SET may
		// still be on its way (a CI failure on a slow box: "on 0 cluster masters").
		lock.WaitForCalls()
		on := 0
		for _, m := range cluster.Masters {
			on += int(m.Client().Exists(ctx, key).Val())
		}
		if on != 1 {
			t.Errorf("%s is on %d cluster masters, want 1", key, on)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("%s: Release: %v", key, err)
		}
	}
}
