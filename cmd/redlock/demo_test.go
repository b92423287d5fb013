//go:build unix

package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// demoArgs make the demo short for tests: four phases of 800 ms; the TTL is short enough
// that a lock left on the nodes by the kill in phase 3 expires before phase 4.
var demoArgs = []string{"demo", "--phase", "800ms", "--ttl", "300ms", "--workers", "3"}

// TestDemo runs the zero-setup demo in process (under the race detector, with goleak
// checking that it stops every goroutine) and checks it reports success.
func TestDemo(t *testing.T) {
	r := runInProcess(t, nil, demoArgs...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"node 5: in-process miniredis on 127.0.0.1:",
		"== phase 1/4: all 5 nodes up",
		"== phase 2/4: nodes 1-2 killed",
		"== phase 3/4: node 3 killed too",
		"== phase 4/4: nodes 1-3 restarted",
		"○○○●●  holder none ",
		"most holders at once: 1",
		"Everything behaved as the algorithm promises.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.took > 30*time.Second {
		t.Errorf("the demo took %v", r.took)
	}
}

// demoPIDs returns the redis-server PIDs the demo printed.
func demoPIDs(out string) []int {
	var pids []int
	for _, m := range regexp.MustCompile(`redis-server pid (\d+)`).FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
	}
	return pids
}

func needRedisServer(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(redistest.SkipEnv) == "1" {
			t.Skipf("redis-server not on PATH and %s=1", redistest.SkipEnv)
		}
		t.Fatalf("redis-server not on PATH: %v", err)
	}
}

// TestDemoRedisServer runs the demo binary on real redis-server processes and checks
// that none of them outlives it.
func TestDemoRedisServer(t *testing.T) {
	needRedisServer(t)
	r := newCLI(t).run("", append(demoArgs, "--redis-server")...)
	if r.code != 0 || !strings.Contains(r.stdout, "Everything behaved as the algorithm promises.") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pids := demoPIDs(r.stdout)
	if len(pids) != 8 { // five started, three restarted
		t.Errorf("%d redis-server PIDs in the output, want 8:\n%s", len(pids), r.stdout)
	}
	for _, pid := range pids {
		if processRunning(pid) {
			t.Errorf("redis-server pid %d still runs after the demo", pid)
		}
	}
}

// TestDemoInterrupted: SIGINT in the middle of the demo stops it with exit code 130 and
// leaves no redis-server behind.
func TestDemoInterrupted(t *testing.T) {
	needRedisServer(t)
	cmd := newCLI(t).command("", append(demoArgs, "--redis-server")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		seen.WriteString(lines.Text() + "\n")
		if strings.HasPrefix(lines.Text(), "== phase 2/4") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		seen.WriteString(lines.Text() + "\n")
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(seen.String(), "interrupted") {
		t.Errorf("exit %d, want 130:\n%s", code, seen.String())
	}
	pids := demoPIDs(seen.String())
	if len(pids) != 5 {
		t.Errorf("%d redis-server PIDs in the output, want 5:\n%s", len(pids), seen.String())
	}
	for _, pid := range pids {
		if processRunning(pid) {
			t.Errorf("redis-server pid %d still runs after the demo", pid)
		}
	}
}

// TestNoRedisServer: demo --redis-server and bench without --nodes, with no
// redis-server on PATH, exit 1 with a message that names the missing binary and what
// to do instead.
func TestNoRedisServer(t *testing.T) {
	path := "PATH=" + t.TempDir() // an empty directory: nothing to find
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(demoArgs, "--redis-server"), "run the demo without the flag"},
		{[]string{"bench", "--local", "1", "--duration", "100ms"}, "give your nodes with --nodes"},
	} {
		r := newCLI(t, path).run("", tc.args...)
		if r.code != 1 || !strings.Contains(r.stderr, `"redis-server"`) || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("redlock %v: exit %d, stderr %q; want 1 and a message naming redis-server that says %q",
				tc.args, r.code, r.stderr, tc.want)
		}
	}
}
