package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestOddKeys: keys that are binary, huge, or full of Redis and Cluster syntax (hash
// tags, globs, our own channel and counter names) are acquired, extended and released
// on real nodes, with and without fencing, and leave no lock key behind; an empty key
// is a clear error. FuzzKeysAndTTLs tries many more on in-process nodes.
func TestOddKeys(t *testing.T) {
	// A 1 MB key (three with fencing's counter names) takes a while to cross under
	// the race detector: give nodes a second, and the whole test a bound, so that a
	// failure is reported instead of retried for ever.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	opts := redlock.Options{NodeTimeout: time.Second}
	c := newCluster(t, 3, redistest.Options{}, opts)
	opts.Fencing = true
	fenced := c.newClient(opts)
	keys := []string{
		"{}", "{", "}", "{a}", "a{b}c", "{}a{b}", "{a}{b}", "\x00", "\xff\xfe binary \x00\r\n",
		"spaces and\ttabs", "ключ-🔒", "*?[]\\", "redlock:released:x", "x:fence", "-1", "1e9",
		strings.Repeat("k", 1<<20), // 1 MB
	}
	for _, client := range []*redlock.Client{c.client, fenced} {
		for _, key := range keys {
			short := key
			if len(short) > 20 {
				short = short[:20] + "..."
			}
			l, err := client.Acquire(ctx, key, 10*time.Second)
			if err != nil {
				t.Fatalf("Acquire(%q): %v", short, err)
			}
			if err := l.Extend(ctx, 20*time.Second); err != nil {
				t.Fatalf("Extend(%q): %v", short, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release(%q): %v", short, err)
			}
			l.WaitForCalls()
			for i, a := range c.admin {
				if n, err := a.Exists(ctx, key).Result(); err != nil || n != 0 {
					t.Fatalf("key %q on node %d after Release: exists %d, %v", short, i+1, n, err)
				}
			}
		}
		if l, err := client.Acquire(ctx, "", time.Second); l != nil || err == nil || !strings.Contains(err.Error(), "redlock: empty key") {
			t.Fatalf("empty key: %v, %v", l, err)
		}
	}
	for i, a := range c.admin { // only the fencing counters stay
		counters := make(map[string]bool)
		for _, key := range keys {
			for _, name := range redlock.FenceKeys(a, key) {
				counters[name] = true
			}
		}
		left, err := a.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range left {
			if !counters[k] {
				if len(k) > 40 {
					k = k[:40] + "..."
				}
				t.Fatalf("node %d keeps %q, which is no fencing counter", i+1, k)
			}
		}
	}
}
