package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every call to a node goes into that node's queue. One goroutine per node (the
// sender) takes everything queued, sends it as one pipeline (a lone call as a plain
// command), and delivers each reply to its round. So a busy node costs one write, one
// read and one pooled connection per batch instead of per call, a call costs no
// goroutine of its own, and the sender's stack, grown once on its way through
// go-redis, is kept. A lock's call to a node whose previous call (of the same lock) is
// still out is parked until that one returns: a release can never overtake its acquire
// on the same node, and the clean-up of a failed attempt can see what each node said.
// A parked call, once free, goes before the calls queued while it waited: the clean-up
// of an attempt that gave up on a slow node must reach that node before the SET of
// the next attempt for the same key, which would otherwise meet the stale key there.
// So a batch ends with a call that has calls parked behind it and a later call for the
// same key (batchEnd), and calls to one key keep their order within a pipeline although
// EVALSHA may fail (againBuf, exec).

// sender queues one node's calls and sends them.
type sender struct {
	nd       *node
	inFlight *sync.WaitGroup // Client.inFlight: one Done per delivered call
	quit     <-chan struct{} // closed by Client.Close once every call was delivered
	wg       *sync.WaitGroup // the Client's sender goroutines
	timeout  time.Duration   // Options.NodeTimeout
	clock    Clock
	health   *nodeHealth // with Options.Logger: the node's state for the log
	// failing: the node's latest call failed (an error, or no answer in time). A
	// lead-first round does not lead with a failing node (Client.lead), nor, until
	// noLeadUntil (Unix nanoseconds, wall clock), with one that was slow to lead
	// (round.leadSilent), even if its calls succeed meanwhile.
	failing     atomic.Bool
	noLeadUntil atomic.Int64

	mu      sync.Mutex // innermost (see the lock order above Client)
	queue   []*nodeCall
	front   []*nodeCall   // parked calls freed by the batch out now: sent before queue
	running bool          // a sender goroutine exists
	idle    bool          // it waits on wake for calls
	wake    chan struct{} // buffered 1

	// The goroutine's own buffers, reused from batch to batch.
	batch []*nodeCall
	cmds  []*redis.Cmd
	again againBuf
}

// senderIdle is how long a sender goroutine waits for another call before it exits.
const senderIdle = 10 * time.Second

// nodeCall is one step's call to one node, from enqueue to delivery.
type nodeCall struct {
	r    *round
	i    int // the node's index in the round
	ctx  context.Context
	st   step
	keys []string
	args []any
	// vector: the whole EVALSHA command (evalShaArgs), made once per step and read by
	// the calls of all its nodes (each sends a copy: evalSha).
	vector []any
	need   func(i int) bool
	parked bool      // it waited for an earlier call to this node (roundCall.next)
	next   *nodeCall // the next call parked behind the same earlier call
	// mustLand: sent even after waiting past the node timeout (stepRequest.mustLand)
	mustLand bool

	out outcome
	v   int64
	err error
}

var callPool = sync.Pool{New: func() any { return new(nodeCall) }}

func newSender(nd *node, c *Client) *sender {
	return &sender{
		nd: nd, inFlight: &c.inFlight, quit: c.sendersQuit, wg: &c.senders,
		timeout: c.opts.NodeTimeout, clock: c.opts.Clock, health: c.watch.log.node(nd.name),
		wake: make(chan struct{}, 1),
	}
}

// enqueue queues a call and makes sure a sender goroutine will take it. If after's
// call to this node is still out, the call is parked behind it instead and queued when
// it returns (deliver).
func (s *sender) enqueue(c *nodeCall, after *round) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if after != nil {
		if prev := &after.calls[c.i]; !prev.delivered {
			c.parked = true
			p := &prev.next
			for *p != nil {
				p = &(*p).next
			}
			*p = c
			return
		}
	}
	s.queue = append(s.queue, c)
	s.kickLocked()
}

