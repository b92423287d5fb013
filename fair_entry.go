package redlock

import "time"

// fairEntry is a waiter's entry in a fair key's queue, as fair_acquire.lua is given it.
// The zero entry (no id) is TryAcquire's: it takes the key only if nobody is queued.
type fairEntry struct {
	id     string // one per Acquire call
	ticket int64  // drawn once (fair_ticket.lua), the same on every node
	lease  time.Duration
	// A waiter without owner in a Client without Options.Fencing registers, with its
	// draw and with each attempt that does not get the key, a token with which the nodes
	// hand it the key when it is the head of a free key (fair_queue.lua, fairHand), and
	// makes its next attempt with that token (use).
	hands  bool
	seq    int64         // of the latest registration: 1 for the draw's, then +1 per attempt
	hand   string        // the latest registration's token
	handAt time.Time     // just before the call that made that registration was sent
	handPX time.Duration // the TTL the nodes hand the key with (handTTL)
	use    string        // the token of the attempt being made: the registration before hand
}

// waiterID returns the entry's id: "" for TryAcquire's and for a Client without
// Options.Fair (nil).
func (e *fairEntry) waiterID() string {
	if e == nil {
		return ""
	}
	return e.id
}

// fairTry is the entry of every fair TryAcquire and of a fair Acquire's first attempt.
var fairTry = &fairEntry{}

// stepRequest returns the fair acquire step for req: fair_acquire.lua, or with a
// proposed fencing token fair_fenced_acquire.lua (Client.start adds the counter's
// names to its KEYS). An owner's hold (req.owner, never with a fence: fairOwnerError)
// adds the owner's head as ARGV[6]; a lock without owner sends the arguments it sent
// before owners were supported.
func (e *fairEntry) stepRequest(req roundRequest) stepRequest {
	args := []any{req.token, req.ttl.Milliseconds(), e.id, e.ticket, e.lease.Milliseconds()}
	queues := e.id != "" // a waiter's attempt, not a TryAcquire
	if req.fence != 0 {
		return stepRequest{step: stepFairFencedAcquire, keys: fairKeys(req.key)[:4], args: append(args, req.fence), queues: queues}
	}
	if req.owner != "" {
		args = append(args, req.owner)
	} else if e.hands {
		args = append(append(args, ""), e.handArgs()...)
	}
	return stepRequest{step: stepFairAcquire, keys: fairKeys(req.key), args: args, queues: queues}
}

// register makes a new hand registration for the waiter's next call (draw or attempt):
// a new token, the next seq, and handAt before the call is sent. The previous
// registration's token under the same id becomes the attempt's token (use).
func (e *fairEntry) register(now time.Time) error {
	if !e.hands {
		return nil
	}
	hand, err := newToken()
	if err != nil {
		return err
	}
	use := e.hand
	if use == "" {
		// No registration under this id yet (the first call, or back from away under
		// a new id): the attempt's token must never be one registered under another
		// id, whose late removal could free a key holding it.
		if use, err = newToken(); err != nil {
			return err
		}
	}
	e.use, e.hand, e.handAt = use, hand, now
	e.seq++
	return nil
}

// handArgs returns the registration's arguments: TTL in ms, token, seq.
func (e *fairEntry) handArgs() []any {
	return []any{e.handPX.Milliseconds(), e.hand, e.seq}
}

// handTTL is the TTL with which the nodes hand a waiter the key: the lock's TTL, at
// most the entry lease, so that a waiter that dies while queued holds the nodes for
// about as long as its entry would (one lease), not for a whole TTL. A lock handed
// with less than its TTL is extended to it soon after the grant (finishHand).
func handTTL(ttl, lease time.Duration) time.Duration { return min(ttl, lease) }
