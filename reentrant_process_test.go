package redlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// reentrantWorkerEnv turns this test binary into a worker process for
// TestReentrantAcrossProcesses: "MODE OWNER KEY TTL ADDR..." (see TestReentrantWorker).
const reentrantWorkerEnv = "REDLOCK_REENTRANT_WORKER"

// TestReentrantWorker is a worker process, not a test: started by
// TestReentrantAcrossProcesses with reentrantWorkerEnv set, it takes a hold of OWNER on
// KEY with one attempt, prints "held TOKEN" (or "error ..."), and then, in mode
// "crash", exits at once without releasing anything (a job that died holding the
// lock); in mode "release", releases the hold when a line arrives on stdin and prints
// "released". A mode ending in "-fair" uses a fair Client (Options.Fair).
func TestReentrantWorker(t *testing.T) {
	spec := os.Getenv(reentrantWorkerEnv)
	if spec == "" {
		t.Skip("a worker for TestReentrantAcrossProcesses, run only by it")
	}
	f := strings.Fields(spec)
	mode, owner, key, addrs := f[0], f[1], f[2], f[4:]
	ttl, err := time.ParseDuration(f[3])
	if err != nil {
		t.Fatal(err)
	}
	var nodes []redis.UniversalClient
	for _, a := range addrs {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: a}))
	}
	mode, fair := strings.CutSuffix(mode, "-fair") // a fair Client (Options.Fair)
	client, err := redlock.New(nodes, redlock.Options{Fair: fair})
	if err != nil {
		t.Fatal(err)
	}
	ctx := redlock.WithOwner(context.Background(), owner)
	lock, err := client.TryAcquire(ctx, key, ttl)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	lock.WaitForCalls()
	fmt.Printf("held %s\n", lock.Token())
	if mode == "crash" {
		os.Exit(0) // no Release, no Close: the process dies holding the lock
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Println("released")
	client.Close()
	for _, n := range nodes {
		n.Close()
	}
}

// worker is a running TestReentrantWorker process.
type worker struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	token string
}

// startWorker starts a worker process and waits until it reports its hold.
func startWorker(t *testing.T, servers []*redistest.Server, mode, owner, key string, ttl time.Duration) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReentrantWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %v %s", reentrantWorkerEnv, mode, owner, key, ttl,
		strings.Join(redistest.Addrs(servers), " ")))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by its PID; a no-op once it has exited
		_ = cmd.Wait()
	})
	line := w.line(t)
	token, ok := strings.CutPrefix(line, "held ")
	if !ok {
		t.Fatalf("worker %s of %s: %q, want held TOKEN", mode, owner, line)
	}
	w.token = token
	return w
}

// line returns the worker's next line of output that is not the test runner's.
func (w *worker) line(t *testing.T) string {
	t.Helper()
	for {
		s, err := w.out.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the worker's output: %v (%q)", err, s)
		}
		if s = strings.TrimSpace(s); strings.HasPrefix(s, "held ") || strings.HasPrefix(s, "error ") || s == "released" {
			return s
		}
	}
}

// TestReentrantAcrossProcesses: a job dies holding its lock; a copy of the job started
// as another OS process with the same owner takes the lock back at once, while another
// owner still finds it held. The dead process's hold is freed only by the lease's TTL.
func TestReentrantAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	ctx := t.Context()
	const ttl = 3 * time.Second

	dead := startWorker(t, c.servers, "crash", "job-42", "k", ttl)
	if err := dead.cmd.Wait(); err != nil {
		t.Fatalf("the first worker: %v", err)
	}
	wantHeldElsewhere(t, redlock.WithOwner(ctx, "job-43"), c.client, "another owner", "k")

	c.takeBack("release", "job-42", "k", ttl, dead)
	// The dead worker's hold stays until the lease's TTL ends.
	wantHeldElsewhere(t, redlock.WithOwner(ctx, "job-43"), c.client, "another owner with the dead hold left", "k")
	start := time.Now()
	var l *redlock.Lock
	eventually(t, "the dead hold's lease to end", func() bool {
		var err error
		l, err = c.client.TryAcquire(redlock.WithOwner(ctx, "job-43"), "k", time.Second)
		if err != nil && !errors.Is(err, redlock.ErrNotAcquired) {
			t.Fatal(err)
		}
		return err == nil
	})
	t.Logf("another owner got the key %v after the last live hold's release (TTL %v)", time.Since(start).Round(time.Millisecond), ttl)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFairReentrantAcrossProcesses: a job dies holding its fair lock while a waiter of
// another owner is queued; a copy of the job started as another OS process with the
// same owner takes the lock back at once, ahead of the waiter, which gets the key
// only once the dead process's hold has run out (its TTL), after the copy released.
func TestFairReentrantAcrossProcesses(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, fairOpts)
	ctx := t.Context()
	const ttl = 2 * time.Second

	died := time.Now() // no later than the dead worker's hold began
	dead := startWorker(t, c.servers, "crash-fair", "job-42", "k", ttl)
	if err := dead.cmd.Wait(); err != nil {
		t.Fatalf("the first worker: %v", err)
	}
	waiter := acquireAsync(redlock.WithOwner(ctx, "job-43"), c.client, "k", 5*time.Second)
	c.waitQueued("k", 1)

	// The copy's one attempt (a TryAcquire) succeeds with the waiter queued: at once.
	c.takeBack("release-fair", "job-42", "k", ttl, dead)
	r := wantResult(t, "the waiter of another owner", waiter)
	if early := died.Add(ttl); r.at.Before(early) {
		t.Errorf("the waiter got the key at %v, before the dead hold's TTL ran out (%v)", r.at.Format(time.StampMilli), early.Format(time.StampMilli))
	}
	t.Logf("the waiter got the key %v after the dead worker began (TTL %v)", r.at.Sub(died).Round(time.Millisecond), ttl)
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// takeBack starts a copy of the job in a worker process of mode, whose one attempt
// (TryAcquire) takes a hold of owner on key beside the dead worker's; it checks that
// every node lists both holds, then has the copy release its hold and exit.
func (c *cluster) takeBack(mode, owner, key string, ttl time.Duration, dead *worker) {
	t := c.t
	t.Helper()
	again := startWorker(t, c.servers, mode, owner, key, ttl)
	for i := range c.servers {
		if got, _ := c.holds(i, key, owner); strings.Join(got, ",") != dead.token+","+again.token {
			t.Fatalf("node %d lists %q, want the dead worker's hold and the new one", i+1, got)
		}
	}
	if _, err := io.WriteString(again.in, "release\n"); err != nil {
		t.Fatal(err)
	}
	if line := again.line(t); line != "released" {
		t.Fatalf("the second worker: %q", line)
	}
	if err := again.cmd.Wait(); err != nil {
		t.Fatalf("the second worker: %v", err)
	}
}
