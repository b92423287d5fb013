package redlock_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// nodesKeeper is an Observer that keeps the Nodes of every event and nothing else
// (clone: a copy of them), as an Observer may: an event's fields are its to keep.
type nodesKeeper struct {
	clone bool
	mu    sync.Mutex
	nodes [][]redlock.NodeReply
}

func (k *nodesKeeper) Observe(_ context.Context, e redlock.Event) {
	n := e.Nodes
	if k.clone {
		n = slices.Clone(n)
	}
	k.mu.Lock()
	k.nodes = append(k.nodes, n)
	k.mu.Unlock()
}

// TestKeptNodesKeepNoStepContext: an Observer that keeps Event.Nodes keeps the
// replies, not the step's round: once the lock is released and dropped, the context
// the Acquire was given (and the values it carries) can be collected, as it is when
// the Observer keeps a copy of the replies. (The first event's Nodes are made in the
// round's allocation, so they keep the round; the round must not keep the context.)
func TestKeptNodesKeepNoStepContext(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	for _, clone := range []bool{true, false} {
		keeper := &nodesKeeper{clone: clone}
		client := c.newClient(redlock.Options{Observer: keeper})
		alive := func() bool {
			type valueKey struct{}
			big := new([1 << 20]byte)
			w := weak.Make(big)
			ctx := context.WithValue(context.Background(), valueKey{}, big)
			lock, err := client.TryAcquire(ctx, "obs:retain", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			lock.WaitForCalls() // every acquire call has returned
			if err := lock.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			lock.WaitForCalls()
			// A sender goroutine may still hold the context for a moment after the
			// calls returned (the batch it sent): give it time.
			for range 100 {
				runtime.GC()
				if w.Value() == nil {
					return false
				}
				time.Sleep(10 * time.Millisecond)
			}
			return true
		}()
		keeper.mu.Lock()
		kept := len(keeper.nodes)
		keeper.mu.Unlock()
		if kept != 2 {
			t.Fatalf("clone %v: %d events, want 2", clone, kept)
		}
		if alive {
			t.Errorf("clone %v: the Acquire's context is still reachable, kept alive by the Event.Nodes the Observer kept", clone)
		}
		runtime.KeepAlive(keeper)
	}
}
