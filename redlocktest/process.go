package redlocktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

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

func (processes) Start(t testing.TB, opts Options) Node {
	t.Helper()
	return Start(t, opts)
}

// Process is a redis-server (or redis-sentinel) child process owned by a test. It
// implements Node.
//
// Every process is bound to 127.0.0.1 on a free port, keeps its data and log in a
// directory from t.TempDir, and is killed and reaped by a t.Cleanup registered when it
// starts. It also gets SIGKILL from the kernel (Pdeathsig) if the test binary dies
// without running its clean-ups. The package starts no goroutines for it: readiness is
// probed with a raw TCP connection and the process is reaped synchronously, which
// keeps it compatible with go.uber.org/goleak.
type Process struct {
	t       testing.TB
	bin     string
	dir     string
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
}

// Start starts one redis-server on a free loopback port and returns once it answers
// PING with PONG. The server is killed and reaped when the test and its subtests
// complete.
func Start(t testing.TB, opts Options) *Process {
	t.Helper()
	p := newProcess(t, serverBinary, opts)
	p.startFirst()
	p.record(EventStart, p.clockDetail())
	return p
}

// StartN starts n redis-servers with the same options, one after another, and returns
// them in start order.
func StartN(t testing.TB, n int, opts Options) []*Process {
	t.Helper()
	ps := make([]*Process, n)
	for i := range ps {
		ps[i] = Start(t, opts)
	}
	return ps
}

// newProcess prepares a process of the named binary without starting it, and registers
// its clean-up.
func newProcess(t testing.TB, binary string, opts Options) *Process {
	t.Helper()
	p := &Process{
		t:   t,
		bin: lookupBinary(t, binary),
		// TempDir registers its removal before our clean-up is registered, so the
		// directory is removed only after the process is gone.
		dir:         t.TempDir(),
		args:        append([]string(nil), opts.Args...),
		cluster:     opts.Cluster,
		persistence: opts.Persistence,
	}
	if opts.Clock != nil {
		c := *opts.Clock
		p.clock = &c
		p.offset = c.Offset
		if err := p.writeClockLocked(); err != nil {
			t.Fatalf("redlocktest: %v", err)
		}
	}
	t.Cleanup(p.cleanup)
	return p
}

// startFirst picks free ports and launches the process, retrying with other ports
// when one was taken in the meantime.
func (p *Process) startFirst() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	retryPorts(p.t, filepath.Base(p.bin), func() error {
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
		return p.launchLocked()
	})
}

// Addr returns the process's address, "127.0.0.1:PORT". It stays the same across Kill
// and Restart.
func (p *Process) Addr() string { return loopback(p.Port()) }

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
// closed when the test ends.
func (p *Process) Client() *redis.Client { return newClient(p.t, p.Addr()) }

// Kill stops the process with SIGKILL and waits until it has exited. Writes not yet
// in the append-only file are lost. Kill does nothing when the process is stopped.
func (p *Process) Kill() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	running := p.cmd != nil
	if err := p.killLocked(); err != nil {
		p.t.Fatalf("redlocktest: %v", err)
	}
	if running {
		p.recordLocked(EventKill, "")
	}
}

// Pause suspends the process with SIGSTOP. A paused server still accepts TCP
// connections (the kernel completes the handshake) but never replies. Pause does
// nothing when the process is already paused; pausing a stopped process fails the
// test.
func (p *Process) Pause() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		p.t.Fatalf("redlocktest: Pause on %s: process is not running", loopback(p.port))
	}
	if p.paused {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatalf("redlocktest: Pause on %s: %v", loopback(p.port), err)
	}
	p.paused = true
	p.recordLocked(EventPause, "")
}

// Resume continues a process suspended by Pause with SIGCONT. It does nothing when the
// process is not paused.
func (p *Process) Resume() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !p.paused {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatalf("redlocktest: Resume on %s: %v", loopback(p.port), err)
	}
	p.paused = false
	p.recordLocked(EventResume, "")
}

