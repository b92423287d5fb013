package redlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is the cause recorded for every node once the Client has been closed.
var ErrClosed = errors.New("redlock: client closed")

// Client acquires locks held across N independent Redis masters. It is safe for
// concurrent use by many goroutines.
type Client struct {
	nodes []node
	opts  Options // with defaults applied
	clock Clock
	owned bool // the go-redis clients were made by NewFromURLs and are closed by Close

	closeMu sync.RWMutex
	closed  bool
	calls   sync.WaitGroup // node calls in flight, including ones a step stopped waiting for
}

// New returns a Client over the given go-redis clients, one per independent Redis
// master (a plain, Sentinel-managed or Cluster client may each serve as one member).
// The zero Options means every default. New rejects an empty list, a nil client, the
// same client or the same server address twice (one server must not vote twice), and
// invalid options. The caller keeps ownership of the clients: Close does not close them.
func New(nodes []redis.UniversalClient, opts Options) (*Client, error) {
	return newClient(nodes, nil, opts)
}

// NewFromURLs returns a Client over one go-redis client per URL, each of the form
// redis://[user:password@]host:port[/db] or rediss://... for TLS (the options
// redis.ParseURL accepts). Errors and node names show URLs with the password redacted.
// The clients honour context deadlines, so a call to a stalled node ends at
// Options.NodeTimeout, and do not retry failed commands (the next attempt is the retry;
// add max_retries=N to a URL to override); Close closes them.
func NewFromURLs(urls []string, opts Options) (*Client, error) {
	rdbs := make([]redis.UniversalClient, 0, len(urls))
	names := make([]string, 0, len(urls))
	closeAll := func() {
		for _, rdb := range rdbs {
			_ = rdb.Close()
		}
	}
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			var uerr *url.Error
			if errors.As(err, &uerr) {
				err = uerr.Err // url.Error prints the whole URL, password included
			}
			closeAll()
			return nil, fmt.Errorf("redlock: node URL %d: %v", i+1, err)
		}
		ropts, err := redis.ParseURL(raw)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redlock: node URL %d (%s): %v", i+1, u.Redacted(), err)
		}
		ropts.ContextTimeoutEnabled = true
		if !u.Query().Has("max_retries") {
			// go-redis would retry READONLY, LOADING and network errors with back-off,
			// which inside a node timeout only hides the cause; the quorum is the retry.
			ropts.MaxRetries = -1
		}
		rdbs = append(rdbs, redis.NewClient(ropts))
		names = append(names, u.Redacted())
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
	c := &Client{nodes: make([]node, len(rdbs)), opts: o, clock: o.Clock}
	servers := make(map[string]int, len(rdbs))
	for i, rdb := range rdbs {
		if rdb == nil || isNilPointer(rdb) {
			return nil, fmt.Errorf("redlock: node %d is nil", i+1)
		}
		for j := range i {
			if rdbs[j] == rdb {
				return nil, fmt.Errorf("redlock: nodes %d and %d are the same client", j+1, i+1)
			}
		}
		name := nodeName(rdb, i)
		if names != nil {
			name = names[i]
		}
		server := nodeServer(rdb, name)
		if j, dup := servers[server]; dup {
			return nil, fmt.Errorf("redlock: nodes %d and %d are the same server %s", j+1, i+1, server)
		}
		servers[server] = i
		c.nodes[i] = node{name: name, rdb: rdb}
	}
	return c, nil
}

func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// Close waits until every node call the Client started has returned, including calls
// a step stopped waiting for (a stalled node's call ends when go-redis gives up on it),
// then closes the go-redis clients if NewFromURLs made them. Steps started after Close
// fail with ErrClosed. Close is safe to call more than once.
func (c *Client) Close() error {
	c.closeMu.Lock()
	already := c.closed
	c.closed = true
	c.closeMu.Unlock()
	if already {
		return nil
	}
	c.calls.Wait()
	if !c.owned {
		return nil
	}
	var errs *multierror.Error
	for _, n := range c.nodes {
		if err := n.rdb.Close(); err != nil {
			errs = multierror.Append(errs, &NodeError{Node: n.name, Err: err})
		}
	}
	return errs.ErrorOrNil()
}

// Acquire takes the lock named key for ttl, retrying after each failed attempt (with the
// delay Options.RetryDelay gives) until it succeeds, ctx ends, or Options.MaxAttempts
// attempts have failed. The returned Lock is held until Lock.Until, which is at most
// ttl − drift after the attempt started. On failure it returns a *QuorumError matching
// ErrNotAcquired (the key is held elsewhere, or ctx ended) or ErrUnavailable (too many
// nodes failed), and ctx.Err() when ctx ended; no key of this call is left behind on any
// node that answers.
func (c *Client) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.acquire(ctx, key, ttl, c.opts.MaxAttempts)
}

// TryAcquire is Acquire with exactly one attempt.
func (c *Client) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.acquire(ctx, key, ttl, 1)
}

func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, maxAttempts int) (*Lock, error) {
	if key == "" {
		return nil, errEmptyKey
	}
	if err := c.opts.checkTTL(ttl); err != nil {
		return nil, err
	}
	id, err := uuid.NewRandom() // 122 random bits from crypto/rand, unique per call
	if err != nil {
		return nil, fmt.Errorf("redlock: making a token: %w", err)
	}
	token := id.String()
	for attempt := 1; ; attempt++ {
		lock, qe := c.attempt(ctx, key, token, ttl)
		if qe == nil {
			return lock, nil
		}
		if qe.ctxErr != nil || (maxAttempts > 0 && attempt >= maxAttempts) {
			return nil, qe
		}
		select {
		case <-ctx.Done():
			qe.kind, qe.ctxErr = ErrNotAcquired, ctx.Err()
			return nil, qe
		case <-c.clock.After(c.opts.RetryDelay(attempt)):
		}
	}
}

