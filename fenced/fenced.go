// Package fenced is the resource side of fencing tokens: it accepts a write only if its
// token (redlock's Lock.Fence) is at least the highest token already accepted, checked
// atomically with the write, so a holder that lost its lock while paused cannot
// overwrite the work of the holder that came after it.
//
// Guard protects a resource inside one process; Write, Read and Update keep a value in
// Redis (a single node or any store of your choice: this is the resource, not the
// lock). A read-modify-write must be one step: inside one Guard.Do, or one Update;
// Read followed by Write can lose an update.
//
// Token 0 is refused everywhere (ErrNoToken): it is what Lock.Fence returns when the
// Client was made without Options.Fencing.
package fenced

import (
	"context"
	"crypto/rand"
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

// ErrNoToken means a call was given the fencing token 0, which no fenced lock has:
// Lock.Fence returns 0 when the Client was made without Options.Fencing. Accepting it
// would switch the protection off silently, so Guard, Write and Update refuse it.
var ErrNoToken = errors.New("fenced: token 0: is Options.Fencing set?")

// ErrBadFence means the fence field stored with a value is not a decimal integer from 0
// to 2^64 − 1 written without leading zeros: the resource was changed by something
// other than this package, and no write can be judged against it.
var ErrBadFence = errors.New("fenced: stored fence is not a token")

// errNilContext refuses a call given a nil context before it reaches go-redis, which
// panics on one and leaves its pool counting a request that never ends.
var errNilContext = errors.New("nil context")

// Guard admits actions in fencing-token order for a resource in this process. The zero
// value is ready to use; a Guard must not be copied after first use.
type Guard struct {
	mu      sync.Mutex
	highest uint64 // the highest token admitted so far
}

// Do runs fn if token is at least the highest token admitted so far, and records it;
// otherwise it returns ErrStale without running fn. fn runs while the Guard is held, so
// the check and fn's effect are atomic with respect to every other Do: a
// read-modify-write done inside one Do cannot lose an update. Token 0 is refused with
// ErrNoToken.
func (g *Guard) Do(token uint64, fn func() error) error {
	if token == 0 {
		return ErrNoToken
	}
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

// The codes of write.lua's reply.
const (
	written   = 1
	stale     = 0
	changed   = 2
	malformed = -1
)

// Write stores value under key (a hash with fields "value" and "fence") if token is at
// least the token of the last accepted write, in one atomic script; otherwise it returns
// ErrStale and leaves the stored value alone. Tokens are compared exactly over the whole
// uint64 range. Token 0 is refused with ErrNoToken, a stored fence field that is not a
// token with ErrBadFence. A hash without a fence field (a value seeded with HSET) counts
// as fenced with 0.
//
// Write alone does not make a read-modify-write safe: the value read with Read may be
// replaced by another holder's write before this Write, which then stores a result
// computed from old data, with a token that passes the fence. Use Update for that. After a network error or a timeout
// the outcome is unknown: the write may have been applied, or land later.
func Write(ctx context.Context, rdb redis.Scripter, key, value string, token uint64) error {
	if ctx == nil {
		return failure("write", key, errNilContext)
	}
	if token == 0 {
		return failure("write", key, ErrNoToken)
	}
	code, last, err := write(ctx, rdb, key, []any{value, token})
	if err != nil {
		return failure("write", key, err)
	}
	switch code {
	case written:
		return nil
	case stale:
		return fmt.Errorf("%w: write %q with token %d, already accepted %s", ErrStale, key, token, last)
	}
	return fmt.Errorf("fenced: write %q: unexpected reply %d", key, code)
}

// write runs write.lua and returns its code and the fence stored before the call.
func write(ctx context.Context, rdb redis.Scripter, key string, args []any) (code int64, last string, err error) {
	res, err := writeScript.Run(ctx, rdb, []string{key}, args...).Slice()
	if err != nil {
		return 0, "", err
	}
	if len(res) == 2 {
		code, ok1 := res[0].(int64)
		last, ok2 := res[1].(string)
		if ok1 && ok2 {
			if code == malformed {
				return 0, "", &badFence{last}
			}
			return code, last, nil
		}
	}
	return 0, "", fmt.Errorf("unexpected reply %v", res)
}

// Update is a fenced read-modify-write of the value under key (the hash Write keeps):
// it reads the value, calls fn with it ("" when nothing is stored), and stores fn's
// result with token in one atomic script that writes only if token is at least the
// stored token and the hash is still exactly as it was read. If another writer changed
// it in between, Update reads again and calls fn again, for as long as ctx allows: each
// such conflict means another write was applied, so the writers together always make
// progress, but busy writers with a token at least ours (workers of one holder) can
// overtake one Update many times. If the token has become stale, it returns ErrStale
// and writes nothing. It returns the value it stored.
//
// What this guarantees: every Update that returns nil was applied to the value stored
// at the moment of its write, as if the read and the write were one step, so no
// update is lost between two holders (with Read then Write, a holder that read before
// another's write overwrites it); and no write with a token below the highest
// accepted is ever stored. What it does not: a holder whose lock expired can still
// update while no newer holder has written (the resource cannot know of a lock it has
// not seen); fn may run more than once and must have no other effect than computing
// the new value. An error from fn ends Update without writing and is returned
// wrapped. Token 0 is refused with ErrNoToken, a stored fence field that is not a token
// with ErrBadFence. Each write also stores a random id of the attempt in the hash's
// field "update_id", so that a copy go-redis sends again after a lost reply is recognised
// as applied (unless another Update was applied in between). After a network error or
// a timeout the outcome is unknown: the write may have been applied, or land later
// (only if the hash is then again exactly as read).
func Update(ctx context.Context, rdb redis.Cmdable, key string, token uint64, fn func(old string) (string, error)) (string, error) {
	if ctx == nil {
		return "", failure("update", key, errNilContext)
	}
	if token == 0 {
		return "", failure("update", key, ErrNoToken)
	}
	for {
		s, err := read(ctx, rdb, key)
		if err != nil {
			return "", failure("update", key, err)
		}
		if token < s.token {
			return "", fmt.Errorf("%w: update %q with token %d, already accepted %d", ErrStale, key, token, s.token)
		}
		value, err := fn(s.value)
		if err != nil {
			return "", failure("update", key, err)
		}
		present := "0"
		if s.present {
			present = "1"
		}
		// A fresh id per attempt: a copy of this call that go-redis sends again after
		// a lost reply is then answered "written", not "changed" (see write.lua).
		code, last, err := write(ctx, rdb, key, []any{value, token, present, s.value, s.fence, rand.Text()})
		if err != nil {
			return "", failure("update", key, err)
		}
		switch code {
		case written:
			return value, nil
		case stale:
			return "", fmt.Errorf("%w: update %q with token %d, already accepted %s", ErrStale, key, token, last)
		case changed:
			if err := ctx.Err(); err != nil {
				return "", failure("update", key, err)
			}
			continue
		}
		return "", fmt.Errorf("fenced: update %q: unexpected reply %d", key, code)
	}
}

// Read returns the value stored under key by Write and the token it was written with;
// both are zero when nothing was written, and the token is 0 for a value seeded without
// a fence field. A fence field that is not a token is an error (ErrBadFence), not 0.
func Read(ctx context.Context, rdb redis.Cmdable, key string) (value string, token uint64, err error) {
	if ctx == nil {
		return "", 0, failure("read", key, errNilContext)
	}
	s, err := read(ctx, rdb, key)
	if err != nil {
		return "", 0, failure("read", key, err)
	}
	return s.value, s.token, nil
}

// state is a fenced hash as read, exactly: Update writes only if it is unchanged.
type state struct {
	present bool   // the value field exists
	value   string // the value field
	fence   string // the fence field, "" when absent
	token   uint64 // the fence field's token (0 when absent)
}

// read fetches the fields of a fenced hash.
func read(ctx context.Context, rdb redis.Cmdable, key string) (state, error) {
	fields, err := rdb.HMGet(ctx, key, "value", "fence").Result()
	if err != nil {
		return state{}, err
	}
	var s state
	s.value, s.present = fields[0].(string)
	if s.fence, _ = fields[1].(string); fields[1] != nil {
		if s.token, err = parseToken(s.fence); err != nil {
			return state{}, err
		}
	}
	return s, nil
}

// parseToken parses a stored fence field as write.lua accepts it: a decimal integer
// from 0 to 2^64 − 1, digits only, without leading zeros.
func parseToken(s string) (uint64, error) {
	bad := s == "" || (len(s) > 1 && s[0] == '0')
	for i := 0; i < len(s) && !bad; i++ {
		bad = s[i] < '0' || s[i] > '9'
	}
	if !bad {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, &badFence{s}
}

// badFence is a stored fence field that is not a token; failure reports it as
// ErrBadFence.
type badFence struct{ field string }

func (e *badFence) Error() string { return fmt.Sprintf("fence field %q", short(e.field)) }

// failure reports err from op on key. The package's own errors name the package
// first, so that their text does not repeat it.
func failure(op, key string, err error) error {
	var bad *badFence
	switch {
	case errors.Is(err, ErrNoToken):
		return fmt.Errorf("%w (%s %q)", err, op, key)
	case errors.As(err, &bad):
		return fmt.Errorf("%w: %s %q: fence field %q", ErrBadFence, op, key, short(bad.field))
	}
	return fmt.Errorf("fenced: %s %q: %w", op, key, err)
}

// short returns s, cut to a length fit for an error message.
func short(s string) string {
	const limit = 40
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
