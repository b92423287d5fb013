package redlock

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-multierror"
)

// Acquire takes the lock named key for ttl, retrying after each failed attempt until it
// succeeds, ctx ends, or Options.MaxAttempts attempts have failed. A retry starts when
// the lock is released: at once when this Client released it (often by a direct
// handoff), after a short random pause when a majority of nodes announced the
// release (see the package documentation); otherwise after the delay
// Options.RetryDelay gives; an attempt that lost a race with other Clients' attempts
// (some nodes said yes) is retried once after a few round trips. Acquires of one
// Client for the same key wait their turn in arrival order, and an Acquire right after
// this Client released the key while other Clients listened for it lets them go first
// (it waits about four round trips plus 1 ms, at most Options.NodeTimeout).
// The returned Lock is held until Lock.Until, which is at most ttl − drift after the
// attempt started. On failure it returns a *QuorumError matching ErrNotAcquired (the key
// is held elsewhere, or ctx ended before any attempt could tell) or ErrUnavailable (the
// last complete attempt failed because too many nodes failed, also when ctx then cut a
// later attempt short), and also ctx.Err() when ctx ended; it fails with ErrClosed once Close was called. A failed
// attempt's keys are released on every node that may have set them, after that node's
// SET call has returned (a node stalled past go-redis's ReadTimeout may still keep one
// until its TTL ends; it belongs to no lock). Every attempt uses a fresh token.
//
// An attempt in which a majority of nodes answered with an error that no retry can fix
// (CROSSSLOT, NOPERM, NOAUTH or WRONGPASS, WRONGTYPE, an unknown command, a script
// error) ends Acquire at once, whatever ctx's deadline: it returns that attempt's
// *QuorumError, which matches ErrUnavailable and holds the replies as *NodeError
// values (with Options.Fencing, a fencing counter that is not a decimal integer is
// such a script error). Other failures (timeouts, network errors, READONLY, LOADING,
// CLUSTERDOWN, ...) are retried. With Options.Fencing, a counter at the largest token
// also ends Acquire at once, with an error matching ErrFenceExhausted and
// ErrUnavailable.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (lock *Lock, err error) {
	if ctx == nil {
		return nil, nilContextError("acquire", key)
	}
	w := c.newWaiter(ctx, key, ttl)
	if c.observing() {
		start := c.opts.Clock.Now()
		defer func() { c.observeAcquire(ctx, w.observed(start), lock, err) }()
	}
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	owner, err := ownerHead(ctx)
	if err != nil {
		return nil, err
	}
	if c.opts.Fair {
		if owner != "" && c.opts.Fencing {
			return nil, fairOwnerError(key)
		}
		return c.fairAcquire(w)
	}
	if owner == "" && !c.opts.Fencing {
		// After leave below (and after a first attempt that ended the Acquire): only
		// once no waiter of this Client is left.
		defer func() {
			if lock == nil {
				c.leaveLine(key, w.tries > 0)
			}
		}()
	}
	if owner != "" || !c.queues.busy(key) {
		// Nobody in this Client waits for key: try at once, without queueing (after
		// letting other Clients go first if this Client just released it to them).
		yield, gone := c.queues.yielding(key, c.opts.Clock.Now())
		c.pause(ctx, yield)
		// After yielding, the woken Clients' heads race for the key: ask its lead first.
		w.lead = leadHint{first: yield > 0 || c.queues.lined(key), gone: gone}
		w.seen = c.queues.wakes(key)
		if lock, err := w.try(); lock != nil || err != nil {
			return lock, err
		}
		w.waitFirst = true // the attempt just made counts: wait before the next
		if owner != "" && c.queues.heldByOwner(key, owner, c.opts.Clock.Now()) {
			return w.beside() // reentrant: never behind waiters for our own lock
		}
	}
	w.t = c.queues.join(key)
	defer w.t.leave() // at once: on every exit, a panic too, w leaves the queue
	if err := w.queue(); err != nil {
		return nil, err
	}
	for {
		if lock, err := w.pass(); lock != nil || err != nil {
			return lock, err
		}
	}
}

// pause waits d on the Client's clock, or until ctx ends or the Client closes.
func (c *Client) pause(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-c.opts.Clock.After(d):
	case <-ctx.Done():
	case <-c.closing:
	}
}

// TryAcquire is Acquire with exactly one attempt, made at once (it does not queue
// behind this Client's waiting Acquires).
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock *Lock, err error) {
	if ctx == nil {
		return nil, nilContextError("acquire", key)
	}
	if c.observing() {
		start := c.opts.Clock.Now()
		defer func() { c.observeAcquire(ctx, tryObserved(key, ttl, start, lock, err), lock, err) }()
	}
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	lock, qe, err := c.try(ctx, key, ttl, leadHint{})
	if lock != nil || err != nil {
		return lock, err
	}
	return nil, qe
}

