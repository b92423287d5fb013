package redlocktest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// T must stay a part of testing.TB, so that every test's t is a T.
var _ T = testing.TB(nil)

// emptyTempDir points os.TempDir (which StartProcess uses) at a new directory of the
// test and returns it, so that the test can see what StartProcess leaves behind.
func emptyTempDir(t *testing.T) string {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	return dir
}

// assertEmptyDir fails the test unless dir has no entries.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("%s left behind in the temporary directory", e.Name())
	}
}

// TestStartProcessAndClose: the core API starts a real server that needs no test,
// reports faults as errors, and Close kills it by PID and removes its directory.
func TestStartProcessAndClose(t *testing.T) {
	tmp := emptyTempDir(t)
	ctx := ctxTimeout(t, 30*time.Second)
	p, err := StartProcess(ctx, Options{Persistence: AOFAlways})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	pids := []int{p.PID()}
	t.Cleanup(func() { assertGone(t, pids) })
	c := p.Client()
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	if err := p.RestartErr(AOFAlways); err != nil {
		t.Fatalf("RestartErr: %v", err)
	}
	pids = append(pids, p.PID())
	if got := c.Get(ctx, "k").Val(); got != "v" {
		t.Errorf("GET after a restart with aof-always = %q, want %q", got, "v")
	}
	if err := p.KillErr(); err != nil {
		t.Fatalf("KillErr: %v", err)
	}
	if err := p.PauseErr(); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("PauseErr on a killed process = %v, want an error saying it is not running", err)
	}
	if err := p.RestartAfterErr(0, NoPersistence); err != nil {
		t.Fatalf("RestartAfterErr: %v", err)
	}
	pids = append(pids, p.PID())
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET after a restart without persistence: %v, want redis.Nil", err)
	}

	dir := p.Dir()
	if !strings.HasPrefix(dir, tmp) {
		t.Errorf("Dir() = %s, want it under TMPDIR %s", dir, tmp)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	assertGone(t, pids)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s after Close: %v, want it removed", dir, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := p.RestartErr(NoPersistence); err == nil || p.PID() != 0 {
		t.Errorf("RestartErr after Close = %v with pid %d; want an error and no process", err, p.PID())
	}
}

// TestCoreMethodsKeepFailuresForClose: without a test to fail, Pause on a stopped
// process neither panics nor loses its error: Close returns it.
func TestCoreMethodsKeepFailuresForClose(t *testing.T) {
	emptyTempDir(t)
	p, err := StartProcess(ctxTimeout(t, 30*time.Second), Options{})
	if err != nil {
		t.Fatalf("StartProcess: %v", err)
	}
	pid := p.PID()
	p.Kill()
	p.Pause()
	err = p.Close()
	if err == nil || !strings.Contains(err.Error(), "Pause on") {
		t.Errorf("Close = %v, want the error of the earlier Pause", err)
	}
	assertGone(t, []int{pid})
}

// TestStartProcessErrors: bad arguments, a cancelled context and a missing binary
// come back as errors that say what went wrong, and leave no directory behind.
func TestStartProcessErrors(t *testing.T) {
	t.Run("bad args", func(t *testing.T) {
		tmp := emptyTempDir(t)
		p, err := StartProcess(ctxTimeout(t, 30*time.Second), Options{Args: []string{"--no-such-directive", "1"}})
		if p != nil || err == nil || !strings.Contains(err.Error(), "no-such-directive") {
			t.Errorf("StartProcess = %v, %v; want nil and an error with the log lines naming the directive", p, err)
		}
		assertEmptyDir(t, tmp)
	})
	t.Run("cancelled", func(t *testing.T) {
		tmp := emptyTempDir(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		p, err := StartProcess(ctx, Options{})
		if p != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("StartProcess with a cancelled context = %v, %v; want nil and context.Canceled", p, err)
		}
		assertEmptyDir(t, tmp)
	})
	t.Run("missing binary", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		p, err := StartProcess(context.Background(), Options{})
		if p != nil || !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "apt-get install") {
			t.Errorf("StartProcess without redis-server = %v, %v; want nil and an error wrapping exec.ErrNotFound that says how to install it", p, err)
		}
	})
}
