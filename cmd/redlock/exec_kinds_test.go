//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// waitFor polls cond, a state of the nodes that the test waits for, until it holds;
// it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// background is a redlock run started without waiting for it.
type background struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

// startBackground starts the binary with args; the test's cleanup kills it if it is
// still running.
func (c *cli) startBackground(mode string, args ...string) *background {
	c.t.Helper()
	b := &background{cmd: c.command(mode, args...)}
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			_ = b.cmd.Process.Kill()
			_ = b.cmd.Wait()
		}
	})
	return b
}

// queued returns how many waiters each server queues for key's fair lock.
func queued(t *testing.T, servers []*redistest.Server, key string) []int64 {
	t.Helper()
	q, _, _ := redlock.FairKeys(key)
	n := make([]int64, len(servers))
	for i, s := range servers {
		n[i] = s.Client().ZCard(t.Context(), q).Val()
	}
	return n
}

// allEqual reports whether every value of ns is n.
func allEqual(ns []int64, n int64) bool {
	for _, v := range ns {
		if v != n {
			return false
		}
	}
	return true
}

// queueRow is one waiter row of status's fair queue table.
type queueRow struct {
	node, counter, waiter, ticket string
	pos                           int
	left                          time.Duration
}

// queueRows parses the waiter rows of status's fair queue table.
func queueRows(t *testing.T, out string) []queueRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "fair queue (waiters in the order they get the lock):\n")
	if !ok {
		t.Fatalf("status shows no fair queue:\n%s", out)
	}
	var rows []queueRow
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 6 || strings.HasPrefix(line, "verdict:") {
			continue
		}
		pos, err1 := strconv.Atoi(f[2])
		left, err2 := time.ParseDuration(f[5])
		if err1 != nil || err2 != nil {
			t.Fatalf("bad queue row %q:\n%s", line, out)
		}
		rows = append(rows, queueRow{node: f[0], counter: f[1], pos: pos, waiter: f[3], ticket: f[4], left: left})
	}
	return rows
}

// TestExecFair: while one exec --fair holds the key, three more arrive one after
// another and queue on every node; status shows each node's queue in that order, with
// tickets rising and leases running; when the holder ends, the three run one at a time
// in their order of arrival and all finish, leaving no key and no queue entry behind.
func TestExecFair(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	const key = "fairjob"
	file := filepath.Join(t.TempDir(), "order")
	c := newCLI(t)
	execFair := []string{"exec", "--nodes", urls, "--key", key, "--ttl", "2s", "--fair", "--fair-lease", "900ms"}
	holder := c.start("signals", append(execFair, helper()...)...)

	names := []string{"B", "C", "D"}
	waiters := make([]*background, len(names))
	for i, name := range names {
		script := fmt.Sprintf("echo begin %s >> %s; sleep 0.05; echo end %s >> %s", name, file, name, file)
		waiters[i] = c.startBackground("", append(execFair, "--wait", "30s", "--", "sh", "-c", script)...)
		waitFor(t, fmt.Sprintf("%s to queue on every node", name), func() bool {
			return allEqual(queued(t, servers, key), int64(i+1))
		})
	}

	r := runInProcess(t, nil, "status", "--nodes", urls, key)
	t.Logf("status with three waiters:\n%s", r.stdout)
	checkFairStatus(t, servers, key, r, len(names), 900*time.Millisecond)

	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, _ := holder.wait(t); code != 40+int(syscall.SIGTERM) {
		t.Errorf("holder: exit %d, want the command's %d; stderr: %s", code, 40+int(syscall.SIGTERM), holder.stderr)
	}
	for i, w := range waiters {
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("waiter %s: %v; stderr: %s", names[i], err, &w.stderr)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := "begin B\nend B\nbegin C\nend C\nbegin D\nend D\n"; string(data) != want {
		t.Errorf("the waiters ran as\n%swant one at a time in arrival order:\n%s", data, want)
	}
	if vals := keyOn(t, servers, key); countHeld(vals) != 0 {
		t.Errorf("the key is left behind: %q", vals)
	}
	if n := queued(t, servers, key); !allEqual(n, 0) {
		t.Errorf("queue entries left behind: %v", n)
	}
}

// checkFairStatus checks status's fair queue against the nodes: every node lists
// the n waiters in its queue's order (ids as the node has them), tickets rising, each
// lease running and at most lease, and the counter at least the last ticket. The
// holder's row is as for any plain lock.
func checkFairStatus(t *testing.T, servers []*redistest.Server, key string, r result, n int, lease time.Duration) {
	t.Helper()
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: held by a majority: token ") || strings.Contains(r.stdout, "HOLDS") {
		t.Errorf("status: exit %d, want a plain holder's verdict and no HOLDS column:\n%s%s", r.code, r.stdout, r.stderr)
	}
	rows := queueRows(t, r.stdout)
	if len(rows) != n*len(servers) {
		t.Fatalf("status lists %d waiters, want %d on each of %d nodes:\n%s", len(rows), n, len(servers), r.stdout)
	}
	q, _, _ := redlock.FairKeys(key)
	for i, s := range servers {
		ids := s.Client().ZRange(t.Context(), q, 0, -1).Val()
		prev := int64(0)
		for j, row := range rows[i*n : (i+1)*n] {
			ticket, _ := strconv.ParseInt(row.ticket, 10, 64)
			counter, _ := strconv.ParseInt(row.counter, 10, 64)
			switch {
			case row.node != "redis://"+s.Addr() || row.pos != j+1:
				t.Errorf("row %+v: want node %s, position %d", row, s.Addr(), j+1)
			case j >= len(ids) || row.waiter != short(ids[j]):
				t.Errorf("%s position %d: waiter %s, the node's queue is %q", s.Addr(), j+1, row.waiter, ids)
			case ticket <= prev:
				t.Errorf("%s position %d: ticket %d after %d: not rising", s.Addr(), j+1, ticket, prev)
			case row.left <= 0 || row.left > lease:
				t.Errorf("%s position %d: lease left %v, want in (0, %v]", s.Addr(), j+1, row.left, lease)
			case counter < ticket:
				t.Errorf("%s: counter %d below ticket %d", s.Addr(), counter, ticket)
			}
			prev = ticket
		}
	}
}