// check validates Acquire's arguments.
func (c *Client) check(key string, ttl time.Duration) error {
	if key == "" {
		return errEmptyKey
	}
	return c.opts.checkTTL(ttl)
}

// try runs one attempt registered with Close, and records a granted lock for this
// Client's waiters. err is set when the attempt could not run at all. lead may ask
// the key's lead node first.
func (c *Client) try(ctx context.Context, key string, ttl time.Duration, lead leadHint) (*Lock, *QuorumError, error) {
	if !c.enter() {
		return nil, nil, closedError(key)
	}
	lock, qe, err := c.attempt(ctx, key, ttl, lead)
	if lock != nil && c.isClosed() {
		// Shutdown began while the attempt was out, and may have returned already:
		// grant nothing after it.
		c.cleanup(ctx, key, lock.owner, lock.token, "", lock.lastRound)
		lock, qe, err = nil, nil, fmt.Errorf("redlock: acquire %q: %w (the attempt won as the Client closed; released)", key, ErrClosed)
	}
	c.inFlight.Done()
	if lock != nil {
		c.queues.granted(lock)
	}
	return lock, qe, err
}

// attempt is one attempt of the algorithm (see rounds), with fairTry's entry for a
// Client with Options.Fair: it takes the key only if nobody is queued.
func (c *Client) attempt(ctx context.Context, key string, ttl time.Duration, lead leadHint) (*Lock, *QuorumError, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.quorumError("acquire", key, newTally(len(c.nodes)), nil, ErrNotAcquired, err), nil
	}
	owner, err := ownerHead(ctx)
	if err != nil {
		return nil, nil, err
	}
	req := roundRequest{key: key, owner: owner, ttl: ttl, lead: lead}
	if c.opts.Fair {
		if owner != "" && c.opts.Fencing {
			return nil, nil, fairOwnerError(key)
		}
		req.fair = fairTry
	}
	lock, qe, _, err := c.rounds(ctx, req)
	return lock, qe, err
}

// rounds is one attempt: send the acquire script to all nodes at once, count the
// answers, compute the validity left, and keep the lock only with a majority and
// positive validity; otherwise release it on every node. Each round has a fresh token.
// With fencing, a round that failed only because nodes refused the proposed token is
// repeated at once with a token above the counters they reported, a few times. t is
// the tally of the last round (the zero tally when none ran).
func (c *Client) rounds(ctx context.Context, req roundRequest) (*Lock, *QuorumError, tally, error) {
	if !c.opts.Fencing {
		token, err := newToken()
		if err != nil {
			return nil, nil, tally{}, err
		}
		req.token = token
		if req.fair != nil && req.fair.hands {
			req.token = req.fair.use // the previous registration's token (fairEntry)
		}
		lock, qe, t := c.round(ctx, req)
		return lock, qe, t, nil
	}
	fence, qe, err := c.proposal(ctx, req.key, []string{req.key}) // Client.start adds the counter's names per node
	if qe != nil || err != nil {
		return nil, qe, tally{}, err
	}
	const maxProposals = 3
	refused := 0 // fencing refusals in this attempt's rounds, for Options.Observer
	for n := 1; ; n++ {
		if req.token, err = newToken(); err != nil {
			return nil, nil, tally{}, err
		}
		req.fence = fence
		lock, qe, t := c.round(ctx, req)
		refused += t.refused
		if lock != nil {
			c.fences.raise(req.key, fence)
			noteRefused(lock.lastRound, refused)
			return lock, nil, t, nil
		}
		seen := max(t.counter, t.yesHigh) // the counters refusals reported, an owner's lease token
		c.fences.raise(req.key, seen)
		if t.refused == 0 || n == maxProposals || qe.ctxErr != nil {
			noteRefused(qe.round, refused)
			return nil, qe, t, nil
		}
		if fence, err = nextFence(req.key, max(fence, seen)); err != nil {
			return nil, nil, t, err
		}
	}
}

// lostRace reports whether a failed attempt looks like a race with other Clients'
// attempts made at the same moment: some nodes said yes, none failed, and a majority
// answered in took. (The step stops once refusals rule a majority out, so a yes still
// on its way is not seen; such an attempt does not count as a race.) If the votes
// split so that nobody won, no release will be announced; the key is free again once
// the racers' clean-ups land, so the next attempt should come after a few round trips
// rather than after the retry delay. If one of them won, that attempt is refused at
// the cost of one call per node.
func lostRace(qe *QuorumError, took time.Duration) bool {
	return qe.Agreed > 0 && qe.Failed == 0 && took > 0
}

