package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/benchload"
	"github.com/redlock-go/redlock/redlocktest"
)

const benchAbout = `
Runs this library's benchmark workloads (those of docs/performance.md) and prints a
summary table: uncontended cycles (acquire + release of a fresh key) with 1 and with 8
goroutines, and a hot key that 8 workers take in turn, each holding it ~100 µs.
Without --nodes it starts --local redis-server processes on loopback (no persistence)
and stops them at the end; with --nodes it uses yours, writing keys under --prefix
that it deletes again. Only this library: to compare it with go-redsync/redsync and
bsm/redislock on the same nodes, run 'make bench' in a checkout of the repository.
Exit code 0 when no call failed and no violation was seen, 1 otherwise.`

// benchConfig is the bench subcommand's command line.
type benchConfig struct {
	conn     *connFlags
	local    int
	duration time.Duration
	ttl      time.Duration
	hold     time.Duration
	prefix   string
	metrics  string           // --metrics-addr
	observer redlock.Observer // the Clients', for --metrics-addr; nil without
}

// runBench is the bench subcommand.
func runBench(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("bench", "redlock bench [flags]", benchAbout)
	cfg := benchConfig{conn: addConnFlags(fs, true)}
	fs.IntVar(&cfg.local, "local", 5, "without --nodes: the number of local redis-server nodes to start (1 to 15)")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "how long each workload runs (100ms to 10m)")
	fs.DurationVar(&cfg.ttl, "ttl", 8*time.Second, "the locks' TTL")
	fs.DurationVar(&cfg.hold, "hold", 100*time.Microsecond, "how long the hot key's holder keeps it, spinning (0 to 100ms)")
	fs.StringVar(&cfg.prefix, "prefix", "redlock-bench", "the prefix of every key the benchmark writes")
	addMetricsFlag(fs, &cfg.metrics)
	pos, done, code := fs.parse(e, args, true)
	if done {
		return code
	}
	specs, err := cfg.check(fs, pos, e)
	if err != nil {
		return reportSetup(e, "bench", err, exitError)
	}
	m, err := startMetrics(e, "bench", cfg.metrics)
	if err != nil {
		return reportSetup(e, "bench", err, exitError)
	}
	defer m.close()
	cfg.observer = m.observer()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if specs != nil {
		return cfg.report(ctx, e, specs, describeNodes(specs))
	}
	// Local nodes, checked here for a clear message: the fault kit would fail with one
	// meant for tests.
	if _, err := exec.LookPath("redis-server"); err != nil {
		fmt.Fprintf(e.errw(), "redlock bench: %v: install redis-server, or give your nodes with --nodes\n", err)
		return exitError
	}
	// The nodes are this command's: closed (killed by PID, their directories removed)
	// before it returns, also after an interrupt.
	nodes, err := redlocktest.StartProcesses(ctx, cfg.local, redlocktest.Options{Persistence: redlocktest.NoPersistence})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(e.errw(), "redlock bench: interrupted")
			return 130
		}
		fmt.Fprintf(e.errw(), "redlock bench: %v\n", err)
		return exitError
	}
	urls := make([]string, len(nodes))
	pids := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = "redis://" + n.Addr()
		pids[i] = strconv.Itoa(n.PID())
	}
	exit := exitError
	specs, err = parseNodes(urls, tlsFiles{}, redlock.DefaultNodeTimeout)
	if err == nil {
		exit = cfg.report(ctx, e, specs, fmt.Sprintf("%s (pids %s)", plural(int64(len(nodes)), "local redis-server node"), strings.Join(pids, " ")))
	}
	if err = errors.Join(err, redlocktest.CloseAll(nodes)); err != nil && exit != 130 {
		fmt.Fprintf(e.errw(), "redlock bench: %v\n", err)
		return exitError
	}
	return exit
}

