package main

import (
	"strings"
	"testing"
	"time"
)

// TestUnixSocketsByPath: the same-server check compares unix socket paths as
// the file system does, case and all, and host names without case. Since the CLI reads
// unix:// nodes (ced8399), two sockets whose paths differed only in case were refused
// as "the same server" (the check lowercased every address).
func TestUnixSocketsByPath(t *testing.T) {
	if _, err := parseNodes([]string{"unix:///run/r/Redis.sock", "unix:///run/r/redis.sock", "redis://h:1"}, tlsFiles{}, time.Second); err != nil {
		t.Errorf("two sockets differing in case: %v", err)
	}
	for _, urls := range [][]string{
		{"unix:///run/r/redis.sock", "unix:///run/r/redis.sock?db=1"},
		{"redis://H:1", "redis://h:1/2"},
	} {
		_, err := parseNodes(urls, tlsFiles{}, time.Second)
		if err == nil || !strings.Contains(err.Error(), "is the same server as node 1") {
			t.Errorf("%q: %v, want the same server", urls, err)
		}
	}
}
