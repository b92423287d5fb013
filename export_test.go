package redlock

import (
	"context"
	"testing"
	"time"
)

// LoseAt records a loss at at, as KeepAlive does when it finds that the machine was
// suspended (clockGap): Until reports no later time from then on.
func (l *Lock) LoseAt(at time.Time) { l.lose(at) }

// WaitForCalls blocks until every node call this lock has started has returned. Tests
// use it to inspect the nodes after a step that decided on a majority early.
func (l *Lock) WaitForCalls() {
	l.op.Lock()
	defer l.op.Unlock()
	for i := range l.lastRound.calls {
		<-l.lastRound.calls[i].done
	}
}

// WaitForCalls waits until none of the Client's node calls is out, clean-ups of
// failed attempts included. Call it only while no step of the Client runs.
func (c *Client) WaitForCalls() { c.inFlight.Wait() }

// Waiting returns how many Acquire calls of this Client wait for key.
func (c *Client) Waiting(key string) int {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	if kq := c.queues.keys[key]; kq != nil {
		return len(kq.queue)
	}
	return 0
}

// PartialNotices returns how many partial-notice timers of this Client are armed
// (queues.partialNotice).
func (c *Client) PartialNotices() int {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	return len(c.queues.partials)
}

// Listening returns how many nodes confirmed the subscription to key's channel (with
// Options.Fair, the Client's own channel, whatever key).
func (c *Client) Listening(key string) int {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	if c.opts.Fair {
		return len(c.queues.fairListening)
	}
	if kq := c.queues.keys[key]; kq != nil {
		return len(kq.listening)
	}
	return 0
}

// ReleaseChannel is the channel on which release.lua announces key's releases.
var ReleaseChannel = releaseChannel

// Wakes returns how many signs that the lock may be free the Client's state for key
// has seen.
func (c *Client) Wakes(key string) uint64 { return c.queues.wakes(key) }

// Queued returns how many calls wait in the queue of node i's sender (not counting
// calls parked behind an earlier call, nor the batch out now).
func (c *Client) Queued(i int) int {
	s := c.nodes[i].s
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Offered reports whether the head of key's queue in this Client has a standing offer
// for a handoff.
func (c *Client) Offered(key string) bool {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	kq := c.queues.keys[key]
	return kq != nil && kq.offer != nil
}

// Claimed returns how many handoffs in a row Releases of this Client have claimed for
// key (queues.claim) since its last plain release.
func (c *Client) Claimed(key string) int {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	if kq := c.queues.keys[key]; kq != nil {
		return kq.handoffs
	}
	return 0
}

// SetAfterHandOver makes f run in Release right after each handoff gave the waiter its
// lock, until the test ends.
func SetAfterHandOver(t testing.TB, f func()) {
	afterHandOver.Store(&f)
	t.Cleanup(func() { afterHandOver.Store(nil) })
}

// SetLinger sets how long a key whose last waiter left stays subscribed (5 s by
// default), so that tests need not wait that long to see it dropped.
func (c *Client) SetLinger(d time.Duration) {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	c.queues.linger = d
}

// HasObserverRecord reports whether the lock's latest round keeps a record for
// Options.Observer (round.obs): made only when the Client has an Observer.
func (l *Lock) HasObserverRecord() bool {
	l.op.Lock()
	defer l.op.Unlock()
	return l.lastRound != nil && l.lastRound.obs != nil
}

// TryAcquireLeadFirst is TryAcquire with its one attempt asking key's lead node first,
// as an Acquire does after a wake-up by the release of token gone (leadHint).
func (c *Client) TryAcquireLeadFirst(ctx context.Context, key string, ttl time.Duration, gone string) (*Lock, error) {
	if err := c.check(key, ttl); err != nil {
		return nil, err
	}
	lock, qe, err := c.try(ctx, key, ttl, leadHint{first: true, gone: gone})
	if lock != nil || err != nil {
		return lock, err
	}
	return nil, qe
}

// Lead returns the index of key's lead node (Client.lead), or -1 when its attempts
// ask every node at once.
func (c *Client) Lead(key string) int { return c.lead(key) }

// HandKey names key's hash of hand registrations (fair_queue.lua, fairHand).
func HandKey(key string) string { return fairKeys(key)[4] }

// SetHandsOver turns the nodes' hand-over of fair keys on or off for the Acquire calls
// that begin from now on, and returns a function that restores the previous setting.
func SetHandsOver(on bool) (restore func()) {
	was := handsOff.Swap(!on)
	return func() { handsOff.Store(was) }
}

// FairScriptHashes returns the SHA1s of the scripts a fair Client without fencing runs
// for a ticket draw, an attempt and a release (fair_ticket.lua, fair_acquire.lua and
// fair_release.lua, each with the files fair.go puts in front of it), so that a test
// that puts them together from scripts/ can check that it runs the same text.
func FairScriptHashes() (ticket, acquire, release string) {
	return stepFairTicket.script.Hash(), stepFairAcquire.script.Hash(), stepFairRelease.script.Hash()
}

// LineNode returns the index of the node that keeps key's line (Client.lineNode).
func (c *Client) LineNode(key string) int { return c.lineNode(key) }

// LineID returns the id that names this Client in the lines of plain keys.
func (c *Client) LineID() string { return c.queues.lineID }
