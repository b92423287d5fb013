package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Late and repeated commands. A command the library sent can reach a node again later:
// go-redis re-sends it after a lost reply (clients passed to New retry by default), and
// a command still queued on a stalled connection runs when the node wakes up. The rule
// every script must keep: such a copy never shortens a TTL and never deletes or
// overwrites the key of a later lock. These tests record every script call the library
// sends and deliver the copies themselves, at chosen moments, in several orders.

// sentCall is one script call the library sent to one node.
type sentCall struct {
	node int
	args []any
}

// recorder is a go-redis hook that records the script calls (EVALSHA, EVAL) sent through
// the clients it is added to, plain and pipelined.
type recorder struct {
	mu    sync.Mutex
	calls []sentCall
}

// clients returns a new client per server with the recorder on it.
func (r *recorder) clients(servers []*redistest.Server) []redis.UniversalClient {
	rdbs := redistest.Clients(servers)
	for i, rdb := range rdbs {
		rdb.AddHook(nodeHook{r, i})
	}
	return rdbs
}

// sent returns a copy of the calls recorded so far, in the order they were sent.
func (r *recorder) sent() []sentCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) record(node int, cmds ...redis.Cmder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cmd := range cmds {
		if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
			r.calls = append(r.calls, sentCall{node, slices.Clone(cmd.Args())})
		}
	}
}

// nodeHook records for one node.
type nodeHook struct {
	r    *recorder
	node int
}

func (nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.r.record(h.node, cmd)
		return next(ctx, cmd)
	}
}
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.r.record(h.node, cmds...)
		return next(ctx, cmds)
	}
}

// scriptSources maps the SHA1 of every script in scripts/ to its source, so that a
// copy of an EVALSHA can be sent as EVAL to a node that lost its script cache.
func scriptSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("scripts/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("reading scripts/: %v (%d files)", err, len(files))
	}
	m := make(map[string]string)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha1.Sum(src)
		m[hex.EncodeToString(sum[:])] = string(src)
	}
	return m
}

// deliverAgain sends a copy of call to its node, on the test's own connection.
func (c *cluster) deliverAgain(call sentCall, sources map[string]string) {
	c.t.Helper()
	ctx := context.Background()
	err := c.admin[call.node].Do(ctx, call.args...).Err()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		args := slices.Clone(call.args)
		args[0], args[1] = "eval", sources[fmt.Sprint(args[1])]
		err = c.admin[call.node].Do(ctx, args...).Err()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		c.t.Fatalf("copy of %v to node %d: %v", call.args, call.node+1, err)
	}
}

