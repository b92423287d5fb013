package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// watch is a Client's state for Options.Observer and Options.Logger.
type watch struct {
	panics atomic.Uint64 // Observe calls that panicked
	log    *logState     // nil without Options.Logger
}

// The Observer's view of a lock (Lock.watched), guarded by Lock.mu.
const (
	unwatched   uint8 = iota // not reported granted (no Observer, or a lock handed to nobody)
	watchedHeld              // an Acquire event reported it granted
	watchedOver              // its Ended event was reported
)

// ObserverPanics returns how many calls of Options.Observer panicked. Each panic was
// recovered, leaving the step's result as it was.
func (c *Client) ObserverPanics() uint64 { return c.watch.panics.Load() }

// observing reports whether the Client has an Observer.
func (c *Client) observing() bool { return c.opts.Observer != nil }

// roundObs is a round's record for the Observer, made only with one (round.obs is
// nil otherwise, so that a round costs no byte more without an Observer).
type roundObs struct {
	handoff bool       // the round is a handoff (handoff.lua)
	refused int        // fencing refusals in the rounds of the attempt that ended with this one
	base    time.Time  // when the round started, on Options.Clock: seen[i].at counts from it
	seen    []nodeSeen // seen[i]: node i's reply as gather received it (gather's goroutine only)
	// out is room for the Nodes of the first event that reports this round, made with
	// the round (capped at n, so that an Observer's append cannot write into the
	// round); lent says it was taken. A handoff round is reported twice, by the
	// Release and by the Acquire it hands the lock to, from two goroutines: the second
	// gets a slice of its own. seen is never written after gather, so both read it.
	// An Observer that keeps the first event's Nodes keeps the round's allocation
	// (about 1 KiB more than the replies alone), not the step's context: the round
	// lets go of that when its last call ends (round.finished).
	out  []NodeReply
	lent atomic.Bool
}

// nodeSeen is one node's reply as gather received it.
type nodeSeen struct {
	out outcome       // zero: no reply seen
	at  time.Duration // when, since roundObs.base
	err error
}

// observedRound3 and observedRound5 are a round and its record in one allocation, for
// up to 3 and up to 5 nodes: an observed round then costs one allocation, as an
// unobserved one does, and little room is left unused for the usual N.
type observedRound3 struct {
	round
	obs  roundObs
	seen [3]nodeSeen
	out  [3]NodeReply
}

type observedRound5 struct {
	round
	obs  roundObs
	seen [5]nodeSeen
	out  [5]NodeReply
}

// since returns how long ago t was, on Options.Clock. With the system clock it reads
// only the monotonic clock (time.Since), half the cost of time.Now, which reads the
// wall clock too: an Observer's record takes one such reading per reply.
func (c *Client) since(t time.Time) time.Duration {
	if _, ok := c.opts.Clock.(systemClock); ok {
		return time.Since(t)
	}
	return c.opts.Clock.Now().Sub(t)
}

// newRound returns an empty round for st to n nodes, with the Observer's record when
// the Client has an Observer.
func (c *Client) newRound(st step, n int) *round {
	if !c.observing() {
		return &round{}
	}
	var r *round
	var seen []nodeSeen
	var out []NodeReply
	switch {
	case n <= 3:
		o := &observedRound3{}
		r, seen, out = &o.round, o.seen[:n], o.out[:n:n]
		r.obs = &o.obs
	case n <= 5:
		o := &observedRound5{}
		r, seen, out = &o.round, o.seen[:n], o.out[:n:n]
		r.obs = &o.obs
	default:
		r, seen = &round{obs: &roundObs{}}, make([]nodeSeen, n)
	}
	r.obs.handoff, r.obs.base, r.obs.seen, r.obs.out = st.script == stepHandoff.script, c.opts.Clock.Now(), seen, out
	return r
}

// saw records node i's reply, received at since the round's start. r.obs is not nil.
func (r *round) saw(i int, at time.Duration, out outcome, err error) {
	r.obs.seen[i] = nodeSeen{out: out, at: at, err: err}
}

// timedOut records the nodes that had not answered when the node timeout fired, at
// since the round's start.
func (r *round) timedOut(answered []bool, at time.Duration) {
	for i, ok := range answered {
		if !ok {
			r.saw(i, at, outFailed, ErrNodeTimeout)
		}
	}
}

// noteRefused records on round r the fencing refusals of the attempt it ended.
func noteRefused(r *round, refused int) {
	if r != nil && r.obs != nil {
		r.obs.refused = refused
	}
}

