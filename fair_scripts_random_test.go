package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// How long TestFairScriptsRandomLateCopies runs. The default (about 12 s under -race
// on 2 cores, the mutants included) fits the test suite; set REDLOCK_FAIR_SCRIPT_SEEDS
// for a longer run, or REDLOCK_FAIR_SCRIPT_SEED to replay one seed with its history.
// A seed replays exactly: tokens and waiter ids are made from the seed's counters.
const (
	randomScriptSeeds  = 25  // seeds of a default run
	randomScriptSteps  = 400 // steps of each seed
	mutantScriptSeeds  = 10  // each mutant must be caught within this many seeds
	randomScriptTTL    = 60_000
	randomScriptLease  = 60_000
	randomScriptTail   = 150 // lines of history a failure prints, unless one seed is replayed
	randomScriptQuorum = 2   // of the 3 nodes
)

// TestFairScriptsRandomLateCopies runs the fair scripts (fair_ticket.lua,
// fair_acquire.lua and fair_release.lua, each with the files the Go side puts in front
// of it) on 3 real redis-servers in random schedules, with the arguments a fair Client
// sends: waiters that draw a ticket with a hand registration, attempt with the
// registration before their latest and undo a failed attempt on the nodes that may
// hold it, locks released, waiters that leave, and fair TryAcquires. Any call may be
// held back and delivered at a later step (two of a node's held-back calls may then
// be swapped), and any call delivered may be delivered again at any later step, as
// go-redis's retries and a stalled connection deliver them. The nodes' hand notices
// are counted by node, and a waiter is granted the lock by hand when a majority handed
// it the key with its latest registration, as fairWaiter.handed does. TTLs and leases
// are a minute, so nothing expires by itself; a "time passes" step drops what would
// have expired by then: the entries of waiters that are done, and a key whose token
// neither a live lock nor a waiting waiter's latest registration has.
//
// After every step, each live lock's key must hold its token, with more than half its
// TTL left, on every node its grant counted, and no lock may be granted while another
// is live. A failure means that a late, swapped or repeated call made a script delete,
// overwrite or shorten the key of a granted lock, or hand over or grant a key another
// lock holds: two holders at once. It prints the seed and the last steps;
// REDLOCK_FAIR_SCRIPT_SEED=N replays seed N alone and prints its whole history, and
// REDLOCK_FAIR_SCRIPT_SEEDS=N tries seeds 0 to N−1 (randomScriptSeeds by default).
//
// The model of the Clients is the test's own, not the library's code: a grant by
// attempt is a majority of replies 1, a grant by hand a majority of notices for the
// latest registration (keyQueue.handedBy, fairWaiter.handed), without the validity
// check against the registration's time. Neither fair_fenced_acquire.lua, owners
// (WithOwner), Extend, lease expiry of a live waiter nor node restarts are driven.
//
// The subtests mutant=... are the negative controls: each runs the checker on a copy
// of the scripts, or of the test's own grant rule, with a known fault, and fails when
// the checker finds no violation within mutantScriptSeeds seeds: the checker would
// have lost its teeth.
func TestFairScriptsRandomLateCopies(t *testing.T) {
	seeds, replay := randomScriptSeedList(t)
	servers := redistest.StartN(t, 3, redistest.Options{})
	var nodes []scriptNode
	for i, s := range servers {
		admin := s.Client()
		sub := admin.PSubscribe(t.Context(), "redlock:fair:*")
		t.Cleanup(func() { _ = sub.Close() })
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatalf("node %d: PSUBSCRIBE: %v", i+1, err)
		}
		nodes = append(nodes, scriptNode{admin, sub})
	}

	t.Run("library", func(t *testing.T) {
		w := newScriptWorld(t, nodes, fairScripts(t, nil), false)
		var total scriptStats
		start := time.Now()
		for _, seed := range seeds {
			step := w.play(seed, randomScriptSteps)
			total.add(w.stats)
			if w.violation != "" {
				t.Errorf("seed %d, step %d: %s\n%s\nreplay: REDLOCK_FAIR_SCRIPT_SEED=%d go test -race -run 'TestFairScriptsRandomLateCopies/library' -v .",
					seed, step, w.violation, w.history(replay), seed)
				return
			}
			if replay {
				t.Logf("seed %d:\n%s", seed, w.history(true))
			}
		}
		t.Logf("%d seeds × %d steps in %v: %d grants (%d by hand), %d late copies delivered",
			len(seeds), randomScriptSteps, time.Since(start).Round(time.Millisecond), total.grants, total.hands, total.copies)
	})

	for _, m := range scriptMutants {
		t.Run("mutant="+m.name, func(t *testing.T) {
			w := newScriptWorld(t, nodes, fairScripts(t, m.edit(t)), m.anyRegistration)
			start := time.Now()
			for seed := range uint64(mutantScriptSeeds) {
				step := w.play(seed, randomScriptSteps)
				if w.violation != "" {
					t.Logf("caught at seed %d, step %d, after %v: %s", seed, step, time.Since(start).Round(time.Millisecond), w.violation)
					return
				}
			}
			t.Errorf("mutant %s (%s) not caught in %d seeds × %d steps: the checker no longer finds this fault",
				m.name, m.breaks, mutantScriptSeeds, randomScriptSteps)
		})
	}
}