// kickLocked makes sure a sender goroutine will take what is queued: it starts one, or
// wakes the idle one. The caller holds s.mu. On the sender goroutine itself (running,
// not idle) it does nothing.
func (s *sender) kickLocked() {
	switch {
	case !s.running:
		s.running = true
		s.wg.Add(1)
		go s.loop()
	case s.idle:
		s.idle = false
		// Never block here, under mu: a token left from an earlier wake-up that the
		// loop did not need is just as good, since it reads the queue under mu.
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// loop takes and sends whatever is queued until it has been idle for senderIdle or the
// Client closes (Close waits for every call first, so the queue is empty then).
func (s *sender) loop() {
	defer s.wg.Done()
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	for {
		s.mu.Lock()
		for len(s.queue)+len(s.front) == 0 {
			s.idle = true
			s.mu.Unlock()
			if idle == nil {
				idle = time.NewTimer(senderIdle)
			} else {
				idle.Reset(senderIdle)
			}
			stop := false
			select {
			case <-s.wake:
			case <-idle.C:
				stop = true
			case <-s.quit:
				stop = true
			}
			s.mu.Lock()
			if stop && len(s.queue)+len(s.front) == 0 {
				s.running, s.idle = false, false
				s.mu.Unlock()
				return
			}
		}
		s.idle = false
		all := append(append(s.batch[:0], s.front...), s.queue...)
		clear(s.front)
		s.front = s.front[:0]
		cut := batchEnd(all, &s.again)
		// What follows the cut stays queued, in order, behind the calls its batch
		// frees (they go to s.front).
		s.queue = append(s.queue[:0], all[cut:]...)
		clear(all[cut:])
		all = all[:cut]
		s.mu.Unlock()
		s.send(all)
		clear(all)
		s.batch = all[:0]
	}
}

// batchEnd returns how many of the calls taken, in order, go out in one batch: all of
// them, unless a call has later calls parked behind it (roundCall.next) and a call
// after it in calls names the same key. The parked calls must reach the node before
// every call queued while they waited, so the batch ends with that call, and the rest
// waits for the next batch, behind the freed calls. Without the cut a SET queued
// behind an acquire call that had not left yet went out in the same pipeline, before
// the release parked behind that acquire: it met the key about to be deleted and was
// refused there (TestParkedCallsGoBeforeItsBatch). Calls for other keys are not held
// back: a node that lags, where most SETs have a release parked behind them, still
// drains its backlog in a few batches (TestSlowNodeDrainsInFewBatches). Calls with
// parked calls behind them are rare, so the keys are compared (through a, linear in
// the batch) only when there is one. The caller holds s.mu.
func batchEnd(calls []*nodeCall, a *againBuf) int {
	if !slices.ContainsFunc(calls, func(c *nodeCall) bool { return c.r.calls[c.i].next != nil }) {
		return len(calls)
	}
	again := a.of(calls)
	for k, c := range calls {
		if again[k] && c.r.calls[c.i].next != nil {
			return k + 1
		}
	}
	return len(calls)
}

// send judges whether each call is still wanted, sends those that are, and delivers
// every call's outcome.
func (s *sender) send(batch []*nodeCall) {
	// The calls to send, in order. (out never overtakes the calls still to judge in
	// batch's array; once freed calls are put in front, batch is a new slice.)
	out := batch[:0]
	late := false
	for len(batch) > 0 {
		c := batch[0]
		batch = batch[1:]
		if s.dropped(c) {
			// Calls parked behind a dropped call were freed to s.front: they go before
			// the rest of this batch, as they would had the call been sent (a release
			// after a failed handoff must precede the waiter's SET).
			s.mu.Lock()
			if len(s.front) > 0 {
				batch = append(append([]*nodeCall(nil), s.front...), batch...)
				clear(s.front)
				s.front = s.front[:0]
			}
			s.mu.Unlock()
			continue
		}
		late = late || c.parked && c.ctx.Err() != nil
		out = append(out, c)
	}
	if len(out) == 0 {
		return
	}
	s.sendOut(out, late)
}

// dropped delivers c without sending it if it is no longer wanted, and reports that.
func (s *sender) dropped(c *nodeCall) bool {
	switch {
	case c.r.abandoned.Load() && !c.r.queues:
		// Its attempt failed and is being cleaned up, or its lock is being released
		// (Lock.skipUnsent): sending the SET now would only leave a key for the
		// release to delete, possibly after the next attempt's SET queued behind it
		// met that key. (A dropped handoff call leaves the old
		// token, which the plain release parked behind it deletes.) A fair waiter's
		// attempt is still sent: it also puts the waiter's entry in place, and the
		// clean-up's release, parked behind it, deletes what it may set.
		c.r.calls[c.i].unsent = true
		s.deliver(c, outNo, 0, nil)
	case c.parked && !c.mustLand && !s.clock.Now().Before(c.r.deadline):
		// Waited behind a stalled call past its own node timeout: a stale extend would
		// only pile up behind the stalled node.
		s.noteFailing(true)
		s.deliver(c, outFailed, 0, errNodeBusy)
	case c.need != nil && !c.need(c.i): // the earlier call has returned (enqueue)
		s.deliver(c, outNo, 0, nil)
	default:
		return false
	}
	return true
}

// sendOut sends the calls that are still wanted and delivers their outcomes.
func (s *sender) sendOut(out []*nodeCall, late bool) {
	// The batch goes out under the call context with the latest deadline (each bounds
	// waiting for a connection and dialling); under a fresh node timeout if all have
	// passed while the calls waited behind an earlier batch, or if the batch carries a
	// call that waited past its own for a stalled one (go-redis may have to dial anew,
	// and a release must not fail for want of time left on a newer call's context).
	ctx := latest(out)
	if late || ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
		defer cancel()
	}
	s.exec(ctx, out)
	for _, c := range out {
		if s.health != nil {
			s.health.note(c.out, c.err)
		}
		s.noteFailing(c.out == outFailed)
		s.deliver(c, c.out, c.v, c.err)
	}
}

// noteFailing records whether the node's latest call failed (sender.failing).
func (s *sender) noteFailing(failed bool) {
	if s.failing.Load() != failed {
		s.failing.Store(failed)
	}
}

// deliver hands a call's outcome to its round, frees the calls parked behind it (to
// go out ahead of the queue, in the order they were parked), marks it returned and
// recycles it. It runs on the sender goroutine, which takes them after the batch, or,
// for a lead-first round's call that was never sent, on the lead node's (kickLocked).
// The lead's own call, once delivered, sends or skips the round's other calls.
func (s *sender) deliver(c *nodeCall, out outcome, v int64, err error) {
	r, i := c.r, c.i
	*c = nodeCall{}
	callPool.Put(c)
	r.answer(i, out, v, err)
	rc := &r.calls[i]
	s.mu.Lock()
	rc.delivered = true
	if rc.next != nil {
		for f := rc.next; f != nil; {
			next := f.next
			f.next = nil
			s.front = append(s.front, f)
			f = next
		}
		rc.next = nil
		s.kickLocked()
	}
	s.mu.Unlock()
	r.finished()
	close(rc.done)
	s.inFlight.Done()
	if r.held != nil && i == r.lead {
		r.followLead(out, v)
	}
}

// againBuf finds, for each call of a batch, whether a later call of the batch names
// the same key (keys[0], the lock key in every step): then the call must run on the
// node before that one. Its buffers are reused from batch to batch.
type againBuf struct {
	again []bool
	seen  map[string]struct{}
}

// againScan is the batch size up to which againBuf compares keys pairwise; larger
// batches (a stalled node's backlog) go through a map, so that the work stays linear.
const againScan = 16

// of returns again[k] for each call of calls; valid until the next call of of.
func (a *againBuf) of(calls []*nodeCall) []bool {
	a.again = slices.Grow(a.again[:0], len(calls))[:len(calls)]
	clear(a.again)
	if len(calls) <= againScan {
		for k, c := range calls {
			for _, d := range calls[k+1:] {
				if d.keys[0] == c.keys[0] {
					a.again[k] = true
					break
				}
			}
		}
		return a.again
	}
	if a.seen == nil {
		a.seen = make(map[string]struct{})
	}
	clear(a.seen)
	for k := len(calls) - 1; k >= 0; k-- {
		key := calls[k].keys[0]
		_, a.again[k] = a.seen[key]
		a.seen[key] = struct{}{}
	}
	return a.again
}

// latest returns the context of the batch's call whose deadline is the latest (one
// without a deadline wins).
func latest(batch []*nodeCall) context.Context {
	best := batch[0].ctx
	for _, c := range batch[1:] {
		d, ok := c.ctx.Deadline()
		if !ok {
			return c.ctx
		}
		if bd, ok := best.Deadline(); ok && d.After(bd) {
			best = c.ctx
		}
	}
	return best
}

// exec runs a batch on the node: one call as a plain command, several as a pipeline. A
// call whose script the node has lost (NOSCRIPT) is sent again on its own with EVAL,
// after the rest of its pipeline has run; so a call that a later call of the batch for
// the same key must follow goes as EVAL in the first place.
func (s *sender) exec(ctx context.Context, batch []*nodeCall) {
	rdb := s.nd.rdb
	if len(batch) == 1 {
		c := batch[0]
		cmd := c.evalSha(ctx, rdb, s.nd.own)
		if noScript(cmd) { // as redis.Script.Run does
			cmd = c.st.script.Eval(ctx, rdb, c.keys, c.args...)
		}
		c.out, c.v, c.err = judge(c.st, cmd)
		return
	}
	pipe := rdb.Pipeline()
	cmds := s.cmds[:0]
	again := s.again.of(batch)
	var loaded []*redis.Script // the scripts this pipeline sends as EVAL, in order
	for k, c := range batch {
		if again[k] && !slices.Contains(loaded, c.st.script) {
			// EVALSHA could fail with NOSCRIPT and run again after the later call for
			// the same key: EVAL runs it in its place (TestNoScriptKeepsTheOrder), and
			// the pipeline's later calls of the script can use EVALSHA.
			cmds = append(cmds, c.st.script.Eval(ctx, pipe, c.keys, c.args...))
			loaded = append(loaded, c.st.script)
			continue
		}
		cmds = append(cmds, c.evalSha(ctx, pipe, s.nd.own))
	}
	defer func() { clear(cmds); s.cmds = cmds }()
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range batch {
		cmd := cmds[i]
		if noScript(cmd) {
			cmd = c.st.script.Eval(ctx, rdb, c.keys, c.args...)
		}
		c.out, c.v, c.err = judge(c.st, cmd)
	}
}

// evalSha sends the call's script as EVALSHA to p (a node's client or pipeline): what
// redis.Script.EvalSha sends, from the step's argument vector without boxing every key
// and argument again for every node. Each call sends a copy of the vector: a hook of
// the caller's node client may rewrite a command's arguments in place (a key prefix,
// say), and must not rewrite the other nodes' (TestHookRewritesOneNodesArgs). Only for
// go-redis's own clients (own: node.own): a caller's wrapper gets its EvalSha called
// (TestWrapperEvalShaStillCalled).
func (c *nodeCall) evalSha(ctx context.Context, p processor, own bool) *redis.Cmd {
	if !own {
		return c.st.script.EvalSha(ctx, p, c.keys, c.args...)
	}
	cmd := redis.NewCmd(ctx, slices.Clone(c.vector)...)
	if len(c.keys) > 0 {
		cmd.SetFirstKeyPos(3) // for a Cluster client, as go-redis's own EvalSha does
	}
	_ = p.Process(ctx, cmd) // the reply and its error are in cmd
	return cmd
}

// noScript reports whether the node did not know the command's script. It asks
// redis.HasErrorPrefix only about an error: that call allocates, even for none.
func noScript(cmd *redis.Cmd) bool {
	err := cmd.Err()
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// processor sends one command: a node's client, or a pipeline that sends it later.
type processor interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// evalShaArgs returns the EVALSHA command of script with keys and args: the name, the
// script's hash, the number of keys, the keys, the arguments (each flat: a string or a
// number, as every step's arguments are).
func evalShaArgs(script *redis.Script, keys []string, args []any) []any {
	v := make([]any, 0, 3+len(keys)+len(args))
	v = append(v, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		v = append(v, k)
	}
	return append(v, args...)
}

// judge turns a script's reply into the step's outcome.
func judge(st step, cmd *redis.Cmd) (outcome, int64, error) {
	res, err := cmd.Result()
	if err != nil {
		return outFailed, 0, err
	}
	v, ok := res.(int64)
	if s, isText := res.(string); isText && st.fencing {
		v, err = strconv.ParseInt(s, 10, 64)
		ok = err == nil
		if ok && st.text != nil {
			if out := st.text(v); out != outFailed {
				return out, v, nil
			}
			return outFailed, v, fmt.Errorf("unexpected script reply %q", s)
		}
	}
	if !ok {
		return outFailed, 0, fmt.Errorf("unexpected script reply %T(%v)", res, res)
	}
	if out := st.judge(v); out != outFailed {
		return out, v, nil
	}
	return outFailed, v, fmt.Errorf("unexpected script reply %d", v)
}
