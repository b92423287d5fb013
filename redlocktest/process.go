package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisproc"
)

// pickPort chooses the port for a new server; tests replace it to simulate a port
// taken by another process.
var pickPort = redisproc.FreePort

const (
	serverBinary   = "redis-server"
	sentinelBinary = "redis-sentinel"
	logFileName    = "redis.log"
)

// Processes is the process backend: each node is a redis-server child process on a
// free loopback port, with its own data directory from t.TempDir. Its Start returns a
// *Process.
var Processes Backend = processes{}

type processes struct{}

func (processes) Start(t T, opts Options) Node {
	t.Helper()
	return Start(t, opts)
}

// Process is a redis-server (or redis-sentinel) child process. It implements Node.
//
// Every process is bound to 127.0.0.1 on a free port and keeps its data and log in a
// directory of its own. A process started by Start (or the helpers built on it) is
// owned by a test: its directory comes from t.TempDir, it is killed and reaped by a
// t.Cleanup registered when it starts, and its methods fail the test when they cannot
// do their job. A process started by StartProcess is owned by the caller, which stops
// it with Close; its methods without an error result keep their failures for Close,
// and each has a twin that returns the error (KillErr, PauseErr, ResumeErr,
// RestartErr, RestartAfterErr, JumpErr).
//
// Either way the process gets SIGKILL from the kernel (Pdeathsig) if the program dies
// without stopping it. Nothing of the kit outlives a call for it: readiness is probed
// with a go-redis client closed after each probe, and the process is reaped
// synchronously, which keeps it compatible with go.uber.org/goleak.
type Process struct {
	t       T // the owning test; nil for StartProcess
	bin     string
	dir     string
	ownDir  bool     // dir was made by StartProcess and is removed by Close
	args    []string // extra arguments, after the generated ones
	conf    string   // configuration file given as the first argument (sentinels), or ""
	cluster bool
	clock   *Clock

	mu          sync.Mutex
	port        int
	busPort     int // cluster bus port, 0 without cluster mode
	persistence Persistence
	offset      time.Duration // the clock offset written for libfaketime
	cmd         *exec.Cmd     // nil while the process is stopped
	paused      bool
	closed      bool  // Close was called
	errs        error // failures kept for Close (processes without a test)
}

// Start starts one redis-server on a free loopback port and returns once it answers
// PING with PONG. The server is killed and reaped when the test and its subtests
// complete.
func Start(t T, opts Options) *Process {
	t.Helper()
	p := newProcess(t, serverBinary, opts)
	p.startFirst()
	p.record(EventStart, p.clockDetail())
	return p
}

// StartN starts n redis-servers with the same options, one after another, and returns
// them in start order.
func StartN(t T, n int, opts Options) []*Process {
	t.Helper()
	ps := make([]*Process, n)
	for i := range ps {
		ps[i] = Start(t, opts)
	}
	return ps
}

// StartProcess starts one redis-server on a free loopback port, in a new temporary
// directory, and returns once it answers PING with PONG. It is the kit's core for
// programs: it needs no test and returns its errors. The server runs until Close,
// which the caller must call (it also removes the directory); ctx bounds the wait for
// the first start. Options.Clock works as with Start.
func StartProcess(ctx context.Context, opts Options) (*Process, error) {
	if ctx == nil { // before the data directory is made
		return nil, errors.New("redlocktest: start process: nil context")
	}
	bin, err := findBinary(serverBinary)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redlocktest-")
	if err != nil {
		return nil, fmt.Errorf("redlocktest: %w", err)
	}
	p, err := prepareProcess(nil, bin, dir, opts)
	if err == nil {
		err = p.launchFirst(ctx, nil)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("redlocktest: %w", err)
	}
	p.ownDir = true
	p.record(EventStart, p.clockDetail())
	return p, nil
}

