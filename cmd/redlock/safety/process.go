package safety

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/redlocktest"
)

// WorkerEnv names the environment variable that turns a process started by a
// holder-process scenario into a lock holder: a program that runs these scenarios (a
// test binary, the redlock command) must call RunWorkerIfAsked first thing, and the
// scenario starts that same program again (os.Args[0]) with this variable set.
const WorkerEnv = "REDLOCK_SAFETY_WORKER"

// RunWorkerIfAsked runs the holder of a holder-process scenario and exits, when the
// environment variable WorkerEnv asks for it; otherwise it returns at once.
func RunWorkerIfAsked() {
	spec := os.Getenv(WorkerEnv)
	if spec == "" {
		return
	}
	if err := runWorker(spec, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "safety worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// workerSpec is what the scenario tells its worker process.
type workerSpec struct {
	Nodes    []string      `json:"nodes"`    // the lock's nodes, host:port
	Resource string        `json:"resource"` // the node holding the protected counter
	TTL      time.Duration `json:"ttl"`
	Fenced   bool          `json:"fenced"`
}

// counterKey is the protected resource of the holder-process scenarios: a counter in
// Redis, a plain string or (fenced) a fenced.Write hash.
const counterKey = "counter"

// readCounter and writeCounter are the non-atomic read and write of the counter.
func readCounter(ctx context.Context, rdb *redis.Client, fence bool) (int, error) {
	var s string
	var err error
	if fence {
		s, _, err = fenced.Read(ctx, rdb, counterKey)
	} else {
		s, err = rdb.Get(ctx, counterKey).Result()
		if errors.Is(err, redis.Nil) {
			s, err = "", nil
		}
	}
	if err != nil || s == "" {
		return 0, err
	}
	return strconv.Atoi(s)
}

// writeCounter stores v; accepted is false when the fence refused a stale write.
func writeCounter(ctx context.Context, rdb *redis.Client, v int, fence uint64) (accepted bool, err error) {
	if fence == 0 {
		return true, rdb.Set(ctx, counterKey, v, 0).Err()
	}
	err = fenced.Write(ctx, rdb, counterKey, strconv.Itoa(v), fence)
	if errors.Is(err, fenced.ErrStale) {
		return false, nil
	}
	return err == nil, err
}

// runWorker takes the lock once, reads the counter, works 50 ms (the scenario stops
// the process during that time), writes the counter, releases, and reports each event
// with its CLOCK_MONOTONIC time on out.
func runWorker(specJSON string, out io.Writer) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ctx := context.Background()
	var urls []string
	for _, a := range spec.Nodes {
		urls = append(urls, "redis://"+a)
	}
	client, err := redlock.NewFromURLs(urls, redlock.Options{Fencing: spec.Fenced})
	if err != nil {
		return err
	}
	defer client.Close()
	res := redis.NewClient(&redis.Options{Addr: spec.Resource})
	defer res.Close()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lock, err := client.Acquire(actx, "safety", spec.TTL)
	if err != nil {
		return err
	}
	grant := monotonic()
	fmt.Fprintf(out, "granted %d %d %d\n", grant, grant+int64(time.Until(lock.Until())), lock.Fence())
	enter := monotonic()
	v, err := readCounter(ctx, res, spec.Fenced)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "entered %d\n", enter)
	time.Sleep(50 * time.Millisecond) // stopped by the scenario in here
	accepted, err := writeCounter(ctx, res, v+1, lock.Fence())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "exited %d %v\n", monotonic(), accepted)
	_ = lock.Release(ctx)
	return nil
}

