package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// assertGone fails the test unless every pid names no process at all, not
// even a zombie waiting to be reaped.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after the test (kill(pid, 0) = %v)", pid, err)
		}
	}
}

func TestStartN(t *testing.T) {
	servers := StartN(t, 3, Options{})
	if len(servers) != 3 {
		t.Fatalf("StartN returned %d servers, want 3", len(servers))
	}

	addrs := Addrs(servers)
	seen := map[string]bool{}
	for i, s := range servers {
		want := fmt.Sprintf("127.0.0.1:%d", s.Port())
		if s.Addr() != want || addrs[i] != want {
			t.Errorf("server %d: Addr() = %q, Addrs()[%d] = %q, want %q", i, s.Addr(), i, addrs[i], want)
		}
		if seen[want] {
			t.Errorf("server %d: address %s used twice", i, want)
		}
		seen[want] = true
		if s.PID() <= 0 {
			t.Errorf("server %d: PID() = %d, want > 0", i, s.PID())
		}
	}

	ctx := ctxTimeout(t, 5*time.Second)
	for i, s := range servers {
		if got, err := s.Client().Ping(ctx).Result(); err != nil || got != "PONG" {
			t.Errorf("server %d: Client().Ping = %q, %v; want PONG", i, got, err)
		}
	}

	clients := Clients(servers)
	if len(clients) != len(servers) {
		t.Fatalf("Clients returned %d clients, want %d", len(clients), len(servers))
	}
	for i, c := range clients {
		// Tag each server through its own client and read the tag back
		// through the server's address to check the order.
		if err := c.Set(ctx, "id", i, 0).Err(); err != nil {
			t.Fatalf("client %d: SET: %v", i, err)
		}
	}
	for i, s := range servers {
		if got, err := s.Client().Get(ctx, "id").Int(); err != nil || got != i {
			t.Errorf("server %d: GET id = %d, %v; want %d", i, got, err, i)
		}
	}
}

func TestKill(t *testing.T) {
	s := Start(t, Options{})
	c := s.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before Kill: %v", err)
	}

	s.Kill()
	if pid := s.PID(); pid != 0 {
		t.Errorf("PID() after Kill = %d, want 0", pid)
	}
	// A short deadline stops go-redis from retrying the dial for long.
	if err := c.Ping(ctxTimeout(t, 100*time.Millisecond)).Err(); err == nil {
		t.Error("PING after Kill succeeded, want an error")
	}

	// Repeated and out-of-order calls are no-ops.
	s.Kill()
	s.Resume()

	// Restart works on a killed server and the old client reconnects.
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Restart: %v", err)
	}
}

func TestRestartWithoutPersistenceLosesData(t *testing.T) {
	s := Start(t, Options{})
	c := s.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	port, pid := s.Port(), s.PID()

	s.Restart()

	if s.Port() != port {
		t.Errorf("Port() after Restart = %d, want %d", s.Port(), port)
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Errorf("PID() after Restart = %d, want a new non-zero PID (old %d)", s.PID(), pid)
	}
	if got, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after Restart = %q, %v; want redis.Nil", got, err)
	}
}

func TestRestartWithPersistenceKeepsData(t *testing.T) {
	s := Start(t, Options{Persistent: true})
	c := s.Client()
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Restart()

	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k after Restart = %q, %v; want \"v\"", got, err)
	}
}

func TestArgs(t *testing.T) {
	s := Start(t, Options{Args: []string{"--maxmemory", "12345678"}})
	ctx := ctxTimeout(t, 5*time.Second)
	got, err := s.Client().ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Errorf("CONFIG GET maxmemory = %v, %v; want 12345678", got, err)
	}
}

func TestPauseResume(t *testing.T) {
	s := Start(t, Options{})
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })

	s.Pause()
	s.Pause() // no-op

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	start := time.Now()
	err := c.Ping(ctx).Err()
	elapsed := time.Since(start)
	cancel()
	var netErr net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
		t.Errorf("PING while paused = %v, want a timeout", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("PING while paused took %v, want about 100ms", elapsed)
	}

	s.Resume()
	s.Resume() // no-op

	if err := c.Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}
}

