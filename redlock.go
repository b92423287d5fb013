package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

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

	watch watch // Options.Observer and Options.Logger (observe_emit.go, logging.go)
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
// percent-encoded), unix:///path, or redis+cluster://host:port[?addr=host:port] (and
// rediss+cluster://) for a Redis Cluster that is one member (ParseNodeURL parses each).
// Errors and node names show URLs with the password redacted, and no error quotes any
// part of it.
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
		n, err := ParseNodeURL(raw, o)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("redlock: node URL %d (%s): %w", i+1, redactURL(raw), err)
		}
		rdbs = append(rdbs, n.Client())
		names = append(names, n.Name)
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
	if c.queues.lineID, err = newToken(); err != nil {
		return nil, err
	}
	if o.Fair {
		id, err := newToken()
		if err != nil {
			return nil, err
		}
		c.queues.fairID = id
	}
	c.watch.log = newLogState(o)
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
		c.nodes[i] = node{name: name, rdb: rdb, cluster: isCluster(rdb), hash: fnv64a(name), own: ownClient(rdb)}
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
// waiting Acquires give up (with Options.Fair each takes its queue entries off the
// nodes first, within a node timeout, and Shutdown waits for that), no attempt or handoff still out grants a lock (one that
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
	if ctx == nil { // nothing is closed: Close is Shutdown without a deadline
		return errors.New("redlock: shutdown: nil context")
	}
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
	for i := range c.nodes {
		c.nodes[i].s.health.close() // no node line after Close
	}
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