// TestLateHandoffCopyCannotShortenTheLock is the double grant of the review: W gets the
// lock by handoff with a 500 ms TTL on a bare majority, extends it to a minute, and a
// late copy of the handoff lands on one of W's nodes. That copy must not cut the
// node's TTL back to 500 ms, or another Client takes the key there and on the node
// that had been taken while W believes it holds the lock for a minute.
func TestLateHandoffCopyCannotShortenTheLock(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	rec := &recorder{}
	a, err := redlock.New(rec.clients(c.servers), noPolling)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := t.Context()
	// Node 3 is held by a stale key: W's lock will rest on nodes 1 and 2.
	if err := c.admin[2].Set(ctx, "k", "stale", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	holder, err := a.Acquire(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waiter := acquireAsync(ctx, a, "k", 500*time.Millisecond)
	eventually(t, "the waiter's offer", func() bool { return a.Offered("k") })
	holder.WaitForCalls()
	before := len(rec.sent())
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := wantResult(t, "the waiter", waiter).lock
	var handoff *sentCall
	for _, call := range rec.sent()[before:] {
		if call.node == 0 && slices.Contains(call.args, any(w.Token())) {
			handoff = &call
			break
		}
	}
	if handoff == nil {
		t.Fatal("no handoff call to node 1 recorded")
	}
	if err := w.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	w.WaitForCalls()
	c.wantValues("k", w.Token(), w.Token(), "stale")

	c.deliverAgain(*handoff, scriptSources(t))
	if ttl := c.admin[0].PTTL(ctx, "k").Val(); ttl < 50*time.Second {
		t.Errorf("the late copy of the handoff cut node 1's TTL to %v", ttl)
	}
	// With the stale key on node 3 gone, another Client must still find the key held
	// on a majority.
	if err := c.admin[2].Del(ctx, "k").Err(); err != nil {
		t.Fatal(err)
	}
	b := c.newClient(redlock.Options{RetryDelay: redlock.ExponentialJitter(20*time.Millisecond, 50*time.Millisecond)})
	bctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if other, err := b.Acquire(bctx, "k", time.Second); err == nil {
		t.Fatalf("double grant: another Client got the key at %v while W holds it until %v",
			time.Now().Format(time.TimeOnly), w.Until().Format(time.TimeOnly))
		_ = other.Release(ctx)
	} else if !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("another Client: %v, want ErrNotAcquired", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// lateWorld is the state of one run of TestLateCopiesOfEveryCommand.
type lateWorld struct {
	t      *testing.T
	c      *cluster
	rec    *recorder
	a      *redlock.Client // plain, recorded
	f      *redlock.Client // with fencing, recorded
	held   map[string]*redlock.Lock
	cancel context.CancelFunc
}

// lateStep is one operation of the run; it updates held.
type lateStep struct {
	name string
	do   func(w *lateWorld, ctx context.Context) error
}

// lateSteps drive every script the library has: acquire, a failed attempt and its
// clean-up, extend (longer and shorter), handoff, heal, fence read, fenced acquire
// and its extend, and release.
var lateSteps = []lateStep{
	{"acquire", func(w *lateWorld, ctx context.Context) error {
		l, err := w.a.Acquire(ctx, "k", 5*time.Second)
		w.held["L1"] = l
		return err
	}},
	{"extend", func(w *lateWorld, ctx context.Context) error {
		return w.held["L1"].Extend(ctx, 10*time.Second)
	}},
	{"failed attempt", func(w *lateWorld, ctx context.Context) error {
		for _, a := range w.c.admin[1:] {
			if err := a.Set(ctx, "k2", "foreign", 10*time.Second).Err(); err != nil {
				return err
			}
		}
		if l, err := w.a.TryAcquire(ctx, "k2", 5*time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			return fmt.Errorf("TryAcquire of a key taken on 2 of 3 nodes: %v, %v", l, err)
		}
		return nil
	}},
	{"handoff", func(w *lateWorld, ctx context.Context) error {
		waiter := acquireAsync(ctx, w.a, "k", 2*time.Second)
		eventually(w.t, "the waiter's offer", func() bool { return w.a.Offered("k") })
		if err := w.held["L1"].Release(ctx); err != nil {
			return err
		}
		delete(w.held, "L1")
		r := wantResult(w.t, "the waiter", waiter)
		w.held["W"] = r.lock
		return r.err
	}},
	{"extend after the handoff", func(w *lateWorld, ctx context.Context) error {
		return w.held["W"].Extend(ctx, 20*time.Second)
	}},
	{"heal", func(w *lateWorld, ctx context.Context) error {
		l := w.held["W"]
		l.WaitForCalls()
		if err := w.c.admin[2].Del(ctx, "k").Err(); err != nil {
			return err
		}
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			return err
		}
		l.WaitForCalls()
		if got := w.c.values("k"); got[2] != l.Token() {
			return fmt.Errorf("node 3 not healed: %q", got)
		}
		return nil
	}},
	{"fenced acquire", func(w *lateWorld, ctx context.Context) error {
		f1, err := w.f.Acquire(ctx, "kf", 5*time.Second)
		if err != nil {
			return err
		}
		if err := f1.Release(ctx); err != nil {
			return err
		}
		f2, err := w.f.Acquire(ctx, "kf", 10*time.Second)
		w.held["F2"] = f2
		return err
	}},
	{"extend the fenced lock", func(w *lateWorld, ctx context.Context) error {
		return w.held["F2"].Extend(ctx, 30*time.Second)
	}},
	{"a shorter extend", func(w *lateWorld, ctx context.Context) error {
		l := w.held["W"]
		if err := l.Extend(ctx, 5*time.Second); err != nil {
			return err
		}
		l.WaitForCalls()
		if ttl := w.c.admin[0].PTTL(ctx, "k").Val(); ttl < 15*time.Second {
			return fmt.Errorf("Extend(5s) cut the TTL of a 20 s lock to %v", ttl)
		}
		return nil
	}},
	{"release", func(w *lateWorld, ctx context.Context) error {
		err := w.held["W"].Release(ctx)
		delete(w.held, "W")
		return err
	}},
	{"acquire after the release", func(w *lateWorld, ctx context.Context) error {
		l, err := w.a.Acquire(ctx, "k", 10*time.Second)
		w.held["L3"] = l
		return err
	}},
	{"reentrant holds", func(w *lateWorld, ctx context.Context) error {
		o := redlock.WithOwner(ctx, "o")
		r1, err := w.a.Acquire(o, "kr", 5*time.Second)
		w.held["R1"] = r1
		if err != nil {
			return err
		}
		r2, err := w.a.TryAcquire(o, "kr", 5*time.Second)
		w.held["R2"] = r2
		return err
	}},
	{"reentrant extend and heal", func(w *lateWorld, ctx context.Context) error {
		l := w.held["R1"]
		l.WaitForCalls()
		if err := w.c.admin[2].Del(ctx, "kr").Err(); err != nil {
			return err
		}
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			return err
		}
		// Nodes 1 and 2 listed R2 too (reply 2): R2 shares the 20 s, which the end of
		// the test holds the nodes to after the late copies.
		if r2 := w.held["R2"].Until(); time.Until(r2) < 15*time.Second {
			return fmt.Errorf("R2 valid until %v: it did not follow R1's Extend", r2)
		}
		l.WaitForCalls()
		if got := w.c.values("kr"); !strings.Contains(got[2], l.Token()) {
			return fmt.Errorf("node 3 not healed: %q", got)
		}
		return w.held["R2"].Extend(ctx, 5*time.Second) // shorter: the lease keeps 20 s
	}},
	{"another owner's failed attempt", func(w *lateWorld, ctx context.Context) error {
		if l, err := w.a.TryAcquire(redlock.WithOwner(ctx, "p"), "kr", 5*time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			return fmt.Errorf("owner p's TryAcquire of a key that owner o holds: %v, %v", l, err)
		}
		return nil
	}},
	{"release a reentrant hold", func(w *lateWorld, ctx context.Context) error {
		err := w.held["R1"].Release(ctx)
		delete(w.held, "R1")
		return err
	}},
	{"release the last hold and take it again", func(w *lateWorld, ctx context.Context) error {
		if err := w.held["R2"].Release(ctx); err != nil {
			return err
		}
		delete(w.held, "R2")
		l, err := w.a.Acquire(redlock.WithOwner(ctx, "o"), "kr", 10*time.Second)
		w.held["R3"] = l
		return err
	}},
	{"fenced reentrant holds, heal and release", func(w *lateWorld, ctx context.Context) error {
		o := redlock.WithOwner(ctx, "fo")
		f1, err := w.f.Acquire(o, "kfr", 5*time.Second)
		w.held["FR1"] = f1
		if err != nil {
			return err
		}
		f2, err := w.f.TryAcquire(o, "kfr", 5*time.Second)
		w.held["FR2"] = f2
		if err != nil {
			return err
		}
		f2.WaitForCalls()
		// Node 3 loses the key and its counter, as if restarted empty.
		if err := w.c.admin[2].Del(ctx, append(redlock.FenceKeys(w.c.admin[2], "kfr"), "kfr")...).Err(); err != nil {
			return err
		}
		if err := f2.Extend(ctx, 20*time.Second); err != nil {
			return err
		}
		f2.WaitForCalls()
		if got := w.c.values("kfr"); !strings.Contains(got[2], f2.Token()) {
			return fmt.Errorf("node 3 not healed: %q", got)
		}
		err = f1.Release(ctx)
		delete(w.held, "FR1")
		return err
	}},
	{"fenced: another owner and a lock without owner fail, then the lease ends", func(w *lateWorld, ctx context.Context) error {
		if l, err := w.f.TryAcquire(redlock.WithOwner(ctx, "fp"), "kfr", 5*time.Second); err == nil {
			return fmt.Errorf("owner fp took kfr, held by fo until %v: %v", w.held["FR2"].Until(), l.Token())
		}
		if l, err := w.f.TryAcquire(ctx, "kfr", 5*time.Second); err == nil {
			return fmt.Errorf("a lock without owner took kfr, held by fo: %v", l.Token())
		}
		err := w.held["FR2"].Release(ctx)
		delete(w.held, "FR2")
		if err != nil {
			return err
		}
		l, err := w.f.Acquire(ctx, "kfr", 5*time.Second) // the fenced lease is over
		w.held["F9"] = l
		return err
	}},
	{"line: a Client gives up and leaves, another waits, renews its place, is named and wins", func(w *lateWorld, ctx context.Context) error {
		const key = "kl"
		holder, err := w.a.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			return err
		}
		holder.WaitForCalls() // on every node: else b's attempt may win the line node and take no place
		order, leases, _ := redlock.LineKeys(key)
		line := w.c.admin[w.a.LineNode(key)]
		quitter, err := redlock.New(w.rec.clients(w.c.servers), redlock.Options{MaxAttempts: 1})
		if err != nil {
			return err
		}
		defer quitter.Close()
		if l, err := quitter.Acquire(ctx, key, time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
			return fmt.Errorf("one attempt at a held key: %v, %v", l, err)
		}
		quitter.WaitForCalls() // its line_leave.lua
		// Polling once an hour, b's waiter renews the place its first refusal took
		// with the 1 s floor (line_renew.lua) before it sleeps.
		b, err := redlock.New(w.rec.clients(w.c.servers), noPolling)
		if err != nil {
			return err
		}
		w.t.Cleanup(func() { b.Close() })
		waiting := acquireAsync(ctx, b, key, 10*time.Second)
		eventually(w.t, "b's renewed place", func() bool {
			ms, err := line.ZScore(ctx, leases, b.LineID()).Result()
			return err == nil && time.Until(time.UnixMilli(int64(ms))) > 30*time.Second
		})
		eventually(w.t, "b's subscriptions", func() bool { return b.Listening(key) == len(w.c.servers) })
		if err := holder.Release(ctx); err != nil { // release.lua names b and gives it the turn
			return err
		}
		r := wantResult(w.t, "b", waiting)
		w.held["LB"] = r.lock
		if ids := line.ZRange(ctx, order, 0, -1).Val(); slices.Contains(ids, quitter.LineID()) {
			return fmt.Errorf("the line %q still holds the Client that gave up", ids)
		}
		sent := map[string]bool{} // the scripts whose copies the test will deliver
		sources := scriptSources(w.t)
		for _, call := range w.rec.sent() {
			if src, ok := sources[fmt.Sprint(call.args[1])]; ok {
				sent[strings.TrimSuffix(strings.Fields(src)[1], ":")] = true // "-- name.lua: ..."
			}
		}
		for _, name := range []string{"line_leave.lua", "line_renew.lua"} {
			if !sent[name] {
				return fmt.Errorf("%s was not sent: its late copies go untested", name)
			}
		}
		return r.err
	}},
}

// nodeState is one node's view of a held lock, read in one round trip between from
// and to.
type nodeState struct {
	value string
	// head and hold, for an owner's lock: its key must keep the head and list the
	// hold (a late copy may add or drop other holds of the same owner)
	head, hold string
	token      string // the lock's token, for a lock without owner
	ttl        time.Duration
	fence      int64
	from, to   time.Time
}

// lists reports whether an owner's lock's key keeps its owner's head and lists its
// hold.
func (s nodeState) lists() bool {
	return s.head != "" && strings.HasPrefix(s.value, s.head) && strings.Contains(s.value[len(s.head)-1:], s.hold)
}

// leaseToken returns the fencing token an owner's fenced lease keeps after the head
// ("#<token>|"), or "".
func (s nodeState) leaseToken() string {
	rest, ok := strings.CutPrefix(s.value, s.head)
	if !ok || !strings.HasPrefix(rest, "#") {
		return ""
	}
	tok, _, _ := strings.Cut(rest[1:], "|")
	return tok
}

// read returns every node's view of each held lock.
func (w *lateWorld) read(ctx context.Context) map[string][]nodeState {
	snap := make(map[string][]nodeState)
	for name, l := range w.held {
		states := make([]nodeState, len(w.c.admin))
		for i, a := range w.c.admin {
			st := &states[i]
			if l.Owner() != "" {
				st.head, st.hold = ownerHead(l.Owner()), "|"+l.Token()+"|"
			} else {
				st.token = l.Token()
			}
			st.from = time.Now()
			cmds, _ := a.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Get(ctx, l.Key())
				p.PTTL(ctx, l.Key())
				p.Get(ctx, l.Key()+":fence")
				return nil
			})
			st.to = time.Now()
			st.value, _ = cmds[0].(*redis.StringCmd).Result()
			st.ttl = cmds[1].(*redis.DurationCmd).Val()
			st.fence, _ = cmds[2].(*redis.StringCmd).Int64()
		}
		snap[name] = states
	}
	return snap
}

