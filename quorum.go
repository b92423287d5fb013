package redlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"
)

// tally counts the answers of the n nodes in one step.
type tally struct {
	n, yes, no, failed, pending int
	quorumIn                    time.Duration // how long until a majority had answered (0: never)
	refused                     int           // of no: refusals by a fencing counter
	high                        int64         // the largest absolute value of a reply that was not a failure
	yesLow, yesHigh             int64         // the smallest and largest value of a yes (an owner's fenced hold, a fair draw)
	counter                     int64         // the largest counter a refusal reported (fencing steps)
	noHigh                      int64         // the largest absolute value of a no (a fair waiter's place)
	positive                    uint64        // the nodes (those below 64) whose yes had a value above 0: a release's deletes
	gone                        int           // of yes: those with a value of 0 or more (a release: the key is gone there)
	unread                      int           // of failed: nodes gather gave up on, whose replies are still to come
	answered                    uint64        // the nodes (those below 64) whose reply addReply recorded
}

func newTally(n int) tally { return tally{n: n, pending: n} }

// add records one node's outcome and reply value.
func (t *tally) add(o outcome, v int64) {
	t.pending--
	switch o {
	case outYes:
		t.yes++
		if t.yes == 1 {
			t.yesLow, t.yesHigh = v, v
		} else {
			t.yesLow, t.yesHigh = min(t.yesLow, v), max(t.yesHigh, v)
		}
	case outNo:
		t.no++
		t.noHigh = max(t.noHigh, v, -v)
	case outRefused:
		t.no++
		t.refused++
		t.counter = max(t.counter, -v)
	default:
		t.failed++
		return
	}
	t.high = max(t.high, v, -v)
}

// addReply is add for rep, which also records in gone and positive whether its node
// said yes with a value of 0 or more, and above 0. (For a release: the key is gone
// from the node, and it deleted it; an owner's release that left other holds says yes
// with −2, replyHoldsLeft.)
func (t *tally) addReply(rep reply) {
	t.add(rep.out, rep.val)
	if rep.node < 64 {
		t.answered |= 1 << rep.node
	}
	if rep.out != outYes || rep.val < 0 {
		return
	}
	t.gone++
	if rep.val > 0 && rep.node < 64 {
		t.positive |= 1 << rep.node
	}
}

// quorum is the majority of the n nodes: n/2 + 1.
func (t tally) quorum() int { return t.n/2 + 1 }

// won reports that a majority said yes.
func (t tally) won() bool { return t.yes >= t.quorum() }

// contended reports, for a step that was not won, whether the "no" answers alone ruled
// out a majority (another holder: contention) rather than failures.
func (t tally) contended() bool { return t.n-t.no < t.quorum() }

// reply is one node's answer in one step.
type reply struct {
	node int
	out  outcome
	val  int64
	err  error
}

// round is one step sent to every node at once.
type round struct {
	replies  chan reply       // buffered to n: a late reply never blocks its sender
	calls    []roundCall      // calls[i] is the call to node i
	expires  time.Time        // when the node timeout of the round's calls ends (system clock)
	timeout  <-chan time.Time // the same for another Clock: its After, taken at the start
	deadline time.Time        // for parked calls, and a lead-first round's held ones

	cancel context.CancelFunc // ends the round's call context
	left   atomic.Int32       // calls not yet finished
	// abandoned is set when a failed acquire or handoff round is cleaned up, or when
	// the lock an acquire round won is released before any later round (skipUnsent):
	// its calls that are still queued, not sent, are then dropped (answered "no":
	// nothing was set; after a handoff the old token stays, for the plain release that
	// follows) and marked unsent.
	abandoned atomic.Bool
	// queues: the round's calls also queue or renew a fair waiter's entry
	// (stepRequest.queues); abandoned does not drop them, since a node they never
	// reach keeps the number it drew, or no entry, until the next renewal.
	queues bool
	// held, in a lead-first round (stepRequest.leadFirst), are the calls to every node
	// but the lead (held[lead] has no call): none is queued until the lead's call has
	// returned (followLead). Nil in other rounds; neither changes after start.
	held []heldCall
	lead int
	// leadDone is set by whichever comes first, the lead's reply (followLead) or
	// leadWait's timer (leadSilent); leadTimer is that timer.
	leadDone  atomic.Bool
	leadTimer *time.Timer
	// lostAtLead is set by followLead, before it answers them, when the round's other
	// calls are answered "no" without being sent: the lead answered that another token
	// holds the key, so no node has ours and the clean-up has nothing to undo.
	lostAtLead atomic.Bool
	// leadPublishes: a release whose call to the key's line node announces it there
	// (Client.lineRelease).
	leadPublishes bool

	obs *roundObs // with Options.Observer: what gather saw (observe_emit.go); else nil
}

