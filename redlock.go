package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by steps started after Close, and by an Acquire that was
// waiting to retry when Close was called.
var ErrClosed = errors.New("redlock: client closed")

// The lock order. A goroutine that holds more than one of the library's mutexes took
// them in this order (an arrow: the left one is held while the right one is taken; a
// step may skip any of them):
//
//	Lock.op → Client.closeMu → Lock.mu   (Lock.begin; KeepAlive)
//	Lock.op → queues.mu → Lock.mu        (Release, handoff; queues.granted and heldHere
//	                                      read the validity of any lock of the Client)
//	Lock.op → sender.mu                  (Client.start queues a lock's node calls)
//
// Client.closeMu and queues.mu are never held together. Lock.mu, sender.mu and
// fenceCache.mu are innermost: nothing else is locked, and nothing is waited for, while
// one of them is held. Two waits are part of the order too: Release stops a running
// KeepAlive (keeper.halt waits for its goroutine) holding neither l.op nor l.mu, since
// that goroutine takes both (Extend, detach); and an Acquire waits for its queue turn,
// a wake-up or a handoff holding no mutex.

// Client acquires locks held across N independent Redis masters. It is safe for
// concurrent use by many goroutines.
type Client struct {
	nodes []node
	opts  Options // with defaults applied
	owned bool    // the go-redis clients were made by NewFromURLs and are closed by Close

	closeMu  sync.RWMutex // guards closed; see the lock order above Client
	closed   bool
	closing  chan struct{}  // closed when Close starts: waiting Acquires give up
	shut     chan struct{}  // closed when Close has finished
	shutErr  error          // what the first Close returned
	inFlight sync.WaitGroup // steps in progress, and node calls not yet returned (also ones a step stopped waiting for)
	keepers  sync.WaitGroup // KeepAlive goroutines: Close ends them and waits

	fences fenceCache // with Options.Fencing: the highest counter seen per key
	queues queues     // waiters (blocking Acquires) per key, and release subscriptions

	senders     sync.WaitGroup // the nodes' sender goroutines (sender.go)
	sendersQuit chan struct{}  // closed by Close after the last node call: senders exit
}

// New returns a Client over the given go-redis clients, one per independent Redis
// master (a plain, Sentinel-managed or Cluster client may each serve as one member).
// The zero Options means every default. The caller keeps ownership of the clients:
// Close does not close them. New rejects:
//   - an empty list, a nil client, and invalid options;
//   - the same client, or the same server, twice: one server must not vote twice.
//     Addresses are compared after normalising IP literals (an IPv4-mapped IPv6
//     address is the IPv4 address) and resolving host names, all at once and for at
//     most half a second (a name that does not resolve in time stands for itself, so
//     New works while DNS is down); unix sockets by path; a client with a Dialer of
//     its own decides itself where it connects and is not compared. CheckNodes finds
//     the rest (a proxy, another interface of the same host) by the servers' run_id;
//   - a client with ContextTimeoutEnabled, with an error wrapping ErrNodeConfig: it
//     breaks an ordering rule, that a call counts as finished only once go-redis gave
//     up on it, so that a lock's release is sent after its SET has really left.
//
// New accepts go-redis's default retries (MaxRetries 3), which most callers pass: the
// scripts are written to stay safe when a command arrives twice or late, so retries
// cost time and hide causes, not safety. CheckNodes reports them; set MaxRetries: -1.
func New(nodes []redis.UniversalClient, opts Options) (*Client, error) {
	return newClient(nodes, nil, opts)
}

