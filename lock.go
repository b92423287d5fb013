package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lock is a held lock: returned only by a successful Acquire, it is the proof of
// ownership. Its methods are safe for concurrent use; Extend and Release run one at a
// time.
type Lock struct {
	c     *Client
	key   string
	token string // an owner's lock: its hold's id
	owner string // the owner's head (ownerHead), or "" for a lock without owner
	fence int64  // with Options.Fencing, else 0
	// fairID, with Options.Fair, is the id of the queue entry that Release removes; ""
	// for a lock that never queued.
	fairID string

	op        sync.Mutex // serializes Extend and Release; guards lastRound; taken first (see the lock order above Client)
	lastRound *round     // this lock's latest round: its next call to a node goes after that one
	// won is the acquire round that granted a lock without owner in a Client without
	// Options.Fair or Options.Fencing; nil for other locks. While it is lastRound, Release drops its
	// calls not sent yet (skipUnsent).
	won *round
	// placed: granted to an Acquire that an earlier attempt of had been refused, so
	// its Client may have a place in the key's line (line.go), which Release takes
	// out on the line node even if the winning call there was never sent. Set before
	// the lock is returned.
	placed bool

	mu         sync.Mutex    // guards the fields below; innermost (see the lock order above Client)
	ttl        time.Duration // of the latest successful Acquire or Extend
	until      time.Time     // the validity proven so far; lowered when a loss is proven
	lost       bool          // a loss was proven: until never moves forward again
	released   bool          // Release was called: no step or KeepAlive may start
	watched    uint8         // Options.Observer: unwatched, watchedHeld or watchedOver (in released's padding)
	releasedAt time.Time     // when Release was called: Until reports no later time
	keeper     *keeper       // the running KeepAlive, or nil
	// handTTL is the TTL a fair Acquire asked for when the nodes handed the lock over
	// with less (fairWaiter.handed), until an Extend succeeds: KeepAlive extends to it
	// first, and so does finishHand. Zero for other locks.
	handTTL time.Duration
	// handEnd, while finishHand waits to extend a handed lock, is closed when that has
	// nothing left to do (endHand): the lock was released or extended first. Without it
	// every hand-over left a goroutine and a timer behind for half the validity.
	handEnd chan struct{}
}

// endHand ends finishHand's wait for l, if any. Callers hold l.mu.
func (l *Lock) endHand() {
	if l.handEnd != nil {
		close(l.handEnd)
		l.handEnd = nil
	}
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// Token returns the random value that marks this holder's keys on the nodes (the token
// of the attempt that won).
func (l *Lock) Token() string { return l.token }

// Fence returns the lock's fencing token when the Client has Options.Fencing, else 0.
// For one key, a lock whose Acquire started after another lock's Acquire returned has a
// strictly greater token (under the assumptions in docs/safety.md), whatever the clocks,
// pauses and delays. Give it to the protected resource with every write; the resource
// must reject a write whose token is below the highest it has accepted (package fenced
// does, and refuses 0, the token of a Client without Options.Fencing). A token is at
// least 1 and at most 2^63 − 1; past that Acquire fails with ErrFenceExhausted.
func (l *Lock) Fence() uint64 { return uint64(l.fence) }

// Until returns when the lock's validity ends, on the local monotonic clock: up to then,
// no other client can hold it (under the assumptions in the package documentation).
// Once Release has been called, Until is no later than that call; once Extend has
// proven the lock lost (its token gone from too many nodes), no later than that Extend;
// once KeepAlive found the machine suspended, no later than that moment. For an
// owner's hold (WithOwner) it also moves with the Extend of another hold of the same
// owner on the key in this Client, when that Extend proved this hold listed too.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return earlier(l.until, l.releasedAt)
	}
	return l.until
}

// lose records that the lock can no longer be trusted to be held from at on: Until
// reports no later time, and no later Extend can move it forward again.
func (l *Lock) lose(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(at)
}

// loseLocked is lose for a caller that holds l.mu.
func (l *Lock) loseLocked(at time.Time) {
	l.until, l.lost = earlier(l.until, at), true
}