// randomScriptSeedList returns the seeds to run (REDLOCK_FAIR_SCRIPT_SEED,
// REDLOCK_FAIR_SCRIPT_SEEDS), and whether one seed is replayed.
func randomScriptSeedList(t *testing.T) (seeds []uint64, replay bool) {
	t.Helper()
	if s := os.Getenv("REDLOCK_FAIR_SCRIPT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("REDLOCK_FAIR_SCRIPT_SEED=%q: %v", s, err)
		}
		return []uint64{seed}, true
	}
	n := randomScriptSeeds
	if s := os.Getenv("REDLOCK_FAIR_SCRIPT_SEEDS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("REDLOCK_FAIR_SCRIPT_SEEDS=%q: want a count of seeds", s)
		}
	}
	for seed := range uint64(n) {
		seeds = append(seeds, seed)
	}
	return seeds, false
}

// fairScriptSet is the scripts of a fair Client without fencing: the ticket draw, an
// attempt (or a TryAcquire) and a release (or a waiter leaving, or a clean-up).
type fairScriptSet struct{ draw, acquire, release *redis.Script }

// fairScripts returns the fair scripts put together from scripts/ as fair.go puts its
// embedded files together, after edit (nil: none) changed each file's text. Unedited,
// each must be the very script the library runs (the same SHA1).
func fairScripts(t *testing.T, edit func(file, text string) string) fairScriptSet {
	t.Helper()
	file := func(name string) string {
		text := readFile(t, "scripts/"+name)
		if edit != nil {
			text = edit(name, text)
		}
		return text
	}
	queue, owner := file("fair_queue.lua"), file("fair_owner.lua")
	s := fairScriptSet{
		draw:    redis.NewScript(queue + file("fair_ticket.lua")),
		acquire: redis.NewScript(queue + owner + file("fair_acquire.lua")),
		release: redis.NewScript(queue + owner + file("fair_release.lua")),
	}
	if edit == nil {
		ticketSHA, acquireSHA, releaseSHA := redlock.FairScriptHashes()
		for _, c := range []struct {
			name      string
			got, want string
		}{{"draw", s.draw.Hash(), ticketSHA}, {"attempt", s.acquire.Hash(), acquireSHA}, {"release", s.release.Hash(), releaseSHA}} {
			if c.got != c.want {
				t.Fatalf("the %s script put together from scripts/ (SHA1 %s) is not the one the library runs (%s)", c.name, c.got, c.want)
			}
		}
	}
	return s
}

// scriptMutant is a known fault that TestFairScriptsRandomLateCopies must catch: edits
// of the scripts' text (a copy, never the library's), or a wrong grant rule in the
// test's own model of the Client.
type scriptMutant struct {
	name, breaks string
	edits        []scriptEdit
	// anyRegistration grants by hand with any registration a majority handed, not only
	// the waiter's latest (fairWaiter.handed).
	anyRegistration bool
}

// scriptEdit replaces old with new, once, in file.
type scriptEdit struct{ file, old, new string }

// scriptMutants are the negative controls of TestFairScriptsRandomLateCopies. Dropping
// only the NX of fairHand's SET is not one: fairNotify hands over only a key it found
// free in the same script, so that change changes nothing.
var scriptMutants = []scriptMutant{
	{
		name:   "hand-held",
		breaks: "fairNotify hands the key to the head while another token holds it",
		edits: []scriptEdit{
			{"fair_queue.lua", "if HANDS and redis.call('EXISTS', key) == 0 then", "if HANDS then"},
			{"fair_queue.lua", "redis.call('SET', key, token, 'NX', 'PX', px)", "redis.call('SET', key, token, 'PX', px)"},
		},
	},
	{
		name:   "stale-any",
		breaks: "an attempt deletes a key handed with the waiter's previous registration, the one it may have been granted with",
		edits:  []scriptEdit{{"fair_acquire.lua", "if seq and seq < tonumber(ARGV[9]) - 1 then", "if seq then"}},
	},
	{
		name:            "old-reg",
		breaks:          "the Client grants by hand with a registration older than the waiter's latest",
		anyRegistration: true,
	},
}

