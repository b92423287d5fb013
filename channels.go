package redlock

import (
	"context"
	"time"
)

// releaseChannel is the pub/sub channel on which the Clients waiting for key hear that
// it was released (Client.announce).
func releaseChannel(key string) string { return "redlock:released:" + key } // as in release.lua

// fairPrefix begins every fair Client's channel (fairChannel).
const fairPrefix = "redlock:fair:"

// fairChannel is the pub/sub channel on which fair_release.lua tells the head of a
// key's queue that the key is free, when the head is a waiter of the Client named
// client (queues.fairID): one channel per Client for all its keys, so that a waiter
// for a key new to its Client needs no SUBSCRIBE first. The message is "<token>
// <waiter id>"; the waiter id tells the Client which key (queues.fairKeys).
func fairChannel(client string) string { return fairPrefix + client } // as in fair_queue.lua

// isFairChannel reports whether ch is this Client's fair channel (fairChannel).
func (q *queues) isFairChannel(ch string) bool {
	return q.c.opts.Fair && len(ch) == len(fairPrefix)+len(q.fairID) &&
		ch[:len(fairPrefix)] == fairPrefix && ch[len(fairPrefix):] == q.fairID
}

// channel returns the channel this Client subscribes to for key's wake-ups: with
// Options.Fair its own channel, the same for every key.
func (q *queues) channel(key string) string {
	if q.c.opts.Fair {
		return fairChannel(q.fairID)
	}
	return releaseChannel(key)
}

// announcePrefix begins a releasing Client's notice on releaseChannel: "!<token>".
// An earlier version's release.lua published the bare token from every node.
const announcePrefix = "!"

// announceRelease announces to the other Clients waiting for key that the key is gone
// from a majority of nodes (Client.announce), given t, the replies of the release round
// r of token read so far (release.lua's, or reentrant_release.lua's: an owner's hold
// released while other holds keep the key is no release, tally.gone). When t shows
// that majority it announces at once. Otherwise, while one can still come, a
// goroutine reads r's other replies (counted in Client.inFlight; the caller holds a
// step, so Close is waiting) and, when it does, wakes this Client's own waiters again
// and announces: a Release whose context ended or whose majority answered after the
// node timeout, and a failed attempt's clean-up still queued behind a slow node, wake
// the waiters when their deletes land, as the nodes' own notices did. Only t's own
// replies may have been read from r.replies. With leadPublishes (a plain lock's
// release: Client.lineRelease), release.lua announced it on the key's line node if
// that node deleted the key, and this Client announces nothing; it waits for that
// node's reply, if the majority came first, as long again as the majority took,
// unless the node failed or was slow lately. won: the release succeeded (Release
// returns nil), so it is announced even once Close has begun.
func (c *Client) announceRelease(key, token string, r *round, t tally, leadPublishes, won bool) {
	q, lw := t.quorum(), c.watchLine(key, leadPublishes)
	if t.gone >= q && lw.heard(t) {
		if !lw.published(t) { // else release.lua announced it on the line node (line.go)
			c.announce(key, token, t)
		}
		return
	}
	late := t.gone < q
	t.pending, t.failed, t.unread = t.pending+t.unread, t.failed-t.unread, 0 // their replies will come
	if t.gone+t.pending < q {
		return
	}
	c.inFlight.Add(1)
	go func() {
		defer c.inFlight.Done()
		lw.readRest(r, &t)
		if t.gone < q || !won && c.isClosed() {
			// Once Close has begun, a release that failed (a Release that returned an
			// error, a failed attempt's clean-up) is not announced when its deletes
			// land late: the PUBLISH would only hold Close up. A Release that returned
			// nil is announced all the same (one PUBLISH, which Close waits for): the
			// line node's reply, which would have announced it, showed no delete there
			// or did not come, or an owner's other holds kept the key on some nodes
			// when Release counted its majority.
			return
		}
		if late {
			c.queues.goneLate(key, token) // this Client's own waiters: no PUBLISH needed
		}
		if late || !lw.published(t) {
			// A late majority is announced even if the line node announced the release
			// as it deleted the key: a named waiter may have given up meeting the
			// release on the other nodes (waiter.settling) before they deleted it.
			c.announce(key, token, t)
		}
	}()
}

// lineWatch is, for a plain lock's release (announceRelease), the key's line node,
// whose reply shows whether release.lua announced the release there (−1: none), and
// whether that reply is worth waiting for.
type lineWatch struct {
	line  int
	await bool
}