// validUntil returns the validity proven so far, ignoring a Release in progress.
func (l *Lock) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend sets the lock's TTL to ttl on every node that still holds its token (a node's
// TTL is never shortened). It succeeds only if a majority did so and validity remains
// (ttl − elapsed − drift > 0); Until then moves to the new end if that is later. It fails
// with ErrLockLost only when the lock is known to be lost: it was released, its
// validity ran out, or too many nodes answered that its token is gone (Until then moves
// back to the start of this Extend). When the new validity could not be proven (too
// many nodes failed or were slow, or the majority came after ttl − drift) it fails with
// ErrUnavailable and leaves Until as it was: the lock is still held until then, since
// no node's TTL got shorter. A failed Extend never releases the lock. For an owner's
// hold, the Until of the owner's other holds on the key in this Client moves to the new
// end too, but only if a majority of the nodes listed each of them as well.
//
// After a successful Extend has proved that a majority still holds the lock, the nodes
// that did not say yes (restarted empty, failed, or still held by a stale key that has
// since expired) are healed: the acquire script runs there with the lock's own token,
// so a node that lost the key gets it back (with Options.Fencing only where the node's
// counter is not above the lock's fencing token). Healing is best effort and does not
// delay Extend's result. A lock that lost its majority is never brought back: Extend
// never re-creates a key unless the same step proved the lock still held.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ctx == nil {
		return nilContextError("extend", l.key)
	}
	return l.extend(ctx, ttl, nil)
}

// errExtendSkipped is extend's answer when its guard said no: nothing was sent.
var errExtendSkipped = errors.New("redlock: extend skipped")

// extend is Extend. A guard, if not nil, is asked (with l.mu held, and the time the
// step starts) once the step holds l.op, so that nothing else runs on the lock: false
// skips the step, which then sends nothing, reports no Observer event and returns
// errExtendSkipped. finishHand's tries need it: what they checked before can change
// while they wait for l.op (found in review: a KeepAlive begun meanwhile, or the
// caller's own Extend).
func (l *Lock) extend(ctx context.Context, ttl time.Duration, guard func(now time.Time) bool) (err error) {
	c := l.c
	var ob stepObs
	if c.observing() {
		ob.start, ob.ttl = c.opts.Clock.Now(), ttl
		defer func() {
			if err != errExtendSkipped {
				l.observeStep(ctx, OpExtend, &ob, err)
			}
		}()
	}
	if err := c.opts.checkTTL(ttl); err != nil {
		return err
	}
	if err := l.begin("extend"); err != nil {
		return err
	}
	defer l.end()
	start := c.opts.Clock.Now()
	if err := l.checkGuarded("extend", start, guard); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return c.quorumError("extend", l.key, newTally(len(c.nodes)), nil, ErrUnavailable, err)
	}
	req, others := l.extendStep(ttl, start)
	r := c.start(ctx, req)
	l.lastRound, ob.r = r, r
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	v := validity(ttl, now.Sub(start), c.opts.DriftFactor)
	until := now.Add(v)
	l.mu.Lock()
	if ctxErr == nil && t.won() && v > 0 && !l.lost {
		// The majority that said yes holds our key at least until the new end; the
		// majority behind the old Until still holds it until then, since no step ever
		// shortens a TTL. So the lock is valid until the later of the two.
		l.until, l.ttl = later(l.until, until), ttl
		l.handTTL = 0 // the caller chose the TTL now (KeepAlive, finishHand: see handTTL)
		l.endHand()
		released := l.released
		l.mu.Unlock()
		l.proven(ctx, r, t, ttl, until, others, released)
		return nil
	}
	if l.lost { // proven lost while this step ran (KeepAlive found a suspension)
		l.mu.Unlock()
		return lostError("extend", l.key, "lost while the extend ran")
	}
	defer l.mu.Unlock()
	qe := c.quorumError("extend", l.key, t, errs, l.extendFailed(t, start, now), ctxErr)
	qe.Late = t.won()
	return qe
}

// extendFailed returns the kind of a failed Extend's error (tally t, begun at start,
// ended at now): ErrLockLost when too many nodes answered that our token is gone
// (proof that the lock is lost, whatever the local validity said: it is marked lost)
// or when its validity is over, else ErrUnavailable. Callers hold l.mu.
func (l *Lock) extendFailed(t tally, start, now time.Time) error {
	switch {
	case t.contended():
		l.loseLocked(start)
		return ErrLockLost
	case !now.Before(l.until):
		return ErrLockLost
	}
	return ErrUnavailable
}

// proven follows an Extend whose round r (tally t) proved the lock held until until:
// unless the lock was released meanwhile (a Release waiting for this step deletes the
// keys next) the nodes that lack the hold are healed, and the owner's other holds that
// r asked about may share that validity (shared). The caller holds l.op only.
func (l *Lock) proven(ctx context.Context, r *round, t tally, ttl time.Duration, until time.Time, others []*Lock, released bool) {
	if !released {
		l.heal(ctx, r, ttl)
	}
	l.shared(r, t, others, until)
}

