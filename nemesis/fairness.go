package nemesis

import (
	"fmt"
	"time"
)

// OvertakeMargin is how much later than a waiting Acquire another call must have
// begun for its grant to count as overtaking it. A fair Acquire first tries once,
// then draws its ticket and queues: about three rounds, each bounded by the node
// timeout, during which a call that began a little later may still queue first.
const OvertakeMargin = 250 * time.Millisecond

// checkFairness is the fairness check of fault-free fair schedules (Options.Fair): a
// blocking Acquire (or Do) A that began before call B, by more than OvertakeMargin,
// is ahead of B in every node's queue, so B (a TryAcquire included: it does not jump
// the queue) must not be granted while A is still waiting. A waits from its call until
// it returned, or until its deadline if that came first (a waiter that gave up is no
// longer ahead of anyone). Each grant that overtook a waiter is a violation; the first
// three are named. An owner's grant made while the same owner held the key (at some
// time during its call) is a reentrant hold, which the library grants ahead of the
// queue, and holds of one owner never overtake each other (one logical holder).
func (rep *Report) checkFairness(key string, recs []Record, ws []Window, base int64) {
	type wait struct {
		session, owner string
		from, to       int64
	}
	var waits []wait
	for _, r := range recs {
		if !((r.Op == OpAcquire && !r.Try) || r.Op == OpDo) {
			continue
		}
		to := r.Ret - base
		if r.Deadline > 0 {
			to = min(to, r.Deadline-base)
		}
		if to-(r.Inv-base) > int64(OvertakeMargin) {
			waits = append(waits, wait{r.Session, r.Owner, r.Inv - base, to})
		}
	}
	n, text := 0, ""
	for _, g := range ws {
		if g.Owner != "" && heldByOwner(ws, g) {
			continue // a reentrant hold: the owner held the key during g's call
		}
		for _, a := range waits {
			if a.session == g.Session || g.Inv <= a.from+int64(OvertakeMargin) || g.Grant >= a.to || (g.Owner != "" && a.owner == g.Owner) {
				continue
			}
			n++
			if n <= 3 {
				text += fmt.Sprintf("; %s (worker %d, %s) called at %s and granted at %s while %s, waiting since %s, was still waiting",
					g.Session, g.Worker, g.Kind, ms(g.Inv), ms(g.Grant), a.session, ms(a.from))
			}
			break // one overtake per grant
		}
	}
	if n > 0 {
		rep.Violations = append(rep.Violations, Violation{Check: "fairness", Key: key,
			Text: fmt.Sprintf("%d of %d grants overtook a waiter that had begun more than %v earlier%s", n, len(ws), OvertakeMargin, text)})
	}
}

// heldByOwner reports whether another window of g's owner held the key at some time
// during g's Acquire call (from its invocation to its grant): g may then be a hold
// added ahead of the queue, as the owner's holds are.
func heldByOwner(ws []Window, g Window) bool {
	for _, w := range ws {
		if w.Session != g.Session && w.Owner == g.Owner && w.Grant <= g.Grant && w.keysUntil() >= g.Inv {
			return true
		}
	}
	return false
}

// keysUntil is until when w's keys may have been on a majority of the nodes: until
// its Release returned (a majority had deleted them by then, not before: the end of
// the critical section comes before the Release call, and another hold of the owner
// that reaches the nodes while that Release is out joins the key, as
// TestFairnessCheck's "an owner's hold while its release is out" has it; seed
// 55616657 of the fair family once showed it), or when not released for sure, until
// its validity ended.
func (w Window) keysUntil() int64 {
	if w.Released && w.ReleaseOK {
		return max(w.End, w.ReleaseReturn)
	}
	return max(w.End, w.Until, w.ReleaseReturn)
}
