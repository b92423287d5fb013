// Package fenced is the resource side of fencing tokens: it accepts a write only if its
// token (redlock's Lock.Fence) is at least the highest token already accepted, checked
// atomically with the write, so a holder that lost its lock while paused cannot
// overwrite the work of the holder that came after it.
//
// Guard protects a resource inside one process; Write and Read keep a value in Redis
// (a single node or any store of your choice: this is the resource, not the lock).
package fenced

import (
	"context"
	_ "embed" // the Lua write script
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrStale means a write was refused because a holder with a greater fencing token has
// already written: the writer's lock is no longer the current one.
var ErrStale = errors.New("fenced: stale fencing token")

// Guard admits actions in fencing-token order for a resource in this process. The zero
// value is ready to use; a Guard must not be copied after first use.
type Guard struct {
	mu      sync.Mutex
	highest uint64 // the highest token admitted so far
}

// Do runs fn if token is at least the highest token admitted so far, and records it;
// otherwise it returns ErrStale without running fn. fn runs while the Guard is held, so
// the check and fn's effect are atomic with respect to every other Do.
func (g *Guard) Do(token uint64, fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if token < g.highest {
		return fmt.Errorf("%w: %d, already admitted %d", ErrStale, token, g.highest)
	}
	g.highest = token
	return fn()
}

// Highest returns the highest token admitted so far.
func (g *Guard) Highest() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.highest
}

//go:embed write.lua
var writeLua string

var writeScript = redis.NewScript(writeLua)

// Write stores value under key (a hash with fields "value" and "fence") if token is at
// least the token of the last accepted write, in one atomic script; otherwise it returns
// ErrStale and leaves the stored value alone.
func Write(ctx context.Context, rdb redis.Scripter, key, value string, token uint64) error {
	res, err := writeScript.Run(ctx, rdb, []string{key}, value, token).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("fenced: write %q: %w", key, err)
	case res == 0:
		return fmt.Errorf("%w: write %q with token %d", ErrStale, key, token)
	case res != 1:
		return fmt.Errorf("fenced: write %q: unexpected reply %d", key, res)
	}
	return nil
}

// Read returns the value stored under key by Write and the token it was written with;
// both are zero when nothing was written.
func Read(ctx context.Context, rdb redis.Cmdable, key string) (value string, token uint64, err error) {
	fields, err := rdb.HMGet(ctx, key, "value", "fence").Result()
	if err != nil {
		return "", 0, fmt.Errorf("fenced: read %q: %w", key, err)
	}
	if fields[0] == nil {
		return "", 0, nil
	}
	value, _ = fields[0].(string)
	fence, _ := fields[1].(string)
	if token, err = strconv.ParseUint(fence, 10, 64); err != nil {
		return "", 0, fmt.Errorf("fenced: read %q: bad fence field %q", key, fence)
	}
	return value, token, nil
}
