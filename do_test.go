package redlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// readmeJobHarness is the program around the README's quick start: its writeReport
// appends a line to $REPORT_FILE and then works until its standard input closes (or its
// context ends), so the test decides when the copy that won stops.
const readmeJobHarness = `package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/redlock-go/redlock"
)

var _, _, _ = errors.Is, fmt.Sprint, time.Second

func main() {
%s
}

func writeReport(ctx context.Context) error {
	f, err := os.OpenFile(os.Getenv("REPORT_FILE"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "report by %%d\n", os.Getpid())
	if err := f.Close(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
`

// readmeQuickStart returns the first Go block of README.md.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```go\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no Go block in README.md")
	}
	return block
}

// buildReadmeJob compiles code (the body of main, with the quick start's node URLs
// replaced by urls) inside this module, through an overlay, so nothing is written into
// the source tree. It returns the program's path.
func buildReadmeJob(t *testing.T, code string, urls []string) string {
	t.Helper()
	return buildJob(t, readmeJobHarness, code, urls)
}

// buildJob is buildReadmeJob with another program around the code: harness, a format
// with one %s for the body of main.
func buildJob(t *testing.T, harness, code string, urls []string) string {
	t.Helper()
	for i, u := range urls {
		old := fmt.Sprintf("redis://127.0.0.1:%d", 7001+i)
		if !strings.Contains(code, old) {
			t.Fatalf("the quick start does not name node %s", old)
		}
		code = strings.ReplaceAll(code, old, u)
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(src, fmt.Appendf(nil, harness, code), 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{
		filepath.Join(wd, "internal", "readmejob", "main.go"): src,
	}})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "readmejob")
	gocmd, err := exec.LookPath("go")
	if err != nil {
		gocmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	build := exec.Command(gocmd, "build", "-overlay", overlayFile, "-o", bin, "./internal/readmejob")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the README's quick start: %v\n%s", err, out)
	}
	return bin
}

// copyRun is one started copy of the job.
type copyRun struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{}
}

// runCopies starts n copies of bin at once, with reports appended to reports; each
// copy's exit is also announced on the returned channel. The copies are killed by PID
// if the test ends first.
func runCopies(t *testing.T, bin, reports string, n int) ([]*copyRun, <-chan *copyRun) {
	t.Helper()
	copies := make([]*copyRun, n)
	exits := make(chan *copyRun, n)
	for i := range copies {
		c := &copyRun{cmd: exec.Command(bin), exited: make(chan struct{})}
		c.cmd.Env = append(os.Environ(), "REPORT_FILE="+reports)
		c.cmd.Stderr = &c.stderr
		in, err := c.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdin = in
		copies[i] = c
	}
	for _, c := range copies {
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			select {
			case <-c.exited:
			default:
				_ = c.cmd.Process.Kill()
				<-c.exited
			}
		})
		go func() {
			_ = c.cmd.Wait()
			close(c.exited)
			exits <- c
		}()
	}
	return copies, exits
}

// TestReadmeJobRunsOnce runs the README's quick start the way cron runs a job: 4 copies
// started at once, as processes, against 5 real redis-server nodes. Exactly one writes
// the report; the others exit at once, with status 0, saying the lock was held. (The
// former quick start, a 30 s blocking Acquire, wrote it 4 times, one after the other.)
func TestReadmeJobRunsOnce(t *testing.T) {
	checkRunsOnce(t, readmeQuickStart(t))
}

