package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
)

const demoAbout = `
Starts five Redis nodes on loopback (in-process miniredis by default; real redis-server
processes with --redis-server), and lets several workers contend for one lock:
each takes it, works a little, releases it. Then it kills two nodes (three of five are
still a majority: locking continues), kills a third (no majority: every attempt fails
with ErrUnavailable, nobody gets the lock), restarts them (locking resumes), and ends
with a summary of grants, errors by class and the most holders seen at once.
Takes about 4 × --phase; leaves nothing running. Exit code 0 when everything behaved
as the algorithm promises, 1 otherwise.`

// demoConfig is the demo's command line.
type demoConfig struct {
	workers     int
	phase       time.Duration
	ttl         time.Duration
	redisServer bool
	metricsAddr string
}

// runDemo is the demo subcommand.
func runDemo(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("demo", "redlock demo [flags]", demoAbout)
	var cfg demoConfig
	fs.IntVar(&cfg.workers, "workers", 4, "workers contending for the lock (2 to 16)")
	fs.DurationVar(&cfg.phase, "phase", 3*time.Second, "length of each of the four phases (0.5s to 1m)")
	fs.DurationVar(&cfg.ttl, "ttl", time.Second, "the lock's TTL (100ms to 10s)")
	fs.BoolVar(&cfg.redisServer, "redis-server", false, "run real redis-server processes (from PATH) instead of in-process nodes")
	addMetricsFlag(fs, &cfg.metricsAddr)
	pos, done, code := fs.parse(e, args, true)
	if done {
		return code
	}
	switch {
	case len(pos) > 0:
		return reportSetup(e, "demo", usagef("unexpected argument %q", pos[0]), exitError)
	case cfg.workers < 2 || cfg.workers > 16:
		return reportSetup(e, "demo", usagef("--workers %d outside 2..16", cfg.workers), exitError)
	case cfg.phase < 500*time.Millisecond || cfg.phase > time.Minute:
		return reportSetup(e, "demo", usagef("--phase %v outside 0.5s..1m", cfg.phase), exitError)
	case cfg.ttl < 100*time.Millisecond || cfg.ttl > 10*time.Second || cfg.ttl%time.Millisecond != 0:
		return reportSetup(e, "demo", usagef("--ttl %v outside 100ms..10s (whole milliseconds)", cfg.ttl), exitError)
	}
	m, err := startMetrics(e, "demo", cfg.metricsAddr)
	if err != nil {
		return reportSetup(e, "demo", err, exitError)
	}
	defer m.close()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &demo{cfg: cfg, w: e.out(), live: isTerminal(e.stdout), observer: m.observer()}
	// The nodes are the demo's: d.close stops them (redis-server processes by PID) when
	// d.run returns, also after an interrupt or an error.
	err = errors.Join(d.run(ctx), d.close())
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(d.w, "\ninterrupted; everything the demo started is stopped")
		return 130
	case err != nil:
		fmt.Fprintf(e.errw(), "redlock demo: %v\n", err)
		return exitError
	}
	return exitOK
}

// isTerminal reports whether w is a character device, where the live line is redrawn
// in place; elsewhere (a file, a pipe, CI logs) it is printed once a second instead.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

const demoNodes = 5

// demoKey is the lock the workers contend for.
const demoKey = "demo"

// phaseInfo describes one phase of the demo: its title, and which nodes are down.
type phaseInfo struct {
	title string
	why   string
	down  []int // node indexes, 0-based
}

var demoPhases = [...]phaseInfo{
	{"all 5 nodes up", "a grant needs 3 of 5 nodes; workers take turns", nil},
	{"nodes 1-2 killed", "3 of 5 nodes left: still a majority, so locking continues", []int{0, 1}},
	{"node 3 killed too", "2 of 5 nodes left: no majority, so every attempt must fail with ErrUnavailable", []int{0, 1, 2}},
	{"nodes 1-3 restarted", "they kept their data, so locking resumes safely", nil},
}

// phaseStats counts the attempts that started in one phase.
type phaseStats struct {
	grants, contended, unavailable, other int
	releaseOK, releaseFailed              int
}

