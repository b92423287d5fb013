package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/internal/redistest"
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
	s, err := redistest.StartServer(context.Background(), redistest.Options{}) // the protected resource; any Redis server
	if err != nil {
		panic(err)
	}
	defer s.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	fmt.Println(fenced.Write(ctx, rdb, "balance", "100", 34))
	err = fenced.Write(ctx, rdb, "balance", "90", 33) // stale holder
	fmt.Println(errors.Is(err, fenced.ErrStale))
	v, token, _ := fenced.Read(ctx, rdb, "balance")
	fmt.Println(v, token)
	// Output:
	// <nil>
	// true
	// 100 34
}

// ExampleUpdate takes one unit from a stock counter, fenced: the read, the decision and
// the write are one step, so two holders never both store 999.
func ExampleUpdate() {
	s, err := redistest.StartServer(context.Background(), redistest.Options{}) // the protected resource; any Redis server
	if err != nil {
		panic(err)
	}
	defer s.Close()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	rdb.HSet(ctx, "stock", "value", "1000") // seeded without a fence: counts as token 0

	errSoldOut := errors.New("sold out")
	takeOne := func(old string) (string, error) {
		n, err := strconv.Atoi(old)
		if err != nil {
			return "", err
		}
		if n <= 0 {
			return "", errSoldOut
		}
		return strconv.Itoa(n - 1), nil
	}
	left, err := fenced.Update(ctx, rdb, "stock", 34, takeOne) // lock.Fence() == 34
	fmt.Println(left, err)
	_, err = fenced.Update(ctx, rdb, "stock", 33, takeOne) // a holder that lost its lock
	fmt.Println(errors.Is(err, fenced.ErrStale))
	// Output:
	// 999 <nil>
	// true
}
