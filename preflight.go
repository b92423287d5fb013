package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// ErrNodeConfig means a node runs with a setting that breaks an assumption of the
// lock's guarantees (see CheckNodes).
var ErrNodeConfig = errors.New("redlock: node setting breaks a safety assumption")

// CheckNodes looks at the settings the guarantees depend on and returns an error
// wrapping ErrNodeConfig, with one *NodeError per node that does not comply (each says
// what to set and why):
//   - maxmemory-policy must be noeviction: any other policy may evict a held lock key
//     (every lock key has a TTL, so even volatile-* policies pick them);
//   - with Options.Fencing, appendonly yes and appendfsync always: a node that restarts
//     without its fencing counter can hand out a token twice;
//   - no two members may be one server (the same run_id in INFO server, also under
//     different addresses): it would vote twice;
//   - the go-redis client of the node, read from the client object without a round
//     trip (plain, Sentinel-managed, Cluster and Ring clients, and types that embed
//     them): MaxRetries must be off (-1), and ContextTimeoutEnabled off (see New).
//
// A node that cannot answer (down, or CONFIG not allowed by its ACL or by a managed
// service) is reported with that error instead; check its settings by other means.
// New does not call it, so that a Client can be made while nodes are down; call it at
// start-up, or from a health check.
//
// The nodes are asked all at once, each for at most 20 × NodeTimeout (1 s with the
// default) and no longer than ctx allows. A node that has not answered by then is
// reported with an error naming the question it left open and wrapping
// context.DeadlineExceeded (or ctx's error); a node that answered is judged by its
// answers alone, whatever the others do. The go-redis calls to a stalled node run on
// in the background until go-redis gives up (its read timeout), and Close waits for
// them. After Close, CheckNodes returns ErrClosed.
func (c *Client) CheckNodes(ctx context.Context) error {
	if ctx == nil {
		return errors.New("redlock: check nodes: nil context")
	}
	if !c.enter() {
		return fmt.Errorf("redlock: check nodes: %w", ErrClosed)
	}
	defer c.inFlight.Done()
	want := map[string]string{"maxmemory-policy": "noeviction"}
	if c.opts.Fencing {
		want["appendonly"] = "yes"
		want["appendfsync"] = "always"
	}
	bound := checkTimeoutFactor * c.opts.NodeTimeout
	asked := ctx
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	checks, asking := c.askNodes(ctx, want)
	var errs *multierror.Error
	ids := make([][]string, len(c.nodes)) // each node's servers' run_id
	for i, n := range c.nodes {
		r := checks[i]
		switch {
		case r != nil:
		case asked.Err() != nil:
			r = &nodeCheck{err: fmt.Errorf("%s: no answer before the context ended: %w", *asking[i].Load(), asked.Err())}
		default:
			r = &nodeCheck{err: fmt.Errorf("%s: no answer within %v (%d × NodeTimeout): %w", *asking[i].Load(), bound, checkTimeoutFactor, context.DeadlineExceeded)}
		}
		ids[i] = r.ids
		if r.err != nil {
			errs = multierror.Append(errs, &NodeError{Node: n.name, Err: r.err})
		}
		wrong := append(clientProblems(n.rdb), r.wrong...)
		if len(wrong) > 0 {
			errs = multierror.Append(errs, &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s", ErrNodeConfig, strings.Join(wrong, "; "))})
		}
	}
	errs = c.sameServers(ids, errs)
	finish(&errs)
	c.watch.log.configProblems(errs)
	return errs.ErrorOrNil()
}

// askNodes asks every node its questions (checkNode) at once and collects the answers
// that come before ctx ends: checks[i] is nil for a node that had not answered by then,
// and asking[i] names the question it left open. The calls still out after that run on
// in the background; Close waits for them.
func (c *Client) askNodes(ctx context.Context, want map[string]string) (checks []*nodeCheck, asking []atomic.Pointer[string]) {
	results := make(chan nodeCheck, len(c.nodes))
	// Each node's question out now, named in its error if no answer comes in time.
	asking = make([]atomic.Pointer[string], len(c.nodes))
	first := "CONFIG GET"
	// Close waits for the calls still out after CheckNodes returns.
	c.inFlight.Add(len(c.nodes))
	for i := range c.nodes {
		asking[i].Store(&first)
		go func() {
			defer c.inFlight.Done()
			results <- checkNode(ctx, i, c.nodes[i].rdb, want, &asking[i])
		}()
	}
	checks = make([]*nodeCheck, len(c.nodes))
collect:
	for range c.nodes {
		select {
		case r := <-results:
			checks[r.node] = &r
		case <-ctx.Done():
			break collect
		}
	}
	return checks, asking
}

// sameServers adds to errs an ErrNodeConfig error for each node that reached a server
// (ids[i]: node i's servers' run_id) that an earlier node reached too: one server must
// not vote twice. It returns the list.
func (c *Client) sameServers(ids [][]string, errs *multierror.Error) *multierror.Error {
	seen := make(map[string]int) // run_id → the first node that has it
	for i, nodeIDs := range ids {
		for _, id := range nodeIDs {
			j, dup := seen[id]
			if !dup {
				seen[id] = i
				continue
			}
			if j == i {
				continue // one Cluster or Ring member reached the same server twice
			}
			errs = multierror.Append(errs, &NodeError{Node: c.nodes[i].name, Err: fmt.Errorf(
				"%w: the same server (run_id %s) as node %d (%s): one server must not vote twice",
				ErrNodeConfig, id, j+1, c.nodes[j].name)})
			break
		}
	}
	return errs
}

// checkTimeoutFactor bounds how long CheckNodes waits for each node: this many times
// Options.NodeTimeout. A check asks several questions one after another (a CONFIG GET
// per setting, then INFO server), possibly on a fresh connection.
const checkTimeoutFactor = 20

// nodeCheck is what CheckNodes learnt from one node.
type nodeCheck struct {
	node  int
	wrong []string // settings that break an assumption
	ids   []string // the run_id of each server behind the node
	err   error    // why the node could not be checked (fully)
}

// checkNode reads a node's settings and run_ids. A CONFIG GET that fails with an
// error reply (CONFIG not allowed) still lets INFO give the run_id; one that fails
// otherwise (no connection, a timeout) ends the check.
func checkNode(ctx context.Context, i int, rdb redis.UniversalClient, want map[string]string, asking *atomic.Pointer[string]) nodeCheck {
	r := nodeCheck{node: i}
	for name, value := range want {
		question := "CONFIG GET " + name
		asking.Store(&question)
		got, err := rdb.ConfigGet(ctx, name).Result()
		if err != nil {
			r.err = fmt.Errorf("%s: %w", question, err)
			var reply redis.Error
			if !errors.As(err, &reply) {
				return r
			}
			break
		}
		if got[name] != value {
			r.wrong = append(r.wrong, fmt.Sprintf("%s is %q, want %q", name, got[name], value))
		}
	}
	question := "INFO server"
	asking.Store(&question)
	ids, err := runIDs(ctx, rdb)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("INFO server: %w", err)
	}
	r.ids = ids
	return r
}