// NewFromURLs returns a Client over one go-redis client per URL, each of the form
// redis://[user:password@]host:port[/db] or rediss://... for TLS (the options
// redis.ParseURL accepts; write '@', ':', '/', '?', '#' and '%' in a password
// percent-encoded). Errors and node names show URLs with the password redacted, and
// no error quotes any part of it.
// The clients do not retry failed commands (the next attempt is the retry; add
// max_retries=N to a URL to override). Their dial, read and write timeouts are
// 10 × Options.NodeTimeout each (500 ms with the default), so that a stalled node holds
// a call, and Close, that long rather than go-redis's 5 s default; a dial_timeout,
// read_timeout or write_timeout in a URL wins (a read_timeout alone sets the write
// timeout too, as in go-redis). Close closes the clients.
func NewFromURLs(urls []string, opts Options) (*Client, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	rdbs := make([]redis.UniversalClient, 0, len(urls))
	names := make([]string, 0, len(urls))
	closeAll := func() {
		for _, rdb := range rdbs {
			_ = rdb.Close()
		}
	}
	for i, raw := range urls {
		name := redactURL(raw)
		ropts, err := parseNodeURL(raw)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redlock: node URL %d (%s): %w", i+1, name, err)
		}
		u, _ := url.Parse(raw) // parsed above
		// ContextTimeoutEnabled stays off on purpose: a call abandoned at a context
		// deadline may still execute later (its bytes wait in a stalled server's
		// socket), so its done channel would no longer mean "no longer in flight", and
		// a release could overtake its SET. go-redis's ReadTimeout ends such calls.
		if !u.Query().Has("max_retries") {
			// go-redis would retry READONLY, LOADING and network errors with back-off,
			// which inside a node timeout only hides the cause; the quorum is the retry.
			ropts.MaxRetries = -1
		}
		// go-redis dials a refused connection 5 times, 100 ms apart, by default: longer
		// than a node timeout, and a release to that node would wait behind it.
		ropts.DialerRetries = 1
		setConnTimeouts(ropts, u.Query(), o.NodeTimeout)
		rdbs = append(rdbs, redis.NewClient(ropts))
		names = append(names, name)
	}
	c, err := newClient(rdbs, names, opts)
	if err != nil {
		closeAll()
		return nil, err
	}
	c.owned = true
	return c, nil
}

func newClient(rdbs []redis.UniversalClient, names []string, opts Options) (*Client, error) {
	if len(rdbs) == 0 {
		return nil, errors.New("redlock: no nodes")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		nodes:   make([]node, len(rdbs)),
		opts:    o,
		closing: make(chan struct{}),
		shut:    make(chan struct{}),
	}
	c.queues.c = c
	c.sendersQuit = make(chan struct{})
	for i, rdb := range rdbs {
		if rdb == nil || isNilPointer(rdb) {
			return nil, fmt.Errorf("redlock: node %d is nil", i+1)
		}
		for j := range i {
			if sameClient(rdbs[j], rdb) {
				return nil, fmt.Errorf("redlock: nodes %d and %d are the same client", j+1, i+1)
			}
		}
		name := nodeName(rdb, i)
		if names != nil {
			name = names[i]
		}
		if readClientSettings(rdb).contextTimeout {
			return nil, fmt.Errorf("redlock: node %d (%s): %w: %s", i+1, name, ErrNodeConfig, whyNoContextTimeout)
		}
		c.nodes[i] = node{name: name, rdb: rdb, cluster: isCluster(rdb)}
	}
	if err := distinctServers(c.nodes); err != nil {
		return nil, err
	}
	for i := range c.nodes {
		c.nodes[i].s = newSender(&c.nodes[i], c)
	}
	return c, nil
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// sameClient reports whether a and b are the same pointer. Values of other kinds are
// never the same client (and == could panic on an uncomparable wrapper type).
func sameClient(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer &&
		va.Type() == vb.Type() && va.Pointer() == vb.Pointer()
}

// Close is Shutdown without a deadline: it returns once every step and node call of
// the Client has ended.
func (c *Client) Close() error { return c.Shutdown(context.Background()) }

// Shutdown closes the Client. From its first call on, new steps fail with ErrClosed,
// waiting Acquires give up, no attempt or handoff still out grants a lock (one that
// wins a majority after Shutdown began is released and its Acquire fails with
// ErrClosed), and
// every KeepAlive ends, its context cancelled with a cause matching ErrClosed: at once,
// or once the renewal it has out ends (a step: about NodeTimeout). The locks are not
// released; Release them first: after Shutdown, Release returns ErrClosed and leaves
// the keys to expire. Shutdown then waits until every KeepAlive has ended, every step
// in progress has finished (a failed attempt's clean-up included) and every node call
// the Client started has returned, closes the go-redis clients if NewFromURLs made
// them, and returns what closing them returned.
//
// A node call returns when the node answers or go-redis gives up on it. For a stalled
// node that takes go-redis's read timeout (10 × NodeTimeout for clients NewFromURLs
// made, 5 s by default for your own), and a call parked behind it (the release of a
// failed attempt) waits for it first: with 3 of 5 nodes paused under load, Close of a
// NewFromURLs Client took 0.8–1.4 s in 16 runs with the default NodeTimeout
// (TestCloseAfterMajorityStalled), and 9.9 s before these timeouts were set.
//
// If ctx ends first, Shutdown returns at once an error wrapping ctx.Err() (the Client
// is closed all the same); the steps and calls still out end by themselves, and once
// they have, the go-redis clients NewFromURLs made are closed. A later Close (or
// Shutdown) waits for that and returns its result, as every call after the first does.
func (c *Client) Shutdown(ctx context.Context) error {
	c.closeMu.Lock()
	first := !c.closed
	c.closed = true
	c.closeMu.Unlock()
	if first {
		close(c.closing)
		if ctx.Done() == nil {
			c.finishClose()
		} else {
			go c.finishClose()
		}
	}
	select {
	case <-c.shut:
		return c.shutErr
	case <-ctx.Done():
	}
	select {
	case <-c.shut: // both ready: the work is done
		return c.shutErr
	default:
	}
	rest := "steps and node calls still out end by themselves (a call to a stalled node at go-redis's read timeout)"
	if c.owned {
		rest += ", and then the go-redis clients are closed"
	}
	return fmt.Errorf("redlock: shutdown: %w: %s", ctx.Err(), rest)
}

// finishClose waits for KeepAlives, steps and node calls to end, stops the senders,
// closes the go-redis clients if the Client owns them, and closes c.shut.
func (c *Client) finishClose() {
	c.keepers.Wait()
	c.inFlight.Wait()
	c.queues.close()
	close(c.sendersQuit)
	c.senders.Wait()
	if c.owned {
		var errs *multierror.Error
		for _, n := range c.nodes {
			if err := n.rdb.Close(); err != nil {
				errs = multierror.Append(errs, &NodeError{Node: n.name, Err: err})
			}
		}
		c.shutErr = errs.ErrorOrNil()
	}
	close(c.shut)
}

// isClosed reports whether Shutdown (or Close) has begun.
func (c *Client) isClosed() bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	return c.closed
}

