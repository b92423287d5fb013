package redlock

import (
	"math/rand/v2"
	"time"
)

// Pacing: every constant that decides how waiters take turns, in one Client and across
// Clients, and how long their state is kept. Each line says why it has its value; the
// functions below are the decisions made from them, pure so that they can be tested
// alone.
const (
	// linger: an idle key stays subscribed this long, so a client that takes the same
	// contended lock again and again does not resubscribe (and miss notices) each time.
	linger = 5 * time.Second
	// sweepDivisor: the drop timer runs at least linger/4 apart, so keys going idle one
	// after another cost a few sweeps per linger (a key is gone within linger + linger/4).
	sweepDivisor = 4
	// maxHandoffs: after this many handoffs in a row inside one Client, a release deletes
	// and announces the key, so waiters in other Clients get a chance.
	maxHandoffs = 16
	// courtesyFactor: after such a capped run, this Client's head waits this many times
	// the release's duration, long enough for a woken Client's attempt to land first.
	courtesyFactor = 2
	// yieldRoundTrips: an Acquire right after this Client released a key other Clients
	// listened for waits this many round trips to a majority, so that they go first.
	yieldRoundTrips = 4
	// yieldSlack: added to that wait for Go's timer lateness on an idle runtime (~1 ms).
	yieldSlack = time.Millisecond
	// quickSpread: after a lost race the next attempt comes 1 to 1+quickSpread round
	// trips later: after the racers' clean-ups landed, and not all at the same moment.
	quickSpread = 2
	// maxNotices: a key's pending notices (tokens a minority announced, such as the
	// clean-up of a failed attempt) are bounded; past it they are forgotten.
	maxNotices = 64
	// maxYields: the keys remembered for yielding are bounded, so memory stays flat.
	maxYields = 1024
	// partialNoticeDivisor: a fair waiter that some nodes, but not a majority, named the
	// head of a free key attempts NodeTimeout/partialNoticeDivisor after the first such
	// notice (partialNoticeWait): long enough for the rest of a release's notices to
	// arrive (they come within a round trip), far shorter than waiting for a renewal.
	partialNoticeDivisor = 5
	// heldPruneFloor: the record of held locks is pruned of expired ones when it has
	// doubled, but not below this size, so that small records are not pruned every time.
	heldPruneFloor = 64
	// ageStepDivisor: a woken head waits a round trip / ageStepDivisor for each race
	// fewer than this Client's recent winners had lost (agePause): long enough to beat
	// the spread of the moments at which the heads hear a release (a whole round trip
	// measured the same), short enough that the few steps a turn takes stay inside an
	// Acquire's yield (yieldRoundTrips).
	ageStepDivisor = 2
	// maxAgeSteps: agePause waits at most this many steps (4 round trips, the yield's
	// length when the round trips are alike), so a head with a high estimate of the
	// contention is not left behind a releaser.
	maxAgeSteps = 8
	// agePauseDivisor: and at most NodeTimeout/agePauseDivisor, so that one slow round
	// trip (a node near its timeout) cannot stretch the pause past the yield's own cap
	// (NodeTimeout).
	agePauseDivisor = 4
	// lineLease: a waiter's place in a key's line (line.go) lasts this long after its
	// latest attempt, or 3 times the wait its pacing chose last if that is more, up
	// to lineLeaseMax (lineLeaseFor): a waiter that polls keeps its place, and with
	// the default RetryDelay one that died leaves the line within a second.
	lineLease = time.Second
	// lineLeaseMax: a waiter that polls less often than every 20 s does not keep a
	// dead Client's place alive (and costing a turn per release) for longer.
	lineLeaseMax = time.Minute
	// lineTurnDivisor: a release gives the line's head the key's turn for
	// NodeTimeout/lineTurnDivisor (lineTurn): its Client hears of it within a round
	// trip and asks every node at once; meanwhile the line node refuses the key to
	// other Acquires. It is also how long the other Clients wait for the next
	// announcement before they attempt anyway (a head that died, or missed its turn),
	// so a dead head costs each hand-over that long, until its place lapses.
	lineTurnDivisor = 4
	// lineReplyWait: a releasing Client whose majority answered before the key's line
	// node waits for that node's reply (which tells whether it announced the release,
	// release.lua) as long again as the majority took, and at least this long.
	lineReplyWait = time.Millisecond
	// settleFloor: the first retry after meeting a release that had not landed on
	// every node comes a round trip later, at least this long (a round trip to a
	// majority can read as 0 on a coarse clock).
	settleFloor = 100 * time.Microsecond
	// settleDoublings: each further retry waits twice as long, up to this many
	// doublings (a thousand round trips), for as long as NodeTimeout from the wake-up
	// (waiter.settling): a few calls cover a delete that lands a node timeout late.
	settleDoublings = 10
	// winAverage: winLosses moves 1/winAverage of the way to each winner's losses, so
	// it follows a change in the number of waiting Clients within a few hand-overs.
	winAverage = 4
)

// wakePause returns how long the head should wait after a wake-up before it attempts.
// After an announcement (remote), the heads of every Client waiting for the key woke at
// the same moment; if all tried at once they could split the votes so that none wins,
// so each waits a random part (jitter) of its last attempt's duration (took) and one
// goes first. After this Client's own release that ended a run of handoffs while other
// Clients were listening, the head steps back for the courtesy time, so they can go
// first. After a wake-up by this Client's own release it does not wait.
func wakePause(remote bool, courtesy, took time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	switch {
	case !remote:
		return 0
	case courtesy > 0:
		return courtesy
	case took > 0:
		return jitter(took)
	}
	return 0
}

// pause is wakePause for the head's key, with a random jitter.
func (t *ticket) pause(took time.Duration) time.Duration {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	return wakePause(t.kq.remote, t.kq.courtesy, took, rand.N[time.Duration])
}

