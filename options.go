package redlock

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults applied by New to the zero fields of Options.
const (
	// DefaultDriftFactor is the share of the TTL set aside for clock drift.
	DefaultDriftFactor = 0.01

	// DefaultNodeTimeout bounds how long one step waits for any single node. It is the
	// upper end of the 5–50 ms the Redlock description gives for a 10 s TTL: long enough
	// for a round trip inside a data centre (with a fresh TCP connection), short enough
	// that a dead or paused node costs a waiter little and shrinks the validity little.
	// Raise it for links with round trips above ~10 ms or for TLS connection set-up.
	DefaultNodeTimeout = 50 * time.Millisecond
)

// DefaultRetryDelay is the retry policy used when Options.RetryDelay is nil.
var DefaultRetryDelay = ExponentialJitter(10*time.Millisecond, 200*time.Millisecond)

// Options configures a Client. The zero value means every default; each field says its
// own. New validates the options and returns an error for values it cannot use.
type Options struct {
	// DriftFactor is the share of the TTL set aside for the clocks of the nodes and this
	// process running at different rates. Each step's validity is
	// ttl − elapsed − (ttl × DriftFactor + 2 ms). Zero means DefaultDriftFactor (0.01);
	// it must lie in [0, 1).
	DriftFactor float64

	// NodeTimeout bounds how long one step (acquire, extend, release) waits for a node;
	// a node that has not answered by then counts as failed for that step. Zero means
	// DefaultNodeTimeout (50 ms). Keep it small next to the TTLs you use: the time spent
	// waiting is subtracted from the validity. Clients made by NewFromURLs also get
	// dial, read and write timeouts of 10 × NodeTimeout (unless the URL sets its own),
	// which bound how long Close waits for a stalled node.
	NodeTimeout time.Duration

	// RetryDelay returns how long Acquire waits after failed attempt number attempt
	// (1, 2, ...) before the next one. It is called concurrently and must keep no state.
	// Nil means DefaultRetryDelay: ExponentialJitter(10ms, 200ms).
	RetryDelay func(attempt int) time.Duration

	// MaxAttempts bounds the attempts of one Acquire call. Zero means no bound: Acquire
	// retries until its context ends. An attempt made only because a node confirmed
	// the key's new subscription (a check for a release announced before it, at most
	// one per node) does not count. With Fair, a waiter also attempts each time it
	// renews its queue entry (every FairLease/3 at the latest, whatever RetryDelay
	// says), and those attempts count.
	MaxAttempts int

	// Clock is the source of time. Nil means the system clock.
	Clock Clock

	// Fencing makes every Acquire also obtain a fencing token (Lock.Fence) that is
	// strictly greater than the token of every lock on the same key acquired before this
	// one started, so a resource can reject writes from a holder that lost the lock.
	// Each key gets a counter key without TTL on every node, named in KEY's hash slot
	// (KEY:fence when KEY has a hash tag) and on a plain node also kept as KEY:fence;
	// FenceKeys gives the names. Off by default: the
	// guarantee needs durable counters (appendonly yes, appendfsync always), no
	// failover behind a node, maxmemory-policy noeviction and a fixed set of nodes; see
	// docs/safety.md. Without it Lock.Fence is 0, which package fenced refuses
	// (fenced.ErrNoToken) rather than let a forgotten setting switch the fence off.
	Fencing bool

	// Fair makes Acquire grant the lock in arrival order across all Clients and
	// processes that use Fair on the key: each waiter is queued on every node under one
	// ticket, and a node grants the key only to the head of its queue (see
	// docs/design.md, "Fair locks across processes"). TryAcquire then fails with
	// ErrNotAcquired while others are queued, even if the key is free. With Fencing,
	// each grant also gets a fencing token, with the guarantees of a plain fenced
	// lock. Clients with and without Fair must not share a key: those without it
	// ignore the queue.
	Fair bool

	// FairLease is how long a waiter's queue entry lives without renewal (a waiter
	// renews it every third of it): a waiter that died blocks the queue for at most
	// about this long. Zero means DefaultFairLease (1 s), or 10 × NodeTimeout if that
	// is more; it must be whole milliseconds and at least 10 × NodeTimeout.
	FairLease time.Duration

	// Observer, when not nil, hears of every Acquire, TryAcquire, Extend and Release
	// and of KeepAlive's renewals (see Observer). Nil, or a nil pointer of a type
	// that implements Observer, means none, at no cost.
	Observer Observer

	// Logger, when not nil, gets a line for a lock lost while kept alive, a node
	// that starts failing or recovers (once per change, not per call), a problem
	// CheckNodes finds, and a panic of the Observer; at most one line per kind and
	// node each second, the next one counting those left out. Nodes appear by their
	// names, which never show a password. Nil means silent.
	Logger *slog.Logger

	// LogKeys makes Logger's lines name lock keys. By default they give a short hash
	// of the key instead (key_hash), since keys may carry user data.
	LogKeys bool
}