// enter registers a step that Close must wait for; it fails once Close has begun.
// The caller must call c.inFlight.Done when the step is over.
func (c *Client) enter() bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return false
	}
	c.inFlight.Add(1)
	return true
}

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
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	w := c.newWaiter(ctx, key, ttl)
	if !c.queues.busy(key) {
		// Nobody in this Client waits for key: try at once, without queueing (after
		// letting other Clients go first if this Client just released it to them).
		c.pause(ctx, c.queues.yielding(key, c.opts.Clock.Now()))
		w.seen = c.queues.wakes(key)
		if lock, err := w.try(); lock != nil || err != nil {
			return lock, err
		}
		w.waitFirst = true // the attempt just made counts: wait before the next
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
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	lock, qe, err := c.try(ctx, key, ttl)
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
// Client's waiters. err is set when the attempt could not run at all.
func (c *Client) try(ctx context.Context, key string, ttl time.Duration) (*Lock, *QuorumError, error) {
	if !c.enter() {
		return nil, nil, closedError(key)
	}
	lock, qe, err := c.attempt(ctx, key, ttl)
	if lock != nil && c.isClosed() {
		// Shutdown began while the attempt was out, and may have returned already:
		// grant nothing after it.
		c.cleanup(ctx, key, lock.token, lock.lastRound)
		lock, qe, err = nil, nil, fmt.Errorf("redlock: acquire %q: %w (the attempt won as the Client closed; released)", key, ErrClosed)
	}
	c.inFlight.Done()
	if lock != nil {
		c.queues.granted(lock)
	}
	return lock, qe, err
}

// attempt is one round of the algorithm: send the acquire script to all nodes at once,
// count the answers, compute the validity left, and keep the lock only with a majority
// and positive validity; otherwise release it on every node. With fencing, a round that
// failed only because nodes refused the proposed token is repeated at once with a token
// above the counters they reported, a few times.
func (c *Client) attempt(ctx context.Context, key string, ttl time.Duration) (*Lock, *QuorumError, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.quorumError("acquire", key, newTally(len(c.nodes)), nil, ErrNotAcquired, err), nil
	}
	ms := ttl.Milliseconds()
	if !c.opts.Fencing {
		token, err := newToken()
		if err != nil {
			return nil, nil, err
		}
		lock, qe, _ := c.round(ctx, key, token, ttl, stepAcquire, []string{key}, []any{token, ms}, 0)
		return lock, qe, nil
	}
	keys := []string{key} // Client.start adds the counter's names per node
	fence, qe, err := c.proposal(ctx, key, keys)
	if qe != nil || err != nil {
		return nil, qe, err
	}
	const maxProposals = 3
	for n := 1; ; n++ {
		token, err := newToken()
		if err != nil {
			return nil, nil, err
		}
		lock, qe, t := c.round(ctx, key, token, ttl, stepFencedAcquire, keys, []any{token, ms, fence}, fence)
		if lock != nil {
			c.fences.raise(key, fence)
			return lock, nil, nil
		}
		c.fences.raise(key, t.high)
		if t.refused == 0 || n == maxProposals || qe.ctxErr != nil {
			return nil, qe, nil
		}
		if fence, err = nextFence(key, max(fence, t.high)); err != nil {
			return nil, nil, err
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

// round is one acquisition round with the given step; fence is the proposed fencing
// token (0 without fencing).
func (c *Client) round(ctx context.Context, key, token string, ttl time.Duration, st step, keys []string, args []any, fence int64) (*Lock, *QuorumError, tally) {
	start := c.opts.Clock.Now()
	r := c.start(ctx, stepRequest{step: st, keys: keys, args: args})
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	v := validity(ttl, now.Sub(start), c.opts.DriftFactor)
	if ctxErr == nil && t.won() && v > 0 {
		return &Lock{c: c, key: key, token: token, fence: fence, ttl: ttl, until: now.Add(v), lastRound: r}, nil, t
	}
	c.cleanup(ctx, key, token, r)
	kind := ErrUnavailable
	if ctxErr != nil || t.contended() {
		kind = ErrNotAcquired
	}
	qe := c.quorumError("acquire", key, t, errs, kind, ctxErr)
	qe.Late = t.won()
	qe.quorum = t.quorumIn
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
	t, errs, ctxErr := c.gather(ctx, c.start(ctx, stepRequest{step: stepFenceRead, keys: keys}), true)
	if ctxErr != nil || !t.won() {
		kind := ErrUnavailable
		if ctxErr != nil {
			kind = ErrNotAcquired
		}
		return 0, c.quorumError("acquire", key, t, errs, kind, ctxErr), nil
	}
	fence, err := nextFence(key, t.high)
	return fence, nil, err
}

// cleanup undoes a failed attempt: the release script goes to every node that may have
// set our key, including nodes that failed or timed out (their SET may still land); only
// nodes that answered that another token holds the key, or that refused our fencing
// token, are skipped. Each release is sent only after that node's acquire call has
// returned, so the DEL cannot overtake the SET; an acquire call still queued, not sent,
// is dropped instead and needs no release. It runs on a context the caller cannot
// cancel. It waits (at most the node timeout) only for the nodes whose acquire call has
// returned already; releases queued behind a silent node finish in the background (see
// Close), so a waiter is not held up by a node that does not answer.
func (c *Client) cleanup(ctx context.Context, key, token string, r *round) {
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
	cr := c.start(ctx, stepRequest{step: stepRelease, keys: []string{key}, args: []any{token},
		after: r, mustLand: true, need: r.mayHold})
	timeout := c.opts.Clock.After(c.opts.NodeTimeout)
	for waiting > 0 {
		select {
		case rep := <-cr.replies:
			if ready[rep.node] {
				waiting--
			}
		case <-timeout:
			return
		}
	}
}

func (c *Client) quorumError(op, key string, t tally, errs *multierror.Error, kind, ctxErr error) *QuorumError {
	return &QuorumError{
		Op: op, Key: key, Nodes: t.n, Needed: t.quorum(),
		Agreed: t.yes, Refused: t.no, Failed: t.failed,
		Errors: errs, kind: kind, ctxErr: ctxErr,
	}
}

// Lock is a held lock: returned only by a successful Acquire, it is the proof of
// ownership. Its methods are safe for concurrent use; Extend and Release run one at a
// time.
type Lock struct {
	c     *Client
	key   string
	token string
	fence int64 // with Options.Fencing, else 0

	op        sync.Mutex // serializes Extend and Release; guards lastRound; taken first (see the lock order above Client)
	lastRound *round     // this lock's latest round: its next call to a node goes after that one

	mu         sync.Mutex    // guards the fields below; innermost (see the lock order above Client)
	ttl        time.Duration // of the latest successful Acquire or Extend
	until      time.Time     // the validity proven so far; lowered when a loss is proven
	lost       bool          // a loss was proven: until never moves forward again
	released   bool          // Release was called: no step or KeepAlive may start
	releasedAt time.Time     // when Release was called: Until reports no later time
	keeper     *keeper       // the running KeepAlive, or nil
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// Token returns the random value that marks this holder's keys on the nodes (the token
// of the attempt that won).
func (l *Lock) Token() string { return l.token }

// Fence returns the lock's fencing token when the Client has Options.Fencing, else 0.
// For one key, a lock whose Acquire started after another lock's Acquire returned has a
// strictly greater token (under the assumptions in docs/safety.md), whatever the clocks,
// pauses and delays. Give it to the protected resource with every write; the resource
// must reject a write whose token is below the highest it has accepted (package fenced
// does, and refuses 0, the token of a Client without Options.Fencing). A token is at
// least 1 and at most 2^63 − 1; past that Acquire fails with ErrFenceExhausted.
func (l *Lock) Fence() uint64 { return uint64(l.fence) }

// Until returns when the lock's validity ends, on the local monotonic clock: up to then,
// no other client can hold it (under the assumptions in the package documentation).
// Once Release has been called, Until is no later than that call; once Extend has
// proven the lock lost (its token gone from too many nodes), no later than that Extend;
// once KeepAlive found the machine suspended, no later than that moment.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return earlier(l.until, l.releasedAt)
	}
	return l.until
}

// lose records that the lock can no longer be trusted to be held from at on: Until
// reports no later time, and no later Extend can move it forward again.
func (l *Lock) lose(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loseLocked(at)
}

// loseLocked is lose for a caller that holds l.mu.
func (l *Lock) loseLocked(at time.Time) {
	l.until, l.lost = earlier(l.until, at), true
}

// validUntil returns the validity proven so far, ignoring a Release in progress.
func (l *Lock) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend sets the lock's TTL to ttl on every node that still holds its token (a node's
// TTL is never shortened). It succeeds only if a majority did so and validity remains
// (ttl − elapsed − drift > 0); Until then moves to the new end if that is later. It fails
// with ErrLockLost only when the lock is known to be lost: it was released, its
// validity ran out, or too many nodes answered that its token is gone (Until then moves
// back to the start of this Extend). When the new validity could not be proven (too
// many nodes failed or were slow, or the majority came after ttl − drift) it fails with
// ErrUnavailable and leaves Until as it was: the lock is still held until then, since
// no node's TTL got shorter. A failed Extend never releases the lock.
//
// After a successful Extend has proved that a majority still holds the lock, the nodes
// that did not say yes (restarted empty, failed, or still held by a stale key that has
// since expired) are healed: the acquire script runs there with the lock's own token,
// so a node that lost the key gets it back (with Options.Fencing only where the node's
// counter is not above the lock's fencing token). Healing is best effort and does not
// delay Extend's result. A lock that lost its majority is never brought back: Extend
// never re-creates a key unless the same step proved the lock still held.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	c := l.c
	if err := c.opts.checkTTL(ttl); err != nil {
		return err
	}
	if err := l.begin("extend"); err != nil {
		return err
	}
	defer l.end()
	start := c.opts.Clock.Now()
	if err := l.check("extend", start); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return c.quorumError("extend", l.key, newTally(len(c.nodes)), nil, ErrUnavailable, err)
	}
	r := c.start(ctx, stepRequest{step: stepExtend, keys: []string{l.key},
		args: []any{l.token, ttl.Milliseconds()}, after: l.lastRound})
	l.lastRound = r
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	v := validity(ttl, now.Sub(start), c.opts.DriftFactor)
	until := now.Add(v)

	l.mu.Lock()
	if ctxErr == nil && t.won() && v > 0 && !l.lost {
		// The majority that said yes holds our key at least until the new end; the
		// majority behind the old Until still holds it until then, since no step ever
		// shortens a TTL. So the lock is valid until the later of the two.
		l.until, l.ttl = later(l.until, until), ttl
		released := l.released
		l.mu.Unlock()
		if !released { // a Release waiting for this step deletes the keys next
			l.heal(ctx, r, ttl)
		}
		return nil
	}
	if l.lost { // proven lost while this step ran (KeepAlive found a suspension)
		l.mu.Unlock()
		return lostError("extend", l.key, "lost while the extend ran")
	}
	defer l.mu.Unlock()
	kind := ErrUnavailable
	switch {
	case t.contended():
		// Too many nodes answered that our token is gone: proof that the lock is lost,
		// whatever the local validity said.
		kind = ErrLockLost
		l.loseLocked(start)
	case !now.Before(l.until):
		kind = ErrLockLost
	}
	qe := c.quorumError("extend", l.key, t, errs, kind, ctxErr)
	qe.Late = t.won()
	return qe
}

