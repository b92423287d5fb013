package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// The tests in this file check that no command run by redlock exec outlives its lock,
// with real processes and real signals: redlock killed or stopped, a closed stderr,
// job control, and processes that the command leaves behind or that leave its group.

// runContainChild runs the helper modes of these tests (see runChild):
//
//	tree FILE      note "pid PID" in FILE; start three more processes that note theirs: one
//	               in the process group, one in a new session (setsid), one whose parent
//	               exits at once (an orphan); ignore SIGTERM; sleep until killed
//	pidsleep FILE  note "pid PID" in FILE, ignore SIGTERM, sleep until killed
//	orphaner FILE  start a pidsleep and exit
//	termnote FILE  note "pid PID" in FILE; on SIGTERM note "term PID" and exit 0
//	stopself       print "until REDLOCK_UNTIL_MS", stop itself with SIGTTIN (as a
//	               background read of the terminal does), print "continued" and exit 0
func runContainChild(mode string, args []string) (int, bool) {
	switch mode {
	case "tree", "pidsleep":
		if err := notePID(args[0]); err != nil {
			return 90, true
		}
		if mode == "tree" {
			for _, c := range []struct {
				mode   string
				setsid bool
			}{{"pidsleep", false}, {"pidsleep", true}, {"orphaner", false}} {
				if _, err := spawn(c.mode, args[0], c.setsid); err != nil {
					return 91, true
				}
			}
		}
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "orphaner":
		if _, err := spawn("pidsleep", args[0], false); err != nil {
			return 91, true
		}
		return 0, true
	case "termnote":
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		if err := notePID(args[0]); err != nil {
			return 90, true
		}
		<-terms
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return 90, true
		}
		defer f.Close()
		fmt.Fprintf(f, "term %d\n", os.Getpid())
		return 0, true
	case "stopself":
		fmt.Printf("until %s\n", os.Getenv("REDLOCK_UNTIL_MS"))
		_ = syscall.Kill(os.Getpid(), syscall.SIGTTIN)
		fmt.Println("continued")
		return 0, true
	}
	return 0, false
}

// notePID appends "pid PID" to file.
func notePID(file string) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "pid %d\n", os.Getpid())
	return err
}

// spawn starts the helper in mode with file, in a new session if setsid, and does not
// wait for it.
func spawn(mode, file string, setsid bool) (int, error) {
	c := exec.Command(os.Args[0], file)
	c.Env = append(os.Environ(), childEnv+"="+mode)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := c.Start(); err != nil {
		return 0, err
	}
	return c.Process.Pid, c.Process.Release()
}

