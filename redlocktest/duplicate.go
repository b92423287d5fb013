package redlocktest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DuplicateOptions configures a Duplicator.
type DuplicateOptions struct {
	// Fraction is the share of commands delivered a second time, from 0 to 1. Each
	// command of a pipeline is drawn on its own.
	Fraction float64

	// MaxDelay bounds the delay of a copy: each copy is sent after a delay drawn
	// uniformly from [0, MaxDelay] after its original went out. A delay of about a
	// lock's TTL lets a copy land after the lock was extended, released or taken over.
	MaxDelay time.Duration

	// Seed makes the draws repeat: two Duplicators with the same seed that see the
	// same commands in the same order copy the same ones with the same delays.
	Seed uint64

	// Match, when not nil, selects the commands that may be copied (it sees the
	// command before it is sent). Connection-scoped commands (HELLO, AUTH, SELECT,
	// CLIENT, the (un)subscribe family, MULTI/EXEC transactions) are never copied.
	Match func(cmd redis.Cmder) bool

	// Timeout bounds the sending of one copy (waiting for a connection, writing,
	// reading the reply). Zero means 1 s.
	Timeout time.Duration
}

// Copy describes one duplicated command, as reported to Duplicator.Copies.
type Copy struct {
	Args  []any         // the command as sent
	Delay time.Duration // after the original
	Err   error         // what the server answered the copy (nil for a reply that is not an error)
}

// Duplicator is a go-redis hook that delivers a chosen fraction of the commands a
// client sends a second time, each copy after a random delay and on a connection of
// its own to the same server: the duplicate and late delivery of a network that
// retransmits, a client library that retries after a lost reply, or a command that
// waited in a stalled connection's buffer. Add it with rdb.AddHook; commands of
// pipelines are copied one by one (each copy is a command of its own). A copy of an
// EVALSHA that the server answers NOSCRIPT is sent again as EVAL when the script's
// body went through the hook before.
//
// Duplicate installs one on a client for a test; NewDuplicator makes one for use
// outside tests. Close drops the copies not sent yet.
type Duplicator struct {
	opts   DuplicateOptions
	copier *redis.Client

	mu      sync.Mutex
	rng     *rand.Rand
	closed  bool
	pending map[*time.Timer]struct{}
	scripts map[string]string // sha1 → body, from EVAL commands seen
	copied  int
	sent    int
	copies  []Copy

	inflight sync.WaitGroup // copies being sent
	drained  *sync.Cond     // signalled when pending shrinks
}

// NewDuplicator returns a Duplicator whose copies go to the server of o (its address,
// credentials and database) over connections of their own. Add it to the client with
// AddHook, and Close it after that client.
func NewDuplicator(o *redis.Options, opts DuplicateOptions) *Duplicator {
	// A fresh client to the same server with the same credentials (copying the
	// hooked client's Options whole would share its internal state).
	co := redis.Options{
		Network: o.Network, Addr: o.Addr, Dialer: o.Dialer, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, CredentialsProvider: o.CredentialsProvider,
		DB: o.DB, TLSConfig: o.TLSConfig,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		MaxRetries: -1, // one copy is one delivery
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	d := &Duplicator{
		opts:    opts,
		copier:  redis.NewClient(&co),
		rng:     rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		pending: make(map[*time.Timer]struct{}),
		scripts: make(map[string]string),
	}
	d.drained = sync.NewCond(&d.mu)
	return d
}

// Duplicate installs a Duplicator on rdb for the rest of the test; it is closed (its
// unsent copies dropped) when the test ends.
func Duplicate(t T, rdb *redis.Client, opts DuplicateOptions) *Duplicator {
	d := NewDuplicator(rdb.Options(), opts)
	rdb.AddHook(d)
	t.Cleanup(func() { _ = d.Close() })
	record(t, Event{Kind: EventDuplicate, Node: rdb.Options().Addr, Detail: d.describe()})
	return d
}

// describe returns the Duplicator's settings for an Event: "30% of commands, up to 1s".
func (d *Duplicator) describe() string {
	return strconv.FormatFloat(100*d.opts.Fraction, 'f', -1, 64) + "% of commands, up to " + d.opts.MaxDelay.String()
}

// DialHook implements redis.Hook; it changes nothing.
func (d *Duplicator) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook: a drawn command is sent, then copied later.
func (d *Duplicator) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		d.consider(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook: each command of a pipeline is drawn on
// its own; transactions are left alone.
func (d *Duplicator) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "multi" {
			for _, cmd := range cmds {
				d.consider(cmd)
			}
		}
		return next(ctx, cmds)
	}
}

