// Package redistest starts real redis-server processes on loopback for the tests of the
// root module (the library's own tests) and of the packages beside it, with the faults
// those tests need: kill, pause, resume, restart, and a small Cluster. It is built on
// internal/redisproc, like the fault kit redlocktest, but imports nothing of the kit, so
// the library's tests do not pull Docker or Toxiproxy into the library's module graph.
//
// Start and its helpers belong to a test: they fail it when they cannot do their job
// and stop every process by its PID when it ends. StartServer is the core for code
// without a test (runnable examples): it returns its errors, and the caller calls Close.
package redistest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisproc"
)

// SkipEnv names the environment variable that opts out of integration tests: when it
// is "1", Start skips the test (t.Skip) if redis-server is not on PATH.
const SkipEnv = redisproc.SkipEnv

// SkipExamplesWithoutServer, called by a TestMain before m.Run, makes the run skip the
// package's examples when redis-server is not on PATH and SkipEnv is "1": an example
// that starts servers (StartServer) cannot skip itself, and its failure would fail the
// whole package. It parses the command line and adds "^Example" to -test.skip.
func SkipExamplesWithoutServer() {
	if os.Getenv(SkipEnv) != "1" {
		return
	}
	if _, err := redisproc.FindBinary("redis-server"); err == nil {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.skip")
	if f == nil {
		return
	}
	skip := "^Example"
	if old := f.Value.String(); old != "" {
		skip = old + "|" + skip
	}
	if err := f.Value.Set(skip); err == nil {
		fmt.Fprintf(os.Stderr, "redistest: redis-server not on PATH and %s=1: the examples are skipped\n", SkipEnv)
	}
}

// Options configures the redis-server processes started by Start and StartN.
type Options struct {
	// Persistent enables the append-only file with "appendfsync always", so every
	// acknowledged write survives Kill followed by Restart. By default the server
	// runs without any persistence.
	Persistent bool

	// Args holds extra redis-server arguments, appended to the generated ones.
	Args []string

	// cluster enables cluster mode with the bus on a second free port (StartCluster).
	cluster bool
}

// Server is one redis-server child process on 127.0.0.1 with its own data directory.
type Server struct {
	t      testing.TB // the owning test; nil for StartServer
	bin    string
	dir    string
	ownDir bool // made by StartServer, removed by Close
	opts   Options

	mu      sync.Mutex
	port    int
	busPort int
	cmd     *exec.Cmd // nil while stopped
	paused  bool
	closed  bool // by Close: Restart refuses to start it again
}

// Start starts one redis-server on a free loopback port and returns once it answers
// PING. The server is killed and reaped when the test and its subtests complete.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := redisproc.FindBinary("redis-server")
	if err != nil {
		if os.Getenv(SkipEnv) == "1" {
			t.Skipf("redistest: %v; skipping because %s=1", err, SkipEnv)
		}
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), opts: opts}
	if err := s.launchFirst(context.Background()); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("redistest: cleanup: %v", err)
		}
	})
	return s
}

// StartN starts n redis-servers with the same options and returns them in start order.
func StartN(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = Start(t, opts)
	}
	return servers
}

// StartServer starts one redis-server without a test, in a new temporary directory, and
// returns once it answers PING. The caller stops it with Close.
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	bin, err := redisproc.FindBinary("redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, ownDir: true, opts: opts}
	if err := s.launchFirst(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return s, nil
}

// Close kills the server if it runs, reaps it, and removes the directory StartServer
// made. It may be called more than once; a closed server cannot be restarted.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	err := s.killLocked()
	if s.ownDir {
		err = errors.Join(err, os.RemoveAll(s.dir))
		s.ownDir = false
	}
	return err
}

// launchFirst picks free ports and launches the server, retrying with other ports when
// one was taken in the meantime.
func (s *Server) launchFirst(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return redisproc.RetryPorts(ctx, nil, "redis-server", func() error {
		var err error
		if s.port, err = redisproc.FreePort(); err != nil {
			return err
		}
		if s.opts.cluster {
			if s.busPort, err = redisproc.FreePort(); err != nil {
				return err
			}
		}
		return s.launchLocked(ctx)
	})
}