// TestExecFairRefusals: --fair with --fence is what the library says: refused with
// its error and exit 2 while it does not support the pair, else a fair fenced lock.
// --fair with --owner runs the command under a reentrant fair lock; with --fence too,
// it gets the library's refusal of fenced reentrant fair locks. No refusal leaves
// anything on the nodes, nor runs the command.
func TestExecFairRefusals(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c := newCLI(t)
	base := []string{"exec", "--nodes", urls, "--key", "fairfence", "--fair", "--nonblock"}
	r := c.run("env", append(append(base, "--fence"), helper()...)...)
	probe, err := redlock.NewFromURLs(strings.Split(urls, ","), redlock.Options{Fair: true, Fencing: true})
	if err == nil {
		probe.Close()
		if r.code != 0 || !strings.Contains(r.stdout, "REDLOCK_FENCE=") {
			t.Errorf("--fair --fence, which the library supports: exit %d, output %q; stderr: %s", r.code, r.stdout, r.stderr)
		}
	} else if r.code != exitUsage || !strings.Contains(r.stderr, err.Error()) || r.stdout != "" {
		t.Errorf("--fair --fence: exit %d, stderr %q; want %d and the library's %q, and no command run", r.code, r.stderr, exitUsage, err)
	}

	r = c.run("env", append(append(base, "--owner", "job"), helper()...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "REDLOCK_KEY=fairfence") {
		t.Errorf("--fair --owner: exit %d, output %q; want the command run under the lock; stderr: %s", r.code, r.stdout, r.stderr)
	}
	r = c.run("env", append(append(base, "--owner", "job", "--fence"), helper()...)...)
	if r.code != exitExecFailure || !strings.Contains(r.stderr, "not supported with Options.Fair and Options.Fencing") || r.stdout != "" {
		t.Errorf("--fair --owner --fence: exit %d, stderr %q; want %d, the library's refusal and no command run", r.code, r.stderr, exitExecFailure)
	}
	for _, s := range servers {
		if keys := s.Client().Keys(t.Context(), "*").Val(); len(keys) != 0 && err != nil {
			t.Errorf("%s: keys left behind: %q", s.Addr(), keys)
		}
	}
}

// holdsRow matches a row of status for an owner's key: node, holder, HOLDS, PTTL.
var holdsRow = regexp.MustCompile(`(?m)^(redis://\S+) +yes +owner (\S+) +(\d+) +(\d+(?:\.\d+)?)s +- *$`)

// ownerStatus runs status on key and returns, per node, the owner shown and the holds.
func ownerStatus(t *testing.T, urls, key string) (result, map[string]string) {
	t.Helper()
	r := runInProcess(t, nil, "status", "--nodes", urls, key)
	got := map[string]string{}
	for _, m := range holdsRow.FindAllStringSubmatch(r.stdout, -1) {
		got[m[1]] = m[2] + " " + m[3]
	}
	return r, got
}

// TestExecOwner: while exec --owner job-1 holds the key, another exec of job-1 gets
// it at once (--nonblock succeeds) and status shows 2 holds of job-1 on every node;
// another owner, and a lock without owner, are refused at once with --nonblock and
// after --wait; REDLOCK_OWNER is the default owner; when the holds end the key is free.
func TestExecOwner(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	const key = "ownedjob"
	c := newCLI(t)
	execArgs := func(extra ...string) []string {
		return append([]string{"exec", "--nodes", urls, "--key", key, "--ttl", "30s"}, extra...)
	}
	first := c.start("signals", append(execArgs("--owner", "job-1"), helper()...)...)
	second := c.start("signals", append(execArgs("--owner", "job-1", "--nonblock"), helper()...)...)

	r, got := ownerStatus(t, urls, key)
	t.Logf("status with two holds:\n%s", r.stdout)
	for _, s := range servers {
		if g := got["redis://"+s.Addr()]; g != "job-1 2" {
			t.Errorf("%s: status shows %q, want owner job-1 with 2 holds", s.Addr(), g)
		}
	}
	if !strings.Contains(r.stdout, "verdict: held by a majority: owner job-1 on 3 of 3 nodes (2 needed)") {
		t.Errorf("status verdict:\n%s", r.stdout)
	}

	marker := filepath.Join(t.TempDir(), "ran")
	touch := []string{"--", "touch", marker}
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"another owner, --nonblock", []string{"--owner", "job-2", "--nonblock"}},
		{"another owner, --wait", []string{"--owner", "job-2", "--wait", "300ms"}},
		{"no owner, --nonblock", []string{"--nonblock"}},
	} {
		r := c.run("", append(execArgs(tc.extra...), touch...)...)
		if r.code != exitNotAcquired {
			t.Errorf("%s: exit %d, want %d; stderr: %s", tc.name, r.code, exitNotAcquired, r.stderr)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a command of another owner ran while job-1 held the key")
	}
	if r := newCLI(t, "REDLOCK_OWNER=job-1").run("", append(execArgs("--nonblock"), touch...)...); r.code != 0 {
		t.Errorf("REDLOCK_OWNER=job-1 while job-1 holds: exit %d; stderr: %s", r.code, r.stderr)
	}

	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second.wait(t)
	if _, got := ownerStatus(t, urls, key); got["redis://"+servers[0].Addr()] != "job-1 1" {
		t.Errorf("after one hold ended: %v, want 1 hold of job-1", got)
	}
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	first.wait(t)
	if vals := keyOn(t, servers, key); countHeld(vals) != 0 {
		t.Errorf("the last hold ended but the key is left: %q", vals)
	}
}