// roundCall is the state of a round's call to one node.
type roundCall struct {
	done chan struct{} // closed once the call has returned
	// out is what the node answered. It is written before the reply is sent and before
	// done is closed: read it only for a node whose reply gather received, or after done.
	out outcome
	val int64 // the reply's value, written with out

	// unsent: the call was dropped without being sent (sender.dropped): the node never
	// saw it. Written before the call is delivered, like out.
	unsent bool

	// Guarded by the node's sender mutex:
	delivered bool      // the call has returned
	next      *nodeCall // later calls to this node that wait for this one, in order
}

// finished records that one call of the round is over; the last one releases the
// round's context and lets go of it: the round outlives its calls (Lock.lastRound,
// QuorumError.round, and the first event's Event.Nodes, made in the round's own
// allocation, which an Observer may keep), and the context carries the caller's values.
func (r *round) finished() {
	if r.left.Add(-1) == 0 {
		r.cancel()
		r.cancel = nil // only the last call gets here
	}
}

// heldCall is a lead-first round's call to one node, and that node's sender (for the
// lead: its sender, and no call).
type heldCall struct {
	s *sender
	c *nodeCall
}

// followLead runs once the lead's call of a lead-first round has returned with out and
// reply v. If the lead answered that another token holds the key, the attempt is lost
// whatever the others say: their calls are not sent and count as that answer (as with
// stepRequest.need), so a waiter that lost the race for a release costs one call, and
// nothing needs cleaning up. So it is when the lead answered only at the round's
// deadline (a stalled lead): the round is over, and a SET sent now would only leave a
// key for the clean-up. Otherwise (a yes; the released token still there, its
// release not arrived yet; or a quick failure: the others may still make a majority)
// they are queued now. It runs on the lead node's sender goroutine.
func (r *round) followLead(out outcome, v int64) {
	if !r.leadDone.CompareAndSwap(false, true) {
		return // leadSilent has sent them
	}
	r.leadTimer.Stop()
	if out == outNo && v != replyGoneHere {
		r.lostAtLead.Store(true) // before the answers, which the round's gather may end on
	}
	for _, h := range r.held {
		switch {
		case h.c == nil: // the lead's own slot
		case out == outNo && v != replyGoneHere, !h.s.clock.Now().Before(r.deadline):
			h.s.deliver(h.c, outNo, 0, nil)
		default:
			h.s.enqueue(h.c, nil)
		}
	}
}

// leadSilent runs when a lead-first round's lead has not answered within leadWait: the
// lead may be down, stalled or just slow, so the other calls go out now and may still
// make a majority in the time left. The Client does not lead with that node for
// leadRest (Client.lead), even if its calls succeed meanwhile (a slow node does
// answer), so that one attempt in leadRest pays this wait, not every one.
func (r *round) leadSilent() {
	if !r.leadDone.CompareAndSwap(false, true) {
		return // the lead answered first
	}
	for _, h := range r.held {
		if h.c == nil {
			h.s.noLeadUntil.Store(time.Now().Add(leadRest(h.s.timeout)).UnixNano())
		} else {
			h.s.enqueue(h.c, nil)
		}
	}
}

// leadWait is how long a lead-first round waits for its lead before it asks the other
// nodes anyway: half the node timeout, which leaves them the other half. A lead
// that answers at all answers far sooner (one round trip), so the wait is paid only
// when the lead is down or stalled.
func leadWait(nodeTimeout time.Duration) time.Duration { return nodeTimeout / 2 }

// leadRest is how long a Client does not lead with a node that was silent for
// leadWait: 20 node timeouts (1 s by default), so that a slow node costs at most one
// attempt in 20 node timeouts half a node timeout, and a node that recovered leads
// again soon.
func leadRest(nodeTimeout time.Duration) time.Duration { return 20 * nodeTimeout }

// answer records node i's outcome and delivers its reply.
func (r *round) answer(i int, out outcome, v int64, err error) {
	r.calls[i].out, r.calls[i].val = out, v
	r.replies <- reply{node: i, out: out, val: v, err: err}
}

// mayHold reports whether node i may have set our key in this acquire round: it did
// not answer that another token holds the key or that its fencing counter refused us.
// Call it once node i's call has returned.
func (r *round) mayHold(i int) bool {
	out := r.calls[i].out
	return out != outNo && out != outRefused
}

// anyMayHold reports whether some node may have set our key in this acquire round
// (mayHold). Call it once every call has returned.
func (r *round) anyMayHold() bool {
	for i := range r.calls {
		if r.mayHold(i) {
			return true
		}
	}
	return false
}

// sent reports whether round r's call to node i went to the node (it may have
// landed). Call it once node i's call has returned.
func (r *round) sent(i int) bool { return !r.calls[i].unsent }

