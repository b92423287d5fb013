package redlock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscribe asks every node to announce releases of the key to this Client. With
// Options.Fair it subscribes the Client's channel, once for every key: the key's state
// is not marked subscribed, so it goes when its last waiter leaves (no linger).
func (t *ticket) subscribe() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	ch, key := q.channel(t.key), t.key
	if q.c.opts.Fair {
		if _, ok := q.chans[ch]; ok {
			return
		}
		key = "" // the channel is no key's
	} else {
		if t.kq.subscribed {
			return
		}
		t.kq.subscribed = true
	}
	if q.chans == nil {
		q.chans = make(map[string]string)
	}
	q.chans[ch] = key
	q.start.Do(q.listen)
	q.changed()
}

// notice counts one node's announcement msg on channel, and wakes the key's waiters
// once a majority of nodes announced it: that token was released (msg is the token, as
// an earlier version's release.lua sent it from every node), or
// with Options.Fair that the key is free and a waiter of this Client is the head of
// its queue (msg is "<token> <waiter id>", counted as one: a majority must name the
// same waiter for the same release), and then that waiter attempts (nameHead). A
// releasing Client's "!<token>" (Client.announce) is sent once a majority deleted the
// key, and wakes them by itself.
func (q *queues) notice(node int, channel, msg string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key, ok := q.chans[channel]
	if q.isFairChannel(channel) {
		key, ok = q.fairKeys[namedIn(msg)] // a waiter that left names no key
	}
	kq := q.keys[key]
	if !ok || kq == nil {
		return
	}
	n := len(q.c.nodes)
	if !q.c.opts.Fair && strings.HasPrefix(msg, announcePrefix) {
		// A releasing Client's, after its majority. This Client's own release woke its
		// waiters already (queues.released, with the courtesy it chose): not again.
		q.heardAnnounce(key, kq, msg[len(announcePrefix):])
		return
	}
	if q.c.opts.Fair && strings.HasPrefix(msg, "=") {
		if kq.handedBy(node, msg, n) {
			kq.nameHead(namedIn(msg))
		}
		// Counted as a wake-up without its TTL, which differs from node to node (the
		// head's lease left): "=<token> <waiter id>", as one release's notices are.
		msg = handNotice(msg)
	}
	partial := kq.notices[msg].partial // before heard, which may drop the entry
	if !kq.heard(msg, n) {
		if c := kq.notices[msg]; q.c.opts.Fair && c.nodes == 1 {
			c.partial = q.partialNotice(key, msg)
			kq.notices[msg] = c
		}
		return
	}
	q.stopPartial(partial) // the majority came: nothing left for it to do
	if !q.c.opts.Fair {
		kq.announced(msg) // a node's, counted: an earlier version's release.lua
		return
	}
	kq.courtesy = 0
	kq.nameHead(namedIn(msg))
}

// handedBy records that node handed the key to the fair waiter named in msg ("=<token>
// <ttl ms> <waiter id>", fairHand) with that token and TTL, and reports whether that
// makes a majority of the n nodes for the token. Nodes are counted, not messages: a
// message delivered twice counts once, so a grant (fairWaiter.handed) never rests on
// one node's repeats. A malformed notice counts for nothing. Callers hold q.mu.
func (kq *keyQueue) handedBy(node int, msg string, n int) bool {
	id := namedIn(msg)
	if _, ok := kq.fair[id]; !ok {
		return false
	}
	end := strings.LastIndexByte(msg, ' ')
	if end < 1 {
		return false
	}
	body := msg[1:end]
	sp := strings.LastIndexByte(body, ' ')
	if sp < 0 {
		return false
	}
	ms, err := strconv.ParseInt(body[sp+1:], 10, 64)
	if err != nil || ms <= 0 {
		return false
	}
	token := body[:sp]
	if kq.handed == nil {
		kq.handed = make(map[string]map[string]map[int]time.Duration)
	}
	byToken := kq.handed[id]
	if byToken == nil {
		byToken = make(map[string]map[int]time.Duration)
		kq.handed[id] = byToken
	}
	nodes := byToken[token]
	if nodes == nil {
		nodes = make(map[int]time.Duration)
		byToken[token] = nodes
	}
	if _, again := nodes[node]; again {
		return false
	}
	nodes[node] = time.Duration(ms) * time.Millisecond
	return len(nodes) == n/2+1
}

