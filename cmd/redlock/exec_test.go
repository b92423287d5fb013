//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// hold takes key on the servers with the library, as another process would, and
// releases it when the test ends.
func hold(t *testing.T, servers []*redistest.Server, key string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	c, err := redlock.New(redistest.Clients(servers), redlock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	lock, err := c.TryAcquire(t.Context(), key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Release(context.Background()) })
	return lock
}

// keyOn returns the key's value on each server ("" when absent).
func keyOn(t *testing.T, servers []*redistest.Server, key string) []string {
	t.Helper()
	vals := make([]string, len(servers))
	for i, s := range servers {
		v, err := s.Client().Get(t.Context(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		vals[i] = v
	}
	return vals
}

// runs is how many commands each of the concurrent runners execs in TestExecNoOverlap;
// REDLOCK_CLI_RUNS raises it for a longer soak.
func runs(t *testing.T) int {
	if s := os.Getenv("REDLOCK_CLI_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("REDLOCK_CLI_RUNS=%q: want a positive number", s)
		}
		return n
	}
	return 15
}

// TestExecNoOverlap: several redlock exec processes at once on one key; each command
// appends "begin PID", works, appends "end PID" to one file. The file must show the
// critical sections one after another, never interleaved.
func TestExecNoOverlap(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "sections")
	c := newCLI(t)
	const runners = 3
	n := runs(t)
	var wg sync.WaitGroup
	errs := make(chan string, runners*n)
	for range runners {
		wg.Go(func() {
			for range n {
				args := append([]string{"exec", "--nodes", urls, "--key", "overlap", "--ttl", "2s", "--wait", "60s"}, helper(file, "15ms")...)
				if r := c.run("critical", args...); r.code != 0 {
					errs <- fmt.Sprintf("exit %d: %s", r.code, r.stderr)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2*runners*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*runners*n, data)
	}
	for i := 0; i < len(lines); i += 2 {
		b, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(b) != 2 || len(e) != 2 || b[0] != "begin" || e[0] != "end" || b[1] != e[1] {
			t.Fatalf("critical sections overlap at line %d:\n%s", i+1, data)
		}
	}
}

// TestExecLockLost: with a majority of the nodes paused, renewal fails; the command
// (which ignores SIGTERM, as does a grandchild in its process group) gets SIGTERM, then
// SIGKILL, and its last action comes before the lock's validity could have ended.
// redlock exits with the "lock lost" code.
func TestExecLockLost(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	file := filepath.Join(t.TempDir(), "ticks")
	const ttl = 2 * time.Second
	c := newCLI(t)
	s := c.start("ticker", append([]string{"exec", "--nodes", urls, "--key", "lost", "--ttl", ttl.String(), "--grace", "50ms"}, helper(file)...)...)

	// No renewal can succeed after paused: it needs a reply from a paused node. So the
	// validity ends by paused + ttl − drift at the latest.
	paused := time.Now()
	servers[0].Pause()
	servers[1].Pause()
	t.Cleanup(func() { servers[0].Resume(); servers[1].Resume() })
	validityEnd := paused.Add(ttl - driftOf(ttl, redlock.DefaultDriftFactor))

	code, _ := s.wait(t)
	if code != exitLost {
		t.Errorf("exit code %d, want %d (lock lost); stderr:\n%s", code, exitLost, s.stderr)
	}
	for _, want := range []string{"lock lost", "SIGTERM", "sent SIGKILL"} {
		if !strings.Contains(s.stderr.String(), want) {
			t.Errorf("stderr does not mention %q:\n%s", want, s.stderr)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var term, last time.Time
	ticksAfterTerm := 0
	grandchild := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "grandchild":
			grandchild = int(v)
		case "term":
			term = time.Unix(0, v)
		case "tick":
			last = time.Unix(0, v)
			if !term.IsZero() {
				ticksAfterTerm++
			}
		}
	}
	if term.IsZero() {
		t.Fatalf("the command never got SIGTERM:\n%s", data)
	}
	if ticksAfterTerm == 0 {
		t.Errorf("no tick after SIGTERM: the command should have run on until SIGKILL")
	}
	if !last.Before(validityEnd) {
		t.Errorf("the command's last tick came %v after the validity ended", last.Sub(validityEnd))
	}
	t.Logf("SIGTERM %v after the pause; last tick %v before the validity ended", term.Sub(paused).Round(time.Millisecond), validityEnd.Sub(last).Round(time.Millisecond))
	if grandchild == 0 || processRunning(grandchild) {
		t.Errorf("the grandchild %d in the command's process group is still running", grandchild)
	}
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// TestExecNotAcquired: while another client holds the lock, --wait gives up after its
// time and --nonblock at once, both with exit code 75 (or --conflict-exit-code), and the
// command never runs.
func TestExecNotAcquired(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	hold(t, servers, "busy", 30*time.Second)
	marker := filepath.Join(t.TempDir(), "ran")
	c := newCLI(t)
	cmd := []string{"--", "touch", marker}

	r := c.run("", append([]string{"exec", "--nodes", urls, "--key", "busy", "--wait", "400ms"}, cmd...)...)
	if r.code != exitNotAcquired || !strings.Contains(r.stderr, "not acquired within 400ms") {
		t.Errorf("--wait: exit %d, want %d; stderr: %s", r.code, exitNotAcquired, r.stderr)
	}
	if r.took < 400*time.Millisecond {
		t.Errorf("--wait 400ms gave up after %v", r.took)
	}

	r = c.run("", append([]string{"exec", "--nodes", urls, "--key", "busy", "--nonblock"}, cmd...)...)
	if r.code != exitNotAcquired || !strings.Contains(r.stderr, "held elsewhere") {
		t.Errorf("--nonblock: exit %d, want %d; stderr: %s", r.code, exitNotAcquired, r.stderr)
	}

	r = c.run("", append([]string{"exec", "--nodes", urls, "--key", "busy", "--nonblock", "--conflict-exit-code", "9"}, cmd...)...)
	if r.code != 9 {
		t.Errorf("--conflict-exit-code 9: exit %d; stderr: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without the lock")
	}

	// A signal while waiting ends the wait with 128+signal; the command never runs.
	waiting := c.command("", append([]string{"exec", "--verbose", "--nodes", urls, "--key", "busy"}, cmd...)...)
	stderr, err := waiting.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "waiting for") {
	}
	if err := waiting.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	_ = waiting.Wait()
	if code := waiting.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) || !strings.Contains(rest.String(), "while waiting for the lock") {
		t.Errorf("SIGINT while waiting: exit %d, want %d; stderr: %s", code, 128+int(syscall.SIGINT), rest.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without the lock")
	}

	r = c.run("", append([]string{"exec", "--nodes", urls, "--key", "free", "--nonblock"}, cmd...)...)
	if r.code != 0 {
		t.Errorf("--nonblock on a free key: exit %d; stderr: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the command did not run on a free key")
	}
}

// TestExecUnavailable: with a majority of the nodes down, exec fails with 69, both at
// once (--nonblock) and when --wait runs out.
func TestExecUnavailable(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	servers[0].Kill()
	servers[1].Kill()
	c := newCLI(t)
	r := c.run("", "exec", "--nodes", urls, "--key", "k", "--nonblock", "--", "true")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "too few nodes answered") {
		t.Errorf("--nonblock: exit %d, want %d; stderr: %s", r.code, exitUnavailable, r.stderr)
	}
	r = c.run("", "exec", "--nodes", urls, "--key", "k", "--wait", "300ms", "--", "true")
	if r.code != exitUnavailable {
		t.Errorf("--wait: exit %d, want %d; stderr: %s", r.code, exitUnavailable, r.stderr)
	}
}

// TestExecSignals: SIGTERM and SIGINT sent to redlock reach the command; redlock exits
// with the command's code and releases the lock.
func TestExecSignals(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c := newCLI(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			s := c.start("signals", append([]string{"exec", "--nodes", urls, "--key", "sig"}, helper()...)...)
			// A grant needs two of the three SETs; the third may still be on its way.
			if vals := keyOn(t, servers, "sig"); countHeld(vals) < 2 {
				t.Fatalf("the lock is not held on a majority while the command runs: %q", vals)
			}
			if err := s.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, out := s.wait(t)
			if want := 40 + int(sig); code != want {
				t.Errorf("exit code %d, want the command's %d; stderr: %s", code, want, s.stderr)
			}
			if want := "got " + sig.String(); !strings.Contains(out, want) {
				t.Errorf("the command printed %q, want %q", out, want)
			}
			if vals := keyOn(t, servers, "sig"); strings.Join(vals, "") != "" {
				t.Errorf("the lock was not released: %q", vals)
			}
		})
	}
}

