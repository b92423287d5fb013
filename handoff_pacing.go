package redlock

import (
	"math/rand/v2"
	"time"
)

// A key whose queue emptied keeps its subscription for linger, so a client that takes
// the same contended lock again and again is not subscribing and unsubscribing all the
// time (and missing the announcements in between). A timer drops it after that, also
// when no other Acquire comes: the subscription is gone within linger + linger/4.
const linger = 5 * time.Second

// maxHandoffs bounds the handoffs in a row inside one Client: after that many, a
// release deletes the key and announces it, so waiters in other Clients get a chance.
const maxHandoffs = 16

// maxNotices bounds a key's pending notices (tokens a minority announced, such as the
// clean-up of a failed attempt); past it they are forgotten.
const maxNotices = 64

// maxYields bounds the keys remembered for yielding.
const maxYields = 1024

// pause returns how long the head should wait after a wake-up before it attempts.
// After an announcement, the heads of every Client waiting for the key woke at the same
// moment; if all tried at once they could split the votes so that none wins, so each
// waits a random part of its last attempt's duration (took) and one goes first. After
// this Client's own release that ended a run of handoffs while other Clients were
// listening, the head steps back for the courtesy time, so they can go first.
func (t *ticket) pause(took time.Duration) time.Duration {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	switch {
	case !t.kq.remote:
		return 0
	case t.kq.courtesy > 0:
		return t.kq.courtesy
	case took > 0:
		return rand.N(took)
	}
	return 0
}
