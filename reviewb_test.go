package redlock_test

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestReviewBKeepAliveStartedLateRenews: a lock whose KeepAlive starts some time after
// its Acquire (the caller prepared its work first) must still be renewed while the
// nodes are healthy. KeepAlive scheduled its first renewal a third of the validity
// after KeepAlive was called, not after the lock's validity began; started when less
// than V/3 + V/10 + NodeTimeout of validity was left, that renewal came after the last
// moment a renewal may start, and the work's context was cancelled as "lost" without a
// single renewal tried.
func TestReviewBKeepAliveStartedLateRenews(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	const ttl = time.Second
	lock, err := acquireRetrying(t, c.client, "late-kept", ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(context.Background())
	first := lock.Until()
	// The caller's preparation, before it asks for renewal: 600 ms of the 990 ms of
	// validity pass (the scenario, not a synchronisation).
	time.Sleep(600 * time.Millisecond)
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	select { // the work: two TTLs
	case <-work.Done():
		t.Fatalf("work context ended with healthy nodes, %v before the validity end: %v",
			time.Until(first).Round(time.Millisecond), context.Cause(work))
	case <-time.After(2 * ttl):
	}
	if !lock.Until().After(first.Add(ttl)) {
		t.Fatalf("Until moved from %v only to %v", first, lock.Until())
	}
}

// lossHidingError is an error of the work that wraps the lock's loss cause (so that
// errors.Is finds it) but says only what the work was doing.
type lossHidingError struct{ cause error }

func (e *lossHidingError) Error() string { return "report aborted" }
func (e *lossHidingError) Unwrap() error { return e.cause }

// TestReviewBRunErrorKeepsTheLossText: fn returns its own error type that wraps
// context.Cause(ctx) but prints only "report aborted". Do's error must still say that
// the lock was lost: RunError's text dropped the loss cause whenever errors.Is found it
// inside fn's error, although fn's text did not contain it, so the log said "report
// aborted" and nothing about the lock.
func TestReviewBRunErrorKeepsTheLossText(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	warmUp(t, c.client)
	err := c.client.Do(t.Context(), "hidden-loss", time.Second, func(ctx context.Context) error {
		c.stealKey(ctx, "hidden-loss")
		<-ctx.Done()
		return &lossHidingError{context.Cause(ctx)}
	})
	var run *redlock.RunError
	if !errors.As(err, &run) || !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v; want a RunError matching ErrLockLost", err)
	}
	if !strings.Contains(err.Error(), "report aborted") || !strings.Contains(err.Error(), run.Lost.Error()) {
		t.Fatalf("Do's text %q: want fn's text and the loss cause %q", err, run.Lost)
	}
}

