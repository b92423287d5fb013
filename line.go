package redlock

import (
	"context"
	_ "embed" // announce.lua
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The line: the order in which a plain key's waiters, across Clients, get the key
// (docs/design.md, "The line of a plain key").
//
//   - One node keeps it: the key's line node (lineNode), the node that every Client
//     naming the nodes alike picks for the key, whether or not it is slow right now.
//   - An Acquire's attempt that the line node refuses puts its Client in the line
//     there (acquire.lua, ARGV[4]: the Client's lineID), in the order of the node's
//     clock, once; each later refusal renews its lease (lineLeaseFor). A grant writes
//     nothing for the line: the Client keeps its place while it holds the key, and
//     its release takes it out.
//   - Release deletes the key there and gives the line's live head the key's turn for
//     lineTurn (release.lua): the line node refuses the free key to every other
//     Acquire meanwhile. It PUBLISHes "!<token> <head>" there, so the announcement
//     needs no round trip of the releasing Client (Client.lineRelease).
//   - The head's Client attempts at once, on every node; the others wait lineTurn for
//     a later announcement and then attempt anyway (lineWait): the head may have died.
//
// The line is a hint: a grant still needs a majority and validity, and the turn only
// refuses. TryAcquire neither joins the line nor respects the turn. A waiter that polls
// less than once a second keeps its place: its lease follows its pacing, up to
// lineLeaseMax, so one that waits more than a third of that between attempts loses
// its place and takes a new one at the back when next refused. A Client
// whose last waiter for the key gives up takes its place out (leaveLine); one that
// closed or died keeps it until its lease ends, and while it is named the head, each
// release costs lineTurn.

//go:embed scripts/announce.lua
var announceLua string

//go:embed scripts/line_leave.lua
var lineLeaveLua string

// stepLineLeave takes a Client that stopped waiting out of a key's line.
var stepLineLeave = step{redis.NewScript(lineLeaveLua), yesOrNo, false, nil}

//go:embed scripts/line_renew.lua
var lineRenewLua string

// stepLineRenew lengthens a waiting Client's lease on its place in a key's line.
var stepLineRenew = step{redis.NewScript(lineRenewLua), yesOrNo, false, nil}

// announceScript publishes a release's announcement on the key's line node when the
// Client announces it (Client.announce), naming the head whose turn it is.
var announceScript = redis.NewScript(announceLua)

// LineKeys returns the names under which the key's line node keeps the line of a
// plain key's waiting Clients (docs/design.md, "The line of a plain key"), for tools
// that inspect the nodes: the order (a sorted set of Client line ids scored by when
// the node first refused them, the head first), their leases (the same ids scored by
// the end of their lease in milliseconds of the node's clock) and the turn ("turn:"
// and the id of the head a release named, for a moment). All three lie in key's Redis
// Cluster hash slot, named like FairKeys's with "line", "linel" and "linet". Do not
// use these names as lock keys: the scripts leave a key of another kind alone, but its
// key's line then does not work.
func LineKeys(key string) (order, leases, turn string) {
	return slotName(key, "line"), slotName(key, "linel"), slotName(key, "linet")
}

// lineNode returns the node that keeps key's line: the key's lead by rendezvous
// hashing (Client.lead), whether or not it is usable as a lead right now; −1 with one
// node.
func (c *Client) lineNode(key string) int {
	if len(c.nodes) < 2 {
		return -1
	}
	kh := fnv64a(key)
	best, bestRank := 0, uint64(0)
	for i := range c.nodes {
		if rank := mix64(kh ^ c.nodes[i].hash); i == 0 || rank > bestRank {
			best, bestRank = i, rank
		}
	}
	return best
}

// lineCall returns the node whose call in round r carries req's line keys and
// arguments (lineNode), or −1 if none does, and records in r whether that call
// announces a release.
func (c *Client) lineCall(r *round, req stepRequest) int {
	if req.lineArgs == nil {
		return -1
	}
	r.leadPublishes = req.step.script == stepRelease.script && len(req.lineArgs) > 3 && req.lineArgs[3] != ""
	return c.lineNode(req.keys[0])
}

// lineRelease returns a plain lock's release step req with the line's part for the
// key's line node: after deleting the key there, release.lua gives the turn to the
// line's head and announces the release, naming it, unless the node is a Cluster
// member (its PUBSUB NUMSUB misses the other masters' subscribers, so Client.announce
// does it, also naming the head: announceScript). ARGV[4] "0": announce if anyone
// listens there, this Client included (it ignores its own announcements): what this
// Client knows of its own subscription there may be stale (a dropped connection, an
// unsubscribe on its way), and a count that took it for a listener would leave the
// release unannounced.
func (c *Client) lineRelease(req stepRequest) stepRequest {
	line := c.lineNode(req.keys[0])
	if line < 0 {
		return req
	}
	key := req.keys[0]
	order, leases, turn := LineKeys(key)
	req.lineKeys = []string{key, order, leases, turn}
	other := any("")
	if len(req.args) > 1 {
		other = req.args[1]
	}
	publish := ""
	if !c.nodes[line].cluster {
		publish = "0"
	}
	req.lineArgs = []any{req.args[0], other, lineTurn(c.opts.NodeTimeout).Milliseconds(), publish, c.queues.lineID}
	return req
}

// splitAnnounce splits an announcement "<token>[ <head>]" (without its prefix).
func splitAnnounce(body string) (token, head string) {
	if i := strings.IndexByte(body, ' '); i >= 0 {
		return body[:i], body[i+1:]
	}
	return body, ""
}

// heardAnnounce handles a releasing Client's announcement "!<token>[ <head>]" (body
// without its "!") for kq: one that names no head, or this Client, wakes its waiters
// (the head's attempt then goes at once: pauseLed); one that names another Client
// lets it go first (lineWait). Callers hold q.mu.
func (q *queues) heardAnnounce(key string, kq *keyQueue, body string) {
	token, head := splitAnnounce(body)
	if token == kq.released {
		return // this Client's own release woke its waiters already (queues.released)
	}
	if head != "" && head != q.lineID {
		q.lineWait(key, kq, token)
		return
	}
	kq.named, kq.lineToken = head != "", ""
	kq.announced(token)
}

// lineWait wakes kq's waiters lineTurn from now, unless an announcement that wakes
// them comes first (heardAnnounce): another Client's waiter has the turn after the
// release of token. One timer per key, armed again by each such announcement.
// Callers hold q.mu.
func (q *queues) lineWait(key string, kq *keyQueue, token string) {
	if q.closed {
		return
	}
	d := lineTurn(q.c.opts.NodeTimeout)
	kq.lineToken, kq.lineDue, kq.named = token, time.Now().Add(d), false
	if kq.lineTimer == nil {
		q.wg.Add(1) // done by lineDue, or by whoever stops the timer (stopLine)
		kq.lineTimer = time.AfterFunc(d, func() { q.lineFallback(key, kq) })
		return
	}
	if !kq.lineTimer.Reset(d) {
		q.wg.Add(1) // it had fired (that run is done by it) or was stopped (done then)
	}
}

// lineFallback is lineWait's timer: no announcement came within lineTurn of the one
// that named another Client, so the key's waiters attempt.
func (q *queues) lineFallback(key string, kq *keyQueue) {
	defer q.wg.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.keys[key] != kq || kq.lineToken == "" || time.Now().Before(kq.lineDue) {
		return // closed, dropped, woken since, or armed again (a run that raced Reset)
	}
	token := kq.lineToken
	kq.lineToken = ""
	kq.announced(token)
}

// stopLine stops kq's lineWait timer, if armed. Callers hold q.mu.
func (q *queues) stopLine(kq *keyQueue) {
	if kq.lineTimer != nil && kq.lineTimer.Stop() {
		q.wg.Done()
	}
}

// publishOn sends the announcement of token's release for key on node i: on the key's
// line node through announceScript, which names the head whose turn it is; elsewhere
// a plain PUBLISH.
func (c *Client) publishOn(ctx context.Context, i, line int, key, token string) error {
	if i == line {
		_, _, turn := LineKeys(key)
		return announceScript.Run(ctx, c.nodes[i].rdb, []string{turn}, releaseChannel(key), token).Err()
	}
	return c.nodes[i].rdb.Publish(ctx, releaseChannel(key), announcePrefix+token).Err()
}

// lined reports whether this Client listens for key's releases (it found the key
// taken lately): an Acquire's first attempt then asks the key's lead first, where the
// turn is kept, so that it cannot win the other nodes while the line node keeps the
// key for the line's head.
func (q *queues) lined(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys[key]
	return kq != nil && kq.subscribed
}

// leaveLine takes this Client out of key's line after an Acquire that may have joined
// it (tried) gave up waiting, unless another Acquire of this Client still waits for
// the key or the Client is closing (Close is not held up for it: the place lapses
// with its lease).
func (c *Client) leaveLine(key string, tried bool) {
	if !tried || c.queues.busy(key) {
		return
	}
	order, leases, turn := LineKeys(key)
	c.lineCall1(key, stepLineLeave, []string{order, leases, turn}, c.queues.lineID)
}

// renewLine lengthens this Client's lease on its place in key's line to lease, for a
// waiter about to wait longer than the place would last.
func (c *Client) renewLine(key string, lease time.Duration) {
	order, leases, _ := LineKeys(key)
	c.lineCall1(key, stepLineRenew, []string{order, leases}, c.queues.lineID, lease.Milliseconds())
}

// lineCall1 sends one call of st to key's line node, unless the Client is closing.
// It goes through that node's sender like an attempt's, so that it lands after any
// attempt of this Client still queued there (one could put a place back after a
// leave); nobody waits for its answer.
func (c *Client) lineCall1(key string, st step, keys []string, args ...any) {
	line := c.lineNode(key)
	select {
	case <-c.closing:
		return
	default:
	}
	if line < 0 || !c.enter() {
		return
	}
	defer c.inFlight.Done()
	c.start(context.Background(), stepRequest{step: st, keys: keys, args: args, need: func(i int) bool { return i == line }})
}

// paced records the wait the pacing chose for a waiter of this Client for key, which
// the leases of the Client's later places in key's line outlast (leaseFor).
func (t *ticket) paced(d time.Duration) {
	t.q.mu.Lock()
	t.kq.paceDelay = d
	t.q.mu.Unlock()
}

// leaseFor returns the lease of this Client's place in key's line for an attempt of
// a waiter whose pacing chose delay last: it outlasts that wait and the latest one any
// waiter of this Client chose for key, so that a first attempt, made before its own
// pacing chose anything, does not get a lease its waits will outlast.
func (q *queues) leaseFor(key string, delay time.Duration) time.Duration {
	q.mu.Lock()
	if kq := q.keys[key]; kq != nil {
		delay = max(delay, kq.paceDelay)
	}
	q.mu.Unlock()
	return lineLeaseFor(delay)
}