// TestExecEnvironment: the command sees the lock's key, token, deadline and fencing
// token, and its exit code (or 128+signal) is redlock's.
func TestExecEnvironment(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	c := newCLI(t, "CHILD_EXIT=7")
	before := time.Now()
	r := c.run("env", append([]string{"exec", "--nodes", urls, "--key", "envkey", "--ttl", "5s", "--fence"}, helper()...)...)
	after := time.Now()
	if r.code != 7 {
		t.Fatalf("exit code %d, want the command's 7; stderr: %s", r.code, r.stderr)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	if vars["REDLOCK_KEY"] != "envkey" || len(vars["REDLOCK_TOKEN"]) != 36 || vars["REDLOCK_FENCE"] != "1" {
		t.Errorf("environment: %v", vars)
	}
	until, err := time.Parse(time.RFC3339Nano, vars["REDLOCK_UNTIL"])
	ms, _ := strconv.ParseInt(vars["REDLOCK_UNTIL_MS"], 10, 64)
	// The lock was acquired between before and after: its validity ends within a TTL
	// of that moment (the process may take a while to start on a loaded machine).
	if err != nil || until.UnixMilli() != ms || until.Before(before) || until.After(after.Add(5*time.Second)) {
		t.Errorf("REDLOCK_UNTIL %q, REDLOCK_UNTIL_MS %q: want the same instant, within a TTL of the run (%v to %v) (%v)",
			vars["REDLOCK_UNTIL"], vars["REDLOCK_UNTIL_MS"], before.UTC(), after.UTC(), err)
	}

	// Without --fence there is no REDLOCK_FENCE, not even one inherited from an outer
	// redlock exec.
	outer := newCLI(t, "CHILD_EXIT=7", "REDLOCK_FENCE=99", "REDLOCK_KEY=outer")
	r = outer.run("env", append([]string{"exec", "--nodes", urls, "--key", "envkey"}, helper()...)...)
	if r.code != 7 || strings.Contains(r.stdout, "REDLOCK_FENCE") || !strings.Contains(r.stdout, "REDLOCK_KEY=envkey\n") {
		t.Errorf("without --fence: exit %d, output %q: want no REDLOCK_FENCE and this lock's key", r.code, r.stdout)
	}

	r = c.run("", "exec", "--nodes", urls, "--key", "envkey", "--", "sh", "-c", "kill -KILL $$")
	if r.code != 128+int(syscall.SIGKILL) {
		t.Errorf("a command killed by SIGKILL: exit %d, want %d", r.code, 128+int(syscall.SIGKILL))
	}
}

// TestExecCannotRun: a command that is not executable gives 126, one that does not
// exist 127, before any node is contacted.
func TestExecCannotRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(file, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const nodes = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3"
	if r := runInProcess(t, nil, "exec", "--nodes", nodes, "--key", "k", "--", file); r.code != exitCannotRun || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("not executable: exit %d, want %d; stderr: %s", r.code, exitCannotRun, r.stderr)
	}
	if r := runInProcess(t, nil, "exec", "--nodes", nodes, "--key", "k", "--", file+".missing"); r.code != exitNotFound {
		t.Errorf("missing: exit %d, want %d; stderr: %s", r.code, exitNotFound, r.stderr)
	}
}

// countHeld returns how many of the nodes' values are set.
func countHeld(vals []string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}
