package redlock

import (
	"context"
	_ "embed" // the Lua scripts are files in scripts/
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reentrant locks: an Acquire whose context carries an owner (WithOwner) adds a hold of
// that owner to the key instead of taking it with a bare token. The key on each node
// is then a string, the owner's head ("owner <length>:<owner>|") followed by the id of
// every hold the node has seen, each followed by "|" (scripts/reentrant_*.lua). A hold
// is one Acquire: its id is the Lock's token, random like every token, so a copy of a
// call that arrives twice adds or removes nothing twice. The TTL is the owner's, shared
// by its holds: extending any hold extends the lease. The key goes when its last hold
// is released, or when the TTL runs out. Locks without owner keep their own scripts
// and bare tokens, and each kind sees the other as a key held elsewhere.

var (
	//go:embed scripts/reentrant_acquire.lua
	reentrantAcquireLua string
	//go:embed scripts/reentrant_extend.lua
	reentrantExtendLua string
	//go:embed scripts/reentrant_release.lua
	reentrantReleaseLua string
	//go:embed scripts/reentrant_fenced_acquire.lua
	reentrantFencedAcquireLua string

	stepReentrantAcquire = step{redis.NewScript(reentrantAcquireLua), yesOrNo, false, nil}
	stepReentrantExtend  = step{redis.NewScript(reentrantExtendLua), sharedOrNo, false, nil}
	stepReentrantRelease = step{redis.NewScript(reentrantReleaseLua), holdReleased, false, nil}
	// Client.start adds the counter's names per node.
	stepReentrantFencedAcquire = step{redis.NewScript(decimalLua + reentrantFencedAcquireLua), leaseReply, true, nil}
)

// ownerKey is the context key under which WithOwner stores the owner.
type ownerKey struct{}

// WithOwner returns a copy of ctx that makes Acquire, TryAcquire and Do take reentrant
// locks for owner: an Acquire whose key owner already holds succeeds at once (with a
// majority of nodes, as every grant) and returns a Lock that shares the lease, whether
// the earlier hold was taken by the same Client, another Client or another process.
// The key is freed when every hold has been released, or when the lease expires.
// Extend, KeepAlive and Do apply to the shared lease. Each Lock's Until is the lease's
// validity as this Client has proven it for that hold: by its Acquire, its own last
// Extend, or an Extend of another hold of the owner in this Client that a majority of
// the nodes answered while listing both holds (docs/reentrant.md says why no less).
//
// Holders that use the same owner are one logical holder: the nodes cannot tell them
// apart, and each can take the lock while another holds it. Use an owner that names
// one job (a job id that a restarted copy of the job reuses takes its lock back at
// once instead of waiting out the TTL), never one shared by work that must exclude
// each other. An empty owner makes Acquire fail with an error; locks taken without an
// owner are not reentrant and see a reentrant lock as held elsewhere (and the other
// way round). See docs/reentrant.md for what is guaranteed under faults, and for
// Options.Fencing with an owner (every hold of a lease gets the lease's token). A nil
// ctx panics, as it does in context.WithValue, before anything is registered.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner that WithOwner put into ctx, and whether there is one
// (none in a nil ctx).
func OwnerFrom(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	owner, ok := ctx.Value(ownerKey{}).(string)
	return owner, ok
}

// errEmptyOwner is returned by Acquire for a context whose owner is empty.
var errEmptyOwner = errors.New("redlock: empty owner (WithOwner)")

// ownerHead returns the prefix under which the nodes keep ctx's owner's holds, or ""
// when ctx has no owner. The owner's length comes first, so no head is a prefix of
// another owner's, and "owner " is never the start of a token (a UUID).
func ownerHead(ctx context.Context) (string, error) {
	owner, ok := OwnerFrom(ctx)
	if !ok {
		return "", nil
	}
	if owner == "" {
		return "", errEmptyOwner
	}
	return "owner " + strconv.Itoa(len(owner)) + ":" + owner + "|", nil
}

// Owner returns the owner the lock was acquired for (WithOwner), or "" for a lock
// without owner.
func (l *Lock) Owner() string {
	if l.owner == "" {
		return ""
	}
	_, rest, _ := strings.Cut(l.owner, ":") // the owner follows its length
	return rest[:len(rest)-1]
}

// acquireStep returns the step that takes or refreshes (heals) a hold of token on key,
// with fencing token fence when it is not 0: acquire.lua or fenced_acquire.lua for a
// lock without owner, reentrant_acquire.lua or reentrant_fenced_acquire.lua for an
// owner's hold. A fenced step gets the counter's names from Client.start.
func acquireStep(key, owner, token string, ttl time.Duration, fence int64) stepRequest {
	keys, ms := []string{key}, ttl.Milliseconds()
	switch {
	case owner == "" && fence == 0:
		return stepRequest{step: stepAcquire, keys: keys, args: []any{token, ms}}
	case owner == "":
		return stepRequest{step: stepFencedAcquire, keys: keys, args: []any{token, ms, fence}}
	case fence == 0:
		return stepRequest{step: stepReentrantAcquire, keys: keys, args: []any{owner, token, ms}}
	}
	return stepRequest{step: stepReentrantFencedAcquire, keys: keys, args: []any{owner, token, ms, fence}}
}

// leaseReply judges reentrant_fenced_acquire.lua: the lease's fencing token (≥ 1)
// means the hold is there, 0 held elsewhere, −c a refused proposal.
func leaseReply(v int64) outcome {
	switch {
	case v >= 1:
		return outYes
	case v == 0:
		return outNo
	}
	return outRefused
}

// leaseFence returns the fencing token of the Lock that round r of req won with tally
// t: the proposal for a lock without owner; for an owner's hold, the lease's token,
// which a majority of the nodes must have reported alike (ok false otherwise: the
// round then fails). Each of those nodes has a counter at least that high, so any
// later grant, which needs one of them, gets a higher token; and one of them belongs
// to any earlier holder's majority, where the lease began (with a token above the
// counter) after that holder's key was gone. The nodes disagree only when some lost
// the lease (restarted empty, or it expired there) and began it afresh with this
// round's proposal. waited reports that it waited for more replies than gather did.
func (req roundRequest) leaseFence(r *round, t tally) (fence int64, ok, waited bool) {
	if req.owner == "" || req.fence == 0 {
		return req.fence, true, false
	}
	if t.yesLow == t.yesHigh {
		return t.yesLow, t.yesLow >= 1, false
	}
	fence, ok = r.agreedYes(t.quorum())
	return fence, ok, true
}

// agreedYes returns the value of a yes that at least quorum nodes of the round
// replied alike. It looks at the calls that returned within the node timeout (a reply
// gather counted returns at once), so it may count fewer than gather did, never more.
func (r *round) agreedYes(quorum int) (int64, bool) {
	timer := time.NewTimer(max(time.Until(r.expires), 0))
	defer timer.Stop()
	expired := false
	counts := make(map[int64]int, len(r.calls))
	for i := range r.calls {
		if !expired {
			select {
			case <-r.calls[i].done:
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-r.calls[i].done:
			if r.calls[i].out == outYes {
				counts[r.calls[i].val]++
			}
		default:
		}
	}
	for v, n := range counts {
		if n >= quorum && v >= 1 {
			return v, true
		}
	}
	return 0, false
}

// extendStep returns the step that raises the TTL of the lock's key where its hold is,
// each call after the lock's previous one to that node. For an owner's hold it also
// returns the owner's other holds on the key in this Client that are valid at now:
// the step asks each node whether it lists them too (see shared).
func (l *Lock) extendStep(ttl time.Duration, now time.Time) (stepRequest, []*Lock) {
	if l.owner == "" {
		return stepRequest{step: stepExtend, keys: []string{l.key}, args: []any{l.token, ttl.Milliseconds()}, after: l.lastRound}, nil
	}
	others := l.c.queues.otherHolds(l, now)
	args := make([]any, 0, 3+len(others))
	args = append(args, l.owner, l.token, ttl.Milliseconds())
	for _, h := range others {
		args = append(args, h.token)
	}
	return stepRequest{step: stepReentrantExtend, keys: []string{l.key}, args: args, after: l.lastRound}, others
}

// sharedOrNo judges reentrant_extend.lua: 2 (extended, and every other hold given is
// listed too) and 1 (extended) are yes, 0 no.
func sharedOrNo(v int64) outcome {
	if v == 2 {
		return outYes
	}
	return yesOrNo(v)
}

// otherHolds returns the holds of l's owner on l's key, other than l, that this
// Client holds: not released, not proven lost, and valid at now.
func (q *queues) otherHolds(l *Lock, now time.Time) []*Lock {
	q.mu.Lock()
	defer q.mu.Unlock()
	var hs []*Lock
	for _, h := range q.held[l.key] {
		if h != l && h.owner == l.owner && h.alive(now) {
			hs = append(hs, h)
		}
	}
	return hs
}

// alive reports whether the lock is neither released nor proven lost, and valid at now.
func (l *Lock) alive(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && !l.lost && now.Before(l.until)
}

// shared raises to until the Until of the holds in others, which extend round r (won
// with tally t, validity until) asked about, when a majority of the nodes replied 2:
// each of them listed this hold and every one of others, with the new TTL. Those
// nodes keep the key until then unless every hold they list is released, and each
// of others is listed there, so each keeps the key for as long as it is not
// released. Fewer than a majority is not enough: a node that lists only l's hold
// would drop the key when l is released (docs/reentrant.md). A hold released, proven
// lost or past its Until meanwhile is left alone; no Until is ever lowered. Nothing
// else is locked while each hold's mu is held (the lock order above Client).
func (l *Lock) shared(r *round, t tally, others []*Lock, until time.Time) {
	if len(others) == 0 || t.yesHigh != 2 {
		return
	}
	if t.yesLow != 2 { // the yes replies counted differ: look at each node's
		if v, ok := r.agreedYes(t.quorum()); !ok || v != 2 {
			return
		}
	}
	now := l.c.opts.Clock.Now()
	for _, h := range others {
		h.mu.Lock()
		if !h.released && !h.lost && now.Before(h.until) {
			h.until = later(h.until, until)
		}
		h.mu.Unlock()
	}
}

// releaseStep returns the step that deletes token's key (a lock without owner; more
// tokens may follow, see release.lua) or removes owner's hold token.
func releaseStep(key, owner string, tokens ...any) stepRequest {
	if owner == "" {
		return stepRequest{step: stepRelease, keys: []string{key}, args: tokens}
	}
	return stepRequest{step: stepReentrantRelease, keys: []string{key}, args: append([]any{owner}, tokens...)}
}

// heldByOwner reports whether a lock of owner (a head, not "") that this Client holds
// has key within its validity at now. Such an owner's Acquire does not queue behind
// this Client's other waiters for key: they wait for that very lock, and a holder
// taking it again (reentrancy) must not wait for them.
func (q *queues) heldByOwner(key, owner string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.ContainsFunc(q.held[key], func(l *Lock) bool {
		return l.owner == owner && now.Before(l.validUntil())
	})
}

// beside is Acquire for a waiter whose owner holds the key in this Client: it retries
// after Options.RetryDelay, outside the key's queue, until it succeeds, ctx ends, the
// Client closes, or Options.MaxAttempts attempts have failed.
func (w *waiter) beside() (*Lock, error) {
	for {
		select {
		case <-w.ctx.Done():
			return nil, w.stopped()
		case <-w.c.closing:
			return nil, w.stopped()
		case <-w.c.opts.Clock.After(w.c.opts.RetryDelay(w.attempt - 1)):
		}
		if lock, err := w.try(); lock != nil || err != nil {
			return lock, err
		}
	}
}

// owner returns the head of the owner the waiter acquires for, or "".
func (w *waiter) owner() string {
	owner, _ := ownerHead(w.ctx) // Acquire checked it before the waiter queued
	return owner
}

// holdReleased judges reentrant_release.lua: as release.lua's answers (released), and
// −2, the hold removed and the key kept for the owner's other holds, also means that
// this hold is gone from the node. Only a value of 0 or more says that the key is
// (tally.gone).
func holdReleased(v int64) outcome {
	if v == replyHoldsLeft {
		return outYes
	}
	return released(v)
}

// replyHoldsLeft is reentrant_release.lua's answer that it removed the hold and the
// owner's other holds keep the key.
const replyHoldsLeft = -2
