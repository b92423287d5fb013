package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/redistest"
)

// binary is the redlock command built once by TestMain for the end-to-end tests.
var binary string

// childEnv names the variable that turns the test binary into a helper command that
// redlock exec runs (see runChild).
const childEnv = "REDLOCK_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	runReaperIfAsked() // an in-process redlock exec starts this binary as its reaper
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Args[1:]))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "redlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "redlock")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building the redlock command: %v\n", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		// go-redis's pool probes a node that refused too many dials once a second, in a
		// goroutine that sees the pool closed only after its sleep: it ends within 1 s.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// runChild is the helper command's main. Modes:
//
//	critical FILE HOLD  append "begin PID", wait HOLD, append "end PID" to FILE
//	ticker FILE         print "ready"; ignore SIGTERM (noting it in FILE); start a grandchild
//	                    in the same process group that also ignores it (its PID noted);
//	                    append "tick UNIXNANO" every 5 ms until killed
//	sleeper             ignore SIGTERM, sleep until killed
//	signals             print "ready"; on SIGINT or SIGTERM print "got NAME", exit 40+signal
//	readline            print "ready", read a line from stdin, print "read LINE"
//	env                 print the REDLOCK_* variables; exit with $CHILD_EXIT or 0
func runChild(mode string, args []string) int {
	switch mode {
	case "critical":
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 90
		}
		defer f.Close()
		hold, _ := time.ParseDuration(args[1])
		fmt.Fprintf(f, "begin %d\n", os.Getpid())
		time.Sleep(hold)
		fmt.Fprintf(f, "end %d\n", os.Getpid())
		return 0
	case "ticker":
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 90
		}
		terms := make(chan os.Signal, 4)
		signal.Notify(terms, syscall.SIGTERM)
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), childEnv+"=sleeper")
		if err := gc.Start(); err != nil {
			return 91
		}
		fmt.Fprintf(f, "grandchild %d\n", gc.Process.Pid)
		fmt.Println("ready")
		tick := time.NewTicker(5 * time.Millisecond)
		for {
			select {
			case <-terms:
				fmt.Fprintf(f, "term %d\n", time.Now().UnixNano())
			case now := <-tick.C:
				fmt.Fprintf(f, "tick %d\n", now.UnixNano())
			}
		}
	case "sleeper":
		signal.Ignore(syscall.SIGTERM)
		select {}
	case "signals":
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		s := <-sigs
		fmt.Printf("got %v\n", s)
		return 40 + int(s.(syscall.Signal))
	case "readline":
		fmt.Println("ready")
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if err != nil {
			return 92
		}
		fmt.Printf("read %s", line)
		return 0
	case "env":
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "REDLOCK_") && !strings.HasPrefix(kv, "REDLOCK_NODES=") {
				fmt.Println(kv)
			}
		}
		code, _ := strconv.Atoi(os.Getenv("CHILD_EXIT"))
		return code
	}
	if code, ok := runContainChild(mode, args); ok {
		return code
	}
	return 99
}

// helper returns the end of an exec command line that runs the helper command (its
// mode comes from the environment cli sets) with args.
func helper(args ...string) []string {
	return append([]string{"--", os.Args[0]}, args...)
}

// result is what one run of the redlock binary did.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// cli describes how to run the binary: the environment it adds.
type cli struct {
	t   *testing.T
	env []string // added to the test's environment, without REDLOCK_NODES
}

func newCLI(t *testing.T, env ...string) *cli { return &cli{t: t, env: env} }

// command returns the binary's command for args, with the helper mode set.
func (c *cli) command(mode string, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDLOCK_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A binary built with -race sleeps a second at exit by default, waiting for late
	// reports; the tests run it dozens of times.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, c.env...)
	if mode != "" {
		cmd.Env = append(cmd.Env, childEnv+"="+mode)
	}
	return cmd
}

// run runs the binary to its end.
func (c *cli) run(mode string, args ...string) result {
	c.t.Helper()
	cmd := c.command(mode, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if strings.Contains(r.stderr, "DATA RACE") {
		c.t.Errorf("redlock %v: the race detector reported:\n%s", args, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("running redlock %v: %v", args, err)
	}
	return r
}

// started is a redlock process running in the background, with its stdout as lines.
type started struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *bytes.Buffer
}

// start starts the binary and returns once the helper printed "ready".
func (c *cli) start(mode string, args ...string) *started {
	c.t.Helper()
	cmd := c.command(mode, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	s := &started{cmd: cmd, lines: bufio.NewScanner(out), stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if !s.lines.Scan() || s.lines.Text() != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		c.t.Fatalf("redlock %v: the command never said ready (stderr: %s)", args, s.stderr)
	}
	return s
}

// wait reads the rest of stdout and waits for the exit; it returns the code and the
// remaining output.
func (s *started) wait(t *testing.T) (int, string) {
	t.Helper()
	var rest strings.Builder
	for s.lines.Scan() {
		rest.WriteString(s.lines.Text() + "\n")
	}
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if strings.Contains(s.stderr.String(), "DATA RACE") {
		t.Errorf("the race detector reported:\n%s", s.stderr)
	}
	return s.cmd.ProcessState.ExitCode(), rest.String()
}

// nodes starts n redis-servers and returns them with their URL list.
func nodes(t *testing.T, n int, opts redistest.Options) ([]*redistest.Server, string) {
	t.Helper()
	servers := redistest.StartN(t, n, opts)
	urls := make([]string, n)
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr()
	}
	return servers, strings.Join(urls, ",")
}

// runInProcess runs the command's run function with captured output.
func runInProcess(t *testing.T, getenv map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return getenv[k] }}
	start := time.Now()
	code := run(context.Background(), e, args)
	return result{code: code, stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
}
