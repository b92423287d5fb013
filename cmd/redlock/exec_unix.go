//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
)

const execAbout = `
Takes the lock KEY on a majority of the nodes, runs the command while holding it, and
releases it when the command exits. The lock is renewed about every ttl/3 while the
command runs. The command inherits stdin, stdout and stderr, runs in its own process
group, and gets the environment variables REDLOCK_KEY, REDLOCK_TOKEN, REDLOCK_UNTIL (the validity
deadline when it started, RFC 3339), REDLOCK_UNTIL_MS (the same in Unix milliseconds) and,
with --fence, REDLOCK_FENCE (the fencing token to give the resource you protect).

SIGINT, SIGTERM and SIGHUP sent to redlock are forwarded to the command's process group;
SIGTSTP stops the group before redlock stops, SIGCONT continues it. If the lock is lost
(renewal failed, or its validity is about to end), the process group gets SIGTERM, then
SIGKILL after --grace, always before the validity ends. A reaper between redlock and the
command kills the command and everything it started (also what left its group, on Linux)
when redlock dies or stays stopped until the validity is about to end. The lock is
released once nothing the command started is left (--leftovers). docs/cli.md says what
exec cannot contain (work handed to other services, writes already sent).

With --fair, waiters get KEY in the order they arrived, across processes (a queue on
every node; --nonblock then fails while others are queued). With --owner NAME (or
REDLOCK_OWNER), the lock is a reentrant hold of NAME: an exec with the same owner gets
KEY at once while another holds it, so a restarted job takes its lock back without
waiting out the TTL; execs that share an owner do not exclude each other.

Exit codes: the command's own (128+N if it died of signal N); 2 usage error;
69 too few nodes answered; 75 lock held elsewhere (after --wait, or at once with
--nonblock; see --conflict-exit-code); 122 lock lost while the command ran;
125 other error of redlock; 126 command cannot be run; 127 command not found.`

// execConfig is the validated command line of exec.
type execConfig struct {
	specs     []nodeSpec
	opts      redlock.Options
	key       string
	ttl       time.Duration
	wait      time.Duration
	nonblock  bool
	grace     time.Duration
	leftovers string // leftoversWait or leftoversKill
	conflict  int
	verbose   bool
	owner     string   // the owner of a reentrant hold (--owner), or ""
	path      string   // the command's program, resolved on PATH
	argv      []string // the command line as given
}

// runExec is the exec subcommand.
func runExec(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("exec", "redlock exec --key KEY [flags] [--] command [args...]", execAbout)
	cf := addConnFlags(fs, true)
	key := fs.String("key", "", "the lock's `name` (required)")
	ttl := fs.Duration("ttl", 10*time.Second, "the lock's time to live on each node; renewed about every ttl/3")
	wait := fs.Duration("wait", 0, "give up (exit 75) if the lock is not acquired within this time;\n0 waits until it is")
	nonblock := fs.Bool("nonblock", false, "never wait: give up at once (exit 75) when the lock is held elsewhere\n(a split vote with copies started at the same instant is retried, 3 attempts at most)")
	grace := fs.Duration("grace", 0, "when the lock is lost: time from SIGTERM to SIGKILL (default ttl/20;\nat most 3·ttl/40, so SIGKILL lands at least ttl/40 before the validity ends)")
	fence := fs.Bool("fence", false, "also obtain a fencing token, exported as REDLOCK_FENCE\n(keeps a counter per key on each node)")
	conflict := fs.Int("conflict-exit-code", exitNotAcquired, "exit code when the lock is held elsewhere")
	verbose := fs.Bool("verbose", false, "log the wait, the acquire and the release to stderr")
	leftovers := fs.String("leftovers", leftoversWait, "what happens to processes the command leaves running when it exits,\nbefore the lock is released: wait (for them to end) or kill (SIGTERM, SIGKILL after --grace)")
	kind := addKindFlags(fs)
	var metricsAddr string
	addMetricsFlag(fs, &metricsAddr)
	pos, done, code := fs.parse(e, args, false)
	if done {
		return code
	}
	cfg := execConfig{
		key: *key, ttl: *ttl, wait: *wait, nonblock: *nonblock, grace: *grace,
		conflict: *conflict, verbose: *verbose, leftovers: *leftovers,
		opts: redlock.Options{NodeTimeout: cf.nodeTimeout, DriftFactor: cf.driftFactor, Fencing: *fence},
	}
	err := kind.resolve(e, fs, &cfg)
	if err == nil {
		cfg, err = execSetup(e, cf, pos, cfg)
	}
	if err != nil {
		var ce *commandError
		if errors.As(err, &ce) {
			fmt.Fprintf(e.errw(), "redlock exec: %v\n", err)
			return ce.code
		}
		return reportSetup(e, "exec", err, exitExecFailure)
	}
	// Served from before the acquire until after the release; a listen error stops
	// exec before it takes the lock.
	m, err := startMetrics(e, "exec", metricsAddr)
	if err != nil {
		return reportSetup(e, "exec", err, exitExecFailure)
	}
	defer m.close()
	cfg.opts.Observer = m.observer()
	return execute(ctx, e, cfg)
}