// StartProcesses starts n redis-servers with StartProcess, one after another, and
// returns them in start order. When one fails, those already started are closed.
func StartProcesses(ctx context.Context, n int, opts Options) ([]*Process, error) {
	ps := make([]*Process, 0, n)
	for range n {
		p, err := StartProcess(ctx, opts)
		if err != nil {
			return nil, errors.Join(err, CloseAll(ps))
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// CloseAll closes every process and returns their errors joined.
func CloseAll(ps []*Process) error {
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// Close kills the process if it runs, reaps it, and removes the directory that
// StartProcess made. It returns that error joined with the failures kept from earlier
// calls of Kill, Pause, Resume, Restart, RestartAfter and Jump on a process without a
// test. Later calls do nothing and return nil. Closing a process of Start is allowed;
// its test's clean-up then finds nothing to do.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	errs := p.errs
	p.errs = nil
	if err := p.killLocked(); err != nil {
		errs = errors.Join(errs, fmt.Errorf("redlocktest: %w", err))
	}
	if p.ownDir {
		if err := os.RemoveAll(p.dir); err != nil {
			errs = errors.Join(errs, fmt.Errorf("redlocktest: %w", err))
		}
	}
	return errs
}

// newProcess prepares a process of the named binary for t without starting it, and
// registers its clean-up.
func newProcess(t T, binary string, opts Options) *Process {
	t.Helper()
	bin := lookupBinary(t, binary)
	// TempDir registers its removal before our clean-up is registered, so the
	// directory is removed only after the process is gone.
	p, err := prepareProcess(t, bin, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("redlocktest: %v", err)
	}
	t.Cleanup(p.cleanup)
	return p
}

// prepareProcess returns a process of the binary bin in dir, not started, owned by t
// (nil for none), with the clock file written when opts asks for a clock.
func prepareProcess(t T, bin, dir string, opts Options) (*Process, error) {
	p := &Process{
		t:           t,
		bin:         bin,
		dir:         dir,
		args:        append([]string(nil), opts.Args...),
		cluster:     opts.Cluster,
		persistence: opts.Persistence,
	}
	if opts.Clock != nil {
		c := *opts.Clock
		p.clock = &c
		p.offset = c.Offset
		if err := p.writeClockLocked(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// startFirst launches the process of a test, failing the test when it cannot.
func (p *Process) startFirst() {
	p.t.Helper()
	if err := p.launchFirst(context.Background(), p.t.Logf); err != nil {
		p.t.Fatalf("redlocktest: %v", err)
	}
}

// launchFirst picks free ports and launches the process, retrying with other ports
// when one was taken in the meantime; logf, when not nil, hears about the retries.
func (p *Process) launchFirst(ctx context.Context, logf func(format string, args ...any)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting %s: %w", filepath.Base(p.bin), err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return redisproc.RetryPorts(ctx, logf, filepath.Base(p.bin), func() error {
		port, err := pickPort()
		if err != nil {
			return err
		}
		p.port = port
		if p.cluster {
			if p.busPort, err = pickPort(); err != nil {
				return err
			}
		}
		return p.launchLocked(ctx)
	})
}

// Addr returns the process's address, "127.0.0.1:PORT". It stays the same across Kill
// and Restart.
func (p *Process) Addr() string { return redisproc.Loopback(p.Port()) }

// Port returns the TCP port the process listens on.
func (p *Process) Port() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.port
}

// Dir returns the process's working and data directory.
func (p *Process) Dir() string { return p.dir }

// PID returns the process ID, or 0 while the process is stopped.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Client returns a new go-redis client with default options connected to Addr. It is
// closed when the test ends; for a process of StartProcess, the caller closes it.
func (p *Process) Client() *redis.Client { return newClient(p.t, p.Addr()) }

// fail reports err, a failure of a method without error result: to the owning test,
// which it ends, or, without a test, to Close.
func (p *Process) fail(err error) {
	if p.t != nil {
		p.t.Helper()
		p.t.Fatalf("%v", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = errors.Join(p.errs, err)
}

// Kill stops the process with SIGKILL and waits until it has exited. Writes not yet
// in the append-only file are lost. Kill does nothing when the process is stopped.
func (p *Process) Kill() {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.KillErr(); err != nil {
		p.fail(err)
	}
}

// KillErr is Kill, returning its error instead of failing the test.
func (p *Process) KillErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	running := p.cmd != nil
	if err := p.killLocked(); err != nil {
		return fmt.Errorf("redlocktest: %w", err)
	}
	if running {
		p.recordLocked(EventKill, "")
	}
	return nil
}

// Pause suspends the process with SIGSTOP. A paused server still accepts TCP
// connections (the kernel completes the handshake) but never replies. Pause does
// nothing when the process is already paused; pausing a stopped process fails the
// test.
func (p *Process) Pause() {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.PauseErr(); err != nil {
		p.fail(err)
	}
}

// PauseErr is Pause, returning its error instead of failing the test.
func (p *Process) PauseErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("redlocktest: Pause on %s: process is not running", redisproc.Loopback(p.port))
	}
	if p.paused {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("redlocktest: Pause on %s: %w", redisproc.Loopback(p.port), err)
	}
	p.paused = true
	p.recordLocked(EventPause, "")
	return nil
}

// Resume continues a process suspended by Pause with SIGCONT. It does nothing when the
// process is not paused.
func (p *Process) Resume() {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.ResumeErr(); err != nil {
		p.fail(err)
	}
}

// ResumeErr is Resume, returning its error instead of failing the test.
func (p *Process) ResumeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.paused {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("redlocktest: Resume on %s: %w", redisproc.Loopback(p.port), err)
	}
	p.paused = false
	p.recordLocked(EventResume, "")
	return nil
}

// Restart kills the process if it runs and starts it again on the same port, with the
// same data directory, arguments and clock, and with persistence pers. It returns once
// the server answers PING with PONG (and not with a LOADING error). A clock offset is
// kept; a clock rate starts counting again from the restart.
func (p *Process) Restart(pers Persistence) {
	if p.t != nil {
		p.t.Helper()
	}
	p.RestartAfter(0, pers)
}

// RestartErr is Restart, returning its error instead of failing the test.
func (p *Process) RestartErr(pers Persistence) error { return p.RestartAfterErr(0, pers) }

// RestartAfter kills the process if it runs, keeps its port closed for down, and then
// restarts it as Restart does. It blocks for the whole time.
func (p *Process) RestartAfter(down time.Duration, pers Persistence) {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.RestartAfterErr(down, pers); err != nil {
		p.fail(err)
	}
}

// RestartAfterErr is RestartAfter, returning its error instead of failing the test.
// A closed process is not restarted.
func (p *Process) RestartAfterErr(down time.Duration, pers Persistence) error {
	if err := p.KillErr(); err != nil {
		return err
	}
	// Sleep unlocked, so that Addr, Port and PID answer meanwhile.
	time.Sleep(down)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("redlocktest: restarting %s on %s: the process was closed", filepath.Base(p.bin), redisproc.Loopback(p.port))
	}
	p.persistence = pers
	if err := p.launchLocked(context.Background()); err != nil {
		return fmt.Errorf("redlocktest: restarting %s: %w", filepath.Base(p.bin), err)
	}
	p.recordLocked(EventRestart, "persistence "+pers.String())
	return nil
}