// fenceRefusals returns the fencing refusals of the attempt that failed with e.
func (e *QuorumError) fenceRefusals() int {
	if e.round != nil && e.round.obs != nil {
		return e.round.obs.refused
	}
	return 0
}

// nodeReplies returns the replies of round r as the Observer sees them, for an event
// whose step began at start: a slice of r's own room the first time, else a new one.
func (c *Client) nodeReplies(r *round, start time.Time) []NodeReply {
	if r == nil || r.obs == nil {
		return nil
	}
	o := r.obs
	var out []NodeReply
	if o.out != nil && o.lent.CompareAndSwap(false, true) {
		out = o.out
	} else {
		out = make([]NodeReply, len(o.seen))
	}
	shift := o.base.Sub(start)
	for i, s := range o.seen {
		out[i].Node = c.nodes[i].name
		if s.out == 0 {
			continue
		}
		out[i].At = s.at + shift
		switch s.out {
		case outYes:
			out[i].Result = ResultYes
		case outNo:
			out[i].Result = ResultNo
		case outRefused:
			out[i].Result, out[i].Class = ResultNo, ClassFenceRefused
		default:
			out[i].Result, out[i].Class, out[i].Err = ResultFailed, errorClass(s.err), s.err
		}
	}
	return out
}

// asQuorumError returns err's *QuorumError, or nil. Its variable is declared only for
// a non-nil err: errors.As makes it escape, and an allocation per successful step would
// cost every Client with an Observer.
func asQuorumError(err error) *QuorumError {
	if err == nil {
		return nil
	}
	var qe *QuorumError
	if errors.As(err, &qe) {
		return qe
	}
	return nil
}

// outcomeOf classifies a step's error.
func outcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	qe := asQuorumError(err)
	switch {
	case errors.Is(err, ErrClosed):
		return OutcomeClosed
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case errors.Is(err, ErrFenceExhausted), errors.Is(err, ErrNodeConfig):
		return OutcomeInvalid
	case qe != nil:
		switch {
		case qe.ctxErr != nil:
			return OutcomeCanceled
		case qe.hopeless():
			return OutcomeInvalid
		case qe.kind == ErrNotAcquired:
			return OutcomeNotAcquired
		}
		return OutcomeUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	case errors.Is(err, ErrNotAcquired):
		return OutcomeNotAcquired
	case errors.Is(err, ErrUnavailable):
		return OutcomeUnavailable
	}
	return OutcomeInvalid // refused arguments
}

// emit hands e to the Observer, recovering a panic. k is the KeepAlive whose goroutine
// runs this call (a renewal's event, or the event of KeepAlive giving up), else nil:
// while Observe runs, a Release or stop that halts k does not wait for that goroutine,
// which would deadlock when Observe itself calls them.
func (c *Client) emit(ctx context.Context, e *Event, k *keeper) {
	if k != nil {
		k.observing.Store(true)
		defer k.observing.Store(false)
	}
	defer func() {
		if p := recover(); p != nil {
			n := c.watch.panics.Add(1)
			c.watch.log.observerPanic(p, n)
		}
	}()
	c.opts.Observer.Observe(ctx, *e)
}

// acquireObs is what Acquire and TryAcquire tell their event besides the result.
type acquireObs struct {
	key      string
	ttl      time.Duration
	start    time.Time
	attempts int
	refused  int // fencing refusals of the failed attempts before the last
}

// observeAcquire reports an Acquire or TryAcquire call that returned lock, err, and
// marks a granted lock as reported, so that its end is reported once.
func (c *Client) observeAcquire(ctx context.Context, a acquireObs, lock *Lock, err error) {
	e := Event{Op: OpAcquire, Key: a.key, TTL: a.ttl, Start: a.start, Outcome: outcomeOf(err),
		Err: err, Attempts: a.attempts, FenceRefusals: a.refused}
	e.Duration = c.since(a.start)
	qe := asQuorumError(err)
	switch {
	case lock != nil:
		r := lock.lastRound
		e.Nodes, e.Fence = c.nodeReplies(r, a.start), lock.Fence()
		if r != nil && r.obs != nil {
			e.Handoff = r.obs.handoff
			e.FenceRefusals += r.obs.refused
		}
		lock.mu.Lock()
		lock.watched = watchedHeld
		lock.mu.Unlock()
	case qe != nil:
		e.Nodes = c.nodeReplies(qe.round, a.start)
	}
	c.emit(ctx, &e, nil)
}

