package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/benchload"
	"github.com/redlock-go/redlock/redlocktest"
)

// The hot key with K operating-system processes, one library client and one worker
// each (BenchmarkProcesses). BenchmarkClients runs its K Clients in one process, where
// they share one Go runtime: one garbage collection (here about every second, 7 to 8
// ms on two cores) slows all K at once, which K processes never see together. This
// workload runs the same loop in K copies of the test binary (TestHotProcess) and
// merges their logs, so the waits are those of separate processes.

var procDur = flag.Duration("procdur", 2*time.Second, "measured length of one BenchmarkProcesses run")

// The environment of a TestHotProcess child.
const (
	envChild = "REDLOCK_BENCH_CHILD" // the file the child writes its record to
	envLib   = "REDLOCK_BENCH_LIB"   // the library's name (clientLibs)
	envAddrs = "REDLOCK_BENCH_ADDRS" // the nodes, comma-separated
	envKey   = "REDLOCK_BENCH_KEY"   // the hot key
	envWarm  = "REDLOCK_BENCH_WARM"  // the key of the common warm-up
	envStart = "REDLOCK_BENCH_START" // Unix ns: the measured loop begins
	envEnd   = "REDLOCK_BENCH_END"   // Unix ns: it ends
)

// childCall is one Lock call of a child's worker, in Unix nanoseconds (the wall
// clock, which every process of the box reads alike): it began at T0 and was granted
// at T1 (Granted) or failed then; a granted call's release began at Rel.
type childCall struct {
	T0, T1, Rel int64
	Granted     bool
}

// childRecord is what a child reports: its measured calls, its CPU time in the
// measured loop, and the first error of a call that failed before the end.
type childRecord struct {
	Calls    []childCall
	CPU      time.Duration
	ReleaseE int
	Err      string
}