// cleanup is registered with t.Cleanup by newProcess.
func (p *Process) cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.killLocked(); err != nil {
		p.t.Errorf("redlocktest: cleanup: %v", err)
	}
}

// killLocked sends SIGKILL to the running process, if any, and reaps it
// (redisproc.Kill).
func (p *Process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	cmd := p.cmd
	p.cmd = nil
	p.paused = false
	return redisproc.Kill(cmd, p.port)
}

// launchLocked starts the process on p.port and waits until it is ready. On failure
// the process is killed and reaped, and the returned error includes the end of its log.
func (p *Process) launchLocked(ctx context.Context) error {
	logPath := filepath.Join(p.dir, logFileName)
	c := redisproc.Command{Bin: p.bin, Dir: p.dir, Args: p.argv(logPath), Port: p.port, LogPath: logPath}
	if p.clock != nil {
		env, err := faketimeEnv(p.clockFile())
		if err != nil {
			return err
		}
		c.Env = append(os.Environ(), env...)
		c.Hint = faketimeHint
	}
	cmd, err := redisproc.Launch(ctx, c)
	if err != nil {
		return err
	}
	p.cmd = cmd
	return nil
}

// argv returns the command line, without the program name.
func (p *Process) argv(logPath string) []string {
	var args []string
	switch {
	case p.conf != "": // persistence and cluster settings do not apply to a sentinel
		args = append([]string{p.conf}, redisproc.ListenArgs(p.port, p.dir, logPath)...)
	default:
		args = redisproc.ServerArgs(p.port, p.dir, logPath, p.persistence == AOFAlways)
		if p.cluster {
			args = append(args, redisproc.ClusterArgs(p.busPort)...)
		}
	}
	return append(args, p.args...)
}

// findBinary returns the path of the named Redis binary, or an error saying how to
// install it, which wraps exec.ErrNotFound when the binary is not on PATH.
func findBinary(name string) (string, error) {
	path, err := redisproc.FindBinary(name)
	if err != nil {
		return "", fmt.Errorf("redlocktest: %w", err)
	}
	return path, nil
}

// lookupBinary returns the path of the named Redis binary, or skips or fails the test
// when it is not installed.
func lookupBinary(t T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(SkipEnv) == "1" {
		t.Skipf("redlocktest: %s not found on PATH; skipping integration test because %s=1", name, SkipEnv)
	}
	t.Fatalf("redlocktest: %s not found on PATH (%v).\n"+
		"Integration tests need a real Redis server. Install it with\n"+
		"\tapt-get install -y redis-server redis-sentinel\n"+
		"(Debian/Ubuntu, as root), or run `make test`, which installs it.\n"+
		"To skip integration tests explicitly, set %s=1.", name, err, SkipEnv)
	return ""
}

// record reports an event of this process to its test's Recorder, if any.
func (p *Process) record(kind EventKind, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recordLocked(kind, detail)
}

func (p *Process) recordLocked(kind EventKind, detail string) {
	record(p.t, Event{Kind: kind, Node: redisproc.Loopback(p.port), Binary: filepath.Base(p.bin), Detail: detail})
}