// pauseLed is pause for a head whose next attempt asks the key's lead node first: the
// lead keeps woken heads from splitting the votes, so no jitter. A courtesy still
// holds; after an announcement the head waits its agePause, given the races it lost
// so far and its latest round trip. It also returns the token whose release made the
// latest wake-up (keyQueue.gone), and named: that release named this Client the head
// of the key's line (line.go), which then attempts at once.
func (t *ticket) pauseLed(losses int, took time.Duration) (d time.Duration, gone string, named bool) {
	t.q.mu.Lock()
	defer t.q.mu.Unlock()
	if t.kq.named {
		t.kq.named = false
		return 0, t.kq.gone, true
	}
	d = wakePause(t.kq.remote, t.kq.courtesy, 0, nil)
	if t.kq.remote && t.kq.courtesy == 0 {
		d = min(agePause(t.kq.winLosses, losses, took), t.q.c.opts.NodeTimeout/agePauseDivisor)
	}
	return d, t.kq.gone, false
}

// agePause orders the woken heads of several Clients by how many races they lost (a
// race: a lead-first attempt after a wake-up that was refused; polls do not count): a
// head waits a step (its round trip took / ageStepDivisor) for each race fewer than
// this Client's recent winners had lost (winLosses), so the head that has lost the
// most reaches the lead first. With the waiters taking turns, the winner has lost
// about as many races as there are other waiters, so it waits nothing; without
// contention the winners lost none (a first attempt that wins counts too), the
// average falls to 0 within a few grants and nobody waits. Clients order their heads
// alike without talking to each other: each judges by its own winners, all of which
// waited in the same line.
func agePause(winLosses float64, losses int, took time.Duration) time.Duration {
	deficit := winLosses - float64(losses)
	if deficit <= 0 || took <= 0 {
		return 0
	}
	step := took / ageStepDivisor
	return time.Duration(min(deficit, maxAgeSteps) * float64(step))
}

// won records that an Acquire of this Client got key after losing losses races
// (keyQueue.winLosses), if the key has a queue's state (else there is nothing to
// correct: a new state starts at 0).
func (q *queues) won(key string, losses int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if kq := q.keys[key]; kq != nil {
		kq.winLosses += (float64(losses) - kq.winLosses) / winAverage
	}
}

// courtesyFor returns the courtesy a release gives other Clients (see wakePause): after
// a release that ended a run of maxHandoffs (capped) and that other Clients heard
// (heard > 1: release.lua answers 1 + the clients that heard it), courtesyFactor times
// the release's duration (took); otherwise none.
func courtesyFor(capped bool, heard int64, took time.Duration) time.Duration {
	if capped && heard > 1 {
		return courtesyFactor * took
	}
	return 0
}

// yieldFor returns how long a new Acquire of this Client waits after its release of a
// key that woke other Clients (see queues.yielding): yieldRoundTrips round trips to a
// majority (quorumIn) plus yieldSlack, at most the node timeout; none when no majority
// answered.
func yieldFor(quorumIn, nodeTimeout time.Duration) time.Duration {
	if quorumIn <= 0 {
		return 0
	}
	return min(yieldRoundTrips*quorumIn+yieldSlack, nodeTimeout)
}

// pacing is what the head's wait before its next attempt depends on.
type pacing struct {
	failed int           // attempts failed so far
	quick  bool          // the latest attempt lost a race (lostRace)
	took   time.Duration // its round trip to a majority
	held   time.Time     // a lock of this Client holds the key until then; zero: none
	turn   time.Duration // the latest attempt met another Client's turn, which ends within this
	settle time.Duration // the latest attempt met a release not landed everywhere: come again this soon
}

// delay is the pacing decision: how long the head waits before its next attempt (a
// wake-up or a handoff ends the wait sooner). By default, what retry (Options.RetryDelay)
// gives for the attempts failed so far; after a lost race, one to three round trips
// (quickSpread) if that is sooner; after meeting another Client's turn on the key's
// line node, when that turn is over (turn) if that is sooner; after meeting a node
// where the release it followed had not landed, soon (settle); while a lock of this
// Client holds the key, until that
// lock's validity ends (its Release wakes the head first). jitter(n) returns a random
// duration in [0, n); with the two functions fixed, delay depends on its inputs only.
func (p pacing) delay(now time.Time, retry func(attempt int) time.Duration, jitter func(n time.Duration) time.Duration) time.Duration {
	d := retry(max(p.failed, 1))
	if p.quick {
		d = min(d, p.took+jitter(quickSpread*p.took))
	}
	if p.turn > 0 {
		d = min(d, p.turn)
	}
	if p.settle > 0 {
		d = min(d, p.settle)
	}
	if !p.held.IsZero() {
		d = p.held.Sub(now)
	}
	return d
}

// partialNoticeWait is how long after a first notice naming a fair waiter the head
// without a majority behind it that waiter attempts anyway (queues.partialNotice).
func partialNoticeWait(nodeTimeout time.Duration) time.Duration {
	return nodeTimeout / partialNoticeDivisor
}

// lineLeaseFor returns the lease of a waiter's place in a key's line (lineLease), given
// the latest wait its pacing chose.
func lineLeaseFor(delay time.Duration) time.Duration {
	return min(max(lineLease, 3*delay), lineLeaseMax).Truncate(time.Millisecond)
}

// lineTurn returns how long a release keeps a free key for the line's head (see
// lineTurnDivisor), at least a millisecond.
func lineTurn(nodeTimeout time.Duration) time.Duration {
	return max(nodeTimeout/lineTurnDivisor, time.Millisecond).Truncate(time.Millisecond)
}