// demo is one run of the demo.
type demo struct {
	cfg      demoConfig
	w        io.Writer
	live     bool
	nodes    []demoNode
	observer redlock.Observer // the workers' Clients', for --metrics-addr; nil without

	// gate lets the controller change phases between attempts: workers hold it shared
	// for the length of one attempt, the controller exclusively while it kills or
	// restarts nodes. So every attempt runs wholly inside one phase.
	gate sync.RWMutex

	mu         sync.Mutex // guards the fields below
	phase      int
	stats      [len(demoPhases)]phaseStats
	holders    int // workers between a grant and the start of their release
	maxHolders int
	holder     string // who holds the lock now, for the live line
	fences     int    // grants seen with a fencing token
	lastFence  uint64
	fenceDrops int // grants whose token was not above the previous one
	otherErr   error
}

// run runs the demo on nodes it starts; the caller stops them with close.
func (d *demo) run(ctx context.Context) error {
	start := time.Now()
	if err := d.startNodes(ctx); err != nil {
		return err
	}
	fmt.Fprintf(d.w, "redlock demo: %d workers contend for lock %q (ttl %v) on %d nodes:\n", d.cfg.workers, demoKey, d.cfg.ttl, demoNodes)
	for i, n := range d.nodes {
		fmt.Fprintf(d.w, "  node %d: %s\n", i+1, n.describe())
	}
	if d.cfg.redisServer {
		fmt.Fprintln(d.w, "(each with appendonly yes, appendfsync always: a restart keeps its data)")
	} else {
		fmt.Fprintln(d.w, "(--redis-server runs real redis-server processes instead)")
	}
	fmt.Fprintln(d.w, "Each line: time, nodes (● up, ○ down), the holder (worker w1, w2, ... and its")
	fmt.Fprintln(d.w, "fencing token #n), and this phase's attempts: granted, failed because another")
	fmt.Fprintln(d.w, "worker held the lock (ErrNotAcquired), failed for want of nodes (ErrUnavailable).")

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range d.cfg.workers {
		rdbs := make([]redis.UniversalClient, len(d.nodes))
		for j, n := range d.nodes {
			rdbs[j] = redis.NewClient(&redis.Options{
				Addr: n.Addr(), MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond,
				// After PoolSize failed dials in a row, go-redis stops dialing and probes
				// once a second; a large pool keeps a restarted node usable at once.
				PoolSize: 4096,
			})
		}
		// Each worker is its own client with its own connections, as separate processes
		// would be. The node timeout is generous: the demo's nodes share this machine.
		c, err := redlock.New(rdbs, redlock.Options{NodeTimeout: 100 * time.Millisecond, Fencing: true, Observer: d.observer})
		if err != nil {
			for _, r := range rdbs {
				_ = r.Close()
			}
			return err
		}
		wg.Go(func() {
			d.work(wctx, fmt.Sprintf("w%d", i+1), c)
			_ = c.Close()
			for _, r := range rdbs {
				_ = r.Close()
			}
		})
	}

	for p, info := range demoPhases {
		restarted, err := d.enter(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.w, "\n== phase %d/%d: %s — %s\n", p+1, len(demoPhases), info.title, info.why)
		for _, i := range restarted {
			fmt.Fprintf(d.w, "  node %d: %s\n", i+1, d.nodes[i].describe())
		}
		if err := d.watch(ctx, start); err != nil {
			return err
		}
	}
	cancel()
	wg.Wait()
	return d.summary(time.Since(start))
}

// startNodes starts the demo's nodes, one after another; close stops those started,
// also when one fails.
func (d *demo) startNodes(ctx context.Context) error {
	if d.cfg.redisServer {
		// Checked here for a clear message about the flag.
		if _, err := exec.LookPath("redis-server"); err != nil {
			return fmt.Errorf("--redis-server: %v (install redis-server, or run the demo without the flag)", err)
		}
	}
	for i := range demoNodes {
		var n demoNode
		var err error
		if d.cfg.redisServer {
			n, err = startProcNode(ctx)
		} else {
			n, err = startMemNode()
		}
		if err != nil {
			return fmt.Errorf("starting node %d: %v", i+1, err)
		}
		d.nodes = append(d.nodes, n)
	}
	return nil
}