// watchLine returns the lineWatch of a release of key; leadPublishes: the release's
// call to the line node may announce it (round.leadPublishes).
func (c *Client) watchLine(key string, leadPublishes bool) lineWatch {
	if !leadPublishes {
		return lineWatch{line: -1}
	}
	line := c.lineNode(key)
	if line >= 64 {
		return lineWatch{line: -1}
	}
	// A line node that failed or was slow lately (Client.lead skips it) is not waited
	// for: its announcement would come late, if at all.
	return lineWatch{line: line, await: line >= 0 && c.lead(key) == line}
}

// heard reports whether t has the line node's reply, or it is not awaited.
func (lw lineWatch) heard(t tally) bool { return !lw.await || t.answered&(1<<lw.line) != 0 }

// published reports whether t shows that the line node deleted the key, and so
// announced the release.
func (lw lineWatch) published(t tally) bool {
	return lw.line >= 0 && t.positive&(1<<lw.line) != 0
}

// readRest reads round r's replies into *t until a majority shows the key gone and the
// line node's reply is in, or neither can come. Once the majority is in, the line
// node's reply is waited for as long again as the majority took (at least
// lineReplyWait): a node that answers much later than the others is slow or down, and
// its announcement may never come; if it comes after this Client's, the Clients it
// does not name attempt once more.
func (lw lineWatch) readRest(r *round, t *tally) {
	q := t.quorum()
	var wait *time.Timer
	for (t.gone < q || !lw.heard(*t)) && t.pending > 0 && t.gone+t.pending >= q {
		if t.gone < q {
			t.addReply(<-r.replies)
			continue
		}
		if wait == nil {
			wait = time.NewTimer(max(t.quorumIn, lineReplyWait))
			defer wait.Stop()
		}
		select {
		case rep := <-r.replies:
			t.addReply(rep)
		case <-wait.C:
			return
		}
	}
}

// goneLate wakes this Client's waiters for key once the release of token, whose round
// showed no majority when it was read, is found gone from a majority: their wake-up
// at Release (queues.released) came before the deletes had landed, and this Client's
// own "!<token>" is ignored (notice).
func (q *queues) goneLate(key, token string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kq := q.keys[key]; kq != nil && !q.c.opts.Fair {
		kq.announced(token)
	}
}

// announce tells the Clients waiting for key that the lock of token is gone from a
// majority of nodes, t being the replies that showed it: one PUBLISH of "!<token>" on
// releaseChannel(key), if any Client may listen (release.lua's count, largest in
// t.yesHigh, this Client's own subscription included: queues.mayListen) or a node is a
// Cluster member (the count covers only the subscribers on the key's master, a PUBLISH
// reaches every master's). It goes to a node that deleted the key in t, so one that
// answered just now: the key's lead (Client.lead: the node the waiters' attempts ask
// first) if it did, and if that PUBLISH fails, the next one that did. Every waiting
// Client subscribes to the channel on every node, so one node's message reaches each
// of them once: 8 Clients waiting on 5 nodes hear 8 messages per release, where a
// PUBLISH from each node's release.lua made 40, and a waiter woken this way finds the
// key free on a majority already. Best effort, as a notice always was: a waiter that
// misses it (its subscription to that node reconnecting) attempts again after
// Options.RetryDelay. The PUBLISH is sent in the background, counted in
// Client.inFlight.
func (c *Client) announce(key, token string, t tally) {
	if t.positive == 0 || !c.queues.mayListen(key, t.yesHigh) && !c.anyCluster() {
		return
	}
	var order []int
	lead := c.lineNode(key)
	if lead >= 0 && lead < 64 && t.positive&(1<<lead) != 0 {
		order = append(order, lead)
	}
	for i := range min(len(c.nodes), 64) {
		if t.positive&(1<<i) != 0 && (len(order) == 0 || order[0] != i) {
			order = append(order, i)
		}
	}
	timeout := c.opts.NodeTimeout
	c.inFlight.Add(1)
	go func() {
		defer c.inFlight.Done()
		for n, i := range order {
			if n > 0 && c.isClosed() {
				return // a fallback would only hold Close up, waiting for a node
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := c.publishOn(ctx, i, lead, key, token)
			cancel()
			if err == nil {
				return
			}
		}
	}()
}

// anyCluster reports whether a node is a Redis Cluster client.
func (c *Client) anyCluster() bool {
	for i := range c.nodes {
		if c.nodes[i].cluster {
			return true
		}
	}
	return false
}

// announced wakes the key's waiters: the lock of token was released on a majority of
// nodes. Callers hold q.mu.
func (kq *keyQueue) announced(token string) {
	kq.courtesy = 0
	kq.gone = token
	kq.wakeUp(true)
}