// connectionScoped lists commands whose copy on another connection would mean
// something else, or nothing.
var connectionScoped = map[string]bool{
	"hello": true, "auth": true, "select": true, "client": true, "quit": true, "reset": true,
	"subscribe": true, "psubscribe": true, "ssubscribe": true, "unsubscribe": true,
	"punsubscribe": true, "sunsubscribe": true, "multi": true, "exec": true, "discard": true,
	"watch": true, "unwatch": true, "readonly": true, "readwrite": true,
}

// consider draws whether cmd gets a copy and schedules it.
func (d *Duplicator) consider(cmd redis.Cmder) {
	name := cmd.Name()
	if name == "eval" && len(cmd.Args()) > 1 {
		if body, ok := cmd.Args()[1].(string); ok {
			sum := sha1.Sum([]byte(body))
			d.mu.Lock()
			d.scripts[hex.EncodeToString(sum[:])] = body
			d.mu.Unlock()
		}
	}
	if connectionScoped[name] || (d.opts.Match != nil && !d.opts.Match(cmd)) {
		return
	}
	args := append([]any(nil), cmd.Args()...)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || d.opts.Fraction <= 0 || d.rng.Float64() >= d.opts.Fraction {
		return
	}
	var delay time.Duration
	if d.opts.MaxDelay > 0 {
		delay = time.Duration(d.rng.Int64N(int64(d.opts.MaxDelay) + 1))
	}
	d.copied++
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		d.mu.Lock()
		if _, ok := d.pending[t]; !ok { // dropped by Close
			d.mu.Unlock()
			return
		}
		delete(d.pending, t)
		d.inflight.Add(1)
		d.drained.Broadcast()
		d.mu.Unlock()
		defer d.inflight.Done()
		d.send(args, delay)
	})
	d.pending[t] = struct{}{}
}

// send delivers one copy and records it.
func (d *Duplicator) send(args []any, delay time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	err := d.copier.Do(ctx, args...).Err()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") && len(args) > 1 {
		d.mu.Lock()
		body, ok := d.scripts[strings.ToLower(asString(args[1]))]
		d.mu.Unlock()
		if ok {
			eval := append([]any{"eval", body}, args[2:]...)
			err = d.copier.Do(ctx, eval...).Err()
		}
	}
	if err == redis.Nil {
		err = nil
	}
	d.mu.Lock()
	d.sent++
	d.copies = append(d.copies, Copy{Args: args, Delay: delay, Err: err})
	d.mu.Unlock()
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// Copies returns the copies sent so far, in the order they were sent.
func (d *Duplicator) Copies() []Copy {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Copy(nil), d.copies...)
}

// Counts returns how many commands were drawn for a copy and how many copies have
// been sent so far (the others are waiting for their delay, or were dropped by Close).
func (d *Duplicator) Counts() (copied, sent int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.copied, d.sent
}

// Drain waits until every copy drawn so far has been sent, or ctx ends.
func (d *Duplicator) Drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.drained.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	for len(d.pending) > 0 && ctx.Err() == nil {
		d.drained.Wait()
	}
	d.mu.Unlock()
	d.inflight.Wait()
	return ctx.Err()
}

// Close drops the copies still waiting for their delay, waits for those being sent,
// and closes the Duplicator's connections. Commands sent after Close get no copy.
func (d *Duplicator) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for t := range d.pending {
		t.Stop()
		delete(d.pending, t)
	}
	d.drained.Broadcast()
	d.mu.Unlock()
	d.inflight.Wait()
	return d.copier.Close()
}