// enter switches to phase p, killing or restarting nodes, while no attempt is running.
// It returns the nodes it restarted.
func (d *demo) enter(p int) (restarted []int, err error) {
	d.gate.Lock()
	defer d.gate.Unlock()
	wasDown := map[int]bool{}
	if p > 0 {
		for _, i := range demoPhases[p-1].down {
			wasDown[i] = true
		}
	}
	nowDown := map[int]bool{}
	for _, i := range demoPhases[p].down {
		nowDown[i] = true
		if !wasDown[i] {
			if err := d.nodes[i].kill(); err != nil {
				return nil, fmt.Errorf("killing node %d: %v", i+1, err)
			}
		}
	}
	for i := range d.nodes {
		if wasDown[i] && !nowDown[i] {
			if err := d.nodes[i].restart(); err != nil {
				return nil, fmt.Errorf("restarting node %d: %v", i+1, err)
			}
			restarted = append(restarted, i)
		}
	}
	d.mu.Lock()
	d.phase = p
	d.mu.Unlock()
	return restarted, nil
}

// watch shows the live line for one phase, and a last one when the phase ends.
func (d *demo) watch(ctx context.Context, start time.Time) error {
	every := time.Second
	if d.live {
		every = 100 * time.Millisecond
	}
	end := time.Now().Add(d.cfg.phase)
	done := time.NewTimer(d.cfg.phase)
	defer done.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	committed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-done.C:
			if d.live {
				fmt.Fprint(d.w, "\r\033[K")
			}
			fmt.Fprintln(d.w, d.line(now.Sub(start)))
			return nil
		case now := <-tick.C:
			switch {
			case end.Sub(now) < every/4: // the final line is near
			case d.live && now.Sub(committed) >= time.Second:
				fmt.Fprintf(d.w, "\r\033[K%s\n", d.line(now.Sub(start)))
				committed = now
			case d.live:
				fmt.Fprintf(d.w, "\r\033[K%s", d.line(now.Sub(start)))
			default:
				fmt.Fprintln(d.w, d.line(now.Sub(start)))
			}
		}
	}
}

// line is the live view: time, which nodes are up, the holder, and this phase's counts.
func (d *demo) line(elapsed time.Duration) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var up strings.Builder
	down := map[int]bool{}
	for _, i := range demoPhases[d.phase].down {
		down[i] = true
	}
	for i := range demoNodes {
		if down[i] {
			up.WriteString("○")
		} else {
			up.WriteString("●")
		}
	}
	holder := d.holder
	if holder == "" {
		holder = "none"
	}
	s := d.stats[d.phase]
	// Under 80 columns: a wrapped line could not be redrawn in place.
	return fmt.Sprintf("%5.1fs %s  holder %-12s grants %3d  contended %4d  unavailable %3d",
		elapsed.Seconds(), up.String(), holder, s.grants, s.contended, s.unavailable)
}

// work is one worker: try the lock, hold it briefly, release it, pause, again.
func (d *demo) work(ctx context.Context, name string, c *redlock.Client) {
	for ctx.Err() == nil {
		d.gate.RLock()
		d.mu.Lock()
		phase := d.phase
		d.mu.Unlock()
		lock, err := c.TryAcquire(ctx, demoKey, d.cfg.ttl)
		d.gate.RUnlock()
		if err != nil {
			d.failed(ctx, phase, err)
			pause(ctx, 20*time.Millisecond, 60*time.Millisecond)
			continue
		}
		d.granted(phase, name, lock.Fence())
		// Work a little, well inside the validity.
		work := 30*time.Millisecond + rand.N(70*time.Millisecond)
		work = min(work, time.Until(lock.Until())/2)
		pause(ctx, work, work)
		d.releasing()
		rerr := lock.Release(context.WithoutCancel(ctx))
		d.mu.Lock()
		if rerr != nil {
			d.stats[d.phase].releaseFailed++
		} else {
			d.stats[d.phase].releaseOK++
		}
		d.mu.Unlock()
		pause(ctx, 10*time.Millisecond, 40*time.Millisecond)
	}
}