// TestExecOwnerRestart: a job whose redlock was killed (SIGKILL: no release) leaves
// its hold until the TTL; run again with the same owner, it gets the key at once,
// while another owner still cannot. Bad owners are refused before any node is touched.
func TestExecOwnerRestart(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	const key = "restarted"
	c := newCLI(t)
	args := func(owner string) []string {
		return []string{"exec", "--nodes", urls, "--key", key, "--ttl", "30s", "--owner", owner, "--nonblock"}
	}
	crashed := c.start("signals", append(args("job-r"), helper()...)...)
	if err := crashed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	crashed.wait(t)
	if vals := keyOn(t, servers, key); countHeld(vals) != 3 {
		t.Fatalf("the crashed job's hold is not on every node: %q", vals)
	}
	if r := c.run("", append(args("job-r"), "--", "true")...); r.code != 0 {
		t.Errorf("restarted job-r: exit %d, want 0 at once; stderr: %s", r.code, r.stderr)
	}
	if r := c.run("", append(args("job-s"), "--", "true")...); r.code != exitNotAcquired {
		t.Errorf("another owner while job-r's crashed hold lasts: exit %d, want %d; stderr: %s", r.code, exitNotAcquired, r.stderr)
	}

	for _, bad := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--owner", ""}, "--owner is empty"},
		{[]string{"REDLOCK_OWNER=-x"}, nil, `REDLOCK_OWNER "-x" begins with '-'`},
		{nil, []string{"--fair", "--fair-lease", "1500500us"}, "--fair-lease 1.5005s must be a positive whole number of milliseconds"},
	} {
		a := append([]string{"exec", "--nodes", urls, "--key", "bad-input", "--nonblock"}, bad.args...)
		r := newCLI(t, bad.env...).run("", append(a, "--", "true")...)
		if r.code != exitUsage || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want %d and %q", bad.env, bad.args, r.code, r.stderr, exitUsage, bad.want)
		}
	}
	for _, s := range servers {
		if n := s.Client().Exists(t.Context(), "bad-input").Val(); n != 0 {
			t.Errorf("%s: bad input left the key", s.Addr())
		}
	}
}
