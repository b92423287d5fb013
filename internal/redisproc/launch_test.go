package redisproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// serverBinary returns the path of redis-server, or skips t when it is not on PATH and
// SkipEnv is "1" (fails it otherwise).
func serverBinary(t *testing.T) string {
	t.Helper()
	bin, err := FindBinary("redis-server")
	if err != nil {
		if os.Getenv(SkipEnv) == "1" {
			t.Skipf("%v; skipping because %s=1", err, SkipEnv)
		}
		t.Fatal(err)
	}
	return bin
}

// launchServer starts a redis-server for t with Launch and kills it when t ends.
func launchServer(t *testing.T) (addr string, pid int) {
	t.Helper()
	bin := serverBinary(t)
	dir := t.TempDir()
	var cmd *exec.Cmd
	err := RetryPorts(context.Background(), t.Logf, "redis-server", func() error {
		port, err := FreePort()
		if err != nil {
			return err
		}
		log := filepath.Join(dir, "redis.log")
		cmd, err = Launch(context.Background(), Command{Bin: bin, Dir: dir, Port: port, LogPath: log,
			Args: ServerArgs(port, dir, log, false)})
		addr = Loopback(port)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Kill(cmd, 0); err != nil {
			t.Error(err)
		}
	})
	return addr, cmd.Process.Pid
}

// TestLaunchAndKill: Launch returns a server that answers under its pid, and Kill leaves
// no process behind, not even a zombie.
func TestLaunchAndKill(t *testing.T) {
	var pid int
	t.Run("server", func(t *testing.T) {
		var addr string
		addr, pid = launchServer(t)
		if err := Probe(addr, pid); err != nil {
			t.Fatal(err)
		}
	})
	if pid == 0 {
		return // the subtest failed or skipped before it started a server
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after Kill (kill(pid, 0) = %v)", pid, err)
	}
}

// TestLaunchFailureQuotesTheLog: a server that cannot start is reported as a
// *StartError with the end of its log, and the hint is appended.
func TestLaunchFailureQuotesTheLog(t *testing.T) {
	bin := serverBinary(t)
	dir := t.TempDir()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "redis.log")
	args := append(ServerArgs(port, dir, log, false), "--no-such-option", "1")
	_, err = Launch(context.Background(), Command{Bin: bin, Dir: dir, Port: port, LogPath: log, Args: args,
		Hint: func(string) string { return "\n(the hint)" }})
	var se *StartError
	if !errors.As(err, &se) || !errors.Is(err, ErrExited) {
		t.Fatalf("Launch with a bad option = %v, want a *StartError wrapping ErrExited", err)
	}
	if !strings.Contains(se.LogTail, "no-such-option") || !strings.HasSuffix(se.LogTail, "(the hint)") {
		t.Errorf("log tail = %q, want the server's complaint and the hint", se.LogTail)
	}
}

// TestFindBinaryMissing: a missing binary is reported with exec.ErrNotFound and how to
// install it.
func TestFindBinaryMissing(t *testing.T) {
	_, err := FindBinary("redis-server-that-does-not-exist")
	if !errors.Is(err, exec.ErrNotFound) || !strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("FindBinary = %v, want exec.ErrNotFound and the install hint", err)
	}
}
