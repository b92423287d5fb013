package redlock

import (
	"context"
	_ "embed" // the Lua scripts are files in scripts/
	"fmt"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// Fair locks across processes (Options.Fair): every node keeps the key's waiters in a
// sorted set ordered by a ticket the client draws once and sends to every node, and
// grants the key only to the head of that queue. docs/design.md, "Fair locks across
// processes", explains the design; this file holds the client side: the steps, the
// names of the keys, and the waiting loop of a fair Acquire.

var (
	//go:embed scripts/fair_ticket.lua
	fairTicketLua string
	//go:embed scripts/fair_queue.lua
	fairQueueLua string // put in front of the two fair acquire scripts, the ticket draw and the release
	//go:embed scripts/fair_owner.lua
	fairOwnerLua string // put after fair_queue.lua in front of fair_acquire.lua and fair_release.lua
	//go:embed scripts/fair_acquire.lua
	fairAcquireLua string
	//go:embed scripts/fair_fenced_acquire.lua
	fairFencedAcquireLua string
	//go:embed scripts/fair_release.lua
	fairReleaseLua string

	stepFairTicket  = step{redis.NewScript(fairQueueLua + fairTicketLua), drawReply, false, nil}
	stepFairAcquire = step{redis.NewScript(fairQueueLua + fairOwnerLua + fairAcquireLua), fairReply, false, nil}
	stepFairRelease = step{redis.NewScript(fairQueueLua + fairOwnerLua + fairReleaseLua), released, false, nil}
	// With Options.Fencing: it answers a refused proposal as text ("-c"), judged as
	// fenced_acquire.lua's, apart from a waiter's place (an integer, fairReply).
	stepFairFencedAcquire = step{redis.NewScript(decimalLua + fairQueueLua + fairFencedAcquireLua), fairReply, true, fencedReply}
)

// fairBehind is 2^40: fair_acquire.lua answers −(fairBehind − a) to a waiter with a
// entries ahead of it, so a tally's high (its largest absolute value) tells the fewest
// ahead on any node that answered.
const fairBehind = 1 << 40

// fairReply judges fair_acquire.lua: 1 took it, 0 (TryAcquire) or a negative number
// (a waiter, see fairBehind) did not.
func fairReply(v int64) outcome {
	if v < 0 && v >= -fairBehind {
		return outNo
	}
	return yesOrNo(v)
}

// drawReply judges fair_ticket.lua with a waiter id: the number drawn, v when the
// waiter is the head of the node's queue, −v when entries are ahead of it; either is
// a yes (the node drew a number and queued the waiter), so the tally's high is the
// largest number drawn and its yesHigh is negative only if the waiter was behind
// others on every node that answered.
func drawReply(v int64) outcome {
	if v == 0 {
		return outFailed
	}
	return outYes
}

// fairAhead returns how many entries were ahead of a waiter whose fair attempt t did
// not win, on the node that had the fewest: 0 when a node said yes or refused its
// fencing token (the waiter was its head), also when every other node failed, and
// when none answered.
func fairAhead(t tally) int64 {
	if t.yes > 0 || t.refused > 0 || t.noHigh <= 0 || t.noHigh > fairBehind {
		return 0
	}
	return fairBehind - t.noHigh
}

// DefaultFairLease is the lease of a waiter's queue entry when Options.FairLease is
// zero: a waiter that died blocks the queue for at most about this long.
const DefaultFairLease = time.Second

// minFairLeaseTimeouts: a lease is at least this many node timeouts, since a waiter
// renews it every third of a lease and a renewal may take a node timeout.
const minFairLeaseTimeouts = 10

// fairOwnerError refuses an owner's Acquire or TryAcquire (WithOwner) with both
// Options.Fair and Options.Fencing: a fenced owner's lease (reentrant_fenced_acquire.lua)
// has no fair script yet. Fair owners without fencing, and fair fencing without owner,
// are supported.
func fairOwnerError(key string) error {
	return fmt.Errorf("redlock: acquire %q: reentrant locks (WithOwner) are not supported with Options.Fair and Options.Fencing together yet", key)
}

// fairDefaults validates the fair-lock options of o and fills in their defaults.
func (o *Options) fairDefaults() error {
	if !o.Fair {
		return nil
	}
	if o.FairLease == 0 {
		o.FairLease = max(DefaultFairLease, timeouts(minFairLeaseTimeouts, o.NodeTimeout))
	}
	if floor := timeouts(minFairLeaseTimeouts, o.NodeTimeout); o.FairLease < floor || o.FairLease%time.Millisecond != 0 {
		return fmt.Errorf("redlock: FairLease %v must be whole milliseconds and at least %d × NodeTimeout (%v)",
			o.FairLease, minFairLeaseTimeouts, floor)
	}
	return nil
}

// fairWaiter is one blocking Acquire of a Client with Options.Fair. It reuses the
// plain waiter's bookkeeping (attempt count, last failure, verdict, stopped).
type fairWaiter struct {
	*waiter
	entry fairEntry
	keys  []string
	// ahead is how many entries were ahead of the waiter at its latest attempt, on the
	// node that had the fewest: the head (none ahead) renews sooner (period). The
	// waiter attempts when a majority of nodes named it the head of a free key
	// (headNamed; seen is the naming of its latest attempt) and otherwise when its
	// lease is due for renewal (renewAt), so a release makes the next waiter attempt,
	// not all of them.
	ahead     int64
	renewAt   time.Time
	lastRound *round
	// cutSince is when the waiter's attempts began to reach fewer than a majority of
	// the nodes (too many failed), zero while they reach one. After a renewal period
	// of that the waiter is away: it takes its entries out, so that it does not stay
	// the head of the nodes it still reaches and block them, and its turns only look
	// for a majority again (turn), keeping its ticket.
	cutSince time.Time
	away     bool
	leftID   string // the id of the waiter's latest removal (leave): never granted by hand
}

// fairAcquire is Acquire with Options.Fair: one attempt that succeeds only when nobody
// is queued, skipped when this Client knows that others are (othersQueued); then a
// ticket, and attempts that queue the waiter on every node and renew its entry, at
// once when a majority of nodes named it the head of a free key and otherwise every
// FairLease/3 (the head: min(FairLease/3, RetryDelay)), until it gets the key.
// Its entries are removed when it gives up, also when the Client closes: Close waits
// for that (at most a node timeout).
func (c *Client) fairAcquire(aw *waiter) (*Lock, error) {
	w := &fairWaiter{waiter: aw, keys: fairKeys(aw.key)}
	// An owner's first attempt is made even behind others: if the owner holds the key,
	// it adds a hold at once (reentrancy). othersQueued is asked either way: it uses up
	// the record of this Client's latest release of the key.
	queued := c.queues.othersQueued(w.key, c.opts.Clock.Now())
	if w.owner() != "" || !queued {
		if lock, err := w.try(); lock != nil || err != nil {
			return lock, err
		}
	}
	if !c.enter() { // for the whole wait: Close waits until the waiter has left
		return nil, w.stopped()
	}
	defer c.inFlight.Done()
	id, err := c.queues.fairWaiterID()
	if err != nil {
		return nil, err
	}
	w.entry = fairEntry{id: id, lease: c.opts.FairLease,
		hands: !handsOff.Load() && w.owner() == "" && !c.opts.Fencing, handPX: handTTL(w.ttl, c.opts.FairLease)}
	w.t = c.queues.join(w.key) // for the wake-ups only: every fair waiter attempts
	defer w.t.leave()
	w.t.joinFair(id)
	defer func() { w.t.leaveFair(w.entry.id) }() // the id may change (turn)
	w.t.subscribe()
	lock, err := w.run()
	if lock == nil {
		w.leave()
	}
	return lock, err
}

// fairWaiterID returns a new id for a fair waiter's queue entry: the Client's fairID,
// ":" and a random UUID, so that the nodes know on which Client's channel to tell the
// waiter that it is the head of a free key (fair_queue.lua, fairNotify; the previous
// version's "/" named a channel per Client and key).
func (q *queues) fairWaiterID() (string, error) {
	id, err := newToken()
	if err != nil {
		return "", err
	}
	return q.fairID + ":" + id, nil
}

// run draws the ticket, which queues the waiter, then attempts until the lock is
// granted or Acquire fails. The first attempt comes right after the draw, unless the
// draw showed that the waiter is queued behind others, alike on a majority (below).
func (w *fairWaiter) run() (*Lock, error) {
	if err := w.settle(); err != nil {
		return nil, err
	}
	// The checks of the confirmations so far (listening) name this waiter too, but it
	// had no entry on any node yet, so no notice naming it can have been missed.
	_, w.seen = w.t.headNamed(w.entry.id)
	queued := false
	for w.entry.ticket == 0 {
		var err error
		if queued, err = w.draw(); err != nil {
			return nil, err
		}
		if w.entry.ticket == 0 {
			if err := w.sleep(nil); err != nil {
				return nil, err
			}
		}
	}
	if queued {
		// Behind others: it is told when it is the head of a free key, and renews
		// its entry (with the ticket, which mends the order where a node drew
		// another number) a third of a lease from now at the latest.
		w.ahead = 1
		w.renewAt = w.c.opts.Clock.Now().Add(w.period())
	}
	for {
		if lock := w.handed(); lock != nil {
			return lock, nil
		}
		// Taken before the attempt: a notice during it is not missed.
		wake, named := w.t.headNamed(w.entry.id)
		if due := !w.c.opts.Clock.Now().Before(w.renewAt); due || named != w.seen {
			// Named by checks alone (its own namings: another waiter's is not its
			// reason to attempt), the attempt does not count.
			w.checked(!due && w.t.namedByChecks(w.entry.id, w.seen))
			w.seen = named
			lock, err := w.turn()
			if lock != nil || err != nil {
				return lock, err
			}
		}
		if err := w.sleep(wake); err != nil {
			return nil, err
		}
	}
}

// settle waits, before the waiter's draw, until every node has confirmed the
// subscription of the Client's channel (fairChannel, one for all its keys), at most
// partialNoticeWait. When the subscription is new, its confirmations (majority and
// last: listening) make every fair waiter attempt, since a notice sent before them
// may have been missed. A node that confirmed before the draw put the waiter's entry
// there cannot have named it in a notice this Client missed, so the waiter makes no
// such attempt for it (run). When settle came after the draw, each of 8 Clients
// contending for a fresh key made an attempt at the confirmations (BenchmarkClients'
// longest wait: the first grants came 2 to 3 ms apart). Once every node confirmed the
// Client's channel (at its first fair wait, for any key) no waiter waits. A node that
// has not confirmed (it is down) costs the cap once per Client, not once per wait
// (fairSettled, TestFairDownNodeCostsSettleOnce); its confirmation, later, makes every
// fair waiter attempt.
func (w *fairWaiter) settle() error {
	c := w.c
	var capped <-chan time.Time
	for {
		wake, all := w.t.listened()
		if all {
			return nil
		}
		if capped == nil {
			capped = c.opts.Clock.After(partialNoticeWait(c.opts.NodeTimeout))
		}
		select {
		case <-wake:
		case <-capped:
			w.t.settled()
			return nil
		case <-w.ctx.Done():
			return w.stopped()
		case <-c.closing:
			return w.stopped()
		}
	}
}

// turn is the waiter's attempt, when one is due. A waiter that has been cut off from
// a majority for a renewal period takes its entries out (away); while away, its turn
// takes them out again instead of attempting, which shows whether a majority
// answers, and once one does it attempts at once, queueing again with its ticket
// under a new id.
func (w *fairWaiter) turn() (*Lock, error) {
	if w.away {
		t, errs := w.leave()
		if cutOff(t) {
			w.renewAt = w.c.opts.Clock.Now().Add(w.period())
			return nil, w.failed(w.c.quorumError("acquire", w.key, t, errs, ErrUnavailable, nil))
		}
		// Back under a fresh id (the ticket stays): a late copy of a removal sent
		// while away names the old one and cannot take the new entries out.
		id, err := w.c.queues.fairWaiterID()
		if err != nil {
			return nil, err
		}
		w.t.leaveFair(w.entry.id)
		w.t.joinFair(id)
		// The new id's namings start from none: seen must too, or a check would
		// count as a real naming (namedByChecks).
		w.entry.id, w.away, w.cutSince, w.seen = id, false, time.Time{}, 0
		w.entry.hand = "" // registrations start afresh under the new id (register)
	}
	lock, err := w.attemptFair()
	if lock == nil && err == nil && w.away {
		w.leave()
	}
	return lock, err
}

// cutOff reports that too many nodes failed in step t for the others to make a
// majority (no step ran: not cut off).
func cutOff(t tally) bool { return t.n > 0 && t.failed > t.n-t.quorum() }

// reach records whether the waiter's attempt, which failed with qe (nil: it won),
// reached a majority, and makes the waiter away once its attempts have not for a
// renewal period (FairLease/3).
func (w *fairWaiter) reach(qe *QuorumError) {
	now := w.c.opts.Clock.Now()
	switch {
	case qe == nil || qe.Failed <= qe.Nodes-qe.Needed:
		w.cutSince = time.Time{}
	case w.cutSince.IsZero():
		w.cutSince = now
	case now.Sub(w.cutSince) >= w.entry.lease/3:
		w.away = true
	}
}

// draw runs fair_ticket.lua on every node, which also queues the waiter there with the
// number it drew, and takes the largest answer of a majority as the waiter's ticket. A
// nil error with no ticket means: try again later. queued reports that a majority
// answered that they queued the waiter behind others, all with the same number (the
// ticket): there the waiter's entry is in its place already, so an attempt now could
// only fail. (The first in line behind a holder is queued too, but attempts at once:
// it learns that it is the head, which polls for an unannounced expiry.) A node where
// the waiter was queued already (a draw before this one) does not say so, since its
// score there is another number.
func (w *fairWaiter) draw() (queued bool, err error) {
	c := w.c
	if !c.enter() {
		return false, w.stopped()
	}
	defer c.inFlight.Done()
	keep := 2 * w.entry.lease.Milliseconds()
	args := []any{keep, w.entry.id, w.entry.lease.Milliseconds()}
	if w.entry.hands {
		if err := w.entry.register(c.opts.Clock.Now()); err != nil {
			return false, err
		}
		args = append(args, w.entry.handArgs()...)
	}
	r := c.start(w.ctx, stepRequest{step: stepFairTicket, keys: w.keys, args: args})
	if w.entry.hands {
		// A lock handed on the draw's registration sends its Release to each node after
		// the draw's call there, which could otherwise queue the gone waiter again.
		w.lastRound = r
	}
	t, errs, ctxErr := c.gather(w.ctx, r, true)
	if ctxErr == nil && t.won() {
		w.entry.ticket = t.high
		return t.yesHigh < 0 && t.yesLow == t.yesHigh, nil
	}
	kind := ErrUnavailable
	if ctxErr != nil {
		kind = ErrNotAcquired
	}
	return false, w.failed(c.quorumError("acquire", w.key, t, errs, kind, ctxErr))
}

// attemptFair is one round of fair_acquire.lua with the waiter's entry. Nil lock and
// error mean that it failed and Acquire goes on.
func (w *fairWaiter) attemptFair() (*Lock, error) {
	c := w.c
	if !c.enter() {
		return nil, w.stopped()
	}
	if err := w.entry.register(c.opts.Clock.Now()); err != nil {
		c.inFlight.Done()
		return nil, err
	}
	lock, qe, t, err := c.rounds(w.ctx, roundRequest{key: w.key, owner: w.owner(), ttl: w.ttl, fair: &w.entry})
	if qe != nil {
		w.lastRound = qe.round
	}
	if err != nil {
		c.inFlight.Done()
		return nil, err
	}
	w.tries++ // for Options.Observer
	w.reach(qe)
	w.ahead = fairAhead(t)
	w.renewAt = c.opts.Clock.Now().Add(w.period())
	if lock != nil && c.isClosed() {
		c.cleanup(w.ctx, w.key, lock.owner, lock.token, w.entry.id, lock.lastRound)
		lock, qe = nil, nil
	}
	c.inFlight.Done()
	switch {
	case lock != nil:
		lock.fairID = w.entry.id // its Release takes the entry out and wakes the next
		// Recorded as Client.try records its grants: an owner's other holds in this
		// Client find it there (otherHolds), so their Extend moves its Until too.
		c.queues.granted(lock)
		return lock, nil
	case qe == nil:
		return nil, fmt.Errorf("redlock: acquire %q: %w (the attempt won as the Client closed; released)", w.key, ErrClosed)
	}
	return nil, w.failed(qe)
}

// failed records a failed step; a non-nil error is Acquire's.
func (w *fairWaiter) failed(qe *QuorumError) error {
	w.refused += qe.fenceRefusals()
	if err := w.verdict(qe); err != nil {
		return err
	}
	w.last = qe
	if !w.free {
		w.attempt++
	}
	return nil
}

// sleep waits for a wake-up (a release announced by a majority of nodes, or one of
// this Client), or for the next renewal of the entry, whichever comes first. A non-nil
// error is Acquire's (ctx ended, or the Client closed).
func (w *fairWaiter) sleep(wake <-chan struct{}) error {
	c := w.c
	d := w.period()
	if !w.renewAt.IsZero() {
		d = w.renewAt.Sub(c.opts.Clock.Now())
	}
	select {
	case <-wake:
	case <-c.opts.Clock.After(d):
	case <-w.ctx.Done():
		return w.stopped()
	case <-c.closing:
		return w.stopped()
	}
	return nil
}

// period is how long after an attempt the next one is due at the latest: a third of
// the lease, and for the head (which must notice a lock that expired, never
// announced) at most the retry delay.
func (w *fairWaiter) period() time.Duration {
	if w.ahead > 0 {
		return w.entry.lease / 3
	}
	return min(w.entry.lease/3, w.c.opts.RetryDelay(max(w.attempt-1, 1)))
}

// leave removes the waiter's entry from every node (fair_release.lua with no token),
// on a context the caller cannot cancel, waiting at most the node timeout, and
// returns what the nodes answered; a node it does not reach drops the entry when its
// lease ends. The nodes announce the removal, so the waiters behind count one fewer
// ahead. It runs under fairAcquire's registration with Close, also once Close began.
func (w *fairWaiter) leave() (tally, *multierror.Error) {
	c := w.c
	// No grant by hand under this id from now on: the removal frees the keys handed
	// with its registrations, on each node whenever it lands there (TestFairHandAfterLeave).
	w.leftID = w.entry.id
	w.t.forgetHanded(w.entry.id)
	ctx := context.WithoutCancel(w.ctx)
	t, errs, _ := c.gather(ctx, c.start(ctx, stepRequest{step: stepFairRelease, keys: w.keys, args: []any{"", w.entry.id}}), false)
	return t, errs
}

// fairRelease turns req into the release step of a lock of a Client with Options.Fair:
// its queue entry, if it has one, goes with the key (an owner's hold: with the hold,
// the key only with the owner's last), and the head of the queue is told.
func (l *Lock) fairRelease(req stepRequest) stepRequest {
	req.step, req.keys, req.args = stepFairRelease, fairKeys(l.key), []any{l.token, l.fairID}
	if l.owner != "" {
		req.args = append(req.args, l.owner) // ARGV[3]
	}
	return req
}
