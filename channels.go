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

// announceTo reports whether a release of key that a majority of nodes confirmed is
// worth announcing: other Clients listened on a node that deleted the key (release.lua's
// count, less this Client's own subscription), or a node is a Cluster member, whose
// count covers only the subscribers on the key's master while a PUBLISH reaches every
// master's.
func (c *Client) announceTo(others int64) bool {
	if others > 0 {
		return true
	}
	for i := range c.nodes {
		if c.nodes[i].cluster {
			return true
		}
	}
	return false
}

// announce tells the Clients waiting for key that the lock of token is gone from a
// majority of nodes: one PUBLISH of "!<token>" on releaseChannel(key), on the key's lead
// node (Client.lead: the node their lead-first attempts ask first) or, if the lead is
// failing, the first node that is not. Every waiting Client subscribes to the channel
// on every node, so one node's message reaches each of them once: 8 Clients waiting on
// 5 nodes hear 8 messages per release, where a PUBLISH from each node's release.lua
// made 40, and a waiter woken this way finds the key free on a majority already. Best
// effort, as a notice always was: a waiter that misses it (its subscription to that
// node reconnecting, the node down) attempts again after Options.RetryDelay. The
// PUBLISH is sent in the background and counts as a node call (Client.inFlight), so
// Close waits for it; the caller holds a step. Nothing depends on its reply.
func (c *Client) announce(key, token string) {
	i := c.lead(key)
	for j := 0; i < 0 && j < len(c.nodes); j++ {
		if !c.nodes[j].s.failing.Load() {
			i = j
		}
	}
	if i < 0 {
		return
	}
	rdb, timeout := c.nodes[i].rdb, c.opts.NodeTimeout
	c.inFlight.Add(1)
	go func() {
		defer c.inFlight.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = rdb.Publish(ctx, releaseChannel(key), announcePrefix+token).Err()
	}()
}

// announced wakes the key's waiters: the lock of token was released on a majority of
// nodes. Callers hold q.mu.
func (kq *keyQueue) announced(token string) {
	kq.courtesy = 0
	kq.gone = token
	kq.wakeUp(true)
}