// edit returns the mutant's edits as fairScripts applies them; it fails the test when
// a text to replace is no longer in its file (the mutant must follow the script).
func (m scriptMutant) edit(t *testing.T) func(file, text string) string {
	for _, e := range m.edits {
		if !strings.Contains(readFile(t, "scripts/"+e.file), e.old) {
			t.Fatalf("mutant %s: %q is no longer in %s: update the mutant", m.name, e.old, e.file)
		}
	}
	return func(file, text string) string {
		for _, e := range m.edits {
			if e.file == file {
				text = strings.Replace(text, e.old, e.new, 1)
			}
		}
		return text
	}
}

// scriptNode is one redis-server: a connection for the calls, and a subscription to
// the fair notices it publishes.
type scriptNode struct {
	admin *redis.Client
	sub   *redis.PubSub
}

// scriptCall is one script call to one node.
type scriptCall struct {
	node   int
	script *redis.Script
	args   []any
	what   string // for the history
}

// scriptWaiter is a fair Acquire call: its entry (fairEntry) and the hand notices the
// nodes sent it, by token, then node.
type scriptWaiter struct {
	id        string
	ticket    int64
	seq       int64
	hand, use string
	done      bool // granted, or left
	handed    map[string]map[int]bool
}

// register is fairEntry.register: a new registration; the previous one becomes the
// token of the coming attempt.
func (w *scriptWaiter) register(token func() string) {
	use := w.hand
	if use == "" {
		use = token()
	}
	w.use, w.hand = use, token()
	w.seq++
}

// scriptLock is a granted lock, live until its Release is sent.
type scriptLock struct {
	name, token, id string // id: the waiter's, "" for a TryAcquire's lock
	counted         []int  // the nodes its grant counted
	live            bool
}

// scriptStats counts what one seed did.
type scriptStats struct{ grants, hands, copies int }

func (s *scriptStats) add(o scriptStats) {
	s.grants += o.grants
	s.hands += o.hands
	s.copies += o.copies
}

// scriptWorld is one schedule's state: the waiters and locks of the modelled Clients,
// the calls held back per node, the calls delivered (for copies), and the history.
type scriptWorld struct {
	t               *testing.T
	nodes           []scriptNode
	keys            []string
	scripts         fairScriptSet
	anyRegistration bool // mutant old-reg

	r         *rand.Rand
	names     int // tokens, waiter ids and markers made so far in this seed
	waiters   []*scriptWaiter
	locks     []*scriptLock
	pending   [][]scriptCall // held back, per node, in the order sent
	sent      []scriptCall   // delivered at least once
	step      int
	lines     []string // the history
	violation string   // the first, which ends the seed
	stats     scriptStats
}

func newScriptWorld(t *testing.T, nodes []scriptNode, scripts fairScriptSet, anyRegistration bool) *scriptWorld {
	q, l, n := redlock.FairKeys("k")
	return &scriptWorld{
		t: t, nodes: nodes, keys: []string{"k", q, l, n, redlock.HandKey("k")},
		scripts: scripts, anyRegistration: anyRegistration,
	}
}

// play runs up to steps steps of seed on emptied nodes, and stops after the first
// violation, returning the step it came at (1-based), or steps.
func (w *scriptWorld) play(seed uint64, steps int) int {
	ctx := w.t.Context()
	for i, n := range w.nodes {
		if err := n.admin.FlushAll(ctx).Err(); err != nil {
			w.t.Fatalf("node %d: FLUSHALL: %v", i+1, err)
		}
		w.drain(i) // notices of the previous seed
	}
	w.r = rand.New(rand.NewPCG(seed, 77))
	w.names, w.waiters, w.locks, w.sent, w.lines, w.violation = 0, nil, nil, nil, nil, ""
	w.pending = make([][]scriptCall, len(w.nodes))
	w.stats = scriptStats{}
	for w.step = 1; w.step <= steps; w.step++ {
		w.next()
		w.check()
		if w.violation != "" {
			return w.step
		}
	}
	return steps
}