// Restart kills the process if it runs and starts it again on the same port, with the
// same data directory, arguments and clock, and with persistence pers. It returns once
// the server answers PING with PONG (and not with a LOADING error). A clock offset is
// kept; a clock rate starts counting again from the restart.
func (p *Process) Restart(pers Persistence) {
	p.t.Helper()
	p.RestartAfter(0, pers)
}

// RestartAfter kills the process if it runs, keeps its port closed for down, and then
// restarts it as Restart does. It blocks for the whole time.
func (p *Process) RestartAfter(down time.Duration, pers Persistence) {
	p.t.Helper()
	p.Kill()
	// Sleep unlocked, so that Addr, Port and PID answer meanwhile.
	time.Sleep(down)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.persistence = pers
	if err := p.launchLocked(); err != nil {
		p.t.Fatalf("redlocktest: restarting %s: %v", filepath.Base(p.bin), err)
	}
	p.recordLocked(EventRestart, "persistence "+pers.String())
}

// cleanup is registered with t.Cleanup by newProcess.
func (p *Process) cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.killLocked(); err != nil {
		p.t.Errorf("redlocktest: cleanup: %v", err)
	}
}

// killLocked sends SIGKILL to the running process, if any, and reaps it. SIGKILL also
// ends a process stopped by SIGSTOP, so no SIGCONT is sent first: continuing it would
// let it execute commands queued while it was paused before it dies.
func (p *Process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	cmd := p.cmd
	p.cmd = nil
	p.paused = false
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		// The process cannot be signalled; do not block on Wait forever.
		return fmt.Errorf("killing %s (pid %d) on %s: %v", filepath.Base(p.bin), cmd.Process.Pid, loopback(p.port), err)
	}
	// The process was killed (or had already exited), so Wait only reports how it
	// died; that is expected and not an error.
	_ = cmd.Wait()
	return nil
}

// launchLocked starts the process on p.port and waits until it is ready. On failure
// the process is killed and reaped, and the returned error includes the end of its log.
func (p *Process) launchLocked() error {
	logPath := filepath.Join(p.dir, logFileName)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// The child inherits its own copy of the descriptor.
	defer logFile.Close()
	info, err := logFile.Stat()
	if err != nil {
		return err
	}
	logStart := info.Size()

	cmd := exec.Command(p.bin, p.argv(logPath)...)
	cmd.Dir = p.dir
	// Output written before the server opens its log file (configuration errors, a
	// preloaded library's complaints) goes to the same file. An *os.File means
	// os/exec starts no goroutines to copy the output.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if p.clock != nil {
		env, err := faketimeEnv(p.clockFile())
		if err != nil {
			return err
		}
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd = cmd

	pid := cmd.Process.Pid
	if err := waitReady(loopback(p.port), pid, func() bool { return processExited(pid) }); err != nil {
		_ = p.killLocked()
		tail := logTail(logPath, logStart)
		return &startError{err: err, port: p.port, logName: logPath, logTail: tail + faketimeHint(tail)}
	}
	return nil
}

// argv returns the command line, without the program name.
func (p *Process) argv(logPath string) []string {
	var args []string
	if p.conf != "" {
		args = append(args, p.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(p.port),
		"--bind", "127.0.0.1",
		"--dir", p.dir,
		"--daemonize", "no",
		"--logfile", logPath,
		"--protected-mode", "no",
	)
	if p.conf == "" { // persistence and cluster settings do not apply to a sentinel
		args = append(args, "--save", "")
		args = append(args, p.persistence.args()...)
		if p.cluster {
			args = append(args,
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(p.busPort),
				"--cluster-node-timeout", "2000",
			)
		}
	}
	return append(args, p.args...)
}

// lookupBinary returns the path of the named Redis binary, or skips or fails the test
// when it is not installed.
func lookupBinary(t testing.TB, name string) string {
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
	record(p.t, Event{Kind: kind, Node: loopback(p.port), Binary: filepath.Base(p.bin), Detail: detail})
}
