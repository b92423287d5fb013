package redlock

import (
	"context"
	"time"

	"github.com/hashicorp/go-multierror"
)

// tally counts the answers of the n nodes in one step.
type tally struct {
	n, yes, no, failed, pending int
	refused                     int   // of no: refusals by a fencing counter
	high                        int64 // the largest counter a node reported (fencing steps)
}

func newTally(n int) tally { return tally{n: n, pending: n} }

// add records one node's outcome and reply value.
func (t *tally) add(o outcome, v int64) {
	t.pending--
	switch o {
	case outYes:
		t.yes++
	case outNo:
		t.no++
	case outRefused:
		t.no++
		t.refused++
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
	replies chan reply      // buffered to n: a late reply never blocks its goroutine
	done    []chan struct{} // done[i] is closed once node i's call has returned
	timeout <-chan time.Time
	// outs[i] is what node i answered. It is written before the reply is sent and
	// before done[i] is closed: read it only for a node whose reply gather received, or
	// after done[i].
	outs     []outcome
	deadline time.Time // for calls that wait behind an earlier one
}

// answer records node i's outcome and delivers its reply.
func (r *round) answer(i int, out outcome, v int64, err error) {
	r.outs[i] = out
	r.replies <- reply{node: i, out: out, val: v, err: err}
}

// mayHold reports whether node i may have set our key in this acquire round: it did
// not answer that another token holds the key or that its fencing counter refused us.
// Call it after r.done[i].
func (r *round) mayHold(i int) bool { return r.outs[i] != outNo && r.outs[i] != outRefused }

// lacks reports whether node i answered that it does not hold our key (or failed) in
// this extend round. Call it after r.done[i].
func (r *round) lacks(i int) bool { return r.outs[i] == outNo || r.outs[i] == outFailed }

// start sends the step's script to every node at once, one call per node on c.workers,
// and returns the round whose replies arrive on r.replies. Node calls run on a context
// the caller cannot cancel and are tracked by c.calls, so none outlives Client.Close.
//
// after[i], when not nil, is the done channel of this lock's earlier call to node i: the
// new call is sent only once that one has returned, so a DEL never overtakes a SET still
// in flight on the same node. If the node timeout has passed by then, the call is sent
// anyway when always is set (a release must land), and dropped otherwise (stale extends
// would only pile up behind a stalled node). need, when not nil, is asked once the
// earlier call has returned whether node i needs this call at all; a node that does not
// gets none and counts as having answered no.
func (c *Client) start(ctx context.Context, st step, keys []string, args []any, after []chan struct{}, always bool, need func(i int) bool) *round {
	n := len(c.nodes)
	r := &round{
		replies: make(chan reply, n),
		done:    make([]chan struct{}, n),
		timeout: c.opts.Clock.After(c.opts.NodeTimeout),
		outs:    make([]outcome, n),
	}
	if after != nil {
		r.deadline = c.opts.Clock.Now().Add(c.opts.NodeTimeout)
	}
	c.calls.Add(n) // the caller holds an operation (Client.enter), so Close is waiting
	base := context.WithoutCancel(ctx)
	for i := range c.nodes {
		done := make(chan struct{})
		r.done[i] = done
		var wait chan struct{}
		if after != nil {
			wait = after[i]
		}
		nd := &c.nodes[i]
		c.workers.run(func() {
			defer c.calls.Done()
			defer close(done)
			if wait != nil {
				select {
				case <-wait: // the earlier call has returned: send at once
				default:
					<-wait
					if !always && !c.opts.Clock.Now().Before(r.deadline) {
						r.answer(i, outFailed, 0, errNodeBusy)
						return
					}
				}
			}
			if need != nil && !need(i) {
				r.answer(i, outNo, 0, nil)
				return
			}
			// No deadline on the call itself: one that go-redis abandoned at a context
			// deadline could still execute later from the socket's buffer, and done
			// must mean the call can no longer land. The round's own timer bounds how
			// long the caller waits; go-redis's ReadTimeout ends the call.
			out, v, err := nd.run(base, st, keys, args)
			r.answer(i, out, v, err)
		})
	}
	return r
}

// gather collects the round's replies into a tally until every node has answered, the
// node timeout fires (nodes still out count as failed with ErrNodeTimeout), ctx ends, or,
// when early is set, a majority said yes. A lost step waits for every answer, so its
// error class (contention or failure) does not depend on which replies came first. It
// never stops the calls: those still out finish in the background, and their done
// channels say when. The per-node errors come in node order.
func (c *Client) gather(ctx context.Context, r *round, early bool) (t tally, errs *multierror.Error, ctxErr error) {
	n := len(c.nodes)
	t = newTally(n)
	answered := make([]bool, n)
	causes := make([]error, n)
wait:
	for t.pending > 0 && !(early && t.won()) {
		select {
		case rep := <-r.replies:
			answered[rep.node] = true
			t.add(rep.out, rep.val)
			causes[rep.node] = rep.err
		case <-r.timeout:
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