// stoppedHolder is the schedule of a holder-process scenario: a separate process takes
// the lock, reads the counter and is stopped with SIGSTOP for TTL + 300 ms; meanwhile
// two workers in this process take the lock in turn and increment the counter; then the
// holder is continued and writes what it read plus one.
func stoppedHolder(t redlocktest.T, fencing bool) (*Report, error) {
	if !processPauses {
		return nil, fmt.Errorf("holder processes need a shared CLOCK_MONOTONIC (Linux)")
	}
	procs := redlocktest.StartN(t, 6, redlocktest.Options{})
	nodes, resource := procs[:5], procs[5]
	spec := workerSpec{Resource: resource.Addr(), TTL: ttl, Fenced: fencing}
	for _, p := range nodes {
		spec.Nodes = append(spec.Nodes, p.Addr())
	}
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	base, start := monotonic(), time.Now()
	since := func(ns int64) time.Duration { return time.Duration(ns - base) }
	rep := &Report{Start: start}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { // stopped or not, it must not outlive the scenario
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stdout)
	next := func(word string) ([]string, error) {
		if !lines.Scan() {
			return nil, fmt.Errorf("holder process: no %q line (%v)", word, lines.Err())
		}
		f := strings.Fields(lines.Text())
		if len(f) == 0 || f[0] != word {
			return nil, fmt.Errorf("holder process: got %q, want %q", lines.Text(), word)
		}
		return f[1:], nil
	}
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

	g, err := next("granted")
	if err != nil {
		return nil, err
	}
	holder := Section{Worker: 0, Grant: since(num(g[0])), Until: since(num(g[1]))}
	fence, _ := strconv.ParseUint(g[2], 10, 64)
	holder.Fence = fence
	e, err := next("entered")
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, err
	}
	holder.Enter = since(num(e[0]))

	// Two workers here take the lock in turn while the holder is stopped.
	opts := quick
	opts.Fencing = fencing
	clients := newClients(t, 2, func() []redis.UniversalClient { return nodeClients(t, nodes) }, opts)
	rdb := dial(t, resource.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), ttl+300*time.Millisecond)
	defer cancel()
	done := make(chan error, 2)
	type tally struct{ writes, refused int }
	counts := make(chan tally, 2)
	var sections = make(chan Section, 1<<12)
	for w, c := range clients {
		go func() {
			var n tally
			defer func() { counts <- n }()
			for ctx.Err() == nil {
				lock, err := c.Acquire(ctx, "safety", ttl)
				if err != nil {
					if ctx.Err() == nil {
						done <- err
						return
					}
					break
				}
				now := since(monotonic())
				sec := Section{Worker: w + 1, Grant: now, Until: now + time.Until(lock.Until()), Fence: lock.Fence(), Enter: now}
				v, err := readCounter(t.Context(), rdb, fencing)
				if err == nil {
					time.Sleep(time.Millisecond)
					var ok bool
					if ok, err = writeCounter(t.Context(), rdb, v+1, lock.Fence()); ok {
						n.writes++
					} else if err == nil {
						n.refused++
					}
				}
				sec.Exit = since(monotonic())
				sections <- sec
				_ = lock.Release(context.WithoutCancel(ctx))
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range clients {
		if err := <-done; err != nil {
			return nil, err
		}
	}
	var writes int
	for range clients {
		n := <-counts
		writes += n.writes
		rep.StaleRefused += n.refused
	}
	close(sections)
	for s := range sections {
		rep.Sections = append(rep.Sections, s)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return nil, err
	}
	x, err := next("exited")
	if err != nil {
		return nil, err
	}
	holder.Exit = since(num(x[0]))
	if x[1] == "true" {
		writes++
		for _, s := range rep.Sections {
			if s.Enter > holder.Enter { // a later holder had entered: the write was stale
				rep.StaleAccepted++
				break
			}
		}
	} else {
		rep.StaleRefused++
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("holder process: %v", err)
	}
	rep.Sections = append(rep.Sections, holder)
	final, err := readCounter(t.Context(), rdb, fencing)
	if err != nil {
		return nil, err
	}
	rep.Grants = len(rep.Sections)
	rep.Duration = since(monotonic())
	rep.Overlaps, rep.LongestOverlap = Overlaps(rep.Sections)
	rep.LostUpdates = writes - final
	if len(rep.Sections) < 2 {
		return rep, fmt.Errorf("no lock was granted while the holder was stopped")
	}
	return rep, nil
}
