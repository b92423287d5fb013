package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redlock-go/redlock/internal/redistest"
)

// openPTY returns a new pseudo-terminal's master and slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestExecTerminal: run from a terminal, the command (in its own process group) is made
// the terminal's foreground group, so it can read from the terminal instead of being
// stopped by SIGTTIN, and Ctrl-C reaches it; redlock takes the terminal back after.
func TestExecTerminal(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	for _, tc := range []struct {
		mode, input, want string
		code              int
	}{
		{"readline", "hello\n", "read hello", 0},
		{"signals", "\x03", "got interrupt", 40 + int(syscall.SIGINT)},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			master, slave := openPTY(t)
			defer master.Close()
			cmd := newCLI(t).command(tc.mode, append([]string{"exec", "--nodes", urls, "--key", "tty"}, helper()...)...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			// A new session whose controlling terminal is the pty: redlock is then in
			// the terminal's foreground group, as when started from a shell prompt.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			var out syncBuffer
			copied := make(chan struct{})
			go func() {
				_, _ = io.Copy(&out, master) // ends with EIO once every slave is closed
				close(copied)
			}()
			if !out.waitFor("ready", 10*time.Second) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the command never said ready:\n%s", out.String())
			}
			if _, err := master.WriteString(tc.input); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("redlock exec did not end (the command stopped by SIGTTIN?):\n%s", out.String())
			}
			<-copied
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Errorf("exit %d (want %d), want %q in:\n%s", code, tc.code, tc.want, out.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer written by one goroutine and polled by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls until the buffer contains s, or the limit passes.
func (b *syncBuffer) waitFor(s string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
