package redlock

import (
	"context"
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
// replies may have been read from r.replies.
func (c *Client) announceRelease(key, token string, r *round, t tally) {
	q := t.quorum()
	if t.gone >= q {
		c.announce(key, token, t)
		return
	}
	t.pending, t.failed, t.unread = t.pending+t.unread, t.failed-t.unread, 0 // their replies will come
	if t.gone+t.pending < q {
		return
	}
	c.inFlight.Add(1)
	go func() {
		defer c.inFlight.Done()
		for t.gone < q && t.gone+t.pending >= q {
			t.addReply(<-r.replies)
		}
		if t.gone >= q && !c.isClosed() { // once closed, nobody here waits, and Close would wait for it
			c.queues.goneLate(key, token) // this Client's own waiters: no PUBLISH needed
			c.announce(key, token, t)
		}
	}()
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
// releaseChannel(key), if another Client may listen (release.lua's count, largest in
// t.yesHigh, less this Client's own subscription) or a node is a Cluster member (the
// count covers only the subscribers on the key's master, a PUBLISH reaches every
// master's). It goes to a node that deleted the key in t, so one that answered just
// now: the key's lead (Client.lead: the node the waiters' attempts ask first) if it
// did, and if that PUBLISH fails, the next one that did. Every waiting Client
// subscribes to the channel on every node, so one node's message reaches each of them
// once: 8 Clients waiting on 5 nodes hear 8 messages per release, where a PUBLISH from
// each node's release.lua made 40, and a waiter woken this way finds the key free on a
// majority already. Best effort, as a notice always was: a waiter that misses it (its
// subscription to that node reconnecting) attempts again after Options.RetryDelay.
// The PUBLISH is sent in the background, counted in Client.inFlight.
func (c *Client) announce(key, token string, t tally) {
	if t.positive == 0 || !c.queues.mayListen(key, t.yesHigh) && !c.anyCluster() {
		return
	}
	var order []int
	if lead := c.lead(key); lead >= 0 && lead < 64 && t.positive&(1<<lead) != 0 {
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
			err := c.nodes[i].rdb.Publish(ctx, releaseChannel(key), announcePrefix+token).Err()
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