// history returns the seed's history: its last randomScriptTail lines, or all of it.
func (w *scriptWorld) history(all bool) string {
	lines := w.lines
	if !all && len(lines) > randomScriptTail {
		skipped := len(lines) - randomScriptTail
		lines = append([]string{fmt.Sprintf("(%d earlier lines: replay the seed for them)", skipped)}, lines[skipped:]...)
	}
	return strings.Join(lines, "\n")
}

func (w *scriptWorld) logf(format string, args ...any) {
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}

// name returns a new name (tokens, waiter ids): the same in every replay of the seed.
func (w *scriptWorld) name(prefix string) string {
	w.names++
	return prefix + strconv.Itoa(w.names)
}

func (w *scriptWorld) token() string { return w.name("t") }

// next makes one random step.
func (w *scriptWorld) next() {
	switch x := w.r.IntN(100); {
	case x < 12 && w.waiting() < 4:
		// Waiters of two Clients, c0 and c1: a notice goes to the head's Client's channel.
		id := fmt.Sprintf("c%d:%s", len(w.waiters)%2, w.name("w"))
		wt := &scriptWaiter{id: id, handed: map[string]map[int]bool{}}
		w.waiters = append(w.waiters, wt)
		w.logf("step %d: new waiter %s", w.step, wt.id)
	case x < 50:
		var active []*scriptWaiter
		for _, wt := range w.waiters {
			if !wt.done {
				active = append(active, wt)
			}
		}
		if len(active) > 0 {
			w.turn(active[w.r.IntN(len(active))])
		}
	case x < 60:
		w.tryAcquire()
	case x < 72:
		if l := w.liveLock(); l != nil {
			w.logf("step %d: RELEASE %s", w.step, l.name)
			l.live = false
			w.send(w.toEvery(w.scripts.release, "release("+l.token+","+l.id+")", l.token, l.id))
		}
	case x < 76:
		w.timePasses()
	case x < 90:
		w.wakeNode()
	default:
		if len(w.sent) > 0 {
			c := w.sent[w.r.IntN(len(w.sent))]
			w.logf("step %d: late copy", w.step)
			w.stats.copies++
			w.run(c)
		}
	}
}

// toEvery returns the call of script with args to every node.
func (w *scriptWorld) toEvery(script *redis.Script, what string, args ...any) []scriptCall {
	calls := make([]scriptCall, len(w.nodes))
	for i := range calls {
		calls[i] = scriptCall{node: i, script: script, args: args, what: what}
	}
	return calls
}

// send delivers each call now, or holds it back as a stalled connection would: a call
// to a node with calls held back is held back too half the time (else it overtakes
// them), any other a fifth of the time. It returns the replies of the calls
// delivered now (nil: held back).
func (w *scriptWorld) send(calls []scriptCall) []*int64 {
	out := make([]*int64, len(calls))
	for i, c := range calls {
		if len(w.pending[c.node]) > 0 && w.r.IntN(2) == 0 || w.r.Float64() < 0.2 {
			w.pending[c.node] = append(w.pending[c.node], c)
			w.logf("  node %d: %s held back", c.node+1, c.what)
			continue
		}
		v := w.run(c)
		w.sent = append(w.sent, c)
		out[i] = &v
	}
	return out
}

// wakeNode delivers the calls held back for a random node, two of them swapped a
// third of the time.
func (w *scriptWorld) wakeNode() {
	var stalled []int
	for i, p := range w.pending {
		if len(p) > 0 {
			stalled = append(stalled, i)
		}
	}
	if len(stalled) == 0 {
		return
	}
	n := stalled[w.r.IntN(len(stalled))]
	backlog := w.pending[n]
	w.pending[n] = nil
	if w.r.IntN(3) == 0 && len(backlog) > 1 {
		i, j := w.r.IntN(len(backlog)), w.r.IntN(len(backlog))
		backlog[i], backlog[j] = backlog[j], backlog[i]
	}
	w.logf("step %d: node %d wakes up: %d held-back calls", w.step, n+1, len(backlog))
	for _, c := range backlog {
		w.run(c)
		w.sent = append(w.sent, c)
	}
}

// run delivers call now and returns its reply; the notices it made are counted.
func (w *scriptWorld) run(c scriptCall) int64 {
	v, err := c.script.Run(w.t.Context(), w.nodes[c.node].admin, w.keys, c.args...).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		w.t.Fatalf("%s to node %d: %v", c.what, c.node+1, err)
	}
	w.logf("  node %d <- %s = %d", c.node+1, c.what, v)
	w.drain(c.node)
	return v
}

