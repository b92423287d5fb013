package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redlock-go/redlock"
)

// The lock modes beyond the plain lock: reentrant holds (redlock.WithOwner) and fair
// locks (Options.Fair). drawModes gives Clients of a schedule one of them; the worker
// side is withOwner and nested below, the checks are the lease-mutex model (holds of
// one owner may overlap) and checkFairness.

// fairFencing says whether fair Clients may use Options.Fencing: they may since the
// library accepts Options.Fair with Options.Fencing (fair_fenced_acquire.lua), so fair
// schedules keep the fencing their family drew, and the fencing-order check covers
// the fair fenced grants.
const fairFencing = true

// sharedOwners are the owners that Clients of both worker processes can share, so
// that one owner's holds come from several Clients and processes at once.
var sharedOwners = []string{"job-a", "job-b"}

// fairLease is the FairLease of fair Clients: short, so that a waiter that gave up
// while a copy of its attempt was in flight blocks the queue briefly; at least 10 ×
// the node timeout, as Options requires.
func fairLease(c ClientSpec) time.Duration { return max(500*time.Millisecond, 10*c.NodeTimeout) }

// drawModes gives the Clients of s their reentrant or fair mode: in Mixed each Client
// acquires for an owner with a chance of 0.3, and a quarter of the schedules are fair
// (every Client; its owners then do not fence); in Reentrant every Client has an
// owner, and each owner fences as drawn below (every owner's Clients alike, see
// giveOwner); in Fair every Client is fair, and acquires for an owner, unfenced, with
// a chance of 0.3. It draws from a generator of its own, so the other draws of a seed
// (Clients, faults) stay what they were before the modes existed.
func drawModes(s *Schedule) {
	r := rand.New(rand.NewPCG(s.Seed, 0x6d6f646573))
	fenced := map[string]bool{} // an owner's fencing (giveOwner)
	shared := 0.5               // the chance that giveOwner picks a shared owner
	if s.Family == Reentrant {
		// Every schedule draws fencing per owner, so that most have both kinds: the
		// owners of each worker's own ("own", most Clients) fence with a chance of
		// 0.75, each shared owner with 0.25. A fenced lease must change hands between
		// Clients, so that one Client's last counter falls behind and it proposes a
		// stale token (reentrant-fence-no-check needs that); an unfenced owner runs
		// reentrant_acquire.lua, which reentrant-any-owner breaks. Fewer shared owners
		// (0.25): the Clients of one shared owner in both processes keep one lease
		// going for most of a run. (With one schedule in two fenced, and fencing and
		// sharing drawn as in Mixed, 1 schedule in 11 had several fenced Clients of one
		// owner, and the fencing mutant survived 11 schedules.) Nodes keep their
		// counters across a restart (AOF) when anyone fences, as Mixed's fenced
		// schedules have them (set below, once the Clients have their owners).
		shared = 0.25
		fenced["own"] = r.Float64() < 0.75
		for _, o := range sharedOwners {
			fenced[o] = r.Float64() < 0.25
		}
	}
	for p := range s.Procs {
		for c := range s.Procs[p] {
			cl := &s.Procs[p][c]
			switch s.Family {
			case Reentrant:
				cl.Sessions = []SessionKind{SessHold, SessTry, SessNested, SessNested, SessNested,
					SessExtend, SessKeepAlive, SessDo, SessAbandon, SessShortWait}
				giveOwner(r, cl, fenced, shared)
			case Fair:
				// Mostly short holds, so that a run has many grants and waiters.
				cl.Sessions = []SessionKind{SessHold, SessHold, SessHold, SessHold, SessHold, SessTry, SessShortWait, SessExtend, SessDo}
				makeFair(cl)
				if r.Float64() < 0.3 {
					// A reentrant fair Client: its holds add to the owner's lock
					// ahead of the queue. Unfenced: the library refuses an owner
					// with both Fair and Fencing.
					cl.Fencing = false
					cl.Sessions = slices.Concat(cl.Sessions, []SessionKind{SessNested, SessNested})
					giveOwner(r, cl, fenced, shared)
				}
			case Mixed:
				if r.Float64() < 0.3 {
					cl.Sessions = slices.Concat(cl.Sessions, []SessionKind{SessNested, SessNested})
					giveOwner(r, cl, fenced, shared)
				}
			}
		}
	}
	if s.Family == Reentrant && slices.ContainsFunc(s.Clients(), func(c ClientSpec) bool { return c.Fencing }) {
		for i := range s.Nodes { // after the owners are drawn: only if a Client fences
			s.Nodes[i].AOF = true
		}
	}
	if s.Family == Mixed && r.Float64() < 0.25 {
		for p := range s.Procs {
			for c := range s.Procs[p] {
				cl := &s.Procs[p][c]
				makeFair(cl)
				if cl.Owner != "" {
					cl.Fencing = false // refused with Fair and an owner; every Client of the owner is here
				}
			}
		}
	}
}

