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
	deadline time.Time        // for calls queued behind an earlier call still out

	cancel context.CancelFunc // ends the round's call context
	left   atomic.Int32       // calls not yet finished
	// abandoned is set when a failed acquire or handoff round is cleaned up: its
	// calls that are still queued, not sent, are then dropped (answered "no": nothing
	// was set; after a handoff the old token stays, for the plain release that
	// follows).
	abandoned atomic.Bool
	// queues: the round's calls also queue or renew a fair waiter's entry
	// (stepRequest.queues); abandoned does not drop them, since a node they never
	// reach keeps the number it drew, or no entry, until the next renewal.
	queues bool

	obs *roundObs // with Options.Observer: what gather saw (observe_emit.go); else nil
}

// roundCall is the state of a round's call to one node.
type roundCall struct {
	done chan struct{} // closed once the call has returned
	// out is what the node answered. It is written before the reply is sent and before
	// done is closed: read it only for a node whose reply gather received, or after done.
	out outcome
	val int64 // the reply's value, written with out

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
}

// start queues the step's script for every node at once (each node's sender sends it,
// batched with the node's other calls) and returns the round whose replies arrive on
// r.replies. Node calls run on a context the caller cannot cancel and are tracked by
// c.inFlight, so none outlives Client.Close. req says what to send and how it is ordered
// behind the lock's earlier calls.
func (c *Client) start(ctx context.Context, req stepRequest) *round {
	st, keys, after := req.step, req.keys, req.after
	n := len(c.nodes)
	r := c.newRound(st, n)
	r.replies, r.calls = make(chan reply, n), make([]roundCall, n)
	r.queues = req.queues
	r.expires = time.Now().Add(c.opts.NodeTimeout)
	if _, ok := c.opts.Clock.(systemClock); !ok {
		r.timeout = c.opts.Clock.After(c.opts.NodeTimeout)
	}
	if after != nil {
		r.deadline = c.opts.Clock.Now().Add(c.opts.NodeTimeout)
	}
	c.inFlight.Add(n) // the caller holds an operation (Client.enter), so Close is waiting
	// One deadline for the round's calls: with go-redis's default ContextTimeoutEnabled
	// off it bounds waiting for a pooled connection, dialling and retry back-off, the
	// phases in which nothing was sent yet. Reads and writes are bounded by go-redis's
	// own timeouts (see NewFromURLs); the round's timer bounds how long the caller waits.
	var rctx context.Context
	rctx, r.cancel = context.WithTimeout(context.WithoutCancel(ctx), c.opts.NodeTimeout)
	r.left.Store(int32(n))
	for i := range c.nodes {
		r.calls[i].done = make(chan struct{})
	}
	var withCounter [2][]string // a fenced step's KEYS for plain and Cluster nodes, made once
	for i := range c.nodes {
		nodeKeys := keys
		if st.fencing {
			kind := 0
			if c.nodes[i].cluster {
				kind = 1
			}
			if withCounter[kind] == nil {
				withCounter[kind] = append(slices.Clip(keys), fenceKeys(keys[0], kind == 1)[1:]...)
			}
			nodeKeys = withCounter[kind]
		}
		call := callPool.Get().(*nodeCall)
		*call = nodeCall{r: r, i: i, ctx: rctx, st: st, keys: nodeKeys, args: req.args, need: req.need, mustLand: req.mustLand}
		c.nodes[i].s.enqueue(call, after)
	}
	return r
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
			t.add(rep.out, rep.val)
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
					causes[i] = ErrNodeTimeout
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
