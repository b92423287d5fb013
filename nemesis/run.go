package nemesis

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// Executed is a fault of the schedule as it happened: when it took effect and when it
// was undone, on CLOCK_MONOTONIC.
type Executed struct {
	Fault
	From, To int64
}

// Result is one run: its schedule, the merged history, what the checker found and
// where the pictures of a failing run are.
type Result struct {
	Schedule   *Schedule
	Base       int64 // CLOCK_MONOTONIC when the workers were told to go
	Records    []Record
	Faults     []Executed
	Check      *Report
	Files      []string // HTML files written for a failing run
	Stderr     string   // the end of the worker processes' error output
	WorkersRun time.Duration
}

// Run runs schedule s: it starts the nodes, a resource node for fenced writes, one
// Toxiproxy proxy per Client and node, and the worker processes (this program again,
// see WorkerEnv); applies the faults on time; then heals everything, stops the
// workers, merges their histories and checks them. If the check fails, Run writes
// porcupine's visualization and safety's timeline into outDir ("" for a temporary
// directory that is kept) and lists them in Result.Files. Everything it starts is
// stopped by t's clean-ups. Call it from the test's goroutine.
func Run(t testing.TB, s *Schedule, outDir string) (*Result, error) {
	res := &Result{Schedule: s}
	var nodes []*redlocktest.Process
	for _, ns := range s.Nodes {
		o := redlocktest.Options{}
		if ns.AOF {
			o.Persistence = redlocktest.AOFAlways
		}
		if ns.Rate != 1 {
			o.Clock = &redlocktest.Clock{Rate: ns.Rate}
		}
		if ns.Cluster {
			nodes = append(nodes, redlocktest.StartCluster(t, 1, o).Masters[0])
			continue
		}
		nodes = append(nodes, redlocktest.Start(t, o))
	}
	resource := redlocktest.Start(t, redlocktest.Options{})
	netw := redlocktest.NewNetwork(t)
	clients := s.Clients()
	proxies := make([][]*redlocktest.Proxy, len(clients))
	for c := range clients {
		proxies[c] = redlocktest.Proxies(netw, nodes)
	}

	dir := t.TempDir()
	var procs []*workerProc
	firstClient, firstWorker := 0, 0
	for p, cs := range s.Procs {
		spec := workerSpec{Seed: s.Seed, Family: s.Family, Proc: p, Resource: resource.Addr(),
			History: filepath.Join(dir, fmt.Sprintf("history-%d.jsonl", p)), FirstClient: firstClient, FirstWorker: firstWorker}
		for i, c := range cs {
			var addrs []string
			for _, p := range proxies[firstClient+i] {
				addrs = append(addrs, p.Addr())
			}
			spec.Proxies = append(spec.Proxies, addrs)
			firstWorker += c.Workers
		}
		firstClient += len(cs)
		wp, err := startWorker(t, spec, filepath.Join(dir, fmt.Sprintf("stderr-%d.txt", p)))
		if err != nil {
			return res, err
		}
		procs = append(procs, wp)
	}
	for _, wp := range procs {
		if err := wp.expect("ready", 30*time.Second); err != nil {
			return res, err
		}
	}

	res.Base = monotonic()
	begin := time.Now()
	for _, wp := range procs {
		if err := wp.say("go"); err != nil {
			return res, err
		}
	}
	res.Faults = execute(t, s, nodes, proxies, procs, begin, res.Base)
	for _, wp := range procs {
		if err := wp.say("stop"); err != nil {
			return res, err
		}
	}
	var stopErr error
	for _, wp := range procs {
		if err := wp.finish(90 * time.Second); err != nil && stopErr == nil {
			stopErr = err
		}
		res.Stderr += wp.stderrTail()
	}
	res.WorkersRun = time.Since(begin)
	if stopErr != nil {
		return res, stopErr
	}
	var paths []string
	for _, wp := range procs {
		paths = append(paths, wp.spec.History)
	}
	recs, err := ReadHistory(paths...)
	if err != nil {
		return res, err
	}
	res.Records = recs
	res.Check = Check(s, recs, res.Faults, res.Base)
	if !res.Check.OK() {
		if outDir == "" {
			if outDir, err = os.MkdirTemp("", fmt.Sprintf("nemesis-%d-", s.Seed)); err != nil {
				return res, err
			}
		}
		files, err := Render(outDir, res)
		res.Files = files
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// action is the start or the end of a fault.
type action struct {
	at    time.Duration
	fault int
	start bool
}

// execute applies the schedule's faults at their times and undoes each at its end, and
// returns when each took effect; it returns at the schedule's length, or when the last
// fault ended if later.
func execute(t testing.TB, s *Schedule, nodes []*redlocktest.Process, proxies [][]*redlocktest.Proxy, procs []*workerProc, begin time.Time, base int64) []Executed {
	// A fault that ends after the schedule's length ends on time all the same (the
	// workers go on meanwhile): cutting short a restart without persistence would
	// break the assumption it stands for.
	var acts []action
	last := s.Length
	for i, f := range s.Faults {
		acts = append(acts, action{at: f.Start, fault: i, start: true}, action{at: f.End, fault: i})
		last = max(last, f.End)
	}
	slices.SortStableFunc(acts, func(a, b action) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		if a.start != b.start { // ends first, so a node is restarted before it is killed again
			if a.start {
				return 1
			}
			return -1
		}
		return 0
	})
	done := make([]Executed, len(s.Faults))
	active := map[int]bool{}
	// applyProxy sets the proxy of client c to node n to the faults active on it.
	applyProxy := func(c, n int) {
		p := proxies[c][n]
		p.Heal()
		for i := range s.Faults {
			f := s.Faults[i]
			if !active[i] || f.Client != c || !slices.Contains(f.Nodes, n) {
				continue
			}
			switch f.Kind {
			case FaultPartition:
				p.Blackhole(redlocktest.BothWays)
			case FaultOneWay:
				p.Blackhole(redlocktest.Replies)
			case FaultLatency:
				d := redlocktest.BothWays
				if f.Requests {
					d = redlocktest.Requests
				}
				p.Latency(d, f.Latency, f.Jitter)
			}
		}
	}
	for _, a := range acts {
		time.Sleep(time.Until(begin.Add(a.at)))
		f := s.Faults[a.fault]
		active[a.fault] = a.start
		switch f.Kind {
		case FaultKill:
			if a.start {
				nodes[f.Nodes[0]].Kill()
			} else {
				pers := redlocktest.NoPersistence
				if s.Nodes[f.Nodes[0]].AOF {
					pers = redlocktest.AOFAlways
				}
				nodes[f.Nodes[0]].Restart(pers)
			}
		case FaultPause:
			if a.start {
				nodes[f.Nodes[0]].Pause()
			} else {
				nodes[f.Nodes[0]].Resume()
			}
		case FaultClientPause:
			sig := syscall.SIGCONT
			if a.start {
				sig = syscall.SIGSTOP
			}
			if err := syscall.Kill(procs[f.Process].cmd.Process.Pid, sig); err != nil {
				t.Errorf("nemesis: signalling worker process %d: %v", f.Process, err)
			}
		default:
			for _, n := range f.Nodes {
				applyProxy(f.Client, n)
			}
		}
		if a.start {
			done[a.fault] = Executed{Fault: f, From: monotonic() - base}
		} else {
			done[a.fault].To = monotonic() - base
		}
	}
	time.Sleep(time.Until(begin.Add(last)))
	return done
}

// workerProc is a running worker process.
type workerProc struct {
	spec   workerSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr string // path of its error output
}

// startWorker starts this program as a worker process with spec; it is killed by t's
// clean-up if still running then.
func startWorker(t testing.TB, spec workerSpec, stderr string) (*workerProc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	errFile, err := os.Create(stderr)
	if err != nil {
		return nil, err
	}
	defer errFile.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(js))
	cmd.Stderr = errFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	wp := &workerProc{spec: spec, cmd: cmd, stdin: stdin, lines: make(chan string, 16), stderr: stderr}
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		defer close(wp.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			wp.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // not reaped by finish
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		for range wp.lines { // let the reader end
		}
		<-reading
	})
	return wp, nil
}