// report runs the workloads on specs, described by where, prints the table and
// returns the exit code.
func (cfg *benchConfig) report(ctx context.Context, e *env, specs []nodeSpec, where string) int {
	out := e.out()
	fmt.Fprintf(out, "redlock bench: %s; TTL %v, %v per workload, hot key held %v\n", where, cfg.ttl, cfg.duration, cfg.hold)

	rows, err := cfg.run(ctx, e, specs)
	if ctx.Err() != nil {
		fmt.Fprintln(e.errw(), "redlock bench: interrupted")
		return 130
	}
	if err != nil {
		fmt.Fprintf(e.errw(), "redlock bench: %v\n", err)
		return exitError
	}
	io.WriteString(out, "\n"+benchTable(rows))
	io.WriteString(out, "\nOnly this library. To compare it with go-redsync/redsync and bsm/redislock on the same\nnodes, run `make bench` in a checkout of the repository (see docs/performance.md).\n")
	bad := 0
	for _, r := range rows {
		if r.violations > 0 || r.errors > 0 {
			bad++
			fmt.Fprintf(e.errw(), "redlock bench: %s: %s, %s; first error: %v\n", r.name, plural(int64(max(r.violations, 0)), "violation"), plural(int64(r.errors), "failed call"), r.firstErr)
		}
	}
	if bad > 0 {
		return exitError
	}
	return exitOK
}

// check validates the command line and returns the nodes given with --nodes, or nil
// when local nodes are to be started.
func (cfg *benchConfig) check(fs *flagSet, pos []string, e *env) ([]nodeSpec, error) {
	localSet := false
	fs.Visit(func(f *flag.Flag) { localSet = localSet || f.Name == "local" })
	switch {
	case len(pos) > 0:
		return nil, usagef("unexpected argument %q", pos[0])
	case cfg.local < 1 || cfg.local > 15:
		return nil, usagef("--local %d outside 1..15", cfg.local)
	case cfg.duration < 100*time.Millisecond || cfg.duration > 10*time.Minute:
		return nil, usagef("--duration %v outside 100ms..10m", cfg.duration)
	case cfg.hold < 0 || cfg.hold > 100*time.Millisecond:
		return nil, usagef("--hold %v outside 0..100ms", cfg.hold)
	case cfg.prefix == "":
		return nil, usagef("--prefix must not be empty")
	}
	if err := cfg.conn.check(); err != nil {
		return nil, err
	}
	if err := cfg.conn.checkTTL(cfg.ttl, false); err != nil {
		return nil, err
	}
	// Only --nodes, never REDLOCK_NODES: the benchmark writes thousands of keys, so the
	// nodes must be named on purpose.
	if strings.TrimSpace(cfg.conn.nodes) == "" {
		if cfg.conn.tls.given() {
			return nil, usagef("--tls-* flags given without --nodes")
		}
		return nil, nil
	}
	if localSet {
		return nil, usagef("--local and --nodes exclude each other")
	}
	urls, err := cfg.conn.urls(e)
	if err != nil {
		return nil, err
	}
	return parseNodes(urls, cfg.conn.tls, cfg.conn.nodeTimeout)
}

// benchRow is one workload's line of the summary. Fields that a workload does not
// measure are negative.
type benchRow struct {
	name                     string
	rate                     float64 // cycles (acquisitions) per second
	acqP50, acqP99           time.Duration
	handoffs                 float64 // per second
	waitP50, waitP99, waitMx time.Duration
	selfPct                  float64
	violations               int
	errors                   int
	firstErr                 error
}