// heal sends the acquire script, with the lock's token (and fencing token), to the nodes
// that answered no or failed in the extend round r, which has just proved that a
// majority holds the lock. A node whose extend reply was still out is looked at once
// that call returns. Nothing waits for the replies. The caller holds l.op.
func (l *Lock) heal(ctx context.Context, r *round, ttl time.Duration) {
	req := acquireStep(l.key, l.owner, l.token, ttl, l.fence)
	req.after, req.need = r, r.lacks
	l.lastRound = l.c.start(context.WithoutCancel(ctx), req)
}

// Release deletes the lock on every node that still holds its token, each after the
// lock's earlier calls to that node have returned; a node that the lock's acquire had
// not been sent to yet (queued behind a slow or unreachable node) gets neither, and
// counts as a node where another token holds the key. It
// returns as soon as the outcome is decided (the remaining deletes finish in the
// background) and waits at most the node timeout. It returns nil if, within the lock's validity, a majority of nodes deleted
// its token or no longer had it (a node whose key is absent holds nothing of ours: a
// copy of the call that go-redis re-sent after a lost reply finds the key already
// deleted; Release cannot tell that from a node that lost the key, which Extend reports
// as a loss); ErrLockLost if the validity had run out, the lock was already released, or
// too many nodes answered that another token holds the key; ErrUnavailable if too many
// nodes failed (their keys expire after the TTL). If ctx ends first, Release returns its
// error; the deletes are still sent. Release marks the lock released at once: Until
// reports no later time from then on, a KeepAlive running is stopped (its context ends
// before Release returns) and none can start. The lock cannot be used after Release,
// whatever it returns.
func (l *Lock) Release(ctx context.Context) (err error) {
	if ctx == nil { // before markReleased: the lock stays held, and can be released
		return nilContextError("release", l.key)
	}
	c := l.c
	var ob stepObs
	if c.observing() {
		ob.start = c.opts.Clock.Now()
		defer func() { l.observeStep(ctx, OpRelease, &ob, err) }()
	}
	if err := l.markReleased(&ob.ends); err != nil {
		return err
	}
	if err := l.begin("release"); err != nil {
		return err
	}
	defer l.end()
	// An Extend that ran up to now may have moved the validity on.
	expired := !c.opts.Clock.Now().Before(l.validUntil())

	var o *offer
	capped := false
	args := []any{l.token}
	if !expired && !c.opts.Fencing && l.owner == "" {
		if o, capped = c.queues.claim(l.key); o != nil {
			handed, token := l.handoff(ctx, o)
			if handed {
				ob.r, ob.handoff = l.lastRound, true
				return nil
			}
			if token != "" { // the failed handoff's token goes with ours
				args = append(args, token)
			}
		}
	}
	start := c.opts.Clock.Now()
	r := c.start(ctx, l.skipUnsent(l.releaseRequest(args)))
	l.lastRound, ob.r = r, r
	if o != nil {
		// The handoff failed: the waiter attempts by itself, and its calls queue
		// behind this release on every node, so they do not meet our stale keys.
		o.got <- nil
	}
	t, errs, ctxErr := c.gather(ctx, r, true)
	end := c.opts.Clock.Now()
	won := ctxErr == nil && t.won() && !expired
	l.wakeAfterRelease(r, t, won, capped, end.Sub(start), end)
	if won {
		return nil
	}
	kind := ErrUnavailable
	if expired || t.contended() {
		kind = ErrLockLost
	}
	qe := c.quorumError("release", l.key, t, errs, kind, ctxErr)
	qe.Late = expired
	return qe
}

// wakeAfterRelease wakes this Client's waiters for the key after Release's round r,
// whose replies read so far are t, which took took and ended at end
// (queues.released), and announces the release to the other Clients once a majority
// deleted the key (Client.announceRelease; for a plain lock the key's line node may
// have announced it already, as release.lua deleted the key there). won: Release
// returns nil.
func (l *Lock) wakeAfterRelease(r *round, t tally, won, capped bool, took time.Duration, end time.Time) {
	c := l.c
	// A new Acquire here lets woken Clients go first (yieldFor), and after a capped run
	// of handoffs this Client's head steps back (courtesyFor).
	heard := t.yesHigh // release.lua's largest yes: 1 + the subscribers on one node
	c.queues.released(l, courtesyFor(capped, heard, took), heard, yieldFor(t.quorumIn, c.opts.NodeTimeout), end)
	if !c.opts.Fair {
		c.announceRelease(l.key, l.token, r, t, r.leadPublishes, won)
	}
}

