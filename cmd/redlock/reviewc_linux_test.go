package main

import (
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
