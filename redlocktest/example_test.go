package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// Five process nodes behind a redlock client: the lock survives two crashed nodes, a
// node restarted empty has lost the key, and a third crash leaves no majority. In a
// test, call the same functions with the test's t instead of redlocktest.Run.
func Example() {
	err := redlocktest.Run(func(t redlocktest.T) {
		ctx := context.Background()
		nodes := redlocktest.StartN(t, 5, redlocktest.Options{})
		locks, err := redlock.New(redlocktest.Clients(nodes), redlock.Options{})
		if err != nil {
			t.Fatalf("%v", err)
		}
		defer locks.Close()

		nodes[0].Kill()
		nodes[1].Kill()
		lock, err := locks.Acquire(ctx, "report", 10*time.Second)
		fmt.Println("with 2 of 5 nodes killed, acquired:", err == nil)

		nodes[4].Restart(redlocktest.NoPersistence)
		_, err = nodes[4].Client().Get(ctx, "report").Result()
		fmt.Println("key on the node restarted empty:", !errors.Is(err, redis.Nil))

		nodes[2].Kill()
		err = lock.Release(ctx)
		fmt.Println("release with 3 of 5 down is ErrUnavailable:", errors.Is(err, redlock.ErrUnavailable))
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// with 2 of 5 nodes killed, acquired: true
	// key on the node restarted empty: false
	// release with 3 of 5 down is ErrUnavailable: true
}

// A client that sees a node through a Toxiproxy proxy: replies delayed by 100 ms, then
// a blackhole that makes the node look partitioned.
func ExampleNetwork() {
	err := redlocktest.Run(func(t redlocktest.T) {
		node := redlocktest.Start(t, redlocktest.Options{})
		proxy := redlocktest.NewNetwork(t).Proxy(node.Addr())
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
		defer client.Close()
		ctx := context.Background()
		client.Ping(ctx) // connect before the faults

		proxy.Latency(redlocktest.Replies, 100*time.Millisecond, 0)
		start := time.Now()
		client.Ping(ctx)
		fmt.Println("PING took at least 100ms:", time.Since(start) >= 100*time.Millisecond)

		proxy.Heal()
		proxy.Blackhole(redlocktest.BothWays)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		fmt.Println("PING through the blackhole:", client.Ping(short).Err())
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// PING took at least 100ms: true
	// PING through the blackhole: context deadline exceeded
}

// A node whose wall clock jumps 30 s ahead expires a 10 s key at once.
func ExampleProcess_Jump() {
	err := redlocktest.Run(func(t redlocktest.T) {
		node := redlocktest.Start(t, redlocktest.Options{Clock: &redlocktest.Clock{}})
		client := node.Client()
		ctx := context.Background()
		client.Set(ctx, "lock", "token", 10*time.Second)

		node.Jump(30 * time.Second)
		fmt.Println("PTTL after the jump:", client.PTTL(ctx, "lock").Val())
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// PTTL after the jump: -2ns
}

// The core API needs no test and returns errors: a program starts a redis-server with
// StartProcess, injects faults with the methods ending in Err, and stops it with Close.
func ExampleStartProcess() {
	ctx := context.Background()
	node, err := redlocktest.StartProcess(ctx, redlocktest.Options{Persistence: redlocktest.AOFAlways})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := node.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	client := node.Client() // owned by the caller, as the process is
	defer client.Close()
	client.Set(ctx, "lock", "token", time.Minute)

	if err := node.RestartErr(redlocktest.AOFAlways); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("key after a restart with aof-always:", client.Get(ctx, "lock").Val())
	// Output:
	// key after a restart with aof-always: token
}