// heal sends the acquire script, with the lock's token (and fencing token), to the nodes
// that answered no or failed in the extend round r, which has just proved that a
// majority holds the lock. A node whose extend reply was still out is looked at once
// that call returns. Nothing waits for the replies. The caller holds l.op.
func (l *Lock) heal(ctx context.Context, r *round, ttl time.Duration) {
	req := stepRequest{step: stepAcquire, keys: []string{l.key},
		args: []any{l.token, ttl.Milliseconds()}, after: r, need: r.lacks}
	if l.fence > 0 {
		req.step, req.args = stepFencedAcquire, append(req.args, l.fence)
	}
	l.lastRound = l.c.start(context.WithoutCancel(ctx), req)
}

// Release deletes the lock on every node that still holds its token, each after the
// lock's earlier calls to that node have returned. It returns as soon as the outcome is
// decided (the remaining deletes finish in the background) and waits at most the node
// timeout. It returns nil if, within the lock's validity, a majority of nodes deleted
// its token or no longer had it (a node whose key is absent holds nothing of ours: a
// copy of the call that go-redis re-sent after a lost reply finds the key already
// deleted; Release cannot tell that from a node that lost the key, which Extend reports
// as a loss); ErrLockLost if the validity had run out, the lock was already released, or
// too many nodes answered that another token holds the key; ErrUnavailable if too many
// nodes failed (their keys expire after the TTL). If ctx ends first, Release returns its
// error; the deletes are still sent. Release marks the lock released at once: Until
// reports no later time from then on, a KeepAlive running is stopped (its context ends
// before Release returns) and none can start. The lock cannot be used after Release,
// whatever it returns.
func (l *Lock) Release(ctx context.Context) error {
	c := l.c
	// Mark the lock released first, so that no KeepAlive can start from here on, then
	// stop the running one (before taking l.op: the keeper may be inside Extend).
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return lostError("release", l.key, "already released")
	}
	l.released, l.releasedAt = true, c.opts.Clock.Now()
	k := l.keeper
	l.mu.Unlock()
	if k != nil {
		k.halt(errReleased)
	}
	if err := l.begin("release"); err != nil {
		return err
	}
	defer l.end()
	// An Extend that ran up to now may have moved the validity on.
	expired := !c.opts.Clock.Now().Before(l.validUntil())

	var o *offer
	capped := false
	args := []any{l.token}
	if !expired && !c.opts.Fencing {
		if o, capped = c.queues.claim(l.key); o != nil {
			handed, token := l.handoff(ctx, o)
			if handed {
				return nil
			}
			if token != "" { // the failed handoff's token goes with ours
				args = append(args, token)
			}
		}
	}
	start := c.opts.Clock.Now()
	r := c.start(ctx, stepRequest{step: stepRelease, keys: []string{l.key}, args: args,
		after: l.lastRound, mustLand: true})
	l.lastRound = r
	if o != nil {
		// The handoff failed: the waiter attempts by itself, and its calls queue
		// behind this release on every node, so they do not meet our stale keys.
		o.got <- nil
	}
	t, errs, ctxErr := c.gather(ctx, r, true)
	var courtesy time.Duration
	end := c.opts.Clock.Now()
	if capped && t.high > 1 { // release.lua answers 1 + the clients that heard it
		courtesy = 2 * end.Sub(start)
	}
	// A new Acquire here lets woken Clients go first: four round trips to a majority
	// and Go's timer lateness on an idle runtime (~1 ms), at most the node timeout.
	var yield time.Duration
	if t.quorumIn > 0 {
		yield = min(4*t.quorumIn+time.Millisecond, c.opts.NodeTimeout)
	}
	c.queues.released(l, courtesy, t.high, yield, end)
	if ctxErr == nil && t.won() && !expired {
		return nil
	}
	kind := ErrUnavailable
	if expired || t.contended() {
		kind = ErrLockLost
	}
	qe := c.quorumError("release", l.key, t, errs, kind, ctxErr)
	qe.Late = expired
	return qe
}