// failed reports whether node i failed or did not answer in time in this round. Call it
// once node i's call has returned.
func (r *round) failed(i int) bool { return r.calls[i].out == outFailed }

// lacks reports whether node i answered that it does not hold our key (or failed) in
// this extend round. Call it once node i's call has returned.
func (r *round) lacks(i int) bool {
	out := r.calls[i].out
	return out == outNo || out == outFailed
}

// stepRequest is one step for Client.start to send to every node.
type stepRequest struct {
	step step
	// keys are the script's KEYS. A step that uses the fencing counter is given them
	// without the counter (the lock key first): each node gets the counter's names for
	// its kind (fenceKeys) added at the end.
	keys []string
	args []any // the script's ARGV
	// after, when not nil, is this lock's previous round: on a node where that round's
	// call is still out, the new call waits for it to return and is queued only then,
	// so a DEL never overtakes a SET on the same node.
	after *round
	// mustLand: a call that waited behind after's call past the node timeout is still
	// sent (a release must land). Without it such a call is dropped: stale extends would
	// only pile up behind a stalled node.
	mustLand bool
	// need, when not nil, is asked once after's call to node i has returned whether
	// node i needs this call at all; a node that does not gets none and counts as
	// having answered no.
	need func(i int) bool
	// queues: the calls queue or renew a fair waiter's entry (round.queues).
	queues bool
	// leadFirst: send the call to the key's lead node (Client.lead) first, and the
	// others only once it has answered (round.followLead). For a plain acquire after
	// a release that several Clients may have heard: one of them wins the lead, and
	// only it asks the other nodes, so the votes cannot split. Ignored with after, or
	// when the key has no usable lead.
	leadFirst bool
	// lineKeys and lineArgs, when lineArgs is not nil, replace keys and args for the
	// key's lead node (Client.lead) alone: a plain acquire that joins the key's line
	// there if it is refused (acquire.lua's ARGV[4]).
	lineKeys []string
	lineArgs []any
}

// start queues the step's script for every node at once (each node's sender sends it,
// batched with the node's other calls) and returns the round whose replies arrive on
// r.replies. Node calls run on a context the caller cannot cancel and are tracked by
// c.inFlight, so none outlives Client.Close. req says what to send and how it is ordered
// behind the lock's earlier calls.
func (c *Client) start(ctx context.Context, req stepRequest) *round {
	st, keys, after, n := req.step, req.keys, req.after, len(c.nodes)
	r := c.newRound(st, n)
	r.replies, r.calls, r.queues = make(chan reply, n), make([]roundCall, n), req.queues
	r.expires = time.Now().Add(c.opts.NodeTimeout)
	if _, ok := c.opts.Clock.(systemClock); !ok {
		r.timeout = c.opts.Clock.After(c.opts.NodeTimeout)
	}
	if after != nil || req.leadFirst {
		r.deadline = c.opts.Clock.Now().Add(c.opts.NodeTimeout)
	}
	c.inFlight.Add(n) // the caller holds an operation (Client.enter), so Close is waiting
	// One deadline for the round's calls: with go-redis's ContextTimeoutEnabled off it
	// bounds waiting for a connection, dialling and back-off, before anything is sent.
	// Reads and writes have go-redis's own timeouts (NewFromURLs); the round's timer
	// bounds how long the caller waits.
	var rctx context.Context
	rctx, r.cancel = context.WithTimeout(context.WithoutCancel(ctx), c.opts.NodeTimeout)
	r.left.Store(int32(n))
	for i := range c.nodes {
		r.calls[i].done = make(chan struct{})
	}
	lead, line := c.leadFor(r, req), c.lineCall(r, req)
	var leadCall *nodeCall
	var withCounter [2][]string // a fenced step's KEYS for plain and Cluster nodes, made once
	var vectors [2][]any        // EVALSHA's arguments with those KEYS (one kind without fencing)
	for i := range c.nodes {
		nodeKeys, kind := keys, 0
		if st.fencing {
			if c.nodes[i].cluster {
				kind = 1
			}
			if withCounter[kind] == nil {
				withCounter[kind] = append(slices.Clip(keys), fenceKeys(keys[0], kind == 1)[1:]...)
			}
			nodeKeys = withCounter[kind]
		}
		if vectors[kind] == nil {
			vectors[kind] = evalShaArgs(st.script, nodeKeys, req.args)
		}
		call := callPool.Get().(*nodeCall)
		*call = nodeCall{r: r, i: i, ctx: rctx, st: st, keys: nodeKeys, args: req.args, vector: vectors[kind], need: req.need, mustLand: req.mustLand}
		if i == line {
			call.keys, call.args, call.vector = req.lineKeys, req.lineArgs, evalShaArgs(st.script, req.lineKeys, req.lineArgs)
		}
		switch {
		case lead < 0:
			c.nodes[i].s.enqueue(call, after)
		case i == lead:
			leadCall, r.held[i].s = call, c.nodes[i].s
		default:
			r.held[i] = heldCall{s: c.nodes[i].s, c: call}
		}
	}
	if leadCall != nil { // last: its reply may come at once and free the held calls
		r.leadTimer = time.AfterFunc(leadWait(c.opts.NodeTimeout), r.leadSilent)
		c.nodes[lead].s.enqueue(leadCall, nil)
	}
	return r
}

