//go:build unix

package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The reaper is the process between redlock exec and its command. redlock exec starts
// itself again with reaperArg; the reaper becomes a subreaper (Linux), starts the command
// in a new process group, and outlives everything the command starts. It kills all of it
// when redlock exec dies (its lease pipe closes), or when the lease redlock exec renews
// after every renewal of the lock runs out: a redlock exec that is stopped (SIGSTOP,
// Ctrl-Z) or hangs can no longer renew, and its command must not run on.
//
// The reaper runs in a process group of its own, so that neither the signals redlock
// forwards to the command's group, nor the terminal's job control, reach it.

// reaperArg is the hidden first argument that makes redlock the reaper.
const reaperArg = "__exec-reaper"

// The reaper's extra file descriptors: the lease pipe from redlock exec, and the
// report pipe to it.
const (
	leaseFD  = 3
	reportFD = 4
)

// reaperConfig is what redlock exec tells its reaper on the command line.
type reaperConfig struct {
	foreground bool          // make the command's group the terminal's (stdin's) foreground group
	leftovers  string        // what to do with processes left when the command exits: wait or kill
	grace      time.Duration // leftovers=kill: from SIGTERM to SIGKILL
	lease      int64         // the first deadline, on leaseClock
	path       string        // the program
	argv       []string      // the command line, argv[0] as the user gave it
}

// leftover policies.
const (
	leftoversWait = "wait"
	leftoversKill = "kill"
)

func (c reaperConfig) args() []string {
	return append([]string{reaperArg,
		"-foreground=" + strconv.FormatBool(c.foreground),
		"-leftovers=" + c.leftovers,
		"-grace=" + c.grace.String(),
		"-lease=" + strconv.FormatInt(c.lease, 10),
		"--", c.path,
	}, c.argv...)
}

func parseReaperArgs(args []string) (reaperConfig, error) {
	var c reaperConfig
	fs := flag.NewFlagSet(reaperArg, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&c.foreground, "foreground", false, "")
	fs.StringVar(&c.leftovers, "leftovers", leftoversWait, "")
	fs.DurationVar(&c.grace, "grace", 0, "")
	fs.Int64Var(&c.lease, "lease", 0, "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() < 2 || c.lease == 0 {
		return c, errors.New("want -lease and a program with its argv")
	}
	c.path, c.argv = fs.Arg(0), fs.Args()[1:]
	return c, nil
}

// runReaperIfAsked runs the reaper and exits when redlock was started as one; otherwise
// it returns at once. main calls it first.
func runReaperIfAsked() {
	if len(os.Args) < 2 || os.Args[1] != reaperArg {
		return
	}
	os.Exit(reap(os.Args[2:]))
}

// reap is the reaper's main. Its exit code only tells redlock exec whether it failed
// before it could report; everything else goes through the report pipe.
func reap(args []string) int {
	cfg, err := parseReaperArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "redlock: %s is started by redlock exec only: %v\n", reaperArg, err)
		return exitUsage
	}
	for _, fd := range []int{leaseFD, reportFD} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			fmt.Fprintf(os.Stderr, "redlock: %s is started by redlock exec only: descriptor %d is not its pipe\n", reaperArg, fd)
			return exitUsage
		}
	}
	// The pipes must not leak into the command: a daemon holding the report pipe
	// would keep redlock exec waiting.
	syscall.CloseOnExec(leaseFD)
	syscall.CloseOnExec(reportFD)
	report := os.NewFile(reportFD, "report")
	leases := os.NewFile(leaseFD, "lease")
	say := func(format string, a ...any) { _, _ = fmt.Fprintf(report, format+"\n", a...) }

	// The command's parent-death signal belongs to the thread that starts it; this one
	// lives as long as the reaper.
	runtime.LockOSThread()
	// A signal meant to stop or end the job, sent to the reaper alone, must not leave the
	// job unguarded: terminating signals kill the job first; stop signals are refused.
	// (Notify, not Ignore: an ignored signal stays ignored in the command.)
	terms := make(chan os.Signal, 4)
	signal.Notify(terms, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	if err := becomeSubreaper(); err != nil {
		say("failed %d cannot become a subreaper: %v", exitExecFailure, err)
		return 0
	}
	sys := &syscall.SysProcAttr{Setpgid: true, Foreground: cfg.foreground, Ctty: 0}
	setPdeathsig(sys)
	pid, err := syscall.ForkExec(cfg.path, cfg.argv, &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{0, 1, 2}, Sys: sys,
	})
	if err != nil {
		code := exitCannotRun
		if errors.Is(err, syscall.ENOENT) {
			code = exitNotFound
		}
		say("failed %d %s: %v", code, cfg.argv[0], err)
		return 0
	}
	say("started %d", pid)
	r := &reaper{cfg: cfg, pgid: pid, say: say}
	r.run(leaseUpdates(leases), childEvents(), terms)
	return 0
}

// reaper is the state of the reaper's loop.
type reaper struct {
	cfg      reaperConfig
	pgid     int // the command's PID and process group
	say      func(format string, a ...any)
	deadline int64 // the lease, on leaseClock
	killing  bool  // SIGKILL is being sent to everything, until nothing is left
}

