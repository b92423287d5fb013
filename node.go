package redlock

import (
	"context"
	_ "embed" // the Lua scripts are files in scripts/
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The server-side steps, one Lua file each. redis.Script sends EVALSHA and falls back to
// EVAL when a node answers NOSCRIPT (after a restart, a failover or SCRIPT FLUSH).
var (
	//go:embed scripts/acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed scripts/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)

	//go:embed scripts/extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)
)

// outcome is what one node did in one step.
type outcome uint8

const (
	// outYes: the node did what was asked (took, refreshed, extended or deleted our key).
	outYes outcome = iota + 1
	// outNo: another token holds the key (acquire), or ours is gone (extend, release).
	outNo
	// outFailed: an error reply, a network error or no reply in time.
	outFailed
)

// node is one member of the quorum: an independent Redis master (or a Sentinel- or
// Cluster-managed client that plays that role) and the name errors show for it.
type node struct {
	name string
	rdb  redis.UniversalClient
}

// run executes script on the node with KEYS[1] = key and turns the reply into an
// outcome. Every script answers 1 (yes) or 0 (no); anything else is a failure.
func (n *node) run(ctx context.Context, script *redis.Script, key string, args []any) (outcome, error) {
	v, err := script.Run(ctx, n.rdb, []string{key}, args...).Result()
	if err != nil {
		return outFailed, err
	}
	switch v {
	case int64(1):
		return outYes, nil
	case int64(0):
		return outNo, nil
	}
	return outFailed, fmt.Errorf("unexpected script reply %T(%v)", v, v)
}

// nodeName returns a printable name for a client: its address, or a description of a
// Sentinel- or Cluster-managed client. Client options never print passwords here.
func nodeName(rdb redis.UniversalClient, index int) string {
	switch c := rdb.(type) {
	case *redis.Client:
		opt := c.Options()
		if opt.Addr == "FailoverClient" { // go-redis's placeholder for Sentinel clients
			return fmt.Sprintf("sentinel-managed node %d", index+1)
		}
		if opt.DB != 0 {
			return fmt.Sprintf("%s/%d", opt.Addr, opt.DB)
		}
		return opt.Addr
	case *redis.ClusterClient:
		return "cluster[" + strings.Join(c.Options().Addrs, ",") + "]"
	case *redis.Ring:
		return fmt.Sprintf("ring node %d", index+1)
	}
	return fmt.Sprintf("node %d", index+1)
}

// nodeServer returns what identifies the server behind a client, so that one server is
// never counted twice in a quorum: the address without the database number.
func nodeServer(rdb redis.UniversalClient, name string) string {
	if c, ok := rdb.(*redis.Client); ok && c.Options().Addr != "FailoverClient" {
		return c.Options().Addr
	}
	return name
}