// compare reports every way in which a copy changed a held lock between two readings:
// its token replaced or deleted, its TTL lower than time alone explains (1 ms of
// Redis' expiry precision allowed), its fencing counter lowered.
func compare(t *testing.T, what string, before, after map[string][]nodeState) {
	t.Helper()
	for name, states := range before {
		for i, s := range states {
			got := after[name][i]
			// Only the lock's own key is checked: a node may hold another (a key an
			// earlier lock or attempt left behind, which a late copy of its own
			// release may delete), or none.
			mine := s.lists() || s.head == "" && s.value != "" && s.value == s.token
			switch {
			case s.lists() && !got.lists():
				t.Errorf("%s: node %d held %s's hold in %q, then %q", what, i+1, name, s.value, got.value)
			case s.lists() && got.leaseToken() != s.leaseToken():
				t.Errorf("%s: node %d: the fencing token of %s's lease went from %q to %q", what, i+1, name, s.leaseToken(), got.leaseToken())
			case s.head == "" && mine && got.value != s.value:
				t.Errorf("%s: node %d held %s's key %q, then %q", what, i+1, name, s.value, got.value)
			case mine && got.ttl < s.ttl-got.to.Sub(s.from)-time.Millisecond:
				t.Errorf("%s: node %d: %s's TTL went from %v to %v in %v", what, i+1, name, s.ttl, got.ttl, got.to.Sub(s.from))
			case got.fence < s.fence:
				t.Errorf("%s: node %d: %s's fencing counter went from %d to %d", what, i+1, name, s.fence, got.fence)
			}
		}
	}
}