// handoff releases l by handing it straight to the waiting Acquire of this Client that
// made offer o: handoff.lua replaces l's token with a new one on every node, so one
// step does the work of a release and an acquire. The new lock is granted exactly as
// an acquired one: with a majority, and validity measured from just before this step.
// It reports whether that happened (the waiter then has the lock). If not, the calls of
// the step not sent yet are dropped, and token (when one was made) is the new token,
// which the caller's plain release must delete wherever it landed, before it tells the
// waiter (o.got <- nil). The caller holds l.op and has checked that l is valid.
func (l *Lock) handoff(ctx context.Context, o *offer) (handed bool, token string) {
	c := l.c
	token, err := newToken()
	if err != nil {
		return false, ""
	}
	start := c.opts.Clock.Now()
	r := c.start(ctx, stepRequest{step: stepHandoff, keys: []string{l.key},
		args: []any{l.token, token, o.ttl.Milliseconds()}, after: l.lastRound, mustLand: true})
	l.lastRound = r // the plain release after a failed handoff waits behind these calls
	t, _, ctxErr := c.gather(ctx, r, true)
	now := c.opts.Clock.Now()
	// After Shutdown began nothing is granted (as in try): the waiter could not even
	// release the lock. The handoff then counts as failed, and the caller's release
	// deletes the new token with ours.
	if v := validity(o.ttl, now.Sub(start), c.opts.DriftFactor); ctxErr == nil && t.won() && v > 0 && !c.isClosed() {
		next := &Lock{c: c, key: l.key, token: token, ttl: o.ttl, until: now.Add(v), lastRound: r}
		c.queues.granted(next)
		c.queues.released(l, 0, 0, 0, now)
		o.got <- next
		// Where the handoff call failed, our token may still hold the key: release
		// it there once that call has returned, so the node is not blocked until our
		// TTL ends. Nobody waits for it.
		c.start(context.WithoutCancel(ctx), stepRequest{step: stepRelease, keys: []string{l.key},
			args: []any{l.token}, after: r, mustLand: true, need: r.failed})
		return true, token
	}
	// Unsent calls set nothing; the others are undone by the caller's release.
	r.abandoned.Store(true)
	return false, token
}

// begin starts a step on the lock: one at a time (l.op), and registered with the
// Client so that Close waits for it. After a nil error, end finishes it.
func (l *Lock) begin(op string) error {
	l.op.Lock()
	if !l.c.enter() {
		l.op.Unlock()
		return fmt.Errorf("redlock: %s %q: %w", op, l.key, ErrClosed)
	}
	return nil
}

// end finishes a step started by begin.
func (l *Lock) end() {
	l.c.inFlight.Done()
	l.op.Unlock()
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earlier returns the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// check returns ErrLockLost if the lock was released or its validity is over at now.
func (l *Lock) check(op string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return lostError(op, l.key, "already released")
	}
	if l.lost {
		return lostError(op, l.key, "lost earlier")
	}
	if !now.Before(l.until) {
		return lostError(op, l.key, fmt.Sprintf("validity ran out %v ago", now.Sub(l.until).Round(time.Millisecond)))
	}
	return nil
}