// TestHotProcess is the worker process of BenchmarkProcesses; without its
// environment it does nothing. It opens the library on the nodes (its own Client and
// connections), warms up as BenchmarkClients's Clients do, runs the hot-key loop
// between the given start and end, and writes its record as JSON.
func TestHotProcess(t *testing.T) {
	out := os.Getenv(envChild)
	if out == "" {
		t.Skip("a worker process of BenchmarkProcesses")
	}
	rec := runChild(os.Getenv(envLib), strings.Split(os.Getenv(envAddrs), ","), os.Getenv(envKey), os.Getenv(envWarm), unixEnv(envStart), unixEnv(envEnd))
	raw, err := json.Marshal(rec)
	if err == nil {
		err = os.WriteFile(out, raw, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// unixEnv reads a Unix-nanosecond time from the environment (zero if absent).
func unixEnv(name string) time.Time {
	ns, _ := strconv.ParseInt(os.Getenv(name), 10, 64)
	return time.Unix(0, ns)
}

// runChild is TestHotProcess's work.
func runChild(name string, addrs []string, key, warm string, start, end time.Time) (rec childRecord) {
	i := slices.IndexFunc(clientLibs, func(l lib) bool { return l.name == name })
	if i < 0 {
		return childRecord{Err: "unknown library " + name}
	}
	s, err := clientLibs[i].open(addrs)
	if err != nil {
		return childRecord{Err: err.Error()}
	}
	defer func() {
		if err := s.close(); err != nil && rec.Err == "" {
			rec.Err = "close: " + err.Error()
		}
	}()
	lk := s.newLocker()
	ctx := context.Background()
	// Warm-up: uncontended cycles open the command connections; contending for a key of
	// its own opens this library's subscriptions (see clientsRun.warmHot).
	for _, k := range freshKeys(warm+":own:"+strconv.Itoa(os.Getpid()), 4) {
		if lk.Lock(ctx, k) == nil {
			_ = lk.Unlock(ctx)
		}
	}
	loop(ctx, lk, warm, time.Until(start)-200*time.Millisecond, 10*time.Second, nil)
	time.Sleep(time.Until(start))
	cpu0, _ := processCPU()
	rec.Calls = []childCall{}
	rec.ReleaseE = loop(ctx, lk, key, time.Until(end), 10*time.Second, &rec)
	cpu1, _ := processCPU()
	rec.CPU = cpu1 - cpu0
	return rec
}

// loop runs the hot-key loop on key for d: acquire, hold hotHold, release. With rec it
// logs every call there (and the first failure); it returns the failed releases.
func loop(ctx context.Context, lk locker, key string, d, waitTimeout time.Duration, rec *childRecord) (releaseErrs int) {
	if d <= 0 {
		return 0
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	for runCtx.Err() == nil {
		lctx, cancel := context.WithTimeout(runCtx, waitTimeout)
		t0 := time.Now()
		err := lk.Lock(lctx, key)
		t1 := time.Now()
		cancel()
		if err != nil {
			if rec != nil {
				rec.Calls = append(rec.Calls, childCall{T0: t0.UnixNano(), T1: t1.UnixNano()})
				if runCtx.Err() == nil && rec.Err == "" {
					rec.Err = "acquire: " + err.Error()
				}
			}
			continue
		}
		benchload.Hold(hotHold)
		rel := time.Now()
		if err := lk.Unlock(ctx); err != nil {
			releaseErrs++
			if rec != nil && rec.Err == "" {
				rec.Err = "release: " + err.Error()
			}
		}
		if rec != nil {
			rec.Calls = append(rec.Calls, childCall{T0: t0.UnixNano(), T1: t1.UnixNano(), Rel: rel.UnixNano(), Granted: true})
		}
	}
	return releaseErrs
}

// procRun is the merged outcome of one BenchmarkProcesses run.
type procRun struct {
	f          hotFigures
	grants     int
	violations int // grants that came before the previous holder began its release
	gaveUp     int // calls that failed before the end
	releaseErr int
	clientCPU  time.Duration
	firstErr   string
}

// runProcesses runs the hot key of l with k worker processes on addrs for d, after a
// warm-up, and merges their records. at, when not nil, is called at the start and
// at the end of the measured window (the nodes' CPU is read there).
func runProcesses(tb testing.TB, l lib, addrs []string, k int, d time.Duration, at func()) procRun {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	key := freshKeys("procs-hot:"+l.name, 1)[0]
	warm := freshKeys("procs-warm:"+l.name, 1)[0]
	start := time.Now().Add(1500 * time.Millisecond) // after k processes started and warmed up
	end := start.Add(d)
	var cmds []*exec.Cmd
	for i := range k {
		cmd := exec.Command(exe, "-test.run=^TestHotProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			envChild+"="+filepath.Join(dir, strconv.Itoa(i)+".json"),
			envLib+"="+l.name, envAddrs+"="+strings.Join(addrs, ","), envKey+"="+key, envWarm+"="+warm,
			envStart+"="+strconv.FormatInt(start.UnixNano(), 10), envEnd+"="+strconv.FormatInt(end.UnixNano(), 10))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		cmds = append(cmds, cmd)
		tb.Cleanup(func() {
			if cmd.ProcessState == nil { // still running: stop it by its PID
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		defer func() {
			if tb.Failed() && out.Len() > 0 {
				tb.Logf("worker process %d:\n%s", i, out.String())
			}
		}()
	}
	if at != nil {
		time.Sleep(time.Until(start))
		at()
		time.Sleep(time.Until(end))
		at()
	}
	var errs []error
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker process %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	recs := make([]childRecord, k)
	for i := range recs {
		raw, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(i)+".json"))
		if err == nil {
			err = json.Unmarshal(raw, &recs[i])
		}
		if err != nil {
			tb.Fatalf("worker process %d: %v", i, err)
		}
	}
	return mergeProcesses(recs, start, end)
}

// mergeProcesses builds one grant log from the workers' records, in the order of the
// grants, and checks mutual exclusion: a grant must come after the previous holder
// began its release.
func mergeProcesses(recs []childRecord, start, end time.Time) procRun {
	type grant struct {
		worker int
		c      childCall
	}
	var r procRun
	var grants []grant
	log := newGrantLog(len(recs))
	log.base = start
	for w, rec := range recs {
		r.clientCPU += rec.CPU
		r.releaseErr += rec.ReleaseE
		if rec.Err != "" && r.firstErr == "" {
			r.firstErr = rec.Err
		}
		for _, c := range rec.Calls {
			if c.Granted {
				grants = append(grants, grant{w, c})
				continue
			}
			log.ended(time.Unix(0, c.T0), time.Unix(0, c.T1))
			if c.T1 < end.UnixNano() {
				r.gaveUp++
			}
		}
	}
	slices.SortFunc(grants, func(a, b grant) int { return int(a.c.T1 - b.c.T1) })
	for i, g := range grants {
		if i > 0 && g.c.T1 < grants[i-1].c.Rel {
			r.violations++
		}
		log.granted(g.worker, time.Unix(0, g.c.T0), time.Unix(0, g.c.T1))
	}
	r.grants = len(grants)
	r.f = log.figures(0)
	return r
}

// BenchmarkProcesses: the hot key of BenchmarkClients (K=8, one worker per library
// client, hold ~100 µs) with every client in a process of its own; each run lasts
// -procdur (b.N is not used: run it with -benchtime=1x). Reports what BenchmarkClients
// reports for the hot key; client-cpu-us/grant sums the K processes' CPU in the
// measured window.
func BenchmarkProcesses(b *testing.B) {
	for _, l := range clientLibs {
		n := nodesOf(l, *nodeCount)
		b.Run(fmt.Sprintf("hot/lib=%s/K=%d/N=%d", l.name, clientsK, n), func(b *testing.B) {
			ns := startNodes(b, n)
			var costs []hotCost
			r := runProcesses(b, l, redlocktest.Addrs(ns), clientsK, *procDur, func() { costs = append(costs, measureCost(ns)) })
			st := benchload.HotStats{Elapsed: *procDur, Violations: r.violations, GaveUp: r.gaveUp}
			reportClientsHot(b, l, st, r.f)
			if len(costs) == 2 && r.grants > 0 {
				reportCost(b, costs[0], costs[1], r.grants)
				b.ReportMetric(float64(r.clientCPU.Microseconds())/float64(r.grants), "client-cpu-us/grant")
			}
			if r.violations > 0 || r.releaseErr > 0 {
				b.Errorf("%d mutual-exclusion violations, %d failed releases (first error: %s)", r.violations, r.releaseErr, r.firstErr)
			}
		})
	}
}

// TestMergeProcesses: the merged log orders the workers' grants by time, counts
// hand-overs and self grants across processes, counts a grant that came before the
// previous holder began its release as a violation, and a call that failed before
// the end as giving up.
func TestMergeProcesses(t *testing.T) {
	start := time.Unix(100, 0)
	at := func(ms int64) int64 { return start.UnixNano() + ms*int64(time.Millisecond) }
	recs := []childRecord{
		{Calls: []childCall{{T0: at(0), T1: at(1), Rel: at(2), Granted: true}, {T0: at(2), T1: at(7), Rel: at(8), Granted: true}}},
		{Calls: []childCall{{T0: at(0), T1: at(3), Rel: at(4), Granted: true}, {T0: at(4), T1: at(50)}}},
		{Calls: []childCall{{T0: at(0), T1: at(5), Rel: at(6), Granted: true}, {T0: at(6), T1: at(8), Rel: at(9), Granted: true}}},
	}
	r := mergeProcesses(recs, start, start.Add(40*time.Millisecond))
	if r.grants != 5 || r.violations != 0 || r.gaveUp != 0 {
		t.Fatalf("grants %d, violations %d, gave up %d; want 5, 0, 0", r.grants, r.violations, r.gaveUp)
	}
	if want := []int{0, 1, 2, 0, 2}; !slices.Equal(r.f.order, want) {
		t.Errorf("order %v, want %v", r.f.order, want)
	}
	if r.f.handoffs != 4 || r.f.self != 0 || r.f.longest != 46*time.Millisecond {
		t.Errorf("hand-overs %d, self %d, longest %v; want 4, 0, 46ms (the open call, up to its end)", r.f.handoffs, r.f.self, r.f.longest)
	}
	// Worker 2's second grant (at 8 ms) came before worker 0 began its release (8 ms
	// is not before 8 ms: none); move it to 7.5 ms and it is a violation; a call that
	// failed before the end gave up.
	recs[2].Calls[1].T1 = at(7) + int64(500*time.Microsecond)
	recs[1].Calls[1].T1 = at(30)
	r = mergeProcesses(recs, start, start.Add(40*time.Millisecond))
	if r.violations != 1 || r.gaveUp != 1 {
		t.Errorf("violations %d, gave up %d; want 1, 1", r.violations, r.gaveUp)
	}
}

// TestProcessesSmoke runs BenchmarkProcesses's hot key for a moment with 3 worker
// processes in fair mode: every process was granted the key, in turns, without a
// violation, and no worker process is left running.
func TestProcessesSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	l := clientLibs[slices.IndexFunc(clientLibs, func(l lib) bool { return l.name == "redlock-fair" })]
	r := runProcesses(t, l, redlocktest.Addrs(startNodes(t, 3)), 3, 500*time.Millisecond, nil)
	if r.violations != 0 || r.releaseErr != 0 || r.gaveUp != 0 {
		t.Fatalf("%d violations, %d failed releases, %d gave up (first error: %s)", r.violations, r.releaseErr, r.gaveUp, r.firstErr)
	}
	for w, n := range r.f.counts {
		if n == 0 {
			t.Errorf("worker process %d was never granted the key (per worker %v)", w, r.f.counts)
		}
	}
	if r.f.handoffs < r.grants/2 {
		t.Errorf("%d hand-overs of %d grants: fair mode's processes did not take turns", r.f.handoffs, r.grants)
	}
	t.Logf("%d grants: per process %v, hand-overs %d, wait p99 %v, longest %v", r.grants, r.f.counts, r.f.handoffs, benchload.Percentile(r.f.waits, 0.99), r.f.longest)
}