// TestReviewBSkipIfHeldAfterASplitVote: two other copies of a job started together with
// this one and split the nodes between them: node 2 has copy B's token, node 3 copy C's,
// so no token holds a majority and nobody holds the lock. Their attempts have failed and
// their clean-ups land a moment later. This copy's SET won node 1, whose reply comes
// last (a slow node, or simply the order the replies came in), so its attempt saw two
// refusals and no yes. SkipIfHeld took that for "held elsewhere" and gave up at once,
// returning ErrNotAcquired: the README's job then logs "another copy is writing the
// report" and exits; when B and C see the same (each one's own yes last), no copy runs.
// Refusals from a split vote vanish within a round trip, a holder's stay: the verdict
// "held" must survive a second look before SkipIfHeld gives up.
func TestReviewBSkipIfHeldAfterASplitVote(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Options{})
	rdbs := redistest.Clients(servers)
	gate, others := newReplyGate(), newReplyGate()
	rdbs[0].AddHook(gate)
	rdbs[1].AddHook(others)
	rdbs[2].AddHook(others)
	client, err := redlock.New(rdbs, redlock.Options{NodeTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	t.Cleanup(func() { // first, so that Close does not wait for a held reply
		gate.release()
		others.release()
	})
	c := &cluster{t: t, servers: servers, client: client}
	for _, s := range servers {
		c.admin = append(c.admin, s.Client())
	}
	c.loadScripts()
	ctx := t.Context()
	const key = "split-job"
	c.admin[1].Set(ctx, key, "copy-b", time.Second)
	c.admin[2].Set(ctx, key, "copy-c", time.Second)

	gate.armed.Store(true)
	others.armed.Store(true)
	ran := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- client.Do(context.Background(), key, 10*time.Second, func(context.Context) error {
			ran <- struct{}{}
			return nil
		}, redlock.SkipIfHeld())
	}()
	waitHeld(t, gate) // node 1 set our key; its yes is held
	waitHeld(t, others)
	waitHeld(t, others) // nodes 2 and 3 refused: copies B and C hold them
	gate.armed.Store(false)
	others.armed.Store(false)
	// B's and C's clean-ups land; then the two refusals reach this copy.
	c.admin[1].Del(ctx, key)
	c.admin[2].Del(ctx, key)
	others.release()

	var doErr error
	select {
	case doErr = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return within 10 s")
	}
	select {
	case <-ran:
	default:
		t.Fatalf("no token held a majority, yet SkipIfHeld did not run fn: %v (held elsewhere: %v)",
			doErr, errors.Is(doErr, redlock.ErrNotAcquired))
	}
	if doErr != nil {
		t.Fatalf("Do: %v", doErr)
	}
}

// nestedJobHarness is a program around the README's quick start whose writeReport
// writes its line and then takes a second, finer lock with Do and SkipIfHeld (as a job
// that uploads its report under a lock of the upload's own): that one is held elsewhere,
// so writeReport fails with the nested Do's error.
const nestedJobHarness = `package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
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
	upload, err := redlock.NewFromURLs(strings.Split(os.Getenv("NODE_URLS"), ","), redlock.Options{})
	if err != nil {
		return err
	}
	defer upload.Close()
	if err := upload.Do(ctx, "report-upload", time.Second, func(context.Context) error { return nil }, redlock.SkipIfHeld()); err != nil {
		return fmt.Errorf("uploading the report: %%w", err)
	}
	return nil
}
`

// TestReviewBReadmeJobFailureIsNotQuiet: the README's job ran writeReport, and
// writeReport failed because a lock of its own (a nested Do with SkipIfHeld) was held
// elsewhere. Its error then matches ErrNotRun and ErrNotAcquired through the RunError,
// and the README's switch, which tested those first, logged "another copy is writing
// the report" and exited 0: a failed run that looks like a skipped one. It must exit
// with the failure.
func TestReviewBReadmeJobFailureIsNotQuiet(t *testing.T) {
	c := newCluster(t, 5, redistest.Options{}, redlock.Options{})
	var urls []string
	for _, a := range redistest.Addrs(c.servers) {
		urls = append(urls, "redis://"+a)
	}
	held, err := acquireRetrying(t, c.client, "report-upload", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	bin := buildJob(t, nestedJobHarness, readmeQuickStart(t), urls)
	reports := filepath.Join(t.TempDir(), "reports")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "REPORT_FILE="+reports, "NODE_URLS="+strings.Join(urls, ","))
	out, err := cmd.CombinedOutput()
	data, rerr := os.ReadFile(reports)
	if rerr != nil || !strings.Contains(string(data), "report by") {
		t.Fatalf("writeReport did not run (%v): %s", rerr, out)
	}
	if err == nil || strings.Contains(string(out), "another copy is writing the report") {
		t.Fatalf("writeReport ran and failed, yet the job exited with %v saying:\n%s", err, out)
	}
	t.Logf("job: %v: %s", err, out)
}