// commandError is a command that cannot be run: exit code 126 or 127.
type commandError struct {
	code int
	err  error
}

func (c *commandError) Error() string { return c.err.Error() }

func execSetup(e *env, cf *connFlags, pos []string, cfg execConfig) (execConfig, error) {
	urls, err := cf.urls(e)
	if err != nil {
		return cfg, err
	}
	if err := cf.check(); err != nil {
		return cfg, err
	}
	if err := checkKey(cfg.key); err != nil {
		return cfg, err
	}
	switch {
	case len(pos) == 0:
		return cfg, usagef("missing command: redlock exec --key KEY [flags] -- command [args...]")
	case cfg.wait < 0:
		return cfg, usagef("--wait %v must not be negative", cfg.wait)
	case cfg.nonblock && cfg.wait > 0:
		return cfg, usagef("--nonblock and --wait exclude each other")
	case cfg.grace < 0:
		return cfg, usagef("--grace %v must not be negative", cfg.grace)
	case cfg.leftovers != leftoversWait && cfg.leftovers != leftoversKill:
		return cfg, usagef("--leftovers %q: want %s or %s", cfg.leftovers, leftoversWait, leftoversKill)
	case cfg.conflict < 0 || cfg.conflict > 255:
		return cfg, usagef("--conflict-exit-code %d outside 0..255", cfg.conflict)
	}
	if err := cf.checkTTL(cfg.ttl, true); err != nil {
		return cfg, err
	}
	if cfg.grace == 0 {
		cfg.grace = cfg.ttl / 20
	}
	if max := maxGrace(cfg.ttl); cfg.grace > max {
		return cfg, usagef("--grace %v is too long for --ttl %v: at most %v, so that SIGKILL lands before the lock's validity ends (raise --ttl)", cfg.grace, cfg.ttl, max)
	}
	if cfg.specs, err = parseNodes(urls, cf.tls, cf.nodeTimeout); err != nil {
		return cfg, err
	}
	if err := checkOptions(cfg.specs, cfg.opts); err != nil {
		return cfg, err
	}
	path, err := exec.LookPath(pos[0])
	if err != nil {
		code := exitCannotRun // as a shell: 127 only when there is no such file
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		return cfg, &commandError{code: code, err: err}
	}
	cfg.path, cfg.argv = path, pos
	return cfg, nil
}

// killMargin is how long before the validity ends SIGKILL is sent at the latest.
// KeepAlive ends the lock's context at Until − V/10 at the latest (V = ttl − drift, the
// validity a renewal gives); the grace fits in what is left before the margin, and
// supervise sends SIGKILL by Until − killMargin whatever the grace.
func killMargin(ttl time.Duration) time.Duration { return ttl / 40 }

// maxGrace is the longest --grace for ttl: ttl/10 − ttl/40.
func maxGrace(ttl time.Duration) time.Duration { return ttl/10 - killMargin(ttl) }

// execute acquires the lock, runs the command under it and releases it.
func execute(ctx context.Context, e *env, cfg execConfig) int {
	logf := func(format string, args ...any) {
		if cfg.verbose {
			fmt.Fprintf(e.errw(), "redlock exec: "+format+"\n", args...)
		}
	}
	client, closeAll, err := dial(cfg.specs, cfg.opts)
	if err != nil {
		fmt.Fprintf(e.errw(), "redlock exec: %v\n", err)
		return exitExecFailure
	}
	defer closeWithin(closeAll, max(250*time.Millisecond, 2*cfg.opts.NodeTimeout))

	// A write to a closed stderr must fail, not kill redlock with SIGPIPE before it
	// could signal the command. (Notify, not Ignore: an ignored SIGPIPE would stay
	// ignored in the command.)
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)

	// From here on, SIGINT, SIGTERM and SIGHUP are ours: while waiting they end the wait,
	// while the command runs they are forwarded, and during release they are ignored,
	// so the release cannot be interrupted.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if !cfg.nonblock {
		logf("waiting for %q", cfg.key)
	}
	lock, code := acquireInterruptibly(ctx, e, cfg, client, sigs)
	if lock == nil {
		return code
	}
	logf("acquired %q%s on %s, valid until %s", cfg.key, cfg.describeKind(), describeNodes(cfg.specs), lock.Until().Format(time.RFC3339Nano))
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := lock.Release(rctx); err != nil {
			if code != exitLost {
				fmt.Fprintf(e.errw(), "redlock exec: release: %v\n", err)
			}
			return
		}
		logf("released %q", cfg.key)
	}()

	lockCtx, stop := lock.KeepAlive(context.WithoutCancel(ctx))
	defer stop()
	code = supervise(e, cfg, lock, lockCtx, sigs)
	return code
}