func TestProcessesAreGoneAfterTest(t *testing.T) {
	var pids []int
	// Registered before Start, so it runs after the servers' cleanups.
	t.Cleanup(func() { assertGone(t, pids) })

	servers := StartN(t, 3, Options{})
	persistent := Start(t, Options{Persistent: true})
	servers = append(servers, persistent)
	for _, s := range servers {
		pids = append(pids, s.PID())
	}

	servers[0].Restart() // both the old and the new process must be gone
	pids = append(pids, servers[0].PID())
	servers[1].Pause() // a paused server must be killed too
	servers[2].Kill()  // a killed server must not be killed again
	persistent.Pause()
}

// fakeTB stands in for a testing.TB so the tests can observe Fatalf and
// Skipf without failing or skipping the real test. Functions run through
// run execute on their own goroutine, which Fatalf and Skipf end.
type fakeTB struct {
	testing.TB // the real test, for Helper, Logf and TempDir

	fatal    string
	skip     string
	errs     []string
	cleanups []func()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Cleanup(fn func()) {
	f.cleanups = append(f.cleanups, fn)
}

// run calls fn on a new goroutine and waits for it to return or exit.
func (f *fakeTB) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.run(f.cleanups[i])
	}
	f.cleanups = nil
}

func TestRestartFailsWhenPortIsTaken(t *testing.T) {
	fake := &fakeTB{TB: t}
	var s *Server
	fake.run(func() { s = Start(fake, Options{}) })
	if s == nil {
		t.Fatalf("Start failed: %s", fake.fatal)
	}
	oldPID := s.PID()
	s.Kill()

	l, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("occupying %s: %v", s.Addr(), err)
	}
	defer l.Close()

	fake.run(s.Restart)
	t.Logf("Fatalf message:\n%s", fake.fatal)
	if !strings.Contains(fake.fatal, "Address already in use") {
		t.Errorf("Restart on a taken port: Fatalf message = %q, want it to contain the redis log line about the address in use", fake.fatal)
	}
	if pid := s.PID(); pid != 0 {
		t.Errorf("PID() after failed Restart = %d, want 0", pid)
	}
	fake.runCleanups()
	if len(fake.errs) > 0 {
		t.Errorf("cleanup reported errors: %q", fake.errs)
	}
	assertGone(t, []int{oldPID})
}

func TestStartRetriesWhenPortIsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	// Hand out the taken port first, then free ones.
	calls := 0
	pickPort = func() (int, error) {
		calls++
		if calls == 1 {
			return taken, nil
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })

	s := Start(t, Options{})
	if calls != 2 {
		t.Errorf("Start picked a port %d times, want 2", calls)
	}
	if s.Port() == taken {
		t.Errorf("Start used the taken port %d", taken)
	}
	if err := s.Client().Ping(ctxTimeout(t, 5*time.Second)).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
}

func TestStartFailsWithBadArgs(t *testing.T) {
	fake := &fakeTB{TB: t}
	start := time.Now()
	fake.run(func() { Start(fake, Options{Args: []string{"--no-such-directive", "1"}}) })
	t.Logf("Fatalf message:\n%s", fake.fatal)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("failing Start took %v; want it to notice the exit quickly", elapsed)
	}
	if !strings.Contains(fake.fatal, "no-such-directive") {
		t.Errorf("Fatalf message = %q, want it to include the log lines naming the bad directive", fake.fatal)
	}
	fake.runCleanups()
	if len(fake.errs) > 0 {
		t.Errorf("cleanup reported errors: %q", fake.errs)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Run("fails", func(t *testing.T) {
		t.Setenv(SkipEnv, "")
		fake := &fakeTB{TB: t}
		fake.run(func() { Start(fake, Options{}) })
		t.Logf("Fatalf message:\n%s", fake.fatal)
		for _, want := range []string{"apt-get install -y redis-server", "make test", SkipEnv + "=1"} {
			if !strings.Contains(fake.fatal, want) {
				t.Errorf("Fatalf message = %q, want it to mention %q", fake.fatal, want)
			}
		}
		if fake.skip != "" {
			t.Errorf("Start skipped with %q, want a failure", fake.skip)
		}
	})

	t.Run("skips", func(t *testing.T) {
		t.Setenv(SkipEnv, "1")
		fake := &fakeTB{TB: t}
		fake.run(func() { Start(fake, Options{}) })
		t.Logf("Skipf message: %s", fake.skip)
		if !strings.Contains(fake.skip, SkipEnv) {
			t.Errorf("Skipf message = %q, want it to name %s", fake.skip, SkipEnv)
		}
		if fake.fatal != "" {
			t.Errorf("Start failed with %q, want a skip", fake.fatal)
		}
	})
}