// tryObserved returns what TryAcquire's event says of its work: it made one attempt
// unless it returned neither a lock nor a *QuorumError.
func tryObserved(key string, ttl time.Duration, start time.Time, lock *Lock, err error) acquireObs {
	a := acquireObs{key: key, ttl: ttl, start: start}
	switch qe := asQuorumError(err); {
	case lock != nil:
		a.attempts = 1
	case qe != nil:
		a.attempts, a.refused = 1, qe.fenceRefusals()
	}
	return a
}

// stepObs is what Extend and Release tell their event besides the result.
type stepObs struct {
	start   time.Time
	ttl     time.Duration
	r       *round // the step's round, once sent
	handoff bool   // Release handed the lock to a waiter
	ends    bool   // Release: this call marked the lock released, and its event ends it
}

// observeStep reports an Extend or Release of l that returned err.
func (l *Lock) observeStep(ctx context.Context, op Op, ob *stepObs, err error) {
	c := l.c
	l.mu.Lock()
	watched := l.watched
	l.mu.Unlock()
	if watched == unwatched { // a lock handed to an Acquire that had given up
		return
	}
	var k *keeper // the KeepAlive that made this Extend, if one did
	if op == OpExtend {
		k = renewalKeeper(ctx)
	}
	e := Event{Op: op, Key: l.key, TTL: ob.ttl, Start: ob.start, Outcome: outcomeOf(err), Err: err,
		Nodes: c.nodeReplies(ob.r, ob.start), Fence: l.Fence(), Handoff: ob.handoff, Renewal: k != nil}
	e.Duration = c.since(ob.start)
	if e.TTL == 0 {
		_, e.TTL = l.deadline()
	}
	if op == OpRelease {
		e.Ended, e.Lost = ob.ends, ob.ends && e.Outcome == OutcomeLost
	} else {
		e.Ended, e.Lost = l.claimEnd(e.Outcome)
	}
	c.emit(ctx, &e, k)
}

// claimEnd decides whether an Extend or KeepAlive event with outcome ends l for the
// Observer (as a loss): it does if it found the lock lost, unless the lock's end was
// reported or claimed already (the first Release claims it: endsHere).
func (l *Lock) claimEnd(outcome Outcome) (ended, lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watched != watchedHeld || outcome != OutcomeLost || l.released {
		return false, false
	}
	l.watched = watchedOver
	return true, true
}

// endsHere is called by Release as it marks l released, holding l.mu: it reports
// whether this Release ends l for the Observer (the lock was reported granted and its
// end not yet reported), and claims that end, so that no other event reports it: a
// second Release, refused as "already released", does not.
func (l *Lock) endsHere() bool {
	if l.watched != watchedHeld {
		return false
	}
	l.watched = watchedOver
	return true
}

// keepAliveEnded reports the KeepAlive k of l that ended with cause: a loss is logged,
// and reported to the Observer unless an Extend already reported it. ctx is the
// context KeepAlive was given.
func (l *Lock) keepAliveEnded(ctx context.Context, k *keeper, cause error) {
	c := l.c
	if !errors.Is(cause, ErrLockLost) || (!c.observing() && c.watch.log == nil) {
		return
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return
	}
	c.watch.log.lockLost(l.key, cause)
	if !c.observing() {
		return
	}
	e := Event{Op: OpKeepAlive, Key: l.key, Start: c.opts.Clock.Now(), Outcome: OutcomeLost,
		Err: cause, Fence: l.Fence(), Renewal: true}
	_, e.TTL = l.deadline()
	if e.Ended, e.Lost = l.claimEnd(OutcomeLost); e.Ended {
		c.emit(ctx, &e, k)
	}
}

// renewalKey marks the context of KeepAlive's renewals (markRenewals).
type renewalKey struct{}

// renewalMark is the value under renewalKey: the exact context KeepAlive's Extends
// get, so that an Extend on a context merely derived from it is not taken for one,
// and the KeepAlive that makes them.
type renewalMark struct {
	ctx context.Context
	k   *keeper
}

// markRenewals returns the context for the renewals of KeepAlive k: ctx itself
// without an Observer, else ctx marked so that their events say Renewal.
func (c *Client) markRenewals(ctx context.Context, k *keeper) context.Context {
	if !c.observing() {
		return ctx
	}
	m := &renewalMark{k: k}
	m.ctx = context.WithValue(ctx, renewalKey{}, m)
	return m.ctx
}

// renewalKeeper returns the KeepAlive whose renewal context ctx is, or nil.
func renewalKeeper(ctx context.Context) *keeper {
	if m, ok := ctx.Value(renewalKey{}).(*renewalMark); ok && m.ctx == ctx {
		return m.k
	}
	return nil
}

// panicText formats a recovered panic value.
func panicText(p any) string { return fmt.Sprint(p) }