// checkRunsOnce builds code as the README job and checks that of 4 copies started at
// once exactly one writes the report, and the other three exit quietly.
func checkRunsOnce(t *testing.T, code string) {
	servers := redistest.StartN(t, 5, redistest.Options{})
	var urls []string
	for _, a := range redistest.Addrs(servers) {
		urls = append(urls, "redis://"+a)
	}
	bin := buildReadmeJob(t, code, urls)
	reports := filepath.Join(t.TempDir(), "reports")

	copies, exits := runCopies(t, bin, reports, 4)
	// The copy that won works until its stdin closes: the other three must exit first,
	// on their own.
	exited := 0
	timeout := time.After(15 * time.Second)
wait:
	for exited < 3 {
		select {
		case <-exits:
			exited++
		case <-timeout:
			break wait
		}
	}
	for _, c := range copies {
		c.stdin.Close()
	}
	for _, c := range copies {
		<-c.exited
	}
	data, err := os.ReadFile(reports)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "report by"); n != 1 || exited != 3 {
		t.Fatalf("4 copies started at once: %d wrote the report, %d exited on their own while one worked; want 1 and 3\n%s", n, exited, data)
	}
	quiet := 0
	for i, c := range copies {
		if code := c.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("copy %d exited with %d: %s", i+1, code, c.stderr.String())
		}
		if strings.Contains(c.stderr.String(), "another copy is writing the report") {
			quiet++
		}
	}
	if quiet != 3 {
		t.Errorf("%d copies said the lock was held, want 3", quiet)
	}
}

// TestDoRefusesTTLTooShortForKeepAlive: Do with a TTL that KeepAlive cannot renew (below
// 20 × NodeTimeout; or too little validity after the drift allowance) returns at once,
// naming the numbers, before acquiring anything: fn does not run and no node gets the
// key. (Before, a 20 ms TTL was accepted and fn's context was cancelled µs later.)
func TestDoRefusesTTLTooShortForKeepAlive(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	drifty := c.newClient(redlock.Options{DriftFactor: 0.95})
	for _, tc := range []struct {
		name   string
		client *redlock.Client
		ttl    time.Duration
		text   string
	}{
		{"below 20 × NodeTimeout", c.client, 20 * time.Millisecond,
			"redlock: ttl too short to keep alive: 20ms is below 20 × NodeTimeout (50ms) = 1s"},
		{"validity after drift", drifty, 10 * time.Second,
			"redlock: ttl too short to keep alive: 10s with DriftFactor 0.95 gives a renewal at most 498ms of validity, below 10 × NodeTimeout (50ms) = 500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			err := tc.client.Do(t.Context(), "short", tc.ttl, func(ctx context.Context) error {
				ran = true
				return nil
			})
			if ran {
				t.Fatal("fn ran with a TTL that cannot be kept alive")
			}
			if !errors.Is(err, redlock.ErrTTLTooShort) || !errors.Is(err, redlock.ErrNotRun) {
				t.Fatalf("Do: %v; want ErrTTLTooShort and ErrNotRun", err)
			}
			if want := `redlock: do "short": ` + tc.text; err.Error() != want {
				t.Fatalf("Do's error:\n got %s\nwant %s", err, want)
			}
			c.wantValues("short", "", "", "")
		})
	}
	opts := redlock.Options{}
	if err := opts.CheckKeepAliveTTL(time.Second); err != nil {
		t.Errorf("CheckKeepAliveTTL(1s) with the defaults: %v", err)
	}
	if err := opts.CheckKeepAliveTTL(999 * time.Millisecond); !errors.Is(err, redlock.ErrTTLTooShort) {
		t.Errorf("CheckKeepAliveTTL(999ms) with the defaults: %v, want ErrTTLTooShort", err)
	}
	if err := (redlock.Options{DriftFactor: 0.95}).CheckKeepAliveTTL(20 * time.Second); err != nil {
		t.Errorf("CheckKeepAliveTTL(20s) with DriftFactor 0.95 (998ms of validity): %v", err)
	}
	if err := opts.CheckKeepAliveTTL(1500 * time.Microsecond); err == nil || errors.Is(err, redlock.ErrTTLTooShort) {
		t.Errorf("CheckKeepAliveTTL(1.5ms): %v, want the invalid-TTL error", err)
	}
}