// drain reads node i's notices up to a marker it publishes after them.
func (w *scriptWorld) drain(i int) {
	n := w.nodes[i]
	marker := w.name("marker ")
	if err := n.admin.Publish(w.t.Context(), "redlock:fair:zzsync", marker).Err(); err != nil {
		w.t.Fatalf("node %d: PUBLISH: %v", i+1, err)
	}
	for {
		ctx, cancel := context.WithTimeout(w.t.Context(), 5*time.Second)
		msg, err := n.sub.ReceiveMessage(ctx)
		cancel()
		if err != nil {
			w.t.Fatalf("node %d: notices: %v", i+1, err)
		}
		if msg.Payload == marker {
			return
		}
		w.notice(i, msg.Payload)
	}
}

// notice counts a hand notice "=<token> <px> <waiter id>" (fairHand) by node, as
// keyQueue.handedBy does.
func (w *scriptWorld) notice(node int, payload string) {
	parts := strings.Fields(strings.TrimPrefix(payload, "="))
	if !strings.HasPrefix(payload, "=") || len(parts) != 3 {
		return
	}
	for _, wt := range w.waiters {
		if wt.id == parts[2] {
			if wt.handed[parts[0]] == nil {
				wt.handed[parts[0]] = map[int]bool{}
			}
			wt.handed[parts[0]][node] = true
			w.logf("  notice from node %d: handed %s to %s", node+1, parts[0], wt.id)
		}
	}
}

// timePasses drops what would expire in more than a TTL and a lease: the entries of
// the waiters that are done, and a key whose token is neither a live lock's nor the
// latest registration of a waiter still waiting. (Expiry is modelled, not waited for:
// a waiter's latest registration is kept, since the model does not check the
// validity of a grant by hand against the time of the registration.)
func (w *scriptWorld) timePasses() {
	ctx := w.t.Context()
	keep := map[string]bool{}
	for _, l := range w.locks {
		if l.live {
			keep[l.token] = true
		}
	}
	for _, wt := range w.waiters {
		if !wt.done {
			keep[wt.hand] = true
		}
	}
	w.logf("step %d: TIME PASSES", w.step)
	for i, n := range w.nodes {
		for _, wt := range w.waiters {
			if wt.done {
				n.admin.ZRem(ctx, w.keys[1], wt.id)
				n.admin.ZRem(ctx, w.keys[2], wt.id)
			}
		}
		v, err := n.admin.Get(ctx, "k").Result()
		if err == nil && !keep[v] {
			err = n.admin.Del(ctx, "k").Err()
			w.logf("  node %d: dead key %s expires", i+1, v)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			w.t.Fatalf("node %d: %v", i+1, err)
		}
	}
}

func (w *scriptWorld) waiting() int {
	n := 0
	for _, wt := range w.waiters {
		if !wt.done {
			n++
		}
	}
	return n
}

func (w *scriptWorld) liveLock() *scriptLock {
	for _, l := range w.locks {
		if l.live {
			return l
		}
	}
	return nil
}

// grant records a lock the model granted; another live lock is a violation.
func (w *scriptWorld) grant(l *scriptLock) {
	slices.Sort(l.counted)
	if other := w.liveLock(); other != nil && w.violation == "" {
		w.violation = fmt.Sprintf("two holders: %s granted on nodes %v while %s (granted on nodes %v) is live",
			l.name, oneBased(l.counted), other.name, oneBased(other.counted))
	}
	l.live = true
	w.locks = append(w.locks, l)
	w.stats.grants++
	w.logf("  GRANT %s, token %s, on nodes %v", l.name, l.token, oneBased(l.counted))
}

func oneBased(nodes []int) []int {
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n + 1
	}
	return out
}

// check records a violation when a live lock's key lacks its token, or has no more
// than half its TTL left, on a node its grant counted.
func (w *scriptWorld) check() {
	ctx := w.t.Context()
	for _, l := range w.locks {
		if !l.live {
			continue
		}
		for _, n := range l.counted {
			if w.violation != "" {
				return
			}
			admin := w.nodes[n].admin
			v, err := admin.Get(ctx, "k").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				w.t.Fatalf("node %d: GET: %v", n+1, err)
			}
			ttl, err := admin.PTTL(ctx, "k").Result()
			if err != nil {
				w.t.Fatalf("node %d: PTTL: %v", n+1, err)
			}
			if v != l.token || ttl <= randomScriptTTL/2*time.Millisecond {
				held := "no key"
				if v != "" {
					held = fmt.Sprintf("%s for %v", v, ttl)
				}
				w.violation = fmt.Sprintf("live lock %s: node %d holds %s, want its token %s for more than %v",
					l.name, n+1, held, l.token, randomScriptTTL/2*time.Millisecond)
			}
		}
	}
}

