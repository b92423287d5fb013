//go:build unix

package main

// The processes around exec's command: sweeping orphans, the reaper process that
// outlives redlock, its line log, and small helpers for signals and exit codes. Split
// from exec_unix.go, which keeps the flow of an exec.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killOrphans SIGKILLs, every resweepEvery until none is left, the processes that
// came to redlock (a subreaper) when its reaper died, with their descendants, and waits
// for them. Children of redlock in keep, and theirs, are left alone.
func killOrphans(keep map[int]bool) {
	self := os.Getpid()
	for {
		var left []int
		for p := range childrenOf(self) {
			if !keep[p] {
				left = append(left, p)
				left = append(left, descendants(p)...)
			}
		}
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		for p := range childrenOf(self) {
			if !keep[p] {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(p, &ws, syscall.WNOHANG, nil)
			}
		}
		time.Sleep(resweepEvery)
	}
}

// logLeftovers says, with --verbose, what redlock waits for after the command exited.
func logLeftovers(logs *lineLog, cfg execConfig, n int) {
	if !cfg.verbose {
		return
	}
	what := "waiting for them to end before releasing the lock"
	if cfg.leftovers == leftoversKill {
		what = "terminating them before releasing the lock"
	}
	logs.printf("redlock exec: the command exited and left %d processes; %s\n", n, what)
}

// lineLog writes messages to w from a goroutine of its own, dropping what does not
// fit in its buffer while w blocks.
type lineLog struct {
	lines chan string
	done  chan struct{}
}

func newLineLog(w io.Writer) *lineLog {
	l := &lineLog{lines: make(chan string, 32), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for line := range l.lines {
			_, _ = io.WriteString(w, line)
		}
	}()
	return l
}

// printf queues a message; it never blocks.
func (l *lineLog) printf(format string, a ...any) {
	select {
	case l.lines <- fmt.Sprintf(format, a...):
	default:
	}
}

// close lets the queued messages out, waiting for them at most d: a stderr that stays
// blocked must not keep redlock from releasing the lock.
func (l *lineLog) close(d time.Duration) {
	close(l.lines)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
}

// leaseFor returns the reaper's deadline for a lock valid until until: killMargin before
// it, on the lease clock.
func leaseFor(until time.Time, ttl time.Duration) int64 {
	return leaseClock() + int64(time.Until(until)-killMargin(ttl))
}

// reaperProc is a running reaper, seen from redlock exec.
type reaperProc struct {
	cmd     *exec.Cmd
	leases  *os.File            // the lease pipe's write end
	reports <-chan reaperReport // closed when the reaper has ended
}

// reaperReport is one line from the reaper: "started PID", "failed CODE TEXT",
// "stopped SIGNAL", "continued", "exited CODE LEFT" or "expired".
type reaperReport struct {
	kind    string
	n, left int
	text    string
}

// startReaper starts redlock again as the command's reaper, with the command's
// environment and redlock's stdin, stdout and stderr.
func startReaper(e *env, env []string, rc reaperConfig) (*reaperProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find redlock's own executable for the reaper: %w", err)
	}
	leaseR, leaseW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	reportR, reportW, err := os.Pipe()
	if err != nil {
		leaseR.Close()
		leaseW.Close()
		return nil, err
	}
	cmd := exec.Command(self, rc.args()...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.ExtraFiles = []*os.File{leaseR, reportW} // leaseFD, reportFD
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setReaperPdeathsig(cmd.SysProcAttr)
	err = cmd.Start()
	leaseR.Close()
	reportW.Close()
	if err != nil {
		leaseW.Close()
		reportR.Close()
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	reports := make(chan reaperReport, 8)
	go func() {
		defer close(reports)
		defer reportR.Close()
		lines := bufio.NewScanner(reportR)
		for lines.Scan() {
			reports <- parseReport(lines.Text())
		}
	}()
	return &reaperProc{cmd: cmd, leases: leaseW, reports: reports}, nil
}

func parseReport(line string) reaperReport {
	f := strings.SplitN(line, " ", 3)
	r := reaperReport{kind: f[0]}
	if len(f) > 1 {
		r.n, _ = strconv.Atoi(f[1])
	}
	if len(f) > 2 {
		r.text = f[2]
		r.left, _ = strconv.Atoi(f[2])
	}
	return r
}

// lease moves the reaper's deadline to d.
func (r *reaperProc) lease(d int64) {
	_, _ = fmt.Fprintf(r.leases, "%d\n", d)
}

// wake continues a reaper that was stopped (SIGSTOP from outside), which would neither
// kill at its lease nor end.
func (r *reaperProc) wake() { _ = r.cmd.Process.Signal(syscall.SIGCONT) }

// signal has the reaper send sig to the command's descendants outside its group.
func (r *reaperProc) signal(sig syscall.Signal) {
	_, _ = fmt.Fprintf(r.leases, "%s%d\n", signalPrefix, int(sig))
}

// close ends the lease (a reaper still running kills everything at once) and waits for
// the reaper.
func (r *reaperProc) close() {
	r.leases.Close()
	for range r.reports {
	}
	_ = r.cmd.Wait()
}

// inherited returns the environment without the variables exec sets, so that a command
// run under a nested redlock exec never sees the outer lock's (an outer REDLOCK_FENCE
// where the inner lock has none would be a wrong fencing token).
func inherited(environ []string) []string {
	out := environ[:0:0]
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "REDLOCK_KEY", "REDLOCK_TOKEN", "REDLOCK_FENCE", "REDLOCK_UNTIL", "REDLOCK_UNTIL_MS":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// exitCodeOf returns a finished process's exit code, or 128+N if signal N ended it.
func exitCodeOf(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signum(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// closeWithin runs closeAll, waiting for it at most d: node calls still in flight (a
// stalled node's) end by go-redis's read timeout, which an exiting process need not wait
// for.
func closeWithin(closeAll func(), d time.Duration) {
	done := make(chan struct{})
	go func() {
		closeAll()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