// newToken returns 122 random bits from crypto/rand as a UUID v4 string. Every round
// has its own token: a clean-up DEL still queued behind a stalled node must never match
// a later round's key, or it could delete a key that round counted in its majority.
func newToken() (string, error) {
	id, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("redlock: making a token: %w", err)
	}
	return id.String(), nil
}

// roundRequest is one acquisition round for Client.round to run.
type roundRequest struct {
	key   string
	owner string // the owner's head (ownerHead), or "" for a lock without owner
	token string // the round's own token (see newToken); an owner's hold id
	ttl   time.Duration
	// fence is the proposed fencing token with Options.Fencing (at least 1: the round
	// runs the fenced acquire), else 0 (the plain acquire).
	fence int64
	// fair, with Options.Fair, is the waiter's queue entry (fairTry for TryAcquire).
	fair *fairEntry
	// lead: a plain acquire (no owner, fencing or fair entry) may ask the key's lead
	// node first; other acquires ignore it.
	lead leadHint
}

// leadHint asks an attempt to go lead-first (stepRequest.leadFirst), after the
// release of token gone was heard ("" when not known): a node whose key still holds
// that token answers so (acquire.lua's ARGV[3]); a lead that does makes the attempt
// ask the other nodes anyway (round.followLead) instead of taking it for a lost race,
// and a failed attempt that met it comes again soon (waiter.settling).
type leadHint struct {
	first bool
	gone  string
	// line: the attempt is an Acquire's, of the Client with this lineID, which joins
	// the key's line for lease if the key's line node refuses it (line.go).
	line  string
	lease time.Duration
}

// stepRequest returns the acquire step that req sends to every node.
func (req roundRequest) stepRequest() stepRequest {
	if req.fair != nil {
		return req.fair.stepRequest(req)
	}
	sr := acquireStep(req.key, req.owner, req.token, req.ttl, req.fence)
	if req.owner == "" && req.fence == 0 { // stepAcquire
		sr.leadFirst = req.lead.first
		if req.lead.gone != "" {
			sr.args = append(sr.args, req.lead.gone)
		}
	}
	if req.lead.line != "" && req.owner == "" && req.fence == 0 {
		line, leases, turn := LineKeys(req.key)
		sr.lineKeys = []string{req.key, line, leases, turn}
		sr.lineArgs = []any{req.token, req.ttl.Milliseconds(), req.lead.gone, req.lead.line, req.lead.lease.Milliseconds()}
	}
	return sr
}

// round is one acquisition round: it grants the lock with a majority and validity
// left, and otherwise cleans up and says why it failed.
func (c *Client) round(ctx context.Context, req roundRequest) (*Lock, *QuorumError, tally) {
	start := c.opts.Clock.Now()
	r := c.start(ctx, req.stepRequest())
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	v := validity(req.ttl, now.Sub(start), c.opts.DriftFactor)
	split := false
	if ctxErr == nil && t.won() && v > 0 {
		fence, ok, waited := req.leaseFence(r, t)
		// Waiting for the fencing tokens of an owner's lease takes time: the lock must
		// still be valid after it.
		if ok && (!waited || c.opts.Clock.Now().Before(now.Add(v))) {
			l := &Lock{c: c, key: req.key, owner: req.owner, token: req.token, fence: fence, ttl: req.ttl, until: now.Add(v), lastRound: r}
			if req.owner == "" && !c.opts.Fair && !c.opts.Fencing {
				l.won = r
			}
			return l, nil, t
		}
		split = !ok
	}
	c.cleanup(ctx, req.key, req.owner, req.token, req.fair.waiterID(), r)
	kind := ErrUnavailable
	if ctxErr != nil || t.contended() {
		kind = ErrNotAcquired
	}
	qe := c.quorumError("acquire", req.key, t, errs, kind, ctxErr)
	qe.Late = t.won() && !split
	if split {
		qe.note = "no fencing token of the owner's lease was reported by a majority"
	}
	qe.quorum, qe.round = t.quorumIn, r
	qe.turn = req.lead.line != "" && t.noHigh == replyTurn
	qe.goneHere = req.lead.gone != "" && t.noHigh == replyGoneHere
	return nil, qe, t
}