// TestReviewBCheckKeepAliveTTLEdges: the options' edges that CheckKeepAliveTTL and New
// let through. A NodeTimeout so large that 20 × NodeTimeout overflows made every TTL
// pass (the floor wrapped to a negative number); a DriftFactor of NaN passed the range
// check (NaN compares false with everything), so New accepted a Client whose every
// validity is garbage, and CheckKeepAliveTTL blamed the TTL with a negative validity.
func TestReviewBCheckKeepAliveTTLEdges(t *testing.T) {
	for _, nt := range []time.Duration{math.MaxInt64, math.MaxInt64 / 15, math.MaxInt64 / 20} {
		if err := (redlock.Options{NodeTimeout: nt}).CheckKeepAliveTTL(time.Second); !errors.Is(err, redlock.ErrTTLTooShort) {
			t.Errorf("CheckKeepAliveTTL(1s) with NodeTimeout %v: %v, want ErrTTLTooShort", nt, err)
		}
	}
	nan := redlock.Options{DriftFactor: math.NaN()}
	if err := nan.CheckKeepAliveTTL(time.Second); err == nil || errors.Is(err, redlock.ErrTTLTooShort) || !strings.Contains(err.Error(), "DriftFactor") {
		t.Errorf("CheckKeepAliveTTL with DriftFactor NaN: %v, want an error about DriftFactor", err)
	}
	servers := redistest.StartN(t, 3, redistest.Options{})
	if client, err := redlock.New(redistest.Clients(servers), nan); err == nil {
		client.Close()
		t.Errorf("New accepted DriftFactor NaN")
	}
}

// TestReviewBKeepAliveNearTheDriftLimit: with DriftFactor 0.95 a TTL of 10.1 s gives a
// renewal 503 ms of validity, just above the 10 × NodeTimeout that CheckKeepAliveTTL
// asks for. With two of three nodes paused, KeepAlive must end the work's context
// before the validity ends (a guard: this passed on main too).
func TestReviewBKeepAliveNearTheDriftLimit(t *testing.T) {
	opts := redlock.Options{DriftFactor: 0.95}
	const ttl = 10100 * time.Millisecond
	if err := opts.CheckKeepAliveTTL(ttl); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3, redistest.Options{}, opts)
	lock, err := acquireRetrying(t, c.client, "near-limit", ttl)
	if err != nil {
		t.Fatal(err)
	}
	work, stop := lock.KeepAlive(t.Context())
	defer stop()
	select { // renewals keep it for a few validities first
	case <-work.Done():
		t.Fatalf("work context ended with healthy nodes: %v", context.Cause(work))
	case <-time.After(1200 * time.Millisecond):
	}
	c.servers[1].Pause()
	c.servers[2].Pause()
	defer c.servers[1].Resume()
	defer c.servers[2].Resume()
	paused := time.Now()
	<-work.Done()
	ended := time.Now()
	until := lock.Until()
	t.Logf("work context ended %v after the pause, %v before the validity end: %v",
		ended.Sub(paused).Round(time.Millisecond), until.Sub(ended).Round(time.Millisecond), context.Cause(work))
	if !errors.Is(context.Cause(work), redlock.ErrLockLost) || !ended.Before(until) {
		t.Fatalf("work context ended at %v, validity end %v, cause %v", ended, until, context.Cause(work))
	}
}

// TestReviewBDoNilFunc: Do with a nil fn is bad input: it must return an error (fn did
// not run) before acquiring anything. It acquired the lock and then panicked calling
// nil (the deferred Release removed the key, but the caller's program crashed).
func TestReviewBDoNilFunc(t *testing.T) {
	c := newCluster(t, 3, redistest.Options{}, redlock.Options{})
	var err error
	panicked := func() (p any) {
		defer func() { p = recover() }()
		err = c.client.Do(t.Context(), "nil-fn", time.Second, nil)
		return nil
	}()
	if panicked != nil {
		t.Fatalf("Do with a nil fn panicked: %v", panicked)
	}
	if !errors.Is(err, redlock.ErrNotRun) {
		t.Fatalf("Do with a nil fn: %v, want an error matching ErrNotRun", err)
	}
	c.wantValues("nil-fn", "", "", "")
}