// releaseRequest is Release's step with the tokens args: release.lua, the owner's
// reentrant_release.lua, or with Options.Fair fair_release.lua (with or without
// owner), which takes out the lock's queue entry if it has one and tells the head of
// the queue (a lock TryAcquire took with nobody queued has no entry, but waiters may
// have queued behind it); it goes after the lock's latest round and must land.
func (l *Lock) releaseRequest(args []any) stepRequest {
	req := releaseStep(l.key, l.owner, args...)
	if l.c.opts.Fair {
		req = l.fairRelease(req)
	} else if l.owner == "" {
		req = l.c.lineRelease(req)
	}
	req.after, req.mustLand = l.lastRound, true
	return req
}

// skipUnsent lets release req skip the nodes that never got the lock's token: when
// the round that won the lock is still its latest (no Extend, heal or handoff since),
// the calls of that round that a node's sender has not sent yet (queued behind a slow
// or unreachable node) are dropped, and those nodes get no release. Each counts as a
// "no", as if another token held the key there: it never held ours, and whether
// another token does is not asked, so Release can only report a loss more readily
// than asking would, never return nil where asking would have found the lock lost
// (TestReleaseSkipsUnsentKeepsALossSeen). Without it every lock granted while a node was
// unreachable left an acquire and a release queued for that node, sent one batch, so
// one node timeout, apart: Close waited them all out, and the acquires reached the
// node once it answered again. The caller holds l.op.
func (l *Lock) skipUnsent(req stepRequest) stepRequest {
	if l.won == nil || l.lastRound != l.won {
		return req
	}
	l.won.abandoned.Store(true) // before the release is queued: its calls park behind these
	req.need = l.won.sent
	if req.lineArgs != nil && l.placed {
		// The key's line node gets the release anyway: it takes this Client's place
		// in the key's line out, which an earlier refused attempt took there (it
		// finds no key of ours, so it deletes nothing). Only then: a node that does
		// not answer would otherwise get a call queued for every release.
		sent, line := l.won.sent, l.c.lineNode(l.key)
		req.need = func(i int) bool { return i == line || sent(i) }
	}
	l.won = nil // used once: the lock is over
	return req
}

// markReleased marks the lock released first thing in Release, so that no KeepAlive
// can start from here on, then stops the running one (before Release takes l.op: the
// keeper may be inside Extend). It fails if Release was called before. It sets *ends
// when this Release's event ends the lock for the Observer (endsHere).
func (l *Lock) markReleased(ends *bool) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return lostError("release", l.key, "already released")
	}
	l.released, l.releasedAt = true, l.c.opts.Clock.Now()
	l.endHand()
	*ends = l.endsHere()
	k := l.keeper
	l.mu.Unlock()
	if k != nil {
		k.halt(errReleased)
	}
	return nil
}

// begin starts a step on the lock: one at a time (l.op), and registered with the
// Client so that Close waits for it. After a nil error, end finishes it.
func (l *Lock) begin(op string) error {
	l.op.Lock()
	if !l.c.enter() {
		l.op.Unlock()
		return fmt.Errorf("redlock: %s %q: %w", op, l.key, ErrClosed)
	}
	return nil
}

// end finishes a step started by begin.
func (l *Lock) end() {
	l.c.inFlight.Done()
	l.op.Unlock()
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// check returns ErrLockLost if the lock was released or its validity is over at now.
func (l *Lock) check(op string, now time.Time) error {
	return l.checkGuarded(op, now, nil)
}

// checkGuarded is check after guard(now), if guard is not nil, under the same hold of
// l.mu: errExtendSkipped if the guard says no (see extend), first, so that a skipped
// try reports nothing, also on a lock released or lost meanwhile (found in review).
func (l *Lock) checkGuarded(op string, now time.Time, guard func(time.Time) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if guard != nil && !guard(now) {
		return errExtendSkipped
	}
	if l.released {
		return lostError(op, l.key, "already released")
	}
	if l.lost {
		return lostError(op, l.key, "lost earlier")
	}
	if !now.Before(l.until) {
		return lostError(op, l.key, fmt.Sprintf("validity ran out %v ago", now.Sub(l.until).Round(time.Millisecond)))
	}
	return nil
}