// proposal returns the fencing token to propose for key: one above the highest
// counter this Client has seen for it, or else one above the highest counter a
// majority of nodes reports (phase 1 of the fenced acquire). Safety does not depend on
// this guess: a node refuses a token that is not above its counter. err reports a
// counter at the largest token (ErrFenceExhausted).
func (c *Client) proposal(ctx context.Context, key string, keys []string) (int64, *QuorumError, error) {
	if seen, ok := c.fences.get(key); ok {
		if seen < math.MaxInt64 {
			return seen + 1, nil, nil
		}
		// At the top, ask the nodes: only they can tell whether an operator has
		// reset the counters since.
		c.fences.forget(key)
	}
	r := c.start(ctx, stepRequest{step: stepFenceRead, keys: keys})
	t, errs, ctxErr := c.gather(ctx, r, true)
	if ctxErr != nil || !t.won() {
		kind := ErrUnavailable
		if ctxErr != nil {
			kind = ErrNotAcquired
		}
		qe := c.quorumError("acquire", key, t, errs, kind, ctxErr)
		qe.round = r
		return 0, qe, nil
	}
	c.fences.raise(key, t.high) // a counter a node holds: the next proposal can start above it
	fence, err := nextFence(key, t.high)
	return fence, nil, err
}

// cleanup undoes a failed attempt: the release script goes to every node that may have
// set our key, including nodes that failed or timed out (their SET may still land); only
// nodes that answered that another token holds the key, or that refused our fencing
// token, are skipped. Each release is sent only after that node's acquire call has
// returned, so the DEL cannot overtake the SET; an acquire call still queued, not sent,
// is dropped instead and needs no release (a fair waiter's is sent: it also queues the
// waiter). It runs on a context the caller cannot cancel. It waits (at most the node
// timeout) only for the nodes whose acquire call has returned already; releases queued
// behind a silent node finish in the background (see Close), so a waiter is not held
// up by a node that does not answer. With Options.Fair the release is fair_release.lua
// (cleanupStep), which tells the head of the queue when it frees the key.
func (c *Client) cleanup(ctx context.Context, key, owner, token, fairID string, r *round) {
	ctx = context.WithoutCancel(ctx)
	ready := make([]bool, len(r.calls))
	waiting := 0
	for i := range r.calls {
		select {
		case <-r.calls[i].done:
			ready[i] = true
			waiting++
		default:
		}
	}
	// A call of r not sent yet is dropped now, so that it cannot set our key after
	// the next attempt's call to that node has been queued (sender.send).
	r.abandoned.Store(true)
	if r.lostAtLead.Load() || waiting == len(r.calls) && !r.anyMayHold() {
		// Every node answered that another token holds the key, or its call was not
		// sent (a lead-first attempt whose lead refused; its last unsent calls may still
		// be being answered): no release would be sent (req.need), and starting the
		// step would only wake every node's sender, and wait for a busy one's.
		return
	}
	req := c.cleanupStep(key, owner, token, fairID)
	req.after, req.mustLand, req.need = r, true, r.mayHold
	cr := c.start(ctx, req)
	timeout := c.opts.Clock.After(c.opts.NodeTimeout)
	t := newTally(len(c.nodes))
	// An attempt that had the key on a majority (its validity ran out, or Close began)
	// is announced as a Release is, once its deletes make a majority: the nodes do not
	// announce it.
	if !c.opts.Fair {
		defer func() { c.announceRelease(key, token, cr, t, false, false) }()
	}
	for waiting > 0 {
		select {
		case rep := <-cr.replies:
			if ready[rep.node] {
				waiting--
			}
			t.addReply(rep)
		case <-timeout:
			return
		}
	}
}

// cleanupStep is the release that undoes a failed attempt of token. With Options.Fair
// it is fair_release.lua without a queue entry (the waiter, id, stays queued): where it
// frees the key it tells the head of the queue, and hands it the key where the head
// registered a token, as a Release does (release.lua told nobody: after split
// attempts the head waited for RetryDelay, TestFairSplitCleanupTellsHead). A head
// that is the waiter itself is not told: told on the node where another lock's key
// was missing, it attempted again and again (TestFairStaleReleaseTellsNobody).
func (c *Client) cleanupStep(key, owner, token, id string) stepRequest {
	if !c.opts.Fair {
		return releaseStep(key, owner, token)
	}
	args := []any{token, "", owner}
	if id != "" {
		args = append(args, id)
	}
	return stepRequest{step: stepFairRelease, keys: fairKeys(key), args: args}
}

func (c *Client) quorumError(op, key string, t tally, errs *multierror.Error, kind, ctxErr error) *QuorumError {
	return &QuorumError{
		Op: op, Key: key, Nodes: t.n, Needed: t.quorum(),
		Agreed: t.yes, Refused: t.no, Failed: t.failed,
		Errors: errs, kind: kind, ctxErr: ctxErr,
	}
}
