//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/redistest"
)

// servingRE matches the line that names the metrics address when the port was 0.
var servingRE = regexp.MustCompile(`^redlock (\w+): serving metrics on http://(127\.0\.0\.1:\d+)/metrics$`)

// scrape fetches /metrics from addr and returns the exposition.
func scrape(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	return string(body), err
}

// sample returns the value of the first sample of metric whose labels include every
// one of labels (`name="value"`), and whether there is one.
func sample(text, metric string, labels ...string) (float64, bool) {
next:
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// TestExecMetrics: exec --metrics-addr 127.0.0.1:0 prints the address it bound, and a
// scrape while the command runs shows the lock held and its acquire; the command's exit
// code is exec's. An address already in use is a usage error (exit 2), reported before
// exec tries the lock: with the lock held elsewhere and --nonblock, a late listen would
// have exited 75.
func TestExecMetrics(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	c := newCLI(t)
	cmd := c.command("readline", append([]string{"exec", "--nodes", urls, "--key", "metrics", "--metrics-addr", "127.0.0.1:0"}, helper()...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	// stderr's first line names the address; the rest is kept for messages. Should the
	// line never come, exec waits for the command, which waits for the test: the wait
	// is bounded, and the cleanup kills exec.
	first, restErr := make(chan string, 1), make(chan string, 1)
	go func() {
		errLines := bufio.NewScanner(stderr)
		if errLines.Scan() {
			first <- errLines.Text()
		}
		close(first)
		var b strings.Builder
		for errLines.Scan() {
			b.WriteString(errLines.Text() + "\n")
		}
		restErr <- b.String()
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(time.Minute):
		t.Fatal("exec printed nothing on stderr within a minute")
	}
	m := servingRE.FindStringSubmatch(line)
	if m == nil || m[1] != "exec" {
		t.Fatalf("first stderr line %q does not name the metrics address", line)
	}
	addr := m[2]
	outLines := bufio.NewScanner(stdout)
	if !outLines.Scan() || outLines.Text() != "ready" {
		t.Fatalf("the command did not start: %q", outLines.Text())
	}

	text, err := scrape(addr) // the command runs: the lock is held
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	if v, ok := sample(text, "redlock_locks_held"); !ok || v != 1 {
		t.Errorf("redlock_locks_held = %v (found %v) while the command runs, want 1:\n%s", v, ok, text)
	}
	if v, ok := sample(text, "redlock_acquire_duration_seconds_count", `redlock_outcome="ok"`); !ok || v != 1 {
		t.Errorf("acquires with outcome ok = %v (found %v), want 1:\n%s", v, ok, text)
	}

	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	for outLines.Scan() {
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d, want the command's 0; stderr:\n%s", code, <-restErr)
	}
	if vals := keyOn(t, servers, "metrics"); vals[0]+vals[1]+vals[2] != "" {
		t.Errorf("the lock was not released: %q", vals)
	}

	// A port in use: exit 2 before the lock is tried.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	hold(t, servers, "metrics", 10*time.Second)
	r := c.run("env", append([]string{"exec", "--nodes", urls, "--key", "metrics", "--nonblock", "--metrics-addr", busy.Addr().String()}, helper()...)...)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--metrics-addr \""+busy.Addr().String()+"\":") ||
		!strings.Contains(r.stderr, "address already in use") || r.stdout != "" {
		t.Errorf("metrics address in use: exit %d, stdout %q, stderr %q; want 2, a message on --metrics-addr, no command run", r.code, r.stdout, r.stderr)
	}
}

// TestDemoBenchMetrics runs demo and bench in process with --metrics-addr 127.0.0.1:0,
// scrapes while they run, and checks that the server is gone once they return: the
// address refuses connections and no goroutine is left.
func TestDemoBenchMetrics(t *testing.T) {
	_, urls := nodes(t, 3, redistest.Options{})
	for _, tc := range []struct {
		args  []string
		after string   // the line (prefix) after which the scrape comes
		want  []string // labels of acquire_duration counts that must be above 0
	}{
		// Demo: by phase 4, phase 3 has failed acquires for want of nodes.
		{append(demoArgs, "--metrics-addr", "127.0.0.1:0"), "== phase 4/4", []string{`redlock_outcome="ok"`, `redlock_outcome="unavailable"`}},
		// Bench: the first workload is done, two are still to run.
		{[]string{"bench", "--nodes", urls, "--duration", "500ms", "--node-timeout", "1s", "--metrics-addr", "127.0.0.1:0"},
			"ok   [1/3] uncontended G=1:", []string{`redlock_outcome="ok"`}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent(),
				goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
			text, addr, code, out := runScraping(t, tc.args, tc.after)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, l := range tc.want {
				if v, ok := sample(text, "redlock_acquire_duration_seconds_count", l); !ok || v <= 0 {
					t.Errorf("acquires with %s = %v (found %v), want some:\n%s", l, v, ok, text)
				}
			}
			if conn, err := net.Dial("tcp", addr); err == nil {
				conn.Close()
				t.Errorf("%s still accepts connections after %s returned", addr, tc.args[0])
			}
		})
	}
}

// runScraping runs args in process with stdout and stderr on one pipe; it scrapes the
// address the command prints once a line beginning with after has come. It returns the
// scrape, the address, the exit code and the whole output.
func runScraping(t *testing.T, args []string, after string) (text, addr string, code int, out string) {
	t.Helper()
	pr, pw := io.Pipe()
	e := &env{stdin: strings.NewReader(""), stdout: pw, stderr: pw, getenv: func(string) string { return "" }}
	exited := make(chan int, 1)
	go func() {
		exited <- run(context.Background(), e, args)
		pw.Close()
	}()
	var (
		all     strings.Builder
		scraped bool
		err     error
	)
	lines := bufio.NewScanner(pr)
	for lines.Scan() { // to the end: the command must not block on a pipe nobody reads
		all.WriteString(lines.Text() + "\n")
		if m := servingRE.FindStringSubmatch(lines.Text()); m != nil && m[1] == args[0] && addr == "" {
			addr = m[2]
		}
		if strings.HasPrefix(lines.Text(), after) && addr != "" && !scraped {
			text, err = scrape(addr)
			scraped = true
		}
	}
	code = <-exited
	switch {
	case !scraped:
		t.Fatalf("no metrics address, or no line %q, in the output (exit %d):\n%s", after, code, all.String())
	case err != nil:
		t.Fatalf("scrape during the run: %v\n%s", err, all.String())
	}
	return text, addr, code, all.String()
}
