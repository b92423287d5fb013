package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// releaseChannel is the pub/sub channel on which release.lua announces that key was
// released; the message is the released (now dead) token.
func releaseChannel(key string) string { return "redlock:released:" + key } // as in release.lua

// subscribe asks every node to announce releases of the key to this Client.
func (t *ticket) subscribe() {
	q := t.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.kq.subscribed || q.closed {
		return
	}
	t.kq.subscribed = true
	if q.chans == nil {
		q.chans = make(map[string]string)
	}
	q.chans[releaseChannel(t.key)] = t.key
	q.start.Do(q.listen)
	q.changed()
}

// notice counts one node's announcement that token was released on key, and wakes the
// key's waiters once a majority of nodes announced it.
func (q *queues) notice(channel, token string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	kq := q.keys[q.chans[channel]]
	if kq == nil {
		return
	}
	if kq.heard(token, len(q.c.nodes)) {
		kq.courtesy = 0
		kq.wakeUp(true)
	}
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
	for _, n := range q.c.nodes {
		ls := &listener{
			ps:   n.rdb.Subscribe(context.Background()),
			kick: make(chan struct{}, 1),
			stop: make(chan struct{}),
		}
		q.listeners = append(q.listeners, ls)
		msgs := ls.ps.Channel()
		q.wg.Add(2)
		go func() { // deliver announcements
			defer q.wg.Done()
			for m := range msgs {
				q.notice(m.Channel, m.Payload)
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
func (q *queues) follow(ls *listener) {
	have := make(map[string]bool)
	for {
		select {
		case <-ls.stop:
			return
		case <-ls.kick:
		}
		q.mu.Lock()
		var add, drop []string
		for ch := range q.chans {
			if !have[ch] {
				add = append(add, ch)
			}
		}
		for ch := range have {
			if _, ok := q.chans[ch]; !ok {
				drop = append(drop, ch)
			}
		}
		q.mu.Unlock()
		ctx := context.Background()
		if len(add) > 0 {
			_ = ls.ps.Subscribe(ctx, add...) // go-redis records them even on error
			for _, ch := range add {
				have[ch] = true
			}
			q.listening(add)
		}
		if len(drop) > 0 {
			_ = ls.ps.Unsubscribe(ctx, drop...)
			for _, ch := range drop {
				delete(have, ch)
			}
			if len(have) == 0 {
				have = make(map[string]bool) // let go of the emptied map's memory
			}
		}
	}
}

// listening counts one more node subscribed to each channel. Once a majority is, a
// release announced from then on wakes the head; one announced between the head's last
// attempt and now was missed, so the head is woken to attempt once more.
func (q *queues) listening(chans []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ch := range chans {
		if kq := q.keys[q.chans[ch]]; kq != nil {
			kq.listeners++
			if kq.listeners == len(q.c.nodes)/2+1 {
				kq.courtesy = 0
				kq.wakeUp(true)
			}
		}
	}
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
			delete(q.keys, key)
			delete(q.chans, releaseChannel(key))
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
