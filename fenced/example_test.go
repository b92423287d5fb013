package fenced_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fenced"
)

func ExampleGuard() {
	var g fenced.Guard
	write := func() error { fmt.Println("written"); return nil }

	fmt.Println(g.Do(34, write)) // the current holder (lock.Fence() == 34)
	err := g.Do(33, write)       // a holder that lost its lock while paused
	fmt.Println(errors.Is(err, fenced.ErrStale))
	// Output:
	// written
	// <nil>
	// true
}

func ExampleWrite() {
	s := miniredis.NewMiniRedis() // the protected resource; any Redis server
	if err := s.Start(); err != nil {
		panic(err)
	}
	defer s.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	fmt.Println(fenced.Write(ctx, rdb, "balance", "100", 34))
	err := fenced.Write(ctx, rdb, "balance", "90", 33) // stale holder
	fmt.Println(errors.Is(err, fenced.ErrStale))
	v, token, _ := fenced.Read(ctx, rdb, "balance")
	fmt.Println(v, token)
	// Output:
	// <nil>
	// true
	// 100 34
}