// notedPIDs waits until file names n PIDs and returns them.
func notedPIDs(t *testing.T, file string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(file)
		var pids []int
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "pid" {
				p, _ := strconv.Atoi(f[1])
				pids = append(pids, p)
			}
		}
		if len(pids) >= n {
			t.Cleanup(func() { // nothing is left running, whatever the test saw
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			})
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes noted, want %d:\n%s", len(pids), n, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// allDeadBy polls until none of pids runs, and returns when that was seen, or false if
// some still ran at limit.
func allDeadBy(pids []int, limit time.Time) (time.Time, []int) {
	for {
		var alive []int
		for _, p := range pids {
			if processRunning(p) {
				alive = append(alive, p)
			}
		}
		now := time.Now()
		if len(alive) == 0 || now.After(limit) {
			return now, alive
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// launched is a redlock exec started in the background with its output collected.
type launched struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

// launch starts the binary with args; the test's cleanup kills it if still running.
func launch(t *testing.T, c *cli, mode string, args ...string) *launched {
	t.Helper()
	l := &launched{cmd: c.command(mode, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	l.cmd.Stdout, l.cmd.Stderr = l.stdout, l.stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = l.cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill()
		_ = syscall.Kill(l.cmd.Process.Pid, syscall.SIGCONT)
		<-l.done
	})
	return l
}

// exit waits at most limit for redlock's exit code.
func (l *launched) exit(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-l.done:
		return l.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("redlock exec did not end within %v; stderr:\n%s", limit, l.stderr)
		return 0
	}
}

// processState returns a process's state letter from /proc ("" when gone).
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// waitState polls until every pid is in state want ("T" stopped), or limit passes.
func waitState(pids []int, want string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for _, p := range pids {
			if processState(p) != want {
				ok = false
			}
		}
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// treeScript runs the tree helper under a shell that notes its own PID and
// REDLOCK_UNTIL_MS first, and has more to do after it: five PIDs in all.
func treeScript(file string) []string {
	return []string{"--", "sh", "-c", `echo "pid $$" >> "$1"; echo "until $REDLOCK_UNTIL_MS" >> "$1"; "$0" "$1"; echo after`, os.Args[0], file}
}

// untilNoted returns the REDLOCK_UNTIL_MS the shell of treeScript noted.
func untilNoted(t *testing.T, file string) time.Time {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "until" {
			ms, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return time.UnixMilli(ms)
		}
	}
	t.Fatalf("no REDLOCK_UNTIL_MS noted:\n%s", data)
	return time.Time{}
}

// TestExecKilledTakesEverything: redlock SIGKILLed while its command runs. Everything
// the command started, in its process group or not (a shell's command, a grandchild, a
// setsid process, an orphan), must be gone before REDLOCK_UNTIL_MS, the validity's end
// when the command started: after that a second holder may run.
func TestExecKilledTakesEverything(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "killed", "--ttl", "3s"}, treeScript(file)...)...)
	pids := notedPIDs(t, file, 5)
	until := untilNoted(t, file)

	killed := time.Now()
	if err := l.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	seen, alive := allDeadBy(pids, until)
	if len(alive) > 0 {
		t.Fatalf("processes %v of the command (all: %v) still ran when its validity ended, %v after redlock was killed",
			alive, pids, until.Sub(killed).Round(time.Millisecond))
	}
	t.Logf("all %d processes gone %v after redlock was killed, %v before the validity ended",
		len(pids), seen.Sub(killed).Round(time.Millisecond), until.Sub(seen).Round(time.Millisecond))
}

// TestExecStoppedKillsAtLease: redlock SIGSTOPped (it cannot catch that) no longer renews
// the lock; the reaper must kill everything the command started before the validity of
// the last renewal ends: at the latest the stop plus the TTL less the drift. When
// redlock is continued it reports the loss (122).
func TestExecStoppedKillsAtLease(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	const ttl = 2 * time.Second
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "stopped", "--ttl", ttl.String()}, treeScript(file)...)...)
	pids := notedPIDs(t, file, 5)

	stopped := time.Now()
	if err := l.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A renewal in flight at the stop started before it: no validity ends later.
	validityEnd := stopped.Add(ttl - driftOf(ttl, redlock.DefaultDriftFactor))
	seen, alive := allDeadBy(pids, validityEnd)
	if len(alive) > 0 {
		t.Fatalf("processes %v of the command (all: %v) still ran %v after redlock was stopped, when its validity had ended",
			alive, pids, validityEnd.Sub(stopped).Round(time.Millisecond))
	}
	t.Logf("all %d processes gone %v after redlock was stopped, %v before the validity could end",
		len(pids), seen.Sub(stopped).Round(time.Millisecond), validityEnd.Sub(seen).Round(time.Millisecond))

	if err := l.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := l.exit(t, 10*time.Second); code != exitLost {
		t.Errorf("exit %d after SIGCONT, want %d (lock lost); stderr:\n%s", code, exitLost, l.stderr)
	}
}

// TestExecClosedStderr: with stderr a pipe nobody reads, losing the lock must still
// send SIGTERM and SIGKILL to the command's group (redlock used to log first and die of
// SIGPIPE), and redlock exits with 122.
func TestExecClosedStderr(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "ticks")
	c := newCLI(t)
	cmd := c.command("ticker", append([]string{"exec", "--nodes", urls, "--key", "closed", "--ttl", "1s", "--grace", "30ms"}, helper(file)...)...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd.Stderr = w
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("the command never said ready")
	}
	servers[0].Pause()
	servers[1].Pause()
	t.Cleanup(func() { servers[0].Resume(); servers[1].Resume() })
	for lines.Scan() {
	}
	_ = cmd.Wait()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != exitLost {
		t.Errorf("redlock ended with %v, want exit %d (lock lost)", cmd.ProcessState, exitLost)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "term ") {
		t.Errorf("the command never got SIGTERM")
	}
	var grandchild int
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "grandchild" {
			grandchild, _ = strconv.Atoi(f[1])
		}
	}
	if grandchild == 0 {
		t.Fatal("no grandchild noted")
	}
	if _, alive := allDeadBy([]int{grandchild}, time.Now().Add(time.Second)); len(alive) > 0 {
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
		t.Errorf("the grandchild %d still runs after redlock ended", grandchild)
	}
}