// launchLocked starts the server on s.port and waits until it is ready.
func (s *Server) launchLocked(ctx context.Context) error {
	log := filepath.Join(s.dir, "redis.log")
	args := redisproc.ServerArgs(s.port, s.dir, log, s.opts.Persistent)
	if s.opts.cluster {
		args = append(args, redisproc.ClusterArgs(s.busPort)...)
	}
	cmd, err := redisproc.Launch(ctx, redisproc.Command{
		Bin: s.bin, Dir: s.dir, Port: s.port, LogPath: log, Args: append(args, s.opts.Args...),
	})
	if err != nil {
		return err
	}
	s.cmd, s.paused = cmd, false
	return nil
}

// killLocked kills and reaps the running process, if any.
func (s *Server) killLocked() error {
	if s.cmd == nil {
		return nil
	}
	cmd := s.cmd
	s.cmd, s.paused = nil, false
	return redisproc.Kill(cmd, s.port)
}

// fail reports err to the owning test, or panics without one (a broken example).
func (s *Server) fail(err error) {
	if s.t == nil {
		panic(err)
	}
	s.t.Helper()
	s.t.Fatalf("redistest: %v", err)
}

// Addr returns "127.0.0.1:PORT". It stays the same across Kill and Restart.
func (s *Server) Addr() string { return redisproc.Loopback(s.Port()) }

// Port returns the TCP port the server listens on.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// PID returns the process ID, or 0 while the server is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Client returns a new go-redis client for Addr, closed when the test ends (without a
// test, by the caller).
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	if s.t != nil {
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}

// Kill stops the server with SIGKILL and waits until it has exited. Writes not yet in
// the append-only file are lost. It does nothing when the server is stopped.
func (s *Server) Kill() {
	s.mu.Lock()
	err := s.killLocked()
	s.mu.Unlock()
	if err != nil {
		s.fail(err)
	}
}

// Pause suspends the server with SIGSTOP: the kernel still accepts connections, but
// nothing is answered until Resume. Pausing a stopped server fails the test.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume continues a server suspended by Pause. It does nothing otherwise.
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

// signal sends sig to the running server and records whether it is now paused.
func (s *Server) signal(sig syscall.Signal, pause bool) {
	s.mu.Lock()
	var err error
	switch {
	case s.cmd == nil && pause:
		err = fmt.Errorf("%v on %s: the server is not running", sig, redisproc.Loopback(s.port))
	case s.cmd == nil || s.paused == pause:
	default:
		if err = s.cmd.Process.Signal(sig); err == nil {
			s.paused = pause
		}
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(err)
	}
}

// Restart kills the server if it runs and starts it again on the same port and data
// directory with the options it was started with: with Options.Persistent, the data
// written before the kill is loaded again; without, it comes back empty. Restarting a
// closed server fails.
func (s *Server) Restart() { s.RestartAfter(0) }

// RestartAfter is Restart with the port kept closed for down in between.
func (s *Server) RestartAfter(down time.Duration) {
	s.Kill()
	time.Sleep(down)
	s.mu.Lock()
	err := errors.New("the server was closed")
	if !s.closed {
		err = s.launchLocked(context.Background())
	}
	s.mu.Unlock()
	if err != nil {
		s.fail(fmt.Errorf("restarting: %w", err))
	}
}

// Addrs returns the address of each server, in the same order.
func Addrs(servers []*Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Clients returns a new client for each server, in the same order.
func Clients(servers []*Server) []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client()
	}
	return clients
}

// Cluster is a Redis Cluster of masters without replicas, whose ClusterClient can be
// one member of a redlock quorum.
type Cluster struct {
	// Masters are the cluster's nodes in slot order: Masters[0] serves slot 0.
	Masters []*Server
	t       testing.TB
}

// StartCluster starts n cluster-enabled servers, splits the slots between them and
// returns once the cluster is ready. Everything is stopped when the test ends.
func StartCluster(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	opts.cluster = true
	c := &Cluster{Masters: StartN(t, n, opts), t: t}
	members := make([]redisproc.ClusterMember, n)
	for i, m := range c.Masters {
		members[i] = redisproc.ClusterMember{Client: m.Client(), Port: m.Port(), BusPort: m.busPort}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := redisproc.FormCluster(ctx, members); err != nil {
		t.Fatalf("redistest: StartCluster: %v", err)
	}
	return c
}

// ClusterClient returns a go-redis cluster client seeded with every master, closed when
// the test ends.
func (c *Cluster) ClusterClient() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: Addrs(c.Masters)})
	c.t.Cleanup(func() { _ = cc.Close() })
	return cc
}