// say writes one line to the worker's stdin.
func (w *workerProc) say(line string) error {
	_, err := io.WriteString(w.stdin, line+"\n")
	return err
}

// expect waits for the worker to print want.
func (w *workerProc) expect(want string, timeout time.Duration) error {
	select {
	case line, ok := <-w.lines:
		if !ok {
			return fmt.Errorf("worker process %d ended before %q:\n%s", w.spec.Proc, want, w.stderrTail())
		}
		if line != want {
			return fmt.Errorf("worker process %d said %q, want %q", w.spec.Proc, line, want)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("worker process %d did not say %q within %v", w.spec.Proc, want, timeout)
	}
}

// finish waits for the worker to say "done" and exit. A worker that does not finish
// in time (a hung Release or Close) fails the run.
func (w *workerProc) finish(timeout time.Duration) error {
	err := w.expect("done", timeout)
	_ = w.stdin.Close()
	if err != nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		return err
	}
	if err := w.cmd.Wait(); err != nil {
		return fmt.Errorf("worker process %d: %v\n%s", w.spec.Proc, err, w.stderrTail())
	}
	return nil
}

// stderrTail returns the last lines the worker wrote to its error output, without
// go-redis's notices.
func (w *workerProc) stderrTail() string {
	b, _ := os.ReadFile(w.stderr)
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.Contains(l, "maintnotifications") {
			keep = append(keep, l)
		}
	}
	if len(keep) > 20 {
		keep = keep[len(keep)-20:]
	}
	return strings.Join(keep, "\n")
}
