package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// pipelineCounter is a go-redis hook that counts pipelines and the commands in them.
type pipelineCounter struct{ pipelines, cmds atomic.Int64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}
func (p *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		p.pipelines.Add(1)
		p.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// TestBatchedCalls: concurrent locks on one Client share pipelines to each node, and a
// node that lost its scripts (SCRIPT FLUSH) still answers every call in a pipeline
// through the EVAL fallback. Every lock is granted and released; no key is left.
func TestBatchedCalls(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	var hook pipelineCounter
	rdbs := redistest.Clients(servers)
	for _, r := range rdbs {
		r.AddHook(&hook)
	}
	client, err := redlock.New(rdbs, redlock.Options{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()
	for _, s := range servers {
		if err := s.Client().ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const goroutines, cycles = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cycles {
				lock, err := client.TryAcquire(ctx, fmt.Sprintf("batch-%d-%d", g, i), 10*time.Second)
				if err == nil {
					err = lock.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if hook.pipelines.Load() == 0 {
		t.Fatal("no call was sent in a pipeline: the batching path was not exercised")
	}
	t.Logf("%d pipelines carried %d calls", hook.pipelines.Load(), hook.cmds.Load())
	if err := client.Close(); err != nil { // waits for the deletes still out
		t.Fatal(err)
	}
	for i, s := range servers {
		if n := s.Client().DBSize(ctx).Val(); n != 0 {
			t.Fatalf("node %d holds %d keys after every lock was released", i+1, n)
		}
	}
}