// acquireInterruptibly takes the lock as --wait and --nonblock say. A signal ends the
// wait with exit code 128+signal. On failure it returns a nil lock and the exit code.
func acquireInterruptibly(ctx context.Context, e *env, cfg execConfig, c *redlock.Client, sigs <-chan os.Signal) (*redlock.Lock, int) {
	actx, cancel := context.WithCancel(cfg.withOwner(ctx))
	defer cancel()
	if cfg.wait > 0 {
		actx, cancel = context.WithTimeout(actx, cfg.wait)
		defer cancel()
	}
	type result struct {
		lock *redlock.Lock
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		if cfg.nonblock {
			// Never wait for a holder, but retry a split vote with copies that
			// started at the same instant (cron on many machines).
			r.lock, r.err = c.AcquireUnlessHeld(actx, cfg.key, cfg.ttl)
		} else {
			r.lock, r.err = c.Acquire(actx, cfg.key, cfg.ttl)
		}
		ch <- r
	}()
	var r result
	select {
	case r = <-ch:
	case s := <-sigs:
		cancel()
		if r = <-ch; r.lock != nil {
			_ = r.lock.Release(context.WithoutCancel(ctx))
		}
		fmt.Fprintf(e.errw(), "redlock exec: %v while waiting for the lock\n", s)
		return nil, 128 + signum(s)
	}
	if r.err == nil {
		return r.lock, 0
	}
	switch {
	case unavailable(r.err):
		fmt.Fprintf(e.errw(), "redlock exec: too few nodes answered: %v\n", r.err)
		return nil, exitUnavailable
	case !errors.Is(r.err, redlock.ErrNotAcquired):
		fmt.Fprintf(e.errw(), "redlock exec: %v\n", r.err)
		return nil, exitExecFailure
	case cfg.wait > 0:
		fmt.Fprintf(e.errw(), "redlock exec: lock %q not acquired within %v: %v\n", cfg.key, cfg.wait, r.err)
	default:
		fmt.Fprintf(e.errw(), "redlock exec: lock %q is held elsewhere: %v\n", cfg.key, r.err)
	}
	return nil, cfg.conflict
}

// unavailable reports whether a failed acquire failed for want of nodes. When a --wait
// ends the library keeps the class of the last complete attempt (ErrUnavailable when
// nodes failed); the counts are also checked, for an attempt that ctx cut short: if
// failures alone ruled out a majority there, the nodes were the problem, not another
// holder.
func unavailable(err error) bool {
	var qe *redlock.QuorumError
	return errors.Is(err, redlock.ErrUnavailable) ||
		errors.As(err, &qe) && qe.Failed > qe.Nodes-qe.Needed
}