// TestExecLeftovers: the command (a shell) starts a job in the background and exits at
// once. By default redlock holds the lock until that job ends; with --leftovers kill
// it terminates the job; either way the job is gone before the lock is released.
func TestExecLeftovers(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c := newCLI(t)
	// The shell exits at once; the job it started runs on for 500 ms.
	script := func(file string) []string {
		return []string{"--", "sh", "-c", `"$0" "$1" 500ms & exit 0`, os.Args[0], file}
	}
	t.Run("wait", func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "sections")
		cmd := c.command("critical", append([]string{"exec", "--nodes", urls, "--key", "left"}, script(file)...)...)
		// Output to a file, not a pipe: the test must see redlock's own exit, not wait
		// for the job that also holds the pipe.
		out, err := os.Create(filepath.Join(dir, "output"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		start := time.Now()
		err = cmd.Run()
		took := time.Since(start)
		data, _ := os.ReadFile(file)
		output, _ := os.ReadFile(out.Name())
		if err != nil || !strings.Contains(string(data), "end ") {
			t.Errorf("redlock ended (%v) after %v; the background job's record:\n%s\nwant exit 0 once the job has ended; output: %s",
				err, took.Round(time.Millisecond), data, output)
		}
	})
	t.Run("kill", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "sections")
		killScript := []string{"--", "sh", "-c", `"$0" "$1" 500ms & echo "$!" > "$1.pid"; exit 0`, os.Args[0], file}
		r := c.run("critical", append([]string{"exec", "--nodes", urls, "--key", "left", "--leftovers", "kill", "--grace", "100ms"}, killScript...)...)
		data, _ := os.ReadFile(file)
		if r.code != 0 || strings.Contains(string(data), "end ") {
			t.Errorf("exit %d; the background job's record:\n%s\nwant exit 0 and no end; stderr: %s", r.code, data, r.stderr)
		}
		pidText, err := os.ReadFile(file + ".pid")
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
		if pid == 0 || processRunning(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the background job %d still runs after redlock exited", pid)
		}
		if vals := keyOn(t, servers, "left"); countHeld(vals) != 0 {
			t.Errorf("the lock was not released: %q", vals)
		}
	})
}

// commandPIDs returns the PIDs under redlock's reaper: the command and its descendants.
func commandPIDs(t *testing.T, redlockPID int) []int {
	t.Helper()
	all := descendants(redlockPID)
	var out []int
	for _, p := range all {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if !strings.Contains(string(cmdline), reaperArg) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no command under redlock %d (descendants %v)", redlockPID, all)
	}
	return out
}

