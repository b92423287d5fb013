package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/benchload"
)

// ttl is the lock TTL of every workload, as in the peer figures of the guide.
const ttl = 8 * time.Second

// locker is one worker goroutine's handle on a library: it holds at most one lock
// at a time. Lock waits (retrying as the library does by default) until the lock
// is held or ctx ends; Unlock releases the lock taken by the last Lock call. The
// workloads that drive it are internal/benchload's, the ones `redlock bench` runs.
type locker = benchload.Locker

// lib is one library under test.
type lib struct {
	name string
	// single: the library locks one node only; it runs on node 0 with N=1.
	single bool
	// open builds the library over fresh go-redis clients (default options), one
	// per address.
	open func(addrs []string) (*setup, error)
}

// setup is a library opened on some nodes.
type setup struct {
	newLocker func() locker // one per worker goroutine
	close     func() error
	// rdbs are the go-redis clients the library was opened over, one per node, for
	// the tests that check that independent setups share no connection pool.
	rdbs []redis.UniversalClient
}

// libs are the libraries compared, in the order the benchmarks alternate them.
var libs = []lib{
	{name: "redlock", open: openRedlock},
	{name: "redsync", open: openRedsync},
	{name: "redislock", single: true, open: openRedislock},
}

// clients returns one go-redis client with default options per address, and a
// function that closes them all.
func clients(addrs []string) ([]redis.UniversalClient, func() error) {
	rdbs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	return rdbs, func() error {
		var first error
		for _, r := range rdbs {
			if err := r.Close(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// openRedlock uses one redlock.Client, with default Options, shared by all workers.
func openRedlock(addrs []string) (*setup, error) { return openRedlockWith(addrs, redlock.Options{}) }

// openRedlockFair is openRedlock with Options.Fair: Acquire calls queue on the
// nodes and are granted in arrival order across Clients (fair.go in the root).
func openRedlockFair(addrs []string) (*setup, error) {
	return openRedlockWith(addrs, redlock.Options{Fair: true})
}

// openRedlockWith is openRedlock with the given Options.
func openRedlockWith(addrs []string, opts redlock.Options) (*setup, error) {
	rdbs, closeAll := clients(addrs)
	c, err := redlock.New(rdbs, opts)
	if err != nil {
		_ = closeAll()
		return nil, err
	}
	return &setup{
		newLocker: benchload.Redlock(c, ttl),
		close: func() error {
			err := c.Close()
			if cerr := closeAll(); err == nil {
				err = cerr
			}
			return err
		},
		rdbs: rdbs,
	}, nil
}

// openRedsync uses one redsync instance; each worker keeps one mutex per key (a new
// one when the key changes), with redsync's default options: expiry 8 s (the common
// ttl), 32 tries, a uniform random 50–250 ms between tries.
func openRedsync(addrs []string) (*setup, error) {
	rdbs, closeAll := clients(addrs)
	pools := make([]rsredis.Pool, len(rdbs))
	for i, r := range rdbs {
		pools[i] = goredis.NewPool(r)
	}
	rs := redsync.New(pools...)
	return &setup{
		newLocker: func() locker { return &redsyncLocker{rs: rs} },
		close:     closeAll,
		rdbs:      rdbs,
	}, nil
}

type redsyncLocker struct {
	rs *redsync.Redsync
	m  *redsync.Mutex
}

func (r *redsyncLocker) Lock(ctx context.Context, key string) error {
	if r.m == nil || r.m.Name() != key {
		r.m = r.rs.NewMutex(key)
	}
	return r.m.LockContext(ctx)
}

func (r *redsyncLocker) Unlock(ctx context.Context) error {
	ok, err := r.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = fmt.Errorf("redsync: unlock of %q found no quorum", r.m.Name())
	}
	return err
}

// openRedislock uses one redislock.Client on the first address only, retrying every
// millisecond while the key is taken (its default is no retry at all).
func openRedislock(addrs []string) (*setup, error) {
	rdbs, closeAll := clients(addrs[:1])
	c := redislock.New(rdbs[0])
	opts := &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
	return &setup{
		newLocker: func() locker { return &redislockLocker{c: c, opts: opts} },
		close:     closeAll,
		rdbs:      rdbs,
	}, nil
}

type redislockLocker struct {
	c    *redislock.Client
	opts *redislock.Options
	l    *redislock.Lock
}

func (r *redislockLocker) Lock(ctx context.Context, key string) error {
	l, err := r.c.Obtain(ctx, key, ttl, r.opts)
	r.l = l
	return err
}

func (r *redislockLocker) Unlock(ctx context.Context) error { return r.l.Release(ctx) }