// pause sleeps for a random time in [lo, hi] or until ctx ends.
func pause(ctx context.Context, lo, hi time.Duration) {
	d := lo
	if hi > lo {
		d += rand.N(hi - lo)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (d *demo) granted(phase int, name string, fence uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats[phase].grants++
	d.holders++
	d.maxHolders = max(d.maxHolders, d.holders)
	d.holder = fmt.Sprintf("%s #%d", name, fence)
	if d.fences > 0 && fence <= d.lastFence {
		d.fenceDrops++
	}
	d.fences++
	d.lastFence = fence
}

func (d *demo) releasing() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holders--
	d.holder = ""
}

func (d *demo) failed(ctx context.Context, phase int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &d.stats[phase]
	switch {
	case ctx.Err() != nil: // the demo is ending: not an attempt's outcome
	case errors.Is(err, redlock.ErrUnavailable):
		s.unavailable++
	case errors.Is(err, redlock.ErrNotAcquired):
		s.contended++
	default:
		s.other++
		if d.otherErr == nil {
			d.otherErr = err
		}
	}
}

// summary prints the table and the explanation, and returns an error if anything
// happened that the algorithm should have prevented.
func (d *demo) summary(took time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "\nSummary: %.1f s, %d workers, lock %q, ttl %v, %d nodes (a majority is 3)\n", took.Seconds(), d.cfg.workers, demoKey, d.cfg.ttl, demoNodes)
	const row = "  %-22s %6v %9v %11v %5v %11v %15v\n"
	fmt.Fprintf(d.w, row, "phase", "grants", "contended", "unavailable", "other", "releases ok", "releases failed")
	for p, s := range d.stats {
		fmt.Fprintf(d.w, row, fmt.Sprintf("%d %s", p+1, demoPhases[p].title), s.grants, s.contended, s.unavailable, s.other, s.releaseOK, s.releaseFailed)
	}
	fmt.Fprintf(d.w, "  most holders at once: %d\n", d.maxHolders)
	fmt.Fprintf(d.w, "  fencing tokens: %s, last token %d, %d not above the one before\n", plural(int64(d.fences), "grant"), d.lastFence, d.fenceDrops)
	fmt.Fprint(d.w, `
Why:
  - "contended" is ErrNotAcquired: another worker held the lock. That is the lock working.
  - A grant needs SET NX to succeed on a majority (3 of 5) within the TTL. With two nodes
    down three remain, so workers kept taking turns; with three down no attempt can reach
    a majority, so every attempt failed with ErrUnavailable and nobody held the lock.
    Refusing is the safe answer: two holders would be the unsafe one.
  - A few ErrUnavailable with a majority up are attempts that split the live nodes
    between them, or met a client not yet reconnected to a restarted node: neither
    side got a majority, and the next attempt sorts it out.
  - A release that failed was in flight when a node died; its keys expire by their TTL.
  - The restarted nodes kept their data, so no lock could be granted twice. A node that
    restarts empty must stay down for one TTL first (see docs/safety.md).
  - Fencing tokens only grow (failed attempts use up numbers too, so they skip): give
    them to the resource you protect, and it can refuse a late writer whose lock expired.
`)
	var problems []string
	if d.maxHolders != 1 {
		problems = append(problems, fmt.Sprintf("%d holders at once (want 1)", d.maxHolders))
	}
	for _, p := range []int{0, 1, 3} {
		if d.stats[p].grants == 0 {
			problems = append(problems, fmt.Sprintf("no grant in phase %d", p+1))
		}
	}
	if s := d.stats[2]; s.grants != 0 || s.unavailable == 0 {
		problems = append(problems, fmt.Sprintf("phase 3 had %s and %d ErrUnavailable (want 0 and some)", plural(int64(s.grants), "grant"), s.unavailable))
	}
	if d.fenceDrops > 0 {
		problems = append(problems, fmt.Sprintf("%s did not increase", plural(int64(d.fenceDrops), "fencing token")))
	}
	if d.otherErr != nil {
		problems = append(problems, fmt.Sprintf("unexpected errors, the first: %v", d.otherErr))
	}
	if len(problems) > 0 {
		return fmt.Errorf("unexpected: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintln(d.w, "Everything behaved as the algorithm promises.")
	return nil
}