// TestKeepAliveRefusesTTLTooShort: KeepAlive on a lock whose TTL it cannot renew returns
// a context already cancelled with the reason, and leaves the lock held.
func TestKeepAliveRefusesTTLTooShort(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	other := c.newClient(redlock.Options{})
	warmUp(t, other)
	lock, err := acquireRetrying(t, c.client, "short-kept", 900*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	if work.Err() == nil {
		t.Fatal("KeepAlive accepted a 900 ms TTL with a 50 ms node timeout")
	}
	cause := context.Cause(work)
	if !errors.Is(cause, redlock.ErrTTLTooShort) || errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause %v; want ErrTTLTooShort, not ErrLockLost", cause)
	}
	if want := `redlock: keep alive "short-kept": redlock: ttl too short to keep alive: 900ms is below 20 × NodeTimeout (50ms) = 1s`; cause.Error() != want {
		t.Fatalf("cause:\n got %s\nwant %s", cause, want)
	}
	if _, err := other.TryAcquire(t.Context(), "short-kept", time.Second); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("another client after the refused KeepAlive: %v, want ErrNotAcquired (still held)", err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release after the refused KeepAlive: %v", err)
	}
}

// TestKeepAliveRenewsOnTheValidityGranted: with DriftFactor 0.95 a 20 s TTL gives each
// renewal at most 998 ms of validity. KeepAlive renews every third of that, so the lock
// stays held for several of those validities. (Renewing every ttl/3, 6.7 s, it gave up
// at once: no renewal could be confirmed before Until − ttl/10.)
func TestKeepAliveRenewsOnTheValidityGranted(t *testing.T) {
	opts := redlock.Options{DriftFactor: 0.95}
	c := newCluster(t, 3, redistest.Options{}, opts)
	const ttl = 20 * time.Second
	lock, err := acquireRetrying(t, c.client, "drifty", ttl)
	if err != nil {
		t.Fatal(err)
	}
	first := lock.Until()
	if v := time.Until(first); v > time.Second {
		t.Fatalf("validity %v with DriftFactor 0.95 of 20 s, want under 1 s", v)
	}
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	select { // the work: 2.5 validities
	case <-work.Done():
		t.Fatalf("work context ended while the nodes were healthy: %v", context.Cause(work))
	case <-time.After(2500 * time.Millisecond):
	}
	if !lock.Until().After(first.Add(1500 * time.Millisecond)) {
		t.Fatalf("Until moved from %v only to %v", first, lock.Until())
	}
	other := c.newClient(opts)
	warmUp(t, other)
	if _, err := other.TryAcquire(t.Context(), "drifty", ttl); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("another client while kept alive: %v, want ErrNotAcquired", err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDoWaitAtMostBoundsTheWaitOnly: WaitAtMost(1s) bounds the wait for the lock, not
// the work: Do waits while another client holds the key, gets it when released, and 3 s
// of work run to the end. Held for longer than the bound, Do gives up after it, without
// running fn. (With a 1 s context deadline instead, the work was cancelled at 1 s.)
func TestDoWaitAtMostBoundsTheWaitOnly(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	other := c.newClient(redlock.Options{})
	held, err := acquireRetrying(t, other, "bounded", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	go func() { // release once Do waits for the key
		for c.client.Waiting("bounded") == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		held.Release(context.Background())
	}()
	start := time.Now()
	var workTook time.Duration
	err = c.client.Do(t.Context(), "bounded", time.Second, func(ctx context.Context) error {
		began := time.Now()
		defer func() { workTook = time.Since(began) }()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(3 * time.Second): // the work
			return nil
		}
	}, redlock.WaitAtMost(time.Second))
	if err != nil {
		t.Fatalf("Do after %v (work %v): %v", time.Since(start), workTook, err)
	}
	if workTook < 3*time.Second {
		t.Fatalf("work took %v, want the full 3 s", workTook)
	}

	held, err = acquireRetrying(t, other, "bounded", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	ran := false
	start = time.Now()
	err = c.client.Do(t.Context(), "bounded", time.Second, func(ctx context.Context) error {
		ran = true
		return nil
	}, redlock.WaitAtMost(300*time.Millisecond))
	took := time.Since(start)
	if ran || !errors.Is(err, redlock.ErrNotRun) || !errors.Is(err, redlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do while held elsewhere: ran %v, err %v; want not run, ErrNotRun, ErrNotAcquired and DeadlineExceeded", ran, err)
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Fatalf("Do gave up after %v, want about the 300 ms bound", took)
	}
}

// TestDoTryOnce: with the key held elsewhere, TryOnce makes one attempt and returns at
// once (no retry delay asked for), without running fn; with the key free, fn runs.
func TestDoTryOnce(t *testing.T) {
	var delays atomic.Int64
	opts := redlock.Options{RetryDelay: func(attempt int) time.Duration {
		delays.Add(1)
		return 10 * time.Millisecond
	}}
	c := newCluster(t, 3, redistest.Options{}, opts)
	warmUp(t, c.client)
	held, err := acquireRetrying(t, c.newClient(redlock.Options{}), "once", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []redlock.DoOption{redlock.TryOnce(), redlock.SkipIfHeld(), redlock.WaitAtMost(0)} {
		ran := false
		start := time.Now()
		err = c.client.Do(context.Background(), "once", time.Second, func(ctx context.Context) error {
			ran = true
			return nil
		}, opt)
		took := time.Since(start)
		var run *redlock.RunError
		if ran || errors.As(err, &run) || !errors.Is(err, redlock.ErrNotRun) || !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("Do while held elsewhere: ran %v, err %v; want not run, ErrNotRun and ErrNotAcquired", ran, err)
		}
		if took > 500*time.Millisecond || delays.Load() != 0 {
			t.Fatalf("Do took %v and asked for %d retry delays; want one quick attempt", took, delays.Load())
		}
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := c.client.Do(context.Background(), "once", time.Second, func(ctx context.Context) error {
		ran = true
		return nil
	}, redlock.TryOnce()); err != nil || !ran {
		t.Fatalf("Do on a free key with TryOnce: ran %v, err %v", ran, err)
	}
}

// TestDoSkipIfHeldRunsOneCopy: 4 Clients (4 copies of a job) call Do with SkipIfHeld at
// the same instant, round after round: in every round exactly one runs fn, and the
// others return ErrNotAcquired without waiting for it. (With a single attempt in place
// of SkipIfHeld, and cold Clients, round 0 once ended with all four attempts timed out
// and no copy running.)
func TestDoSkipIfHeldRunsOneCopy(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	clients := []*redlock.Client{c.client}
	for range 3 {
		clients = append(clients, c.newClient(redlock.Options{}))
	}
	for _, cl := range clients {
		warmUp(t, cl)
	}
	for round := range 10 {
		key := fmt.Sprintf("copies-%d", round)
		start := make(chan struct{})
		finish := make(chan struct{})
		var ran atomic.Int32
		errs := make(chan error, len(clients))
		for _, cl := range clients {
			go func() {
				<-start
				errs <- cl.Do(context.Background(), key, time.Second, func(ctx context.Context) error {
					ran.Add(1)
					<-finish // work until the other copies have returned
					return nil
				}, redlock.SkipIfHeld())
			}()
		}
		close(start)
		for range len(clients) - 1 {
			if err := <-errs; !errors.Is(err, redlock.ErrNotRun) || !errors.Is(err, redlock.ErrNotAcquired) {
				t.Errorf("round %d: a copy returned %v while another ran; want ErrNotRun and ErrNotAcquired", round, err)
			}
		}
		close(finish)
		if err := <-errs; err != nil {
			t.Errorf("round %d: the copy that ran: %v", round, err)
		}
		if n := ran.Load(); n != 1 {
			t.Fatalf("round %d: %d copies ran, want 1", round, n)
		}
	}
}

// warmUp connects client to every node and loads the scripts, so that its next
// attempt is not the first over cold connections (which can miss a 50 ms node timeout
// on a loaded machine).
func warmUp(t *testing.T, client *redlock.Client) {
	t.Helper()
	lock, err := acquireRetrying(t, client, "warm-up", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// stealKey sets key to another token on every node, and deletes it when the test ends.
func (c *cluster) stealKey(ctx context.Context, key string) {
	for _, a := range c.admin {
		a.Set(ctx, key, "intruder", time.Minute)
	}
	c.t.Cleanup(func() {
		for _, a := range c.admin {
			a.Del(context.Background(), key)
		}
	})
}

// TestDoOutcomes: Do's error tells "not run" from "ran, fn failed", "ran, then lost the
// lock" and "ran, the release failed" without a flag set inside fn, and its text says
// each thing once. (Before, fn's error and the loss cause were joined: when fn returned
// the cause, as a context-aware function does, the text said it twice; a failed Release
// after fn succeeded looked like any other failed step.)
func TestDoOutcomes(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	warmUp(t, c.client)
	ctx := t.Context()
	var run *redlock.RunError

	t.Run("not run", func(t *testing.T) {
		held, err := acquireRetrying(t, c.newClient(redlock.Options{}), "outcome", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(context.Background())
		err = c.client.Do(ctx, "outcome", time.Second, func(context.Context) error { return nil }, redlock.TryOnce())
		if errors.As(err, &run) || !errors.Is(err, redlock.ErrNotRun) || !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatalf("held elsewhere: %v; want ErrNotRun and ErrNotAcquired, no RunError", err)
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || err.Error() != qe.Error() {
			t.Fatalf("not run: text %q, want the attempt's %v", err, qe)
		}
	})

	t.Run("fn failed", func(t *testing.T) {
		errWork := errors.New("work failed")
		err := c.client.Do(ctx, "outcome", time.Second, func(context.Context) error { return errWork })
		if !errors.As(err, &run) || run.Err != errWork || run.Lost != nil || run.Release != nil || errors.Is(err, redlock.ErrNotRun) {
			t.Fatalf("fn failed: %#v; want a RunError with fn's error only", err)
		}
		if err.Error() != "work failed" {
			t.Fatalf("text %q, want fn's", err)
		}
	})

	for _, tc := range []struct {
		name string
		ret  func(ctx context.Context) error
		text func(cause error) string
	}{
		{"lost, fn returned the cause", context.Cause, func(cause error) string { return cause.Error() }},
		{"lost, fn wrapped the cause", func(ctx context.Context) error { return fmt.Errorf("report: %w", context.Cause(ctx)) },
			func(cause error) string { return "report: " + cause.Error() }},
		{"lost, fn quoted the cause", func(ctx context.Context) error { return fmt.Errorf("report: %v", context.Cause(ctx)) },
			func(cause error) string { return "report: " + cause.Error() }},
		{"lost, fn returned ctx.Err()", func(ctx context.Context) error { return ctx.Err() },
			func(cause error) string { return "context canceled; " + cause.Error() }},
		{"lost, fn returned nil", func(context.Context) error { return nil }, func(cause error) string { return cause.Error() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "outcome-" + strings.ReplaceAll(tc.name, " ", "-")
			var cause error
			err := c.client.Do(ctx, key, time.Second, func(ctx context.Context) error {
				c.stealKey(ctx, key)
				<-ctx.Done() // the keeper notices at its next renewal
				cause = context.Cause(ctx)
				return tc.ret(ctx)
			})
			if !errors.As(err, &run) || run.Lost != cause || run.Release != nil || !errors.Is(err, redlock.ErrLockLost) || errors.Is(err, redlock.ErrNotRun) {
				t.Fatalf("lost while fn ran: %v; want a RunError whose Lost is the cause %v", err, cause)
			}
			if want := tc.text(cause); err.Error() != want {
				t.Fatalf("text:\n got %s\nwant %s", err, want)
			}
			if n := strings.Count(err.Error(), "lock lost"); n != 1 {
				t.Fatalf("text says \"lock lost\" %d times: %s", n, err)
			}
		})
	}

	t.Run("release failed", func(t *testing.T) {
		err := c.client.Do(ctx, "outcome", time.Second, func(context.Context) error {
			c.servers[1].Pause()
			c.servers[2].Pause()
			return nil
		})
		c.servers[1].Resume()
		c.servers[2].Resume()
		if !errors.As(err, &run) || run.Err != nil || run.Lost != nil || run.Release == nil ||
			!errors.Is(err, redlock.ErrUnavailable) || errors.Is(err, redlock.ErrNotRun) || errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("release failed after fn succeeded: %v; want a RunError with Release's ErrUnavailable only", err)
		}
		if err.Error() != run.Release.Error() || !strings.HasPrefix(err.Error(), `redlock: quorum unavailable: release "outcome"`) {
			t.Fatalf("text %q, want Release's", err)
		}
	})
}

// TestKeepAliveLossNamesTheNodes: when renewals fail until no renewal can be confirmed
// in time, the loss cause (KeepAlive's context cause, and Do's error) carries the last
// renewal's *QuorumError, whose NodeErrors name exactly the nodes that stopped
// answering: here 3 of 5, paused. It matches ErrLockLost and no other sentinel.
// (Before, the cause said "no renewal confirmed in time" and nothing about the nodes.)
func TestKeepAliveLossNamesTheNodes(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	addrs := redistest.Addrs(c.servers)
	paused := []int{1, 3, 4}
	defer func() {
		for _, i := range paused {
			c.servers[i].Resume()
		}
	}()
	var cause error
	err := c.client.Do(t.Context(), "silent", time.Second, func(ctx context.Context) error {
		for _, i := range paused {
			c.servers[i].Pause()
		}
		<-ctx.Done()
		cause = context.Cause(ctx)
		return cause
	})
	for _, i := range paused {
		c.servers[i].Resume()
	}
	for what, e := range map[string]error{"Do's error": err, "fn's context cause": cause} {
		var qe *redlock.QuorumError
		if !errors.As(e, &qe) {
			t.Fatalf("%s %v carries no QuorumError", what, e)
		}
		if !errors.Is(e, redlock.ErrLockLost) || errors.Is(e, redlock.ErrUnavailable) || errors.Is(e, redlock.ErrNotAcquired) {
			t.Fatalf("%s %v: want ErrLockLost only", what, e)
		}
		var failed []string
		for _, ne := range qe.Errors.Errors {
			var n *redlock.NodeError
			if !errors.As(ne, &n) {
				t.Fatalf("%s: %v is not a NodeError", what, ne)
			}
			failed = append(failed, n.Node)
		}
		want := []string{addrs[1], addrs[3], addrs[4]}
		if strings.Join(failed, ",") != strings.Join(want, ",") {
			t.Fatalf("%s names the failed nodes %v, want the paused %v: %v", what, failed, want, e)
		}
		prefix := `redlock: lock lost: keep alive "silent": no renewal confirmed in time; last extend: 2 of 5 nodes agreed, 3 needed, 3 failed: node ` + addrs[1]
		if !strings.HasPrefix(e.Error(), prefix) {
			t.Fatalf("%s text:\n got %s\nwant it to begin %s", what, e, prefix)
		}
	}
	t.Logf("cause: %v", cause)
}

// TestRunErrorText pins the shape of RunError's text for every combination: each part
// once, fn's error first, "; " between.
func TestRunErrorText(t *testing.T) {
	fnErr := errors.New("write failed")
	lost := errors.New("redlock: lock lost: extend \"k\": 0 of 3 nodes agreed, 2 needed, 3 refused")
	rel := errors.New("redlock: quorum unavailable: release \"k\": 1 of 3 nodes agreed, 2 needed, 2 failed")
	for _, tc := range []struct {
		e    redlock.RunError
		want string
	}{
		{redlock.RunError{Key: "k", Err: fnErr}, "write failed"},
		{redlock.RunError{Key: "k", Lost: lost}, lost.Error()},
		{redlock.RunError{Key: "k", Release: rel}, rel.Error()},
		{redlock.RunError{Key: "k", Err: fnErr, Lost: lost}, "write failed; " + lost.Error()},
		{redlock.RunError{Key: "k", Err: fnErr, Release: rel}, "write failed; " + rel.Error()},
		{redlock.RunError{Key: "k", Err: fmt.Errorf("write: %w", lost), Lost: lost}, "write: " + lost.Error()},
		{redlock.RunError{Key: "k", Err: errors.Join(lost, errors.New("flush")), Lost: lost}, lost.Error() + "\nflush"},
		{redlock.RunError{Key: "k"}, `redlock: do "k": no error`},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.e, got, tc.want)
		}
	}
}