// TestExecJobControl: SIGTSTP to redlock (Ctrl-Z when redlock has the terminal) stops
// the command's group before redlock stops; SIGCONT to redlock continues both.
func TestExecJobControl(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	s := newCLI(t).start("signals", append([]string{"exec", "--nodes", urls, "--key", "jobs", "--ttl", "5s"}, helper()...)...)
	pid := s.cmd.Process.Pid
	command := commandPIDs(t, pid)
	if err := s.cmd.Process.Signal(syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	if !waitState([]int{pid}, "T", 5*time.Second) {
		t.Fatalf("redlock is not stopped after SIGTSTP (state %q)", processState(pid))
	}
	if !waitState(command, "T", time.Second) {
		t.Fatalf("redlock is stopped but its command %v runs on (state %q)", command, processState(command[0]))
	}
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !waitState(command, "S", 5*time.Second) {
		t.Fatalf("the command %v was not continued after SIGCONT to redlock (state %q)", command, processState(command[0]))
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, out := s.wait(t); code != 40+int(syscall.SIGTERM) {
		t.Errorf("exit %d (output %q), want the command's %d", code, out, 40+int(syscall.SIGTERM))
	}
	if strings.Contains(s.stderr.String(), "stopped by") {
		t.Errorf("redlock reported its own stop of the command as someone else's:\n%s", s.stderr)
	}
}

// TestExecCommandStopped: a command stopped by job control (SIGTTIN: it read the
// terminal from the background) keeps the lock, renewed past its first validity, and
// redlock says so on stderr; SIGCONT to redlock continues it.
func TestExecCommandStopped(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	l := launch(t, newCLI(t), "stopself", append([]string{"exec", "--nodes", urls, "--key", "ttin", "--ttl", "2s"}, helper()...)...)
	if !l.stderr.waitFor("stopped by", 10*time.Second) {
		t.Fatalf("redlock did not report the stopped command; stderr:\n%s\nstdout:\n%s", l.stderr, l.stdout)
	}
	var ms int64
	for _, line := range strings.Split(l.stdout.String(), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "until" {
			ms, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if ms == 0 {
		t.Fatalf("no REDLOCK_UNTIL_MS printed: %q", l.stdout)
	}
	// Past the first validity, the lock is still held: it was renewed meanwhile.
	time.Sleep(time.Until(time.UnixMilli(ms).Add(200 * time.Millisecond)))
	if vals := keyOn(t, servers, "ttin"); countHeld(vals) < 2 {
		t.Fatalf("the lock of a stopped command was not kept: %q", vals)
	}
	if err := l.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := l.exit(t, 5*time.Second); code != 0 || !strings.Contains(l.stdout.String(), "continued") {
		t.Errorf("exit %d, stdout %q: want the command continued and exit 0; stderr:\n%s", code, l.stdout, l.stderr)
	}
}

// TestExecSignalsReachOutsiders: SIGTERM sent to redlock reaches the command's process
// group and also a descendant that left it (setsid), through the reaper; otherwise that
// one would run on, and redlock (waiting for leftovers) with it.
func TestExecSignalsReachOutsiders(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	l := launch(t, newCLI(t), "termnote", "exec", "--nodes", urls, "--key", "outsiders", "--",
		"sh", "-c", `setsid "$0" "$1" & "$0" "$1"`, os.Args[0], file)
	pids := notedPIDs(t, file, 2)
	if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The shell, the command, dies of the SIGTERM: 128+15.
	if code := l.exit(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want the shell's %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), l.stderr)
	}
	data, _ := os.ReadFile(file)
	if n := strings.Count(string(data), "term "); n != len(pids) {
		t.Errorf("%d of the %d processes got SIGTERM:\n%s", n, len(pids), data)
	}
}

// TestExecLockLostTakesEverything: the lock lost (a majority of the nodes paused) while
// the command runs; every process it started, also those that left its group and
// ignore SIGTERM, is gone before the validity can have ended, and redlock exits 122.
func TestExecLockLostTakesEverything(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "pids")
	const ttl = 2 * time.Second
	l := launch(t, newCLI(t), "tree", append([]string{"exec", "--nodes", urls, "--key", "lostall", "--ttl", ttl.String()}, treeScript(file)...)...)
	pids := notedPIDs(t, file, 5)

	paused := time.Now()
	servers[0].Pause()
	servers[1].Pause()
	t.Cleanup(func() { servers[0].Resume(); servers[1].Resume() })
	validityEnd := paused.Add(ttl - driftOf(ttl, redlock.DefaultDriftFactor))
	seen, alive := allDeadBy(pids, validityEnd)
	if len(alive) > 0 {
		t.Fatalf("processes %v of the command (all: %v) still ran when the validity ended; stderr:\n%s", alive, pids, l.stderr)
	}
	t.Logf("all %d processes gone %v after the pause, %v before the validity could end",
		len(pids), seen.Sub(paused).Round(time.Millisecond), validityEnd.Sub(seen).Round(time.Millisecond))
	if code := l.exit(t, 10*time.Second); code != exitLost {
		t.Errorf("exit %d, want %d (lock lost); stderr:\n%s", code, exitLost, l.stderr)
	}
}
