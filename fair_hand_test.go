package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// handScripts runs the fair scripts on one real redis-server the way a Client sends
// them, for the hand registrations (fair_queue.lua, fairHand).
type handScripts struct {
	t                      *testing.T
	admin                  *redis.Client
	keys                   []string
	draw, acquire, release *redis.Script
	lease, ttl             int64 // ms
}

func newHandScripts(t *testing.T) *handScripts {
	c := newCluster(t, 1, redistest.Options{}, fairOpts)
	q, l, n := redlock.FairKeys("k")
	s := fairScripts(t, nil)
	return &handScripts{
		t: t, admin: c.admin[0], keys: []string{"k", q, l, n, redlock.HandKey("k")},
		draw: s.draw, acquire: s.acquire, release: s.release,
		lease: 60_000, ttl: 30_000,
	}
}

func (h *handScripts) run(s *redis.Script, args ...any) int64 {
	h.t.Helper()
	got, err := s.Run(h.t.Context(), h.admin, h.keys, args...).Int64()
	if err != nil {
		h.t.Fatal(err)
	}
	return got
}

// drawAs queues id with a draw that registers token with seq (px: the hand TTL).
func (h *handScripts) drawAs(id, token string, seq, px int64) int64 {
	return h.run(h.draw, 2*h.lease, id, h.lease, px, token, seq)
}

// attempt is id's attempt with token use, registering next with seq.
func (h *handScripts) attempt(id, use string, ticket int64, next string, seq, px int64) int64 {
	return h.run(h.acquire, use, h.ttl, id, ticket, h.lease, "", px, next, seq)
}

