package redlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestCheckNodes (T21): an eviction policy other than noeviction is reported per node;
// with fencing, so is a node without appendfsync always.
func TestCheckNodes(t *testing.T) {
	ctx := t.Context()
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	if err := c.client.CheckNodes(ctx); err != nil {
		t.Fatalf("default nodes: %v", err)
	}
	c.admin[1].ConfigSet(ctx, "maxmemory-policy", "allkeys-lru")
	err := c.client.CheckNodes(ctx)
	var ne *redlock.NodeError
	if !errors.Is(err, redlock.ErrNodeConfig) || !errors.As(err, &ne) || ne.Node != c.servers[1].Addr() ||
		!strings.Contains(err.Error(), `maxmemory-policy is "allkeys-lru"`) {
		t.Fatalf("allkeys-lru on node 2: got %v", err)
	}

	fenced := c.newClient(redlock.Options{Fencing: true})
	c.admin[1].ConfigSet(ctx, "maxmemory-policy", "noeviction")
	if err := fenced.CheckNodes(ctx); !errors.Is(err, redlock.ErrNodeConfig) || !strings.Contains(err.Error(), "appendfsync") {
		t.Fatalf("fencing without appendfsync always: got %v", err)
	}
	durable := newCluster(t, 3, redistest.Options{Persistent: true}, redlock.Options{Fencing: true})
	if err := durable.client.CheckNodes(ctx); err != nil {
		t.Fatalf("fencing on durable nodes: %v", err)
	}
}