// withDefaults validates o and returns it with defaults filled in.
func (o Options) withDefaults() (Options, error) {
	switch {
	case !(o.DriftFactor >= 0 && o.DriftFactor < 1): // also NaN
		return o, fmt.Errorf("redlock: DriftFactor %v outside [0, 1)", o.DriftFactor)
	case o.NodeTimeout < 0:
		return o, fmt.Errorf("redlock: negative NodeTimeout %v", o.NodeTimeout)
	case o.MaxAttempts < 0:
		return o, fmt.Errorf("redlock: negative MaxAttempts %d", o.MaxAttempts)
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = DefaultNodeTimeout
	}
	if o.RetryDelay == nil {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if err := o.fairDefaults(); err != nil {
		return o, err
	}
	if o.Observer != nil && isNilPointer(o.Observer) {
		// A nil *T in the interface: its Observe would most likely panic on every
		// step (recovered, but paid for and logged). It means none, as nil does.
		o.Observer = nil
	}
	return o, nil
}

// checkTTL returns an error if ttl cannot give a lock any validity: TTLs are sent to
// Redis in whole milliseconds, and the drift allowance must leave something over.
func (o *Options) checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl%time.Millisecond != 0 {
		return fmt.Errorf("redlock: ttl %v must be a positive whole number of milliseconds", ttl)
	}
	if d := drift(ttl, o.DriftFactor); ttl <= d {
		return fmt.Errorf("redlock: ttl %v leaves no validity after the drift allowance %v", ttl, d)
	}
	return nil
}

// KeepAlive's limits, as multiples of Options.NodeTimeout.
const (
	// minTTLTimeouts: a kept-alive TTL is at least this many node timeouts, so that a
	// renewal step, which may take a node timeout, is a small part of each period.
	minTTLTimeouts = 20
	// minValidityTimeouts: the validity one renewal can give is at least this many node
	// timeouts, so that two renewals a third of it apart, each allowed a node timeout,
	// start before the work must stop (a tenth of it before the end).
	minValidityTimeouts = 10
)

// CheckKeepAliveTTL reports whether Lock.KeepAlive (and so Client.Do) can keep a lock
// with this ttl renewed under these options, and if not, why, naming the numbers. It
// returns nil when ttl is a valid TTL (a positive whole number of milliseconds) that
// meets both rules:
//   - ttl ≥ 20 × NodeTimeout (1 s with the defaults);
//   - the validity one renewal can give at best, ttl − (ttl × DriftFactor + 2 ms), is
//     at least 10 × NodeTimeout. With the default DriftFactor the first rule implies
//     this one; a large DriftFactor (0.95 of a 10 s TTL leaves 498 ms) can break it.
//
// Otherwise the error wraps ErrTTLTooShort (or describes the invalid TTL or options).
// Zero fields of o mean their defaults, as in New.
func (o Options) CheckKeepAliveTTL(ttl time.Duration) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	return o.checkKeepAlive(ttl)
}

// checkKeepAlive is CheckKeepAliveTTL for options with defaults applied.
func (o *Options) checkKeepAlive(ttl time.Duration) error {
	if err := o.checkTTL(ttl); err != nil {
		return err
	}
	if floor := timeouts(minTTLTimeouts, o.NodeTimeout); ttl < floor {
		return fmt.Errorf("%w: %v is below %d × NodeTimeout (%v) = %v",
			ErrTTLTooShort, ttl, minTTLTimeouts, o.NodeTimeout, floor)
	}
	if v, floor := bestValidity(ttl, o.DriftFactor), timeouts(minValidityTimeouts, o.NodeTimeout); v < floor {
		return fmt.Errorf("%w: %v with DriftFactor %v gives a renewal at most %v of validity, below %d × NodeTimeout (%v) = %v",
			ErrTTLTooShort, ttl, o.DriftFactor, v, minValidityTimeouts, o.NodeTimeout, floor)
	}
	return nil
}

// timeouts returns n × d, or the largest Duration where that would overflow.
func timeouts(n int64, d time.Duration) time.Duration {
	if d > math.MaxInt64/time.Duration(n) {
		return math.MaxInt64
	}
	return time.Duration(n) * d
}

// errEmptyKey is returned for an empty lock key.
var errEmptyKey = errors.New("redlock: empty key")

// nilContextError is the error of a call given a nil context: bad input, like an empty
// key. It is checked first, before the call registers anything with the Client or
// marks a lock, so that it neither panics nor leaves a step that Close would wait for.
func nilContextError(op, key string) error {
	return fmt.Errorf("redlock: %s %q: nil context", op, key)
}

// ExponentialJitter returns a stateless retry policy: after attempt a the delay is drawn
// uniformly from [d/2, d], where d = min·2^(a−1) capped at max. The randomness spreads
// out clients that missed a majority together, so one of them wins the next round.
// A min ≤ 0 is taken as 1 ms, and a max below min as min.
func ExponentialJitter(min, max time.Duration) func(attempt int) time.Duration {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return func(attempt int) time.Duration {
		d := min
		for i := 1; i < attempt && d < max; i++ {
			if d > max/2 {
				d = max
				break
			}
			d *= 2
		}
		return d/2 + rand.N(d/2+1)
	}
}