// turn is a waiter's next move: it leaves (one time in 12), draws its ticket, takes
// the lock the nodes handed it (fairWaiter.handed), or attempts and, failing, undoes
// the attempt on the nodes that may hold it.
func (w *scriptWorld) turn(wt *scriptWaiter) {
	if w.r.IntN(12) == 0 {
		w.logf("step %d: LEAVE %s", w.step, wt.id)
		wt.done = true
		w.send(w.toEvery(w.scripts.release, "leave("+wt.id+")", "", wt.id))
		return
	}
	if wt.ticket == 0 {
		wt.register(w.token)
		w.logf("step %d: DRAW %s (registers %s, seq %d)", w.step, wt.id, wt.hand, wt.seq)
		replies := w.send(w.toEvery(w.scripts.draw, fmt.Sprintf("draw(%s,%s/%d)", wt.id, wt.hand, wt.seq),
			2*randomScriptLease, wt.id, randomScriptLease, randomScriptTTL, wt.hand, wt.seq))
		n, high := 0, int64(0)
		for _, v := range replies {
			if v != nil && *v != 0 {
				n++
				high = max(high, *v, -*v)
			}
		}
		if n >= randomScriptQuorum {
			wt.ticket = high
		}
		return
	}
	if token, nodes := w.handedTo(wt); token != "" {
		w.stats.hands++
		w.logf("step %d: HANDED %s", w.step, wt.id)
		w.grant(&scriptLock{name: wt.id + " (by hand)", token: token, id: wt.id, counted: nodes})
		wt.done = true
		return
	}
	wt.register(w.token)
	w.logf("step %d: ATTEMPT %s with %s (registers %s, seq %d)", w.step, wt.id, wt.use, wt.hand, wt.seq)
	replies := w.send(w.toEvery(w.scripts.acquire, fmt.Sprintf("attempt(%s,%s,%s/%d)", wt.id, wt.use, wt.hand, wt.seq),
		wt.use, randomScriptTTL, wt.id, wt.ticket, randomScriptLease, "", randomScriptTTL, wt.hand, wt.seq))
	if w.decide(replies, wt.use, wt.id, wt.id) {
		wt.done = true
	}
}

// handedTo returns the token with which a majority of nodes handed wt the key, and
// those nodes: its latest registration only, as fairWaiter.handed counts (any, for
// the mutant old-reg).
func (w *scriptWorld) handedTo(wt *scriptWaiter) (string, []int) {
	tokens := []string{wt.hand}
	if w.anyRegistration {
		tokens = slices.Sorted(maps.Keys(wt.handed))
	}
	for _, token := range tokens {
		if nodes := wt.handed[token]; len(nodes) >= randomScriptQuorum {
			return token, slices.Collect(maps.Keys(nodes))
		}
	}
	return "", nil
}

// tryAcquire is a fair TryAcquire: one attempt without a queue entry.
func (w *scriptWorld) tryAcquire() {
	token := w.token()
	w.logf("step %d: TRYACQUIRE with %s", w.step, token)
	replies := w.send(w.toEvery(w.scripts.acquire, "try("+token+")", token, randomScriptTTL, "", 0, 0))
	w.decide(replies, token, "", "try "+token)
}

// decide grants the lock of an attempt with token when a majority answered 1, and
// otherwise undoes it on every node that may hold it (it answered 1, or its call is
// held back), as Client.cleanupStep does for the waiter id ("" for a TryAcquire).
func (w *scriptWorld) decide(replies []*int64, token, id, name string) bool {
	var yes, mayHold []int
	for i, v := range replies {
		switch {
		case v == nil:
			mayHold = append(mayHold, i)
		case *v == 1:
			yes = append(yes, i)
			mayHold = append(mayHold, i)
		}
	}
	if len(yes) >= randomScriptQuorum {
		w.grant(&scriptLock{name: name, token: token, id: id, counted: yes})
		return true
	}
	args := []any{token, "", ""}
	if id != "" {
		args = append(args, id)
	}
	var cleanup []scriptCall
	for _, i := range mayHold {
		cleanup = append(cleanup, scriptCall{node: i, script: w.scripts.release, args: args, what: fmt.Sprintf("cleanup(%s,%s)", token, id)})
	}
	w.send(cleanup)
	return false
}
