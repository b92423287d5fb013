//go:build unix

package main

import (
	"bufio"
	"context"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// benchRowRE matches a row of the summary table: the workload, then its cells.
var benchRowRE = regexp.MustCompile(`(?m)^(uncontended G=1|uncontended G=8|hot key G=8) +(.*)$`)

// checkBenchTable checks that out has the table with the three workloads, each with
// some cycles, no failed call, and (for the hot key) no violation; it returns the
// hot key's cells.
func checkBenchTable(t *testing.T, out string) []string {
	t.Helper()
	if !regexp.MustCompile(`(?m)^workload +cycles/s +acquire p50 +acquire p99 +handoffs/s +wait p50 +wait p99 +wait max +self % +violations +errors$`).MatchString(out) {
		t.Errorf("no table header:\n%s", out)
	}
	rows := benchRowRE.FindAllStringSubmatch(out, -1)
	if len(rows) != 3 {
		t.Fatalf("%d workload rows, want 3:\n%s", len(rows), out)
	}
	var hot []string
	for _, r := range rows {
		cells := regexp.MustCompile(` {2,}`).Split(strings.TrimSpace(r[2]), -1)
		if len(cells) != 10 {
			t.Fatalf("%s: %d cells, want 10: %q", r[1], len(cells), cells)
		}
		if rate, _ := strconv.Atoi(strings.ReplaceAll(cells[0], ",", "")); rate <= 0 {
			t.Errorf("%s: %s cycles/s", r[1], cells[0])
		}
		if cells[9] != "0" {
			t.Errorf("%s: %s failed calls", r[1], cells[9])
		}
		if strings.HasPrefix(r[1], "hot key") {
			hot = cells
		} else if cells[3] != "-" || cells[8] != "-" {
			t.Errorf("%s: handoffs %s and violations %s, want - (not measured)", r[1], cells[3], cells[8])
		}
	}
	if hot[8] != "0" {
		t.Errorf("hot key: %s violations", hot[8])
	}
	return hot
}

// TestBenchLocal runs the benchmark briefly on local nodes it starts itself, and checks
// the table, the exit code, and that no node outlives it.
func TestBenchLocal(t *testing.T) {
	needRedisServer(t)
	// A second per node step: the benchmark fails on any failed call, and a loaded CI
	// machine running -race can stall past the default 50 ms.
	r := newCLI(t).run("", "bench", "--local", "3", "--duration", "300ms", "--node-timeout", "1s")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	hot := checkBenchTable(t, r.stdout)
	if h, _ := strconv.Atoi(strings.ReplaceAll(hot[3], ",", "")); h <= 0 {
		t.Errorf("hot key: %s handoffs/s, want some (8 workers take turns)", hot[3])
	}
	for _, want := range []string{"ok   [1/3] uncontended G=1:", "ok   [3/3] hot key G=8:"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "make bench") {
		t.Errorf("no pointer to the comparison with the peers:\n%s", r.stdout)
	}
	pids := regexp.MustCompile(`pids ([\d ]+)\)`).FindStringSubmatch(r.stdout)
	if pids == nil || len(strings.Fields(pids[1])) != 3 {
		t.Fatalf("no 3 PIDs in the header:\n%s", r.stdout)
	}
	for _, f := range strings.Fields(pids[1]) {
		if pid, _ := strconv.Atoi(f); processRunning(pid) {
			t.Errorf("redis-server pid %d still runs after the benchmark", pid)
		}
	}
}

// TestBenchNodes runs the benchmark on given nodes and checks that it leaves no key
// behind, and that REDLOCK_NODES alone does not make it use them.
func TestBenchNodes(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	start := time.Now()
	r := newCLI(t).run("", "bench", "--nodes", urls, "--duration", "200ms", "--prefix", "bt", "--node-timeout", "1s")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkBenchTable(t, r.stdout)
	if !strings.Contains(r.stdout, "redlock bench: 3 nodes (redis://") {
		t.Errorf("the header does not name the nodes:\n%s", r.stdout)
	}
	for i, c := range redistest.Clients(servers) {
		keys, err := c.Keys(context.Background(), "*").Result()
		if err != nil || len(keys) != 0 {
			t.Errorf("node %d: keys left after the benchmark: %v (%v)", i+1, keys, err)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %v", took)
	}
}

// TestBenchInterrupted: SIGINT while a workload runs ends the benchmark with exit code
// 130 and leaves none of its local nodes running.
func TestBenchInterrupted(t *testing.T) {
	needRedisServer(t)
	cmd := newCLI(t).command("", "bench", "--local", "2", "--duration", "10s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	header := bufio.NewScanner(out)
	if !header.Scan() { // printed once the nodes run, before the first workload
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no header line; stderr:\n%s", stderr.String())
	}
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, out)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %d, want 130; stderr:\n%s", code, stderr.String())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v to stop after SIGINT", took)
	}
	pids := regexp.MustCompile(`pids ([\d ]+)\)`).FindStringSubmatch(header.Text())
	if pids == nil || len(strings.Fields(pids[1])) != 2 {
		t.Fatalf("no 2 PIDs in the header %q", header.Text())
	}
	for _, f := range strings.Fields(pids[1]) {
		if pid, _ := strconv.Atoi(f); processRunning(pid) {
			t.Errorf("redis-server pid %d still runs after the benchmark", pid)
		}
	}
}
