package main

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The adversarial review of redlock exec's containment (issue #15): attacks on the
// reaper itself.

// reaperOf returns the PID of redlock's reaper.
func reaperOf(t *testing.T, redlockPID int) int {
	t.Helper()
	for _, p := range descendants(redlockPID) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if strings.Contains(string(cmdline), reaperArg) {
			return p
		}
	}
	t.Fatalf("no reaper under redlock %d", redlockPID)
	return 0
}

// TestReviewCReaperKilledLeavesNoWork: the reaper SIGKILLed (an OOM kill, an operator's
// kill -9) while the command runs a tree with processes outside its group (setsid, an
// orphan). redlock then releases the lock: by then nothing the command started may run,
// or a second holder runs beside it.
func TestReviewCReaperKilledLeavesNoWork(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "reaperkilled", "--ttl", "3s"}, treeScript(file)...)...)
	pids := notedPIDs(t, file, 5)
	reaper := reaperOf(t, l.cmd.Process.Pid)
	if err := syscall.Kill(reaper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code := l.exit(t, 10*time.Second)
	var alive []int
	for _, p := range pids {
		if processRunning(p) {
			alive = append(alive, p)
		}
	}
	held := countHeld(keyOn(t, servers, "reaperkilled"))
	if len(alive) > 0 && held == 0 {
		t.Fatalf("redlock exited %d and released the lock while processes %v of the command (all: %v) still ran; stderr:\n%s",
			code, alive, pids, l.stderr)
	}
	if len(alive) > 0 {
		t.Errorf("processes %v of the command still run after redlock exited %d; stderr:\n%s", alive, code, l.stderr)
	}
}

// TestReviewCReaperStoppedLockLost: the reaper SIGSTOPped (an operator debugging, a
// stray kill -STOP), then the lock lost (a majority of the nodes paused). redlock
// terminates the command's group, but what left the group only the reaper can reach:
// everything must still be gone before the validity can have ended, and redlock must
// end with 122 rather than wait for ever for a stopped reaper.
func TestReviewCReaperStoppedLockLost(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	const ttl = 2 * time.Second
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "reaperstoppedlost", "--ttl", ttl.String()}, treeScript(file)...)...)
	pids := notedPIDs(t, file, 5)
	reaper := reaperOf(t, l.cmd.Process.Pid)
	t.Cleanup(func() { _ = syscall.Kill(reaper, syscall.SIGKILL); _ = syscall.Kill(reaper, syscall.SIGCONT) })
	if err := syscall.Kill(reaper, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !waitState([]int{reaper}, "T", 5*time.Second) {
		t.Fatalf("the reaper %d did not stop", reaper)
	}
	paused := time.Now()
	servers[0].Pause()
	servers[1].Pause()
	t.Cleanup(func() { servers[0].Resume(); servers[1].Resume() })
	validityEnd := paused.Add(ttl - driftOf(ttl, redlock.DefaultDriftFactor))
	if _, alive := allDeadBy(pids, validityEnd); len(alive) > 0 {
		t.Fatalf("processes %v of the command (all: %v) still ran when the validity ended, the reaper stopped; stderr:\n%s",
			alive, pids, l.stderr)
	}
	if code := l.exit(t, 10*time.Second); code != exitLost {
		t.Errorf("exit %d, want %d (lock lost); stderr:\n%s", code, exitLost, l.stderr)
	}
}

// TestReviewCBlockedStderr: redlock's stderr is a pipe that its reader does not drain
// (a parent that reads stdout only), and the command fills it, then is stopped by job
// control (SIGTTIN). A stopped command keeps the lock (docs/cli.md); but redlock's
// message about the stop blocked its loop, the reaper's lease was no longer renewed,
// and the reaper killed the command while the lock was valid and still renewed.
func TestReviewCBlockedStderr(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	const ttl = time.Second
	c := newCLI(t)
	cmd := c.command("", "exec", "--nodes", urls, "--key", "blockederr", "--ttl", ttl.String(), "--",
		"sh", "-c", `head -c 65536 /dev/zero >&2; kill -TTIN $$; echo continued`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stderr = w
	out := &syncBuffer{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		go func() { _, _ = io.Copy(io.Discard, r) }()
		<-done
	})
	// Long past the first validity: a stopped command still runs (state T).
	time.Sleep(3 * ttl)
	var shell []int
	for _, p := range descendants(cmd.Process.Pid) {
		if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline"); strings.HasPrefix(string(cmdline), "sh\x00") {
			shell = append(shell, p)
		}
	}
	if len(shell) == 0 || processState(shell[0]) != "T" {
		t.Errorf("the stopped command is gone %v after it stopped, while the lock was renewed (stderr blocked)", 3*ttl)
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("redlock did not end after SIGCONT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(out.String(), "continued") {
		t.Errorf("exit %d, stdout %q: want the command continued and exit 0", code, out)
	}
}

// TestReviewCNestedReaperStopped: redlock exec run under another redlock exec (or any
// subreaper in the same session: an init such as tini in a container). The inner reaper
// is SIGSTOPped, then the inner redlock SIGKILLed. The inner reaper's parent is now the
// outer reaper, in the same session, so its group is not orphaned and the kernel does
// not continue it (SIGHUP, SIGCONT) as it would under init: it cannot see the lease
// pipe close, and the inner command runs on after the inner lock's validity.
func TestReviewCNestedReaperStopped(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	const ttl = 2 * time.Second
	inner := append([]string{binary, "exec", "--nodes", urls, "--key", "nestedinner", "--ttl", ttl.String()}, treeScript(file)...)
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "nestedouter", "--ttl", "5s", "--"}, inner...)...)
	pids := notedPIDs(t, file, 5)
	var innerRedlock, innerReaper int
	for _, p := range descendants(l.cmd.Process.Pid) {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if strings.Contains(string(cmdline), "nestedinner") && !strings.Contains(string(cmdline), reaperArg) {
			innerRedlock = p
		}
	}
	if innerRedlock == 0 {
		t.Fatal("no inner redlock found")
	}
	innerReaper = reaperOf(t, innerRedlock)
	t.Cleanup(func() { _ = syscall.Kill(innerReaper, syscall.SIGKILL); _ = syscall.Kill(innerReaper, syscall.SIGCONT) })
	if err := syscall.Kill(innerReaper, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !waitState([]int{innerReaper}, "T", 5*time.Second) {
		t.Fatalf("the inner reaper %d did not stop", innerReaper)
	}
	killed := time.Now()
	if err := syscall.Kill(innerRedlock, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	validityEnd := killed.Add(ttl - driftOf(ttl, redlock.DefaultDriftFactor))
	if _, alive := allDeadBy(pids, validityEnd); len(alive) > 0 {
		t.Fatalf("processes %v of the inner command (all: %v) still ran when the inner lock's validity ended (inner reaper stopped, inner redlock killed); inner reaper state %q",
			alive, pids, processState(innerReaper))
	}
}