// handNotice returns a hand notice "=<token> <ttl ms> <waiter id>" without its TTL, or
// msg itself if malformed.
func handNotice(msg string) string {
	id := strings.LastIndexByte(msg, ' ')
	if id < 0 {
		return msg
	}
	ttl := strings.LastIndexByte(msg[:id], ' ')
	if ttl < 0 {
		return msg
	}
	return msg[:ttl] + msg[id:]
}

// namedIn returns the waiter id a fair notice "<token> <waiter id>" names.
func namedIn(msg string) string { return msg[strings.LastIndexByte(msg, ' ')+1:] }

// partialNotice names the waiter of a fair notice msg for key the head after all
// (nameHead) if no majority of nodes has sent msg within partialNoticeWait of the
// first: the nodes that did not name it lack its queue entry (an enqueue call that was
// dropped, queued behind a failed attempt, or a node restarted empty) or name another
// head. Without a majority it would wait for its renewal, a third of the entry lease;
// its attempt queues it again on every node, which mends their order. It returns the
// armed timer (nil if the Client is closed), which the majority's notice stops
// (stopPartial). Callers hold q.mu.
func (q *queues) partialNotice(key, msg string) *time.Timer {
	if q.closed {
		return nil
	}
	q.wg.Add(1) // done by the timer, or by close if it stops the timer first
	var tm *time.Timer
	// The function takes q.mu, which the caller holds: tm is set before it reads it.
	tm = time.AfterFunc(partialNoticeWait(q.c.opts.NodeTimeout), func() {
		defer q.wg.Done()
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.partials, tm)
		if len(q.partials) == 0 {
			q.partials = nil // let go of the emptied map's memory
		}
		kq := q.keys[key]
		if q.closed || kq == nil {
			return
		}
		if c, ok := kq.notices[msg]; ok && c.nodes < len(q.c.nodes)/2+1 {
			kq.nameHead(namedIn(msg))
		}
	})
	if q.partials == nil {
		q.partials = make(map[*time.Timer]struct{})
	}
	q.partials[tm] = struct{}{}
	return tm
}

// stopPartial stops a partialNotice timer that has not fired, if tm is one: on a hot
// key every release's first notice arms one, and the rest of the release's notices
// come within a round trip. Callers hold q.mu.
func (q *queues) stopPartial(tm *time.Timer) {
	if tm == nil || !tm.Stop() {
		return // none, or it fired: its function cleans up after itself
	}
	delete(q.partials, tm)
	if len(q.partials) == 0 {
		q.partials = nil
	}
	q.wg.Done()
}