func (h *handScripts) key() string {
	v, err := h.admin.Get(h.t.Context(), "k").Result()
	if err == redis.Nil {
		return ""
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// wantKey fails the test unless the key's value is want ("": absent); format has one
// %q, for the value found.
func (h *handScripts) wantKey(want, format string) {
	h.t.Helper()
	if got := h.key(); got != want {
		h.t.Fatalf(format, got)
	}
}

// hold sets the key to value, as a holder without queue entry, for a minute.
func (h *handScripts) hold(value string) {
	h.t.Helper()
	if err := h.admin.Set(h.t.Context(), "k", value, time.Minute).Err(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *handScripts) pttl() time.Duration {
	return h.admin.PTTL(h.t.Context(), "k").Val()
}

// TestFairHandScripts: what the scripts do with hand registrations, one call at a time
// on a real redis-server, late copies included.
func TestFairHandScripts(t *testing.T) {
	h := newHandScripts(t)
	ctx := t.Context()

	// A holder without queue entry; W draws behind it (registering w1, seq 1, 5 s).
	h.hold("holder")
	if v := h.drawAs("c:w", "w1", 1, 5000); v != 1 {
		t.Fatalf("W's draw answered %d, want 1 (first in line behind the holder)", v)
	}
	// W's attempt uses w1 and registers w2 (seq 2): the key is held.
	if got := h.run(h.acquire, "w1", h.ttl, "c:w", 1, h.lease, "", 5000, "w2", 2); got >= 0 {
		t.Fatalf("W's attempt on a held key answered %d", got)
	}
	// A late copy of the draw (seq 1) must not bring w1 back.
	h.drawAs("c:w", "w1", 1, 5000)
	// The holder's release hands the key to W with w2, for 5 s.
	if got := h.run(h.release, "holder", ""); got < 1 {
		t.Fatalf("release answered %d", got)
	}
	h.wantKey("w2", "after the release the key is %q, want it handed to W with w2")
	if d := h.pttl(); d > 5*time.Second || d < 4*time.Second {
		t.Fatalf("handed with a TTL of %v, want the registered 5 s", d)
	}
	// The hand emptied the hash (W's registration was its only field) before it
	// recorded the hand: the hash must have a TTL again (found in review).
	if d := h.admin.PTTL(ctx, redlock.HandKey("k")).Val(); d <= 0 {
		t.Fatalf("the hand registrations' hash has PTTL %v after the hand, want a TTL", d)
	}
	// A late copy of W's first attempt (use w1, registering w2 with seq 2) leaves
	// the key handed with w2 (seq 2 is not older than 2 − 1).
	h.run(h.acquire, "w1", h.ttl, "c:w", 1, h.lease, "", 5000, "w2", 2)
	h.wantKey("w2", "a late copy of W's first attempt changed the key to %q")
	// W's next attempt uses w2: answered 1 at once, the TTL raised to the lock's.
	if got := h.attempt("c:w", "w2", 1, "w3", 3, 5000); got != 1 {
		t.Fatalf("W's attempt with the handed token answered %d, want 1", got)
	}
	if d := h.pttl(); d < 29*time.Second {
		t.Fatalf("the handed key's TTL is %v after the attempt, want it raised to 30 s", d)
	}
	// Late copies of every earlier call leave W's key alone.
	h.drawAs("c:w", "w1", 1, 5000)
	h.run(h.acquire, "w1", h.ttl, "c:w", 1, h.lease, "", 5000, "w2", 2)
	h.wantKey("w2", "late copies changed W's key to %q")
	// W releases; nobody is queued: the key goes.
	h.run(h.release, "w2", "c:w")
	h.wantKey("", "after W's release the key is %q")
	if n := h.admin.HLen(ctx, redlock.HandKey("k")).Val(); n != 0 {
		t.Fatalf("%d hand registrations left after W's release", n)
	}
}

// TestFairRedrawRegisters: a draw whose reply was lost queued W with registration w1;
// W draws again (registering w2, seq 2) and finds itself queued there. The hand must
// name w2, the token W counts notices for: a draw that did not register left w1, and
// the node's notice did not count towards W's majority.
func TestFairRedrawRegisters(t *testing.T) {
	h := newHandScripts(t)
	h.hold("holder")
	h.drawAs("c:w", "w1", 1, 5000)
	h.drawAs("c:w", "w2", 2, 5000) // the retried draw
	h.drawAs("c:w", "w1", 1, 5000) // a late copy of the first: w1 stays replaced
	h.run(h.release, "holder", "")
	h.wantKey("w2", "after the release the key is %q, want it handed to W with its latest registration w2")
}

// TestFairRescoreTellsNewHead: X is the head of a free key by the number this node drew
// for it, W behind it with a registration; X's attempt brings its ticket, which puts it
// behind W. No release is coming, so the attempt itself must tell W, and hand it the
// key; a late copy of that attempt changes nothing.
func TestFairRescoreTellsNewHead(t *testing.T) {
	h := newHandScripts(t)
	sub := h.admin.Subscribe(h.t.Context(), "redlock:fair:c")
	defer sub.Close()
	if _, err := sub.Receive(h.t.Context()); err != nil { // the confirmation
		t.Fatal(err)
	}
	h.hold("holder")
	h.run(h.draw, 2*h.lease, "c:x", h.lease) // X queued first, without a registration
	h.drawAs("c:w", "w1", 1, 5000)           // W behind it (score 2), registering w1
	h.run(h.release, "holder", "")           // X is told; nothing to hand it
	if m, err := sub.ReceiveMessage(h.t.Context()); err != nil || m.Payload != "holder c:x" {
		t.Fatalf("the release's notice: %v, %v; want \"holder c:x\"", m, err)
	}
	// X's attempt with its ticket 5: behind W now, on a free key.
	if got := h.attempt("c:x", "x0", 5, "x1", 2, 5000); got >= 0 {
		t.Fatalf("X's attempt behind W answered %d, want a place behind", got)
	}
	h.wantKey("w1", "after X moved behind W the key is %q, want it handed to W with w1")
	if m, err := sub.ReceiveMessage(h.t.Context()); err != nil || m.Payload != "=w1 5000 c:w" {
		t.Fatalf("the notice to W: %v, %v; want \"=w1 5000 c:w\"", m, err)
	}
	// A late copy of X's attempt: X is not the head, so nobody is told again.
	h.attempt("c:x", "x0", 5, "x1", 2, 5000)
	h.wantKey("w1", "a late copy of X's attempt changed the key to %q")
}

// TestFairRescoreAfterPruneTellsNewHead: D, the head, has a lease that ended; X is next
// by the number this node drew for it, W behind X with a registration; the key is
// free. X's attempt prunes D and brings X's ticket, which puts X behind W: W, now the
// head of a free key, must be handed it, although X was not the head before the prune.
func TestFairRescoreAfterPruneTellsNewHead(t *testing.T) {
	h := newHandScripts(t)
	h.hold("holder")
	h.run(h.draw, 2*h.lease, "c:d", 200)     // D first in line, with a 200 ms lease
	h.run(h.draw, 2*h.lease, "c:x", h.lease) // X behind it, without a registration
	h.drawAs("c:w", "w1", 1, 5000)           // W behind X, registering w1
	h.run(h.release, "holder", "")           // D is told; the key is free
	time.Sleep(300 * time.Millisecond)       // D dies: its lease ends
	if got := h.attempt("c:x", "x0", 5, "x1", 2, 5000); got >= 0 {
		t.Fatalf("X's attempt behind W answered %d, want a place behind", got)
	}
	h.wantKey("w1", "after X moved behind W (D pruned) the key is %q, want it handed to W with w1")
}

// TestFairHandStaleAndLeave: a key handed to a waiter with a registration older than
// the one before its attempt's (the attempt that would have replaced it did not reach
// the node) is freed by its next attempt, and a waiter that leaves frees a key handed
// to it, which goes to the next head.
func TestFairHandStaleAndLeave(t *testing.T) {
	h := newHandScripts(t)
	h.hold("holder")
	h.drawAs("c:w", "w1", 1, 5000)
	h.drawAs("c:x", "x1", 1, 5000)
	h.run(h.release, "holder", "")
	h.wantKey("w1", "the key is %q, want it handed to W with w1")
	// W's attempts 2 and 3 did not reach this node; its attempt 4 uses w3 and
	// registers w4: w1 (seq 1) is stale, the key is freed and W, the head, takes it
	// with w3.
	if got := h.attempt("c:w", "w3", 1, "w4", 4, 5000); got != 1 {
		t.Fatalf("W's attempt after a stale hand answered %d, want 1", got)
	}
	h.wantKey("w3", "the key is %q, want W's attempt's w3")
	// A late copy of an attempt with an older seq leaves W's key alone.
	// (See TestFairStaleHandTellsHead for a waiter that is not the head any more.)
	h.attempt("c:w", "w1", 1, "w2", 2, 5000)
	h.wantKey("w3", "a late attempt copy changed the key to %q")
	h.run(h.release, "w3", "c:w")
	h.wantKey("x1", "after W's release the key is %q, want it handed to X with x1")
	// X gives up before it heard: its removal frees the key; nobody else is queued.
	if got := h.run(h.release, "", "c:x"); got < 1 {
		t.Fatalf("X's removal answered %d", got)
	}
	h.wantKey("", "after X left the key is %q, want it free")
	// A late copy of X's removal, after another holder took the key, touches nothing.
	h.hold("y")
	h.run(h.release, "", "c:x")
	h.wantKey("y", "a late copy of X's removal changed the key to %q")
}

// TestFairHandOverGrant: a release hands the key to the head of the queue on every
// node, and the head's Client grants it on the majority's notices, with no attempt of
// its own. The lock starts with the hand TTL (the entry lease, below the lock's TTL)
// and is extended to its TTL soon after; its Release frees the key everywhere.
func TestFairHandOverGrant(t *testing.T) {
	// A waiter that is not handed the key attempts when a single node's notice is not
	// followed by a majority's within NodeTimeout/5, and, as the head, at RetryDelay:
	// both far above the time the nodes take to hand it the key, so that an attempt
	// after the release shows a hand that did not happen.
	opts := redlock.Options{Fair: true, NodeTimeout: 500 * time.Millisecond,
		RetryDelay: func(int) time.Duration { return 10 * time.Second }}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w, err := redlock.New(rec.clients(c.servers), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	const ttl, lease = 20 * time.Second, 5 * time.Second // FairLease: 10 × NodeTimeout
	res := acquireAsync(ctx, w, "k", ttl)
	c.waitQueued("k", 1)
	eventually(t, "W listening on every node", func() bool { return listening(len(c.admin), w) })
	// W, first in line behind a holder, attempts once at once and registers its next
	// token (seq 2) on every node. Released before that attempt reached a node, that
	// node handed the key to W's first token, the attempt took it there, and its
	// clean-up freed it again (a sleep of 50 ms stood here, and about 1 run in 70
	// under -race found a node empty below).
	eventually(t, "W's attempt on every node", func() bool { return registeredOnAll(t, c.admin, "k", 2) })
	before := len(rec.sent())
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the head", res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	lock := r.lock
	_, _, attempts := fairRounds(rec.sent()[before:])
	if attempts != 0 {
		t.Errorf("the head made %d attempts after the release, want 0 (handed by the nodes)", attempts)
	}
	if left := time.Until(lock.Until()); left > lease || left <= 0 {
		t.Errorf("handed lock valid for %v, want at most the hand TTL (%v)", left, lease)
	}
	holder.WaitForCalls() // the release's last node hands the key over too
	c.wantValues("k", lock.Token(), lock.Token(), lock.Token())
	eventually(t, "the handed lock extended to its TTL", func() bool {
		return time.Until(lock.Until()) > lease
	})
	lock.WaitForCalls() // the extension's last node may answer after its majority
	for i, a := range c.admin {
		if d := a.PTTL(ctx, "k").Val(); d <= lease {
			t.Errorf("node %d: the key lives %v after the extension, want more than %v", i+1, d, lease)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lock.WaitForCalls()
	c.wantValues("k", "", "", "")
}

// TestFairReleaseFreesLaterHand: a waiter's attempt registers its next token on a node
// where the key is still held, and wins with its current token on the others; the
// holder's release then hands that node the key with the next token. The waiter's
// Release frees it there too (found in review: the key stayed for the hand TTL).
func TestFairReleaseFreesLaterHand(t *testing.T) {
	h := newHandScripts(t)
	h.hold("holder")
	h.drawAs("c:w", "w1", 1, 5000)
	if got := h.attempt("c:w", "w1", 1, "w2", 2, 5000); got >= 0 {
		t.Fatalf("W's attempt on a held key answered %d", got)
	}
	h.run(h.release, "holder", "")
	h.wantKey("w2", "the key is %q, want it handed to W with w2")
	if got := h.run(h.release, "w1", "c:w"); got < 1 {
		t.Fatalf("W's release of its lock (w1) answered %d", got)
	}
	h.wantKey("", "after W's release the key is %q, want it free")
}

// TestFairHandedKeepAlive: KeepAlive and Do on a lock the nodes handed over with less
// than its TTL plan from the TTL the nodes set, and keep the lock (found in review:
// with a TTL over ten leases KeepAlive gave up at once).
func TestFairHandedKeepAlive(t *testing.T) {
	_, lock, lease := handedLock(t, 30*time.Second)
	ctx := t.Context()
	kctx, stop := lock.KeepAlive(ctx)
	defer stop()
	select {
	case <-kctx.Done():
		t.Fatalf("KeepAlive of a handed lock ended: %v", context.Cause(kctx))
	case <-time.After(lease / 2):
	}
	if left := time.Until(lock.Until()); left < 10*time.Second {
		t.Errorf("the lock is valid for %v under KeepAlive, want it extended to its TTL", left)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFairHandedExtendChoosesTTL: a handed lock that its holder extends to a TTL of its
// choice keeps that TTL; the background extension to the Acquire's TTL is off (found
// in review: it raised a 3 s choice to the Acquire's 30 s).
func TestFairHandedExtendChoosesTTL(t *testing.T) {
	c, lock, lease := handedLock(t, 30*time.Second)
	ctx := t.Context()
	if err := lock.Extend(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// Past the moment the background extension would run (half the hand validity);
	// nothing signals that it did not.
	time.Sleep(lease/2 + 200*time.Millisecond)
	lock.WaitForCalls()
	for i, a := range c.admin {
		if d := a.PTTL(ctx, "k").Val(); d > 3*time.Second {
			t.Errorf("node %d: the key lives %v, more than the 3 s the holder chose", i+1, d)
		}
	}
	if left := time.Until(lock.Until()); left > 3*time.Second {
		t.Errorf("the lock is valid for %v, more than the 3 s the holder chose", left)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// handedLock returns a cluster of 3 and a lock with the given TTL that the nodes
// handed over (checked: its validity is at most the hand TTL), and the entry lease.
func handedLock(t *testing.T, ttl time.Duration) (*cluster, *redlock.Lock, time.Duration) {
	t.Helper()
	// As in TestFairHandOverGrant: a waiter not handed the key would attempt late.
	opts := redlock.Options{Fair: true, NodeTimeout: 200 * time.Millisecond,
		RetryDelay: func(int) time.Duration { return 10 * time.Second }}
	const lease = 2 * time.Second // 10 × NodeTimeout
	c := newCluster(t, 3, redistest.Options{}, opts)
	return c, c.handOver(c.newClient(opts), ttl, lease), lease
}

// handOver has c.client hold "k" while fair Client w queues for it with ttl, waits for
// w's first attempt on every node (see TestFairHandOverGrant), releases, and returns
// the lock the nodes handed w (checked: valid for at most lease, the hand TTL).
func (c *cluster) handOver(w *redlock.Client, ttl, lease time.Duration) *redlock.Lock {
	t := c.t
	t.Helper()
	ctx := t.Context()
	holder, err := c.client.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's key must be on every node. A grant needs a majority only: where the
	// holder's call missed its node timeout (a cold connection on a busy box), the key
	// is free, W's attempts take it there and their clean-ups free it again, so W never
	// registers on that node and the wait below timed out (a few times in a hundred
	// hand-overs under -race on a 2-core box). A successful Extend heals such a node.
	eventually(t, "the holder's key on every node", func() bool {
		holder.WaitForCalls()
		if !slices.ContainsFunc(c.values("k"), func(v string) bool { return v != holder.Token() }) {
			return true
		}
		_ = holder.Extend(ctx, 10*time.Second)
		return false
	})
	res := acquireAsync(ctx, w, "k", ttl)
	c.waitQueued("k", 1)
	eventually(t, "W listening on every node", func() bool { return listening(len(c.admin), w) })
	eventually(t, "W's attempt on every node", func() bool { return registeredOnAll(t, c.admin, "k", 2) })
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := wantResult(t, "the head", res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if left := time.Until(r.lock.Until()); left > lease {
		t.Fatalf("the lock was not handed over (valid for %v)", left)
	}
	holder.WaitForCalls()
	return r.lock
}

// TestFairStaleHandTellsHead: an attempt that frees a key handed to its waiter with a
// stale registration, while another waiter has become the head, tells that head,
// here by handing it the key (found in review: the key stayed free until the head's
// renewal).
func TestFairStaleHandTellsHead(t *testing.T) {
	h := newHandScripts(t)
	h.hold("holder")
	h.drawAs("c:w", "w1", 1, 5000)
	h.run(h.release, "holder", "")
	h.wantKey("w1", "the key is %q, want it handed to W with w1")
	// V, with a lower ticket than W's (its draw's majority was elsewhere), queues
	// ahead of W and registers v2.
	if got := h.run(h.acquire, "v1", h.ttl, "c:v", 0, h.lease, "", 5000, "v2", 2); got >= 0 {
		t.Fatalf("V's attempt on W's key answered %d", got)
	}
	// W's attempt 4 (use w3): w1 is stale, the key is freed, V is the head: V is
	// handed the key with v2.
	if got := h.attempt("c:w", "w3", 1, "w4", 4, 5000); got >= 0 {
		t.Fatalf("W's attempt behind V answered %d", got)
	}
	h.wantKey("v2", "the key is %q after W freed its stale hand, want it handed to V with v2")
}

// finishers counts the goroutines waiting to extend a handed lock (finishHand).
func finishers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "redlock.(*Client).finishHand.func")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestFairHandFinisherEndsAtRelease: a lock the nodes handed over with less than its
// TTL waits (finishHand) to extend itself after half its validity; released first, it
// leaves no goroutine behind. Until that wait ended at Release, every hand-over on a
// hot key left one, with its timer, for half the hand TTL: 596 of them in a one-second
// run of BenchmarkClients' fair hot key, all scanned by every garbage collection.
func TestFairHandFinisherEndsAtRelease(t *testing.T) {
	opts := redlock.Options{Fair: true, NodeTimeout: 500 * time.Millisecond,
		RetryDelay: func(int) time.Duration { return 10 * time.Second }}
	c := newCluster(t, 3, redistest.Options{}, opts)
	ctx := t.Context()
	base := finishers()
	for i := range 3 {
		w, err := redlock.New(redistest.Clients(c.servers), opts)
		if err != nil {
			t.Fatal(err)
		}
		// Handed for FairLease (5 s) where 20 s was asked: extended after about 2.5 s.
		lock := c.handOver(w, 20*time.Second, 5*time.Second)
		if n := finishers(); n != base+1 {
			t.Fatalf("round %d: %d goroutines wait to extend the handed lock, want 1", i, n-base)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Without the end at Release it waits about 2.5 s; with it, none is left within
		// a second (a goroutine's exit has no signal to wait for).
		for deadline := time.Now().Add(time.Second); finishers() != base; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the goroutine waiting to extend the handed lock outlived its Release by 1 s", i)
			}
		}
		lock.WaitForCalls()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// registeredOnAll reports whether every node holds a hand registration of key's one
// waiter with a sequence number of at least seq ("seq px token", fairRegister).
func registeredOnAll(t *testing.T, admins []*redis.Client, key string, seq int) bool {
	t.Helper()
	for _, a := range admins {
		regs, err := a.HGetAll(t.Context(), redlock.HandKey(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for id, v := range regs {
			var s, px int
			var token string
			if !strings.HasPrefix(id, "@") {
				if _, err := fmt.Sscan(v, &s, &px, &token); err == nil && s >= seq {
					found = true
				}
			}
		}
		if !found {
			return false
		}
	}
	return true
}