// run runs the three workloads, each on a Client of its own over specs.
func (cfg *benchConfig) run(ctx context.Context, e *env, specs []nodeSpec) ([]benchRow, error) {
	opts := redlock.Options{NodeTimeout: cfg.conn.nodeTimeout, DriftFactor: cfg.conn.driftFactor, Observer: cfg.observer}
	run := randomTag()
	type workload struct {
		name string
		unit string // singular: "cycle"
		do   func(c *redlock.Client, done *atomic.Int64) benchRow
	}
	uncontended := func(g int) func(*redlock.Client, *atomic.Int64) benchRow {
		return func(c *redlock.Client, done *atomic.Int64) benchRow {
			newLocker := benchload.Redlock(c, cfg.ttl)
			key := func(phase string) func(int) string {
				base := fmt.Sprintf("%s:%s:g%d:%s:", cfg.prefix, run, g, phase)
				return func(i int) string { return base + strconv.Itoa(i) }
			}
			// Warm up: open the connections every goroutine will use.
			benchload.Cycles(ctx, newLocker, benchload.CycleConfig{Goroutines: g, Key: key("warm"), Cycles: 4 * g})
			rctx, cancel := context.WithTimeout(ctx, cfg.duration)
			defer cancel()
			st := benchload.Cycles(rctx, newLocker, benchload.CycleConfig{Goroutines: g, Key: key("cycle"), Done: done})
			return benchRow{
				rate:   float64(st.Cycles) / st.Elapsed.Seconds(),
				acqP50: benchload.Percentile(st.Acquire, 0.5), acqP99: benchload.Percentile(st.Acquire, 0.99),
				handoffs: -1, waitP50: -1, waitP99: -1, waitMx: -1, selfPct: -1, violations: -1,
				errors: st.Errors(), firstErr: st.FirstErr,
			}
		}
	}
	hot := func(c *redlock.Client, done *atomic.Int64) benchRow {
		st := benchload.HotKey(ctx, benchload.Redlock(c, cfg.ttl), fmt.Sprintf("%s:%s:hot", cfg.prefix, run), benchload.HotConfig{
			Workers: 8, Hold: cfg.hold, MaxDuration: cfg.duration, WaitTimeout: 10 * time.Second, Done: done,
		})
		secs := st.Elapsed.Seconds()
		return benchRow{
			rate:   float64(st.Acquisitions) / secs,
			acqP50: benchload.Percentile(st.Acquire, 0.5), acqP99: benchload.Percentile(st.Acquire, 0.99),
			handoffs: float64(st.Handoffs) / secs,
			waitP50:  benchload.Percentile(st.Waits, 0.5), waitP99: benchload.Percentile(st.Waits, 0.99), waitMx: benchload.Percentile(st.Waits, 1),
			selfPct: st.SelfPercent(), violations: st.Violations,
			errors: st.GaveUp + st.ReleaseErrs, firstErr: st.FirstErr,
		}
	}
	workloads := []workload{
		{"uncontended G=1", "cycle", uncontended(1)},
		{"uncontended G=8", "cycle", uncontended(8)},
		{"hot key G=8", "acquisition", hot},
	}
	prog := newProgress(e.errw(), isTerminal(e.stderr), len(workloads), cfg.duration+100*time.Millisecond)
	defer prog.stop()
	var rows []benchRow
	for _, w := range workloads {
		var done atomic.Int64
		prog.begin(w.name, func() string { return plural(done.Load(), w.unit) })
		c, closeClient, err := dial(specs, opts)
		if err != nil {
			return nil, err
		}
		row := w.do(c, &done)
		closeClient()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		row.name = w.name
		rows = append(rows, row)
		detail := fmt.Sprintf("%s, %.0f/s", plural(done.Load(), w.unit), row.rate)
		if row.errors > 0 || row.violations > 0 {
			detail += fmt.Sprintf(", %s, %s", plural(int64(row.errors), "failed call"), plural(int64(max(row.violations, 0)), "violation"))
		}
		prog.end(row.errors == 0 && row.violations <= 0, detail)
	}
	return rows, nil
}

// randomTag returns 8 random hex digits that make this run's keys its own.
func randomTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// benchTable formats the rows as an aligned table; "-" marks what a workload does not
// measure.
func benchTable(rows []benchRow) string {
	head := []string{"workload", "cycles/s", "acquire p50", "acquire p99", "handoffs/s", "wait p50", "wait p99", "wait max", "self %", "violations", "errors"}
	cells := [][]string{head}
	num := func(v float64, format string) string {
		switch {
		case v < 0:
			return "-"
		case format == "":
			return thousands(v)
		}
		return fmt.Sprintf(format, v)
	}
	dur := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
	}
	for _, r := range rows {
		cells = append(cells, []string{r.name, thousands(r.rate), dur(r.acqP50), dur(r.acqP99), num(r.handoffs, ""),
			dur(r.waitP50), dur(r.waitP99), dur(r.waitMx), num(r.selfPct, "%.1f"), num(float64(r.violations), "%.0f"), strconv.Itoa(r.errors)})
	}
	widths := make([]int, len(head))
	for _, row := range cells {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for _, row := range cells {
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// thousands formats v rounded to a whole number with commas: 12,345.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