// clientSettings is what the library depends on in a node's go-redis client.
type clientSettings struct {
	known          bool // the client's type exposes its options
	retries        bool // it re-sends a command after an error (MaxRetries above 0)
	contextTimeout bool // ContextTimeoutEnabled
}

// readClientSettings reads the settings from the client object: *redis.Client (plain
// or Sentinel-managed), *redis.ClusterClient and *redis.Ring, and any type that embeds
// one of them. The options hold the values after go-redis applied its defaults:
// MaxRetries 0 means off for a plain client or a Ring (-1 given), -1 for a Cluster.
// A ClusterClient also re-sends a command after a network error, CLUSTERDOWN or
// LOADING, and follows MOVED and ASK, up to MaxRedirects times (3 by default), which
// is not read here: a Cluster being resharded needs the redirects, and every script
// is safe when a copy of a command arrives again ("Late and repeated commands" in
// docs/design.md); MaxRedirects: -1 turns both off.
func readClientSettings(rdb redis.UniversalClient) clientSettings {
	switch c := rdb.(type) {
	case interface{ Options() *redis.Options }:
		o := c.Options()
		return clientSettings{known: true, retries: o.MaxRetries > 0, contextTimeout: o.ContextTimeoutEnabled}
	case interface{ Options() *redis.ClusterOptions }:
		o := c.Options()
		return clientSettings{known: true, retries: o.MaxRetries > 0, contextTimeout: o.ContextTimeoutEnabled}
	case interface{ Options() *redis.RingOptions }:
		o := c.Options()
		return clientSettings{known: true, retries: o.MaxRetries > 0, contextTimeout: o.ContextTimeoutEnabled}
	}
	return clientSettings{}
}

// Why the client settings matter; CheckNodes and New say it in these words.
const (
	whyNoRetries = "go-redis MaxRetries is on (plain, Sentinel and Ring clients default to 3): a command whose reply was lost " +
		"is sent again, so the node runs it twice, and READONLY, LOADING and network errors " +
		"are retried with back-off, which turns them into node timeouts and holds up the " +
		"lock's next call to the node; set MaxRetries: -1 (the next attempt is the retry)"
	whyNoContextTimeout = "go-redis ContextTimeoutEnabled is on: a call given up at its " +
		"context deadline may still run on the node later, after the lock's next call " +
		"(a release can overtake its SET and leave a key behind); turn it off (each step " +
		"has its own timer)"
)

// clientProblems returns what is wrong with a node's go-redis client settings.
func clientProblems(rdb redis.UniversalClient) []string {
	s := readClientSettings(rdb)
	var wrong []string
	if s.retries {
		wrong = append(wrong, whyNoRetries)
	}
	if s.contextTimeout {
		wrong = append(wrong, whyNoContextTimeout)
	}
	return wrong
}

// runIDs returns the run_id of the server behind a client; of every master for a
// Cluster client, of every live shard for a Ring.
func runIDs(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	type eachServer interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}
	type eachShard interface {
		ForEachShard(context.Context, func(context.Context, *redis.Client) error) error
	}
	var mu sync.Mutex
	var ids []string
	collect := func(ctx context.Context, c *redis.Client) error {
		id, err := runID(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, id)
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case eachServer: // a Cluster client: INFO would go to any one node
		err = c.ForEachMaster(ctx, collect)
	case eachShard: // a Ring
		err = c.ForEachShard(ctx, collect)
	default:
		var id string
		if id, err = runID(ctx, rdb); err == nil {
			ids = []string{id}
		}
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// runID returns the run_id line of INFO server: a random identifier each server
// process draws at start-up.
func runID(ctx context.Context, rdb redis.Cmdable) (string, error) {
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(info) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && id != "" {
			return id, nil
		}
	}
	return "", errors.New("no run_id in its reply")
}
