package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redisproc"
)

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

func TestProcessesAreGoneAfterTest(t *testing.T) {
	var pids []int
	// Registered before Start, so it runs after the servers' cleanups.
	t.Cleanup(func() { assertGone(t, pids) })

	servers := StartN(t, 3, Options{})
	persistent := Start(t, Options{Persistence: AOFAlways})
	servers = append(servers, persistent)
	for _, s := range servers {
		pids = append(pids, s.PID())
	}

	servers[0].Restart(NoPersistence) // both the old and the new process must be gone
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
	var s *Process
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

	fake.run(func() { s.Restart(NoPersistence) })
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
		return redisproc.FreePort()
	}
	t.Cleanup(func() { pickPort = redisproc.FreePort })

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

// TestStartProcessNilContext: a nil context is refused before the data directory is
// made (it used to panic after, leaving the directory behind).
func TestStartProcessNilContext(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var nilCtx context.Context
	if p, err := StartProcess(nilCtx, Options{}); err == nil || !strings.Contains(err.Error(), "nil context") {
		t.Errorf("StartProcess(nil ctx) = %v, %v; want a nil context error", p, err)
	}
	if left, _ := os.ReadDir(os.TempDir()); len(left) > 0 {
		t.Errorf("StartProcess(nil ctx) left %d entries in TMPDIR, the first %s", len(left), left[0].Name())
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