// TestLateCopiesOfEveryCommand runs the steps above, stopping after each one in turn,
// then delivers a copy of every script call sent so far again (as sent, in reverse, and
// shuffled), and checks after every copy that it did not shorten the TTL of a lock still
// held, replace its token or lower a fencing counter; at the end, another Client must
// not be able to take a held key.
func TestLateCopiesOfEveryCommand(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	sources := scriptSources(t)
	for stop := 1; stop <= len(allLateSteps); stop++ {
		t.Run("after "+allLateSteps[stop-1].name, func(t *testing.T) {
			c := &cluster{t: t, servers: servers}
			for _, s := range servers {
				a := s.Client()
				if err := a.FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				c.admin = append(c.admin, a)
			}
			w := &lateWorld{t: t, c: c, rec: &recorder{}, held: make(map[string]*redlock.Lock)}
			var err error
			if w.a, err = redlock.New(w.rec.clients(servers), noPolling); err != nil {
				t.Fatal(err)
			}
			defer w.a.Close()
			if w.f, err = redlock.New(w.rec.clients(servers), redlock.Options{Fencing: true}); err != nil {
				t.Fatal(err)
			}
			defer w.f.Close()
			ctx := t.Context()
			for _, st := range allLateSteps[:stop] {
				if err := st.do(w, ctx); err != nil {
					t.Fatalf("step %q: %v", st.name, err)
				}
			}
			for _, l := range w.held {
				l.WaitForCalls()
			}
			calls := w.rec.sent()
			reversed := slices.Clone(calls)
			slices.Reverse(reversed)
			shuffled := slices.Clone(calls)
			rng := rand.New(rand.NewPCG(uint64(stop), 11))
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for _, order := range []struct {
				name  string
				calls []sentCall
			}{{"as sent", calls}, {"reversed", reversed}, {"shuffled", shuffled}} {
				prev := w.read(ctx)
				for i, call := range order.calls {
					c.deliverAgain(call, sources)
					now := w.read(ctx)
					compare(t, fmt.Sprintf("%s, copy %d (%v to node %d)", order.name, i+1, call.args[3:], call.node+1), prev, now)
					prev = now
				}
			}
			b, err := redlock.New(redistest.Clients(servers), redlock.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			for name, l := range w.held {
				if time.Now().After(l.Until()) {
					continue // a short lock may have run out while the copies went out
				}
				if other, err := b.TryAcquire(ctx, l.Key(), time.Second); err == nil {
					t.Errorf("another Client took %s's key %q while it is held until %v", name, l.Key(), l.Until())
					_ = other.Release(ctx)
				}
			}
			t.Logf("%d calls sent, each delivered again 3 times", len(calls))
		})
	}
}
