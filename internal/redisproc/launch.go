package redisproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// SkipEnv names the environment variable that opts out of integration tests: when it
// is "1", a test that needs a Redis binary skips if the binary is not on PATH.
const SkipEnv = "REDLOCK_SKIP_INTEGRATION"

// InstallHint says how to install the Redis binaries; errors about a missing binary end
// with it.
const InstallHint = "install it with `apt-get install -y redis-server redis-sentinel` " +
	"(Debian/Ubuntu, as root), or run `make test`, which installs it"

// FindBinary returns the path of the named Redis binary, or an error saying how to
// install it, which wraps exec.ErrNotFound when the binary is not on PATH.
func FindBinary(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found on PATH (%w); %s", name, err, InstallHint)
	}
	return path, nil
}

// Command is one run of a Redis binary on a loopback port.
type Command struct {
	Bin     string   // path of the binary
	Dir     string   // working directory
	Args    []string // the whole argument list, without the program name
	Env     []string // the environment; nil inherits this process's
	Port    int      // the port the arguments make it listen on, probed for readiness
	LogPath string   // the log file the arguments name; a failed start quotes its end

	// Hint, when not nil, is given the end of the log of a failed start and returns
	// text to add to it (for example, how to install a missing library).
	Hint func(logTail string) string
}

// Launch starts c and returns once the server on c.Port answers PING with PONG (not
// LOADING) under the started process's pid. Output written before the server opens its
// log file goes to the same file. The process gets SIGKILL from the kernel if this
// program dies first (on Linux). On failure the process is killed and reaped, and the
// error is a *StartError quoting the log written by this run.
func Launch(ctx context.Context, c Command) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(c.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child inherits its own copy of the descriptor.
	defer logFile.Close()
	info, err := logFile.Stat()
	if err != nil {
		return nil, err
	}
	logStart := info.Size()

	cmd := exec.Command(c.Bin, c.Args...)
	cmd.Dir = c.Dir
	// An *os.File means os/exec starts no goroutines to copy the output.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = SysProcAttr()
	cmd.Env = c.Env
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	if err := WaitReady(ctx, Loopback(c.Port), pid, func() bool { return Exited(pid) }); err != nil {
		_ = Kill(cmd, c.Port)
		tail := LogTail(c.LogPath, logStart)
		if c.Hint != nil {
			tail += c.Hint(tail)
		}
		return nil, &StartError{Err: err, Port: c.Port, LogName: c.LogPath, LogTail: tail}
	}
	return cmd, nil
}

// Kill sends SIGKILL to the process of cmd, which listens on port, and reaps it.
// SIGKILL also ends a process stopped by SIGSTOP, so no SIGCONT is sent first:
// continuing it would let it execute commands queued while it was paused before it dies.
func Kill(cmd *exec.Cmd, port int) error {
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		// The process cannot be signalled; do not block on Wait forever.
		return fmt.Errorf("killing %s (pid %d) on %s: %v", filepath.Base(cmd.Path), cmd.Process.Pid, Loopback(port), err)
	}
	// The process was killed (or had already exited), so Wait only reports how it
	// died; that is expected and not an error.
	_ = cmd.Wait()
	return nil
}

// ListenArgs returns the arguments that make a Redis binary listen on 127.0.0.1:port in
// the foreground, with dir as its working directory and its log in logPath.
func ListenArgs(port int, dir, logPath string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", logPath,
		"--protected-mode", "no",
	}
}

// ServerArgs returns ListenArgs for redis-server with no RDB snapshots, and the
// append-only file (fsynced before each reply) only when aof is true.
func ServerArgs(port int, dir, logPath string, aof bool) []string {
	args := append(ListenArgs(port, dir, logPath), "--save", "")
	if aof {
		return append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, "--appendonly", "no")
}

// ClusterArgs returns the arguments that enable cluster mode with its bus on busPort.
func ClusterArgs(busPort int) []string {
	return []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(busPort),
		"--cluster-node-timeout", "2000",
	}
}
