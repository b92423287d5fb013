package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Calls to one node that overlap in time are sent together: the first caller sends
// what is queued as one pipeline and hands on to the next queued caller, so a busy node
// costs one write, one read and one pooled connection per batch instead of per call.
// A lone call goes out at once, as a plain command.

// batcher queues one node's calls.
type batcher struct {
	timeout time.Duration // Options.NodeTimeout

	mu    sync.Mutex
	queue []*nodeCall
	busy  bool // a caller is sending

	// Buffers of the sending caller, reused from batch to batch.
	sending []*nodeCall
	cmds    []*redis.Cmd
}

// nodeCall is one call waiting in a batcher.
type nodeCall struct {
	ctx  context.Context
	st   step
	keys []string
	args []any
	out  outcome
	v    int64
	err  error
	sig  chan bool // true: send the queue now; false: your result is in
}

var callPool = sync.Pool{New: func() any { return &nodeCall{sig: make(chan bool, 1)} }}

// run executes the step's script on the node, batched with the node's other calls in
// flight, and judges the integer reply; v is the reply itself.
func (n *node) run(ctx context.Context, st step, keys []string, args []any) (out outcome, v int64, err error) {
	b := n.b
	if b == nil { // a node made without New (unit tests)
		return judge(st, st.script.Run(ctx, n.rdb, keys, args...))
	}
	c := callPool.Get().(*nodeCall)
	c.ctx, c.st, c.keys, c.args = ctx, st, keys, args
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !lead {
		lead = <-c.sig
	}
	if lead {
		b.mu.Lock()
		batch := b.queue
		b.queue = b.sending[:0]
		b.mu.Unlock()
		// The batch goes out under the call context with the latest deadline (each
		// bounds waiting for a connection and dialling); if all have passed while
		// this caller waited for earlier batches, under a fresh node timeout.
		sctx := latest(batch)
		if sctx.Err() != nil {
			var cancel context.CancelFunc
			sctx, cancel = context.WithTimeout(context.WithoutCancel(sctx), b.timeout)
			defer cancel()
		}
		n.send(sctx, batch)
		for _, o := range batch {
			if o != c {
				o.sig <- false
			}
		}
		clear(batch)
		b.mu.Lock()
		b.sending = batch
		if len(b.queue) > 0 {
			b.queue[0].sig <- true // the next caller sends what queued meanwhile
		} else {
			b.busy = false
		}
		b.mu.Unlock()
	}
	out, v, err = c.out, c.v, c.err
	*c = nodeCall{sig: c.sig}
	callPool.Put(c)
	return out, v, err
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

// send executes a batch: one call as a plain command, several as a pipeline. A call
// whose script the node has lost (NOSCRIPT) is sent again on its own with EVAL.
func (n *node) send(ctx context.Context, batch []*nodeCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.out, c.v, c.err = judge(c.st, c.st.script.Run(ctx, n.rdb, c.keys, c.args...))
		return
	}
	pipe := n.rdb.Pipeline()
	cmds := n.b.cmds[:0]
	for _, c := range batch {
		cmds = append(cmds, pipe.EvalSha(ctx, c.st.script.Hash(), c.keys, c.args...))
	}
	defer func() { clear(cmds); n.b.cmds = cmds }()
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range batch {
		cmd := cmds[i]
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			cmd = c.st.script.Eval(ctx, n.rdb, c.keys, c.args...)
		}
		c.out, c.v, c.err = judge(c.st, cmd)
	}
}

// judge turns a script's reply into the step's outcome.
func judge(st step, cmd *redis.Cmd) (outcome, int64, error) {
	res, err := cmd.Result()
	if err != nil {
		return outFailed, 0, err
	}
	v, ok := res.(int64)
	if !ok {
		return outFailed, 0, fmt.Errorf("unexpected script reply %T(%v)", res, res)
	}
	if out := st.judge(v); out != outFailed {
		return out, v, nil
	}
	return outFailed, v, fmt.Errorf("unexpected script reply %d", v)
}