// attempt is one round of the algorithm: send the acquire script to all nodes at once,
// count the answers, compute the validity left, and keep the lock only with a majority
// and positive validity; otherwise release it on every node.
func (c *Client) attempt(ctx context.Context, key, token string, ttl time.Duration) (*Lock, *QuorumError) {
	if err := ctx.Err(); err != nil {
		return nil, c.quorumError("acquire", key, newTally(len(c.nodes)), nil, ErrNotAcquired, err)
	}
	start := c.clock.Now()
	r := c.start(ctx, acquireScript, key, []any{token, ttl.Milliseconds()}, nil, false)
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.clock.Now()
	v := validity(ttl, now.Sub(start), c.opts.DriftFactor)
	if ctxErr == nil && t.won() && v > 0 {
		return &Lock{c: c, key: key, token: token, ttl: ttl, until: now.Add(v), calls: r.done}, nil
	}
	c.cleanup(ctx, key, token, r.done)
	kind := ErrUnavailable
	if ctxErr != nil || t.contended() {
		kind = ErrNotAcquired
	}
	qe := c.quorumError("acquire", key, t, errs, kind, ctxErr)
	qe.Late = t.won()
	return nil, qe
}

// cleanup undoes a failed attempt: the release script goes to every node, including
// nodes that failed or timed out (their SET may still land), each only after that
// node's acquire call has returned so the DEL cannot overtake the SET. It runs on a
// context the caller cannot cancel and waits at most the node timeout; calls still out
// finish in the background (see Close).
func (c *Client) cleanup(ctx context.Context, key, token string, after []chan struct{}) {
	ctx = context.WithoutCancel(ctx)
	c.gather(ctx, c.start(ctx, releaseScript, key, []any{token}, after, true), false)
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

	op    sync.Mutex      // serializes Extend and Release; guards calls
	calls []chan struct{} // calls[i] is closed when this lock's latest call to node i returned

	mu       sync.Mutex    // guards the fields below
	ttl      time.Duration // of the latest successful Acquire or Extend
	until    time.Time
	released bool
	keeper   *keeper // the running KeepAlive, or nil
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// Token returns the random value that marks this holder's keys on the nodes.
func (l *Lock) Token() string { return l.token }

// Until returns when the lock's validity ends, on the local monotonic clock: up to then,
// no other client can hold it (under the assumptions in the package documentation).
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Extend resets the lock's TTL to ttl on every node that still holds its token. It
// succeeds only if a majority did so and validity remains (ttl − elapsed − drift > 0);
// Until then moves to the new end. It never re-creates a key that expired on a node.
// It fails with ErrLockLost if the lock was released, its validity ran out, or too
// many nodes no longer hold its token, and with ErrUnavailable if too many nodes failed;
// a failed Extend never releases the lock, but Until may move earlier (a node that got
// the new TTL may expire sooner than the old end).
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	c := l.c
	if err := c.opts.checkTTL(ttl); err != nil {
		return err
	}
	l.op.Lock()
	defer l.op.Unlock()
	start := c.clock.Now()
	if err := l.check("extend", start); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return c.quorumError("extend", l.key, newTally(len(c.nodes)), nil, ErrUnavailable, err)
	}
	r := c.start(ctx, extendScript, l.key, []any{l.token, ttl.Milliseconds()}, l.calls, false)
	l.calls = r.done
	t, errs, ctxErr := c.gather(ctx, r, true)
	now := c.clock.Now()
	v := validity(ttl, now.Sub(start), c.opts.DriftFactor)
	until := now.Add(v)

	l.mu.Lock()
	defer l.mu.Unlock()
	if ctxErr == nil && t.won() && v > 0 {
		l.until, l.ttl = until, ttl
		return nil
	}
	if until.Before(l.until) {
		l.until = until // the new TTL may have landed on nodes that did not answer yes
	}
	kind := ErrUnavailable
	if t.contended() || v <= 0 || !now.Before(l.until) {
		kind = ErrLockLost
	}
	qe := c.quorumError("extend", l.key, t, errs, kind, ctxErr)
	qe.Late = t.won()
	return qe
}

// Release deletes the lock on every node that still holds its token, each after the
// lock's earlier calls to that node have returned. It returns as soon as the outcome is
// decided (the remaining deletes finish in the background) and waits at most the node
// timeout. It returns nil if a majority released the lock within its validity;
// ErrLockLost if the validity had run out, the lock was already released, or too many
// nodes no longer held its token; ErrUnavailable if too many nodes failed (their keys
// expire after the TTL). If ctx ends first, Release returns its error; the deletes are
// still sent. Release stops a KeepAlive first. The lock cannot be used after Release,
// whatever it returns.
func (l *Lock) Release(ctx context.Context) error {
	c := l.c
	l.stopKeeper(errReleased) // before taking l.op: the keeper may be inside Extend
	l.op.Lock()
	defer l.op.Unlock()
	now := c.clock.Now()
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return lostError("release", l.key, "already released")
	}
	l.released = true
	expired := !now.Before(l.until)
	l.mu.Unlock()

	r := c.start(ctx, releaseScript, l.key, []any{l.token}, l.calls, true)
	l.calls = r.done
	t, errs, ctxErr := c.gather(ctx, r, true)
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

// check returns ErrLockLost if the lock was released or its validity is over at now.
func (l *Lock) check(op string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return lostError(op, l.key, "already released")
	}
	if !now.Before(l.until) {
		return lostError(op, l.key, fmt.Sprintf("validity ran out %v ago", now.Sub(l.until).Round(time.Millisecond)))
	}
	return nil
}