// childEvent is a change of state of a child, or gone when no child is left.
type childEvent struct {
	pid  int
	ws   syscall.WaitStatus
	gone bool
}

// childEvents waits for every child of the reaper, the orphans it inherits included,
// and reports each change, then gone once none is left.
func childEvents() <-chan childEvent {
	ch := make(chan childEvent, 16)
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WUNTRACED|syscall.WCONTINUED, nil)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case err != nil: // ECHILD: every descendant has ended
				ch <- childEvent{gone: true}
				return
			}
			ch <- childEvent{pid: pid, ws: ws}
		}
	}()
	return ch
}

// signalPrefix starts a line that asks the reaper to send a signal (its number follows)
// to the command's descendants that are not in its process group; redlock exec signals
// the group itself.
const signalPrefix = "signal "

// leaseUpdates reads what redlock exec sends, one line each: a new deadline (a positive
// decimal number on leaseClock), or signalPrefix and a signal's number, sent on the
// channel as that number negated. The channel is closed when the pipe closes (redlock
// exec ended or died) or carries anything else.
func leaseUpdates(f *os.File) <-chan int64 {
	ch := make(chan int64, 4)
	go func() {
		defer close(ch)
		lines := bufio.NewScanner(f)
		for lines.Scan() {
			line := strings.TrimSpace(lines.Text())
			if sig, ok := strings.CutPrefix(line, signalPrefix); ok {
				n, err := strconv.Atoi(sig)
				if err != nil || n <= 0 || n >= 65 {
					return
				}
				ch <- -int64(n)
				continue
			}
			d, err := strconv.ParseInt(line, 10, 64)
			if err != nil || d <= 0 {
				return // not redlock exec talking: treat as gone
			}
			ch <- d
		}
	}()
	return ch
}

// leasePoll bounds how long the reaper sleeps between looks at the lease clock: its
// timers run on the monotonic clock, which stands still while the machine is suspended.
const leasePoll = 100 * time.Millisecond

// resweepEvery is how often the kill is repeated until nothing is left, for processes
// forked while it was being sent.
const resweepEvery = 10 * time.Millisecond

func (r *reaper) run(leases <-chan int64, events <-chan childEvent, terms <-chan os.Signal) {
	r.deadline = r.cfg.lease
	check := time.NewTimer(r.untilCheck())
	defer check.Stop()
	var (
		resweep  <-chan time.Time
		leftKill <-chan time.Time
	)
	ticker := time.NewTicker(time.Hour)
	defer ticker.Stop()
	killAll := func() {
		r.sweep(syscall.SIGKILL)
		if !r.killing {
			r.killing = true
			ticker.Reset(resweepEvery)
			resweep = ticker.C
		}
	}
	for {
		select {
		case d, ok := <-leases:
			if !ok { // redlock exec is gone: nothing renews the lock any more
				leases = nil
				killAll()
				continue
			}
			if d < 0 {
				r.sweepOutside(syscall.Signal(-d))
				continue
			}
			r.deadline = d
			check.Reset(r.untilCheck())
		case <-check.C:
			if leaseClock() < r.deadline {
				check.Reset(r.untilCheck())
				continue
			}
			if !r.killing {
				killAll()
				r.say("expired")
			}
		case ev := <-events:
			if ev.gone {
				return
			}
			if ev.pid != r.pgid {
				continue // an orphan inherited and now reaped
			}
			switch {
			case ev.ws.Stopped():
				r.say("stopped %d", int(ev.ws.StopSignal()))
			case ev.ws.Continued():
				r.say("continued")
			default:
				r.say("exited %d %d", exitCodeOfStatus(ev.ws), len(descendants(os.Getpid())))
				if r.cfg.leftovers == leftoversKill && !r.killing {
					_ = syscall.Kill(-r.pgid, syscall.SIGTERM)
					r.sweepOutside(syscall.SIGTERM)
					leftKill = time.After(r.cfg.grace)
				}
			}
		case <-leftKill:
			leftKill = nil
			killAll()
		case <-resweep:
			r.sweep(syscall.SIGKILL)
		case <-terms:
			killAll()
		}
	}
}

// untilCheck returns how long to sleep before looking at the lease again.
func (r *reaper) untilCheck() time.Duration {
	return min(max(0, time.Duration(r.deadline-leaseClock())), leasePoll)
}

// sweep sends sig to the command's process group and to every descendant of the
// reaper: those that left the group, and, as the reaper is a subreaper, those whose
// parents have exited.
func (r *reaper) sweep(sig syscall.Signal) {
	_ = syscall.Kill(-r.pgid, sig)
	for _, p := range descendants(os.Getpid()) {
		_ = syscall.Kill(p, sig)
	}
}

// sweepOutside sends sig to the reaper's descendants that are not in the command's
// process group: those that left it, or were never in it. Signalling the group is the
// caller's, so that no process gets a catchable signal twice.
func (r *reaper) sweepOutside(sig syscall.Signal) {
	for _, p := range descendants(os.Getpid()) {
		if g, err := syscall.Getpgid(p); err == nil && g != r.pgid {
			_ = syscall.Kill(p, sig)
		}
	}
}

// exitCodeOfStatus returns a wait status's exit code, or 128+N for signal N.
func exitCodeOfStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