// supervise starts the command under the reaper and waits for both, forwarding
// signals to the command's process group and renewing the reaper's lease whenever the
// lock's validity moves. When the lock is lost it terminates the group: SIGTERM at once,
// SIGKILL after the grace or killMargin before the validity ends, whichever comes first
// (the reaper kills at the same moment, including what left the group).
func supervise(e *env, cfg execConfig, lock *redlock.Lock, lockCtx context.Context, sigs <-chan os.Signal) int {
	until := lock.Until()
	env := append(inherited(os.Environ()),
		"REDLOCK_KEY="+cfg.key,
		"REDLOCK_TOKEN="+lock.Token(),
		"REDLOCK_UNTIL="+until.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		"REDLOCK_UNTIL_MS="+strconv.FormatInt(until.UnixMilli(), 10),
	)
	if cfg.opts.Fencing {
		env = append(env, "REDLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10))
	}
	if lockCtx.Err() != nil { // lost before the command could start: do not start it
		fmt.Fprintf(e.errw(), "redlock exec: %v; the command was not started\n", context.Cause(lockCtx))
		return exitLost
	}
	// Job control sent to redlock stops the command's group first (below); SIGCONT
	// continues it.
	jobs := make(chan os.Signal, 4)
	signal.Notify(jobs, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT)
	defer signal.Stop(jobs)

	// redlock is a subreaper too: if the reaper is killed, what it kept (a setsid
	// process, an orphan) comes to redlock, which kills it before the release. Its
	// children before the reaper (none in the CLI) are not the command's.
	keep := childrenOf(os.Getpid())
	_ = becomeSubreaper()
	tty, foreground := terminalForeground(e.stdin)
	r, err := startReaper(e, env, reaperConfig{
		foreground: foreground, leftovers: cfg.leftovers, grace: cfg.grace, lease: leaseFor(until, cfg.ttl),
		path: cfg.path, argv: cfg.argv,
	})
	if err != nil {
		fmt.Fprintf(e.errw(), "redlock exec: %v\n", err)
		return exitExecFailure
	}
	defer r.close()
	if foreground {
		defer reclaimTerminal(tty)
	}
	first, ok := <-r.reports
	if !ok || first.kind != "started" {
		if ok && first.kind == "failed" {
			fmt.Fprintf(e.errw(), "redlock exec: %s\n", first.text)
			return first.n
		}
		fmt.Fprintf(e.errw(), "redlock exec: the reaper ended before starting the command\n")
		return exitExecFailure
	}
	pgid := first.n
	// From here on, messages go through a goroutine: a stderr nobody drains must not
	// stall this loop, which renews the reaper's lease and sends the kills.
	logs := newLineLog(e.errw())
	defer logs.close(time.Second)

	renew := time.NewTicker(max(cfg.ttl/40, time.Millisecond))
	defer renew.Stop()
	var (
		lost       = lockCtx.Done()
		killAt     <-chan time.Time
		isLost     bool
		expired    bool
		selfStop   bool    // redlock stopped the group for job control, until it reports it continued
		leaseUntil = until // the validity the reaper's lease was last computed from
		code       = -1    // the command's exit code, once it exited
	)
	for {
		select {
		case rep, ok := <-r.reports:
			if !ok { // the reaper ended: the command and everything it left are gone
				switch {
				case isLost || expired:
					return exitLost
				case code < 0:
					// The reaper was killed: the group is SIGKILLed, and what the
					// reaper kept came to redlock once the reaper was waited for.
					_ = syscall.Kill(-pgid, syscall.SIGKILL)
					r.close()
					killOrphans(keep)
					logs.printf("redlock exec: the reaper ended before the command did; sent SIGKILL to the command's process group and everything it started\n")
					return exitExecFailure
				}
				return code
			}
			switch rep.kind {
			case "exited":
				code = rep.n
				if rep.left > 0 && !isLost {
					logLeftovers(logs, cfg, rep.left)
				}
			case "continued":
				selfStop = false
			case "stopped":
				if selfStop {
					continue
				}
				logs.printf("redlock exec: the command was stopped by %v; the lock stays held while it is; send SIGCONT to redlock (pid %d) to continue it\n",
					syscall.Signal(rep.n), os.Getpid())
			case "expired":
				expired = true
				logs.printf("redlock exec: the lock's validity was about to end without a renewal; the reaper killed the command and everything it started\n")
			}
		case s := <-sigs:
			_ = syscall.Kill(-pgid, s.(syscall.Signal))
			r.signal(s.(syscall.Signal))
		case s := <-jobs:
			if s == syscall.SIGCONT {
				_ = syscall.Kill(-pgid, syscall.SIGCONT)
				r.signal(syscall.SIGCONT)
				continue
			}
			// Stop the work before redlock stops: while redlock is stopped nothing
			// renews, and the reaper kills the group when the lease runs out.
			selfStop = true
			_ = syscall.Kill(-pgid, syscall.SIGSTOP)
			r.signal(syscall.SIGSTOP)
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		case <-renew.C:
			if u := lock.Until(); !isLost && u.After(leaseUntil) {
				r.lease(leaseFor(u, cfg.ttl))
				leaseUntil = u
			}
		case <-lost:
			lost, isLost = nil, true
			now := time.Now()
			until := lock.Until()
			at := now.Add(cfg.grace)
			if latest := until.Add(-killMargin(cfg.ttl)); latest.Before(at) {
				at = latest
			}
			// Signal first, then log: a write to a broken stderr must not delay the kill.
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			r.signal(syscall.SIGTERM)
			r.lease(leaseClock() + int64(time.Until(at)))
			r.wake()
			killAt = time.After(at.Sub(now))
			logs.printf("redlock exec: %v; sent SIGTERM to the command's process group, SIGKILL in %v (validity ends in %v)\n",
				context.Cause(lockCtx), max(0, at.Sub(now)).Round(time.Millisecond), until.Sub(now).Round(time.Millisecond))
		case <-killAt:
			killAt = nil
			_ = syscall.Kill(-pgid, syscall.SIGKILL) // the reaper does the same, and more
			// A stopped reaper does nothing: redlock kills what it would, once.
			r.wake()
			for _, p := range descendants(r.cmd.Process.Pid) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			logs.printf("redlock exec: sent SIGKILL to the command's process group and its descendants\n")
		}
	}
}