// changed tells every listener that the set of channels changed. Callers hold q.mu.
func (q *queues) changed() {
	for _, ls := range q.listeners {
		select {
		case ls.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// listener keeps one node's subscription in line with the channels the Client wants,
// and forwards the node's release announcements.
type listener struct {
	ps   *redis.PubSub
	kick chan struct{}
	stop chan struct{}
}

// listen starts one listener per node. Called once, with q.mu held.
func (q *queues) listen() {
	for i, n := range q.c.nodes {
		ls := &listener{
			ps:   n.rdb.Subscribe(context.Background()),
			kick: make(chan struct{}, 1),
			stop: make(chan struct{}),
		}
		q.listeners = append(q.listeners, ls)
		msgs := ls.ps.ChannelWithSubscriptions()
		q.wg.Add(2)
		go func() { // deliver announcements, and the node's confirmations of subscriptions
			defer q.wg.Done()
			for m := range msgs {
				switch m := m.(type) {
				case *redis.Message:
					q.notice(i, m.Channel, m.Payload)
				case *redis.Subscription:
					if m.Kind == "subscribe" {
						q.listening(i, m.Channel)
					}
				}
			}
		}()
		go func() { // follow the wanted channels
			defer q.wg.Done()
			q.follow(ls)
		}()
	}
}

// follow subscribes ls to the channels the Client wants and unsubscribes it from the
// others, each time it is kicked, until stopped. A node that is down makes these calls
// fail or wait; go-redis keeps the wanted set and subscribes again on reconnection.
//
// It remembers, per channel, the key state it subscribed for. When sweep dropped a
// key and an Acquire brought it back before this listener ran, the channel is wanted
// and subscribed as before, but the new state has no confirmation from this node (its
// waiters would wait for one: listening): the channel is subscribed again, and Redis
// confirms a repeated SUBSCRIBE. A fair Client's own channel belongs to no key state
// (nil): it is subscribed once, until Close.
func (q *queues) follow(ls *listener) {
	have := make(map[string]*keyQueue) // a fair Client's own channel: nil, no key's
	for {
		select {
		case <-ls.stop:
			return
		case <-ls.kick:
		}
		q.mu.Lock()
		var add, drop []string
		for ch, key := range q.chans {
			kq := q.keys[key]
			if was, ok := have[ch]; !ok || was != kq {
				add = append(add, ch)
				have[ch] = kq
			}
		}
		for ch := range have {
			if _, ok := q.chans[ch]; !ok {
				drop = append(drop, ch)
				delete(have, ch)
			}
		}
		if len(drop) > 0 && len(have) == 0 {
			have = make(map[string]*keyQueue) // let go of the emptied map's memory
		}
		q.mu.Unlock()
		ctx := context.Background()
		if len(add) > 0 {
			_ = ls.ps.Subscribe(ctx, add...) // go-redis records them even on error
		}
		if len(drop) > 0 {
			_ = ls.ps.Unsubscribe(ctx, drop...)
		}
	}
}

// listening records that node i confirmed its subscription to channel (its reply to
// SUBSCRIBE, which go-redis also gets after a reconnection): from then on that node's
// announcements reach this Client. When that makes a majority, or when a node counted
// already confirms again (it reconnected, and may have announced a release meanwhile),
// a release announced between the head's last attempt and now was missed: the key's
// waiters are woken, and every fair waiter attempts once (nameAll). For a fair Client
// so does the last node's confirmation: a node that confirmed after the majority may
// have sent, before it did, a notice that counted (one node's is enough to make a fair
// waiter attempt, see partialNotice), which left the waiter to RetryDelay; not each
// confirmation past the majority, as the last one covers the earlier ones, and on a
// fresh key every fair waiter would attempt once more per node (see settle). For a
// plain key each confirmation past the majority is checked: a release is announced on
// one node (Client.announce), and the waiter missed it if that node confirmed after
// it (a node down may keep the last confirmation from ever coming). These wake-ups are
// checks: the attempts they cause do not count toward Options.MaxAttempts
// (waiter.checked). With Options.Fair the channel is the Client's own, for all its
// keys, and every key with fair waiters is checked.
func (q *queues) listening(i int, channel string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.isFairChannel(channel) {
		// The Client's own channel, for all its keys: each key with fair waiters is
		// checked as a key's own subscription would be. Once a waiter drew without
		// waiting for every node (fairSettled), every confirmation is checked: the
		// waiter may have an entry on this node that named it before it listened, and
		// the last confirmation, which covers the earlier ones, may never come (a node
		// down; TestFairSettledLateConfirmationRechecks).
		if confirmed(&q.fairListening, i, len(q.c.nodes)) || q.fairSettled {
			for _, kq := range q.keys {
				if len(kq.fair) > 0 {
					kq.recheck()
				}
			}
		}
		return
	}
	if kq := q.keys[q.chans[channel]]; kq != nil &&
		(confirmed(&kq.listening, i, len(q.c.nodes)) || len(kq.listening) > len(q.c.nodes)/2) {
		kq.recheck()
	}
}

// confirmed records in *seen that node i of n confirmed a subscription, and reports
// whether that calls for a check (listening): the confirmations now make a majority,
// or come from every node, or node i had confirmed before (it reconnected).
func confirmed(seen *map[int]bool, i, n int) bool {
	if *seen == nil {
		*seen = make(map[int]bool)
	}
	again := (*seen)[i]
	(*seen)[i] = true
	return again || len(*seen) == n/2+1 || len(*seen) == n
}

// recheck wakes the key's waiters and names every fair waiter, as a check (listening).
func (kq *keyQueue) recheck() {
	kq.courtesy = 0
	kq.check(true)
	kq.nameAll()
}

// listened returns the channel that is closed at the key's next wake-up, and whether
// every node has confirmed the subscription that brings the key's notices (with
// Options.Fair, the Client's own channel, or a waiter of this Client gave up waiting
// for that: settled).
func (t *ticket) listened() (<-chan struct{}, bool) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.q.c.opts.Fair {
		return t.kq.wake, t.q.fairSettled || len(t.q.fairListening) == len(t.q.c.nodes)
	}
	return t.kq.wake, len(t.kq.listening) == len(t.q.c.nodes)
}

// settled records that a fair waiter waited out settle's cap for the confirmations of
// the Client's channel: later waiters do not wait for them (listened).
func (t *ticket) settled() {
	t.q.mu.Lock()
	t.q.fairSettled = true
	t.q.mu.Unlock()
}

// lingering returns how long an idle key stays subscribed.
func (q *queues) lingering() time.Duration {
	if q.linger > 0 {
		return q.linger
	}
	return linger
}

// schedule arms the sweeper to run after d, unless it is armed already (then it runs
// sooner: every key that became idle before this one lingers out earlier) or the
// Client is closed. Callers hold q.mu.
func (q *queues) schedule(d time.Duration) {
	if q.sweeper != nil || q.closed {
		return
	}
	q.wg.Add(1) // done by sweepLater, or by close if it stops the timer first
	q.sweeper = time.AfterFunc(d, q.sweepLater)
}

// sweepLater drops the keys that lingered out, and arms the sweeper again while others
// linger: at the end of the earliest one's linger, but at least linger/4 from now, so
// that keys going idle one after another cost a few sweeps per linger, not one each.
func (q *queues) sweepLater() {
	defer q.wg.Done()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweeper = nil
	if q.closed {
		return
	}
	if next, ok := q.sweep(time.Now()); ok {
		q.schedule(max(next, q.lingering()/sweepDivisor))
	}
}

// sweep drops the keys that have been idle for linger, and their subscriptions. It
// returns how long until the next idle key lingers out, and whether there is one.
// Callers hold q.mu.
func (q *queues) sweep(now time.Time) (next time.Duration, lingering bool) {
	d := q.lingering()
	dropped := false
	for key, kq := range q.keys {
		if kq.idle.IsZero() {
			continue
		}
		left := d - now.Sub(kq.idle)
		if left <= 0 {
			q.stopLine(kq)
			delete(q.keys, key)
			delete(q.chans, releaseChannel(key)) // fair keys do not linger
			dropped = true
			continue
		}
		if !lingering || left < next {
			next, lingering = left, true
		}
	}
	// A map keeps the memory of its largest size: let go of emptied ones.
	if len(q.keys) == 0 {
		q.keys = nil
	}
	if len(q.chans) == 0 {
		q.chans = nil
	}
	if dropped {
		q.changed()
	}
	return next, lingering
}

// close ends the subscriptions and waits for their goroutines.
func (q *queues) close() {
	q.mu.Lock()
	q.closed = true
	if q.sweeper != nil && q.sweeper.Stop() {
		q.wg.Done() // its sweepLater will not run
	}
	q.sweeper = nil
	for _, kq := range q.keys {
		q.stopLine(kq)
	}
	for tm := range q.partials { // they would only find the Client closed
		if tm.Stop() {
			q.wg.Done()
		}
	}
	q.partials = nil
	listeners := q.listeners
	q.mu.Unlock()
	for _, ls := range listeners {
		close(ls.stop)
		q.wg.Add(1)
		go func() { // in parallel: each may wait for a reconnection to a dead node
			defer q.wg.Done()
			_ = ls.ps.Close() // ends its message channel
		}()
	}
	q.wg.Wait()
}
