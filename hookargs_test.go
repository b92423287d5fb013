package redlock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// prefixHook rewrites the keys of every EVAL and EVALSHA in place, as a key-prefix hook
// on a user's go-redis client may: go-redis lets a hook change a command before it
// is sent.
type prefixHook struct{ prefix string }

func (prefixHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h prefixHook) rewrite(cmd redis.Cmder) {
	args := cmd.Args()
	if name := cmd.Name(); (name != "evalsha" && name != "eval") || len(args) < 3 {
		return
	}
	n, _ := args[2].(int)
	for i := 3; i < 3+n && i < len(args); i++ {
		if s, ok := args[i].(string); ok {
			args[i] = h.prefix + s
		}
	}
}

func (h prefixHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.rewrite(cmd)
		return next(ctx, cmd)
	}
}

func (h prefixHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.rewrite(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestHookRewritesOneNodesArgs: a hook on each node's client that rewrites a script's
// keys in place rewrites that node's command only. Every node then holds the lock
// under the prefixed key once, and the release frees it everywhere. When one argument
// vector was shared by the nodes' calls of a step (0ecc6e3), the hooks of three nodes
// prefixed the same keys three times, and -race reported the writes.
func TestHookRewritesOneNodesArgs(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	nodes := redistest.Clients(servers)
	for _, n := range nodes {
		n.AddHook(prefixHook{prefix: "ns:"})
	}
	ctx := t.Context()
	for _, fair := range []bool{false, true} {
		c, err := redlock.New(nodes, redlock.Options{Fair: fair})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			key := fmt.Sprintf("hooked:%t:%d", fair, i)
			l, err := c.TryAcquire(ctx, key, time.Minute)
			if err != nil {
				t.Fatalf("fair=%t: TryAcquire(%s): %v", fair, key, err)
			}
			l.WaitForCalls()
			for j, s := range servers {
				if v, err := s.Client().Get(ctx, "ns:"+key).Result(); err != nil || v == "" {
					t.Fatalf("fair=%t: node %d: GET ns:%s = %q, %v; want the lock's token", fair, j, key, v, err)
				}
				if n, _ := s.Client().Exists(ctx, "ns:ns:"+key, key).Result(); n != 0 {
					t.Fatalf("fair=%t: node %d holds %s or ns:ns:%s", fair, j, key, key)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("fair=%t: Release(%s): %v", fair, key, err)
			}
			l.WaitForCalls()
			for j, s := range servers {
				if n, _ := s.Client().Exists(ctx, "ns:"+key).Result(); n != 0 {
					t.Errorf("fair=%t: node %d still holds ns:%s after Release", fair, j, key)
				}
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// countingClient is a caller's wrapper of a go-redis client that overrides EvalSha, as
// one that counts or traces its calls may.
type countingClient struct {
	*redis.Client
	evalShas atomic.Int64
}

func (c *countingClient) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	c.evalShas.Add(1)
	return c.Client.EvalSha(ctx, sha1, keys, args...)
}

// TestWrapperEvalShaStillCalled: a node given as a caller's type that wraps a go-redis
// client and overrides EvalSha gets its scripts through that EvalSha, as before the
// step's argument vector was built once (0ecc6e3 sent every command through Process,
// which bypassed such an override).
func TestWrapperEvalShaStillCalled(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	var wrapped []*countingClient
	var nodes []redis.UniversalClient
	for _, n := range redistest.Clients(servers) {
		w := &countingClient{Client: n.(*redis.Client)}
		wrapped = append(wrapped, w)
		nodes = append(nodes, w)
	}
	c, err := redlock.New(nodes, redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "wrapped", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l.WaitForCalls()
	for i, w := range wrapped {
		if n := w.evalShas.Load(); n < 2 {
			t.Errorf("node %d: the wrapper's EvalSha ran %d times for an acquire and a release; want 2", i, n)
		}
	}
}