// leadFor returns the lead of a lead-first round r (Client.lead), and sets r up to
// hold the other calls back; or −1, for a round that asks every node at once.
func (c *Client) leadFor(r *round, req stepRequest) int {
	if !req.leadFirst || req.after != nil {
		return -1
	}
	lead := c.lead(req.keys[0])
	if lead >= 0 {
		r.held, r.lead = make([]heldCall, len(c.nodes)), lead
	}
	return lead
}

// lead returns the node that a lead-first round for key asks first, or −1 when the
// round should ask every node at once: with one node, when the lead's latest call
// failed, or when it was slow to lead lately (round.leadSilent): a lead that does not
// answer at once costs every lead-first attempt leadWait. Every Client that names the
// nodes alike picks the same lead for a key: the node whose name, hashed with the
// key, ranks highest (rendezvous hashing), so the leads of different keys spread over
// the nodes. Safety does not depend on it: Clients that
// pick different leads only race as they would without one.
func (c *Client) lead(key string) int {
	best := c.lineNode(key)
	if best < 0 {
		return -1
	}
	if s := c.nodes[best].s; s.failing.Load() || time.Now().UnixNano() < s.noLeadUntil.Load() {
		return -1
	}
	return best
}

// fnv64a is the 64-bit FNV-1a hash of s (as hash/fnv computes it, without its
// allocation on the hot path).
func fnv64a(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// mix64 is SplitMix64's finaliser: it spreads every bit of x over the result.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// gather collects the round's replies into a tally until every node has answered, the
// node timeout fires (nodes still out count as failed with ErrNodeTimeout), ctx ends, or,
// when early is set, a majority said yes or enough said no that no majority can say yes
// (contention: no later answer can change that class). A step lost to failures waits
// for every answer, so its error class does not depend on which replies came first. It
// never stops the calls: those still out finish in the background, and their done
// channels say when. The per-node errors come in node order.
func (c *Client) gather(ctx context.Context, r *round, early bool) (t tally, errs *multierror.Error, ctxErr error) {
	n := len(c.nodes)
	t = newTally(n)
	began := time.Now()
	timeout := r.timeout
	if timeout == nil {
		t := timers.Get().(*time.Timer)
		t.Reset(time.Until(r.expires))
		defer func() {
			t.Stop() // since Go 1.23 a stopped timer's channel holds no stale value
			timers.Put(t)
		}()
		timeout = t.C
	}
	// Small fixed arrays stay on the stack for the usual N (≤ 7).
	var answeredBuf [7]bool
	var causesBuf [7]error
	answered, causes := answeredBuf[:0], causesBuf[:0]
	if n > len(answeredBuf) {
		answered, causes = make([]bool, 0, n), make([]error, 0, n)
	}
	answered, causes = answered[:n], causes[:n]
wait:
	for t.pending > 0 && !(early && (t.won() || t.contended())) {
		select {
		case rep := <-r.replies:
			answered[rep.node] = true
			t.addReply(rep)
			if t.n-t.pending == t.quorum() {
				t.quorumIn = time.Since(began) // for pacing only: the system clock will do
			}
			causes[rep.node] = rep.err
			if r.obs != nil {
				r.saw(rep.node, c.since(r.obs.base), rep.out, rep.err)
			}
		case <-timeout:
			if r.obs != nil {
				r.timedOut(answered, c.since(r.obs.base))
			}
			for i, ok := range answered {
				if !ok {
					t.add(outFailed, 0)
					t.unread++
					causes[i] = ErrNodeTimeout
					c.nodes[i].s.noteFailing(true) // no lead-first round leads with it (Client.lead)
				}
			}
		case <-ctx.Done():
			ctxErr = ctx.Err()
			break wait
		}
	}
	for i, cause := range causes {
		if cause != nil {
			errs = multierror.Append(errs, &NodeError{Node: c.nodes[i].name, Err: cause})
		}
	}
	finish(&errs)
	return t, errs, ctxErr
}

// finish sets the one-line format on a node error list.
func finish(errs **multierror.Error) {
	if *errs != nil {
		(*errs).ErrorFormat = joinNodeErrors
	}
}

// timers keeps stopped timers for gather: one per step would otherwise be made and
// dropped on the hot path (with the system clock; another Clock gives its own).
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}