// giveOwner makes cl acquire for an owner of each worker's own, or (with the chance
// shared) for a shared owner; such a Client has one worker: with several, an owner's holds
// would follow each other without a gap, and, as reentrancy allows, keep the key from
// every other owner for the whole run. Whether the owner's Clients fence is fenced's
// entry for the owner (the shared owner's name, or "own" for the owners per worker),
// taken from the first of its Clients: every Client of one owner must agree, since a lease taken
// without fencing has no token for a fenced hold to join (an error), and a fenced
// lease gives its token to every hold (the fencing-order check allows that repeat
// within one owner only).
func giveOwner(r *rand.Rand, cl *ClientSpec, fenced map[string]bool, shared float64) {
	cl.Owner, cl.OwnerPerWorker = "own", true
	if r.Float64() < shared {
		cl.Owner, cl.OwnerPerWorker, cl.Workers = sharedOwners[r.IntN(len(sharedOwners))], false, 1
	}
	f, ok := fenced[cl.Owner]
	if !ok {
		f = cl.Fencing
		fenced[cl.Owner] = f
	}
	cl.Fencing = f
}

// makeFair makes cl a fair Client.
func makeFair(cl *ClientSpec) {
	cl.Fair, cl.FairLease = true, fairLease(*cl)
	if !fairFencing {
		cl.Fencing = false
	}
}

// modes describes cl's owner and fairness for Schedule.String.
func (cl ClientSpec) modes() string {
	switch {
	case cl.OwnerPerWorker:
		return ", an owner per worker"
	case cl.Owner != "":
		return ", owner " + cl.Owner
	case cl.Fair:
		return fmt.Sprintf(", fair (entry lease %v)", cl.FairLease)
	}
	return ""
}

// workerOwner returns the owner worker wid of a Client cs acquires for ("" none).
func workerOwner(cs ClientSpec, wid int) string {
	if cs.OwnerPerWorker {
		return fmt.Sprintf("%s/%d", cs.Owner, wid)
	}
	return cs.Owner
}

// withOwner returns ctx with the worker's owner, if it has one.
func (w *worker) withOwner(ctx context.Context) context.Context {
	if w.owner == "" {
		return ctx
	}
	return redlock.WithOwner(ctx, w.owner)
}

// nested runs the rest of a SessNested session once its first hold is granted: a
// second hold of the same owner on the key, taken while the first is held (TryAcquire
// or Acquire, drawn), then the two released in a drawn order. The hold released second
// goes on working alone: the owner's lease must outlive the release of the other hold.
// The second hold is a session of its own (the first's id and "n").
func (w *worker) nested(ctx context.Context, base Record, outer *redlock.Lock) {
	ttl := w.s.TTL
	w.work(ctx, base, outer, w.between(0, ttl/20))
	in := base
	in.Session = base.Session + "n"
	rec := in
	rec.Op, rec.Try = OpAcquire, w.r.IntN(2) == 0
	wait := w.between(ttl/10, ttl/2)
	actx, cancel := context.WithTimeout(w.withOwner(ctx), wait)
	rec.Inv = monotonic()
	rec.Deadline = rec.Inv + int64(wait)
	var inner *redlock.Lock
	var err error
	if rec.Try {
		inner, err = w.c.TryAcquire(actx, base.Key, ttl)
	} else {
		inner, err = w.c.Acquire(actx, base.Key, ttl)
	}
	rec.Ret = monotonic()
	cancel()
	rec.Ok, rec.Err = err == nil, errClass(err)
	if err != nil {
		rec.Detail = err.Error()
		w.record(rec)
		w.work(ctx, base, outer, w.between(0, ttl/10))
		w.release(base, outer)
		return
	}
	rec.Until = untilNs(inner)
	w.record(rec)
	first, second := base, in
	firstLock, secondLock := outer, inner
	if w.r.IntN(2) == 0 {
		first, second, firstLock, secondLock = in, base, inner, outer
	}
	w.work(ctx, first, firstLock, w.between(0, ttl/10))
	w.release(first, firstLock)
	w.work(ctx, second, secondLock, w.between(0, ttl/5))
	w.release(second, secondLock)
}

// drawMembers makes some nodes of s Cluster members (NodeSpec.Cluster): in Mixed,
// Reentrant, Fair and Fenced one schedule in three has one or two of them, so that fencing,
// reentrant holds and fair queues meet Cluster key names under the same faults as
// plain nodes (a review found fencing broken on Cluster members, which no schedule
// had). It draws from a generator of its own, so the other draws of a seed stay what
// they were before.
func drawMembers(s *Schedule) {
	switch s.Family {
	case Mixed, Reentrant, Fair, Fenced:
	default:
		return
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x636c7573746572))
	if r.Float64() >= 1.0/3 {
		return
	}
	for _, i := range r.Perm(Nodes)[:1+r.IntN(2)] {
		s.Nodes[i].Cluster = true
	}
}
