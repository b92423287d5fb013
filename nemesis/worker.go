package nemesis

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fenced"
	"github.com/redlock-go/redlock/redlocktest"
)

// WorkerEnv names the environment variable that turns a process into a worker of a
// run: the run starts its own program again (os.Args[0]) with this variable set, and
// the program must call RunWorkerIfAsked first thing (a test binary: in TestMain).
const WorkerEnv = "REDLOCK_NEMESIS_WORKER"

// RunWorkerIfAsked runs a worker process and exits when WorkerEnv is set; otherwise
// it returns at once.
func RunWorkerIfAsked() {
	spec := os.Getenv(WorkerEnv)
	if spec == "" {
		return
	}
	if err := runWorker(spec); err != nil {
		fmt.Fprintln(os.Stderr, "nemesis worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// workerSpec is what a run tells a worker process. The process draws its Clients and
// sessions from the schedule of Seed and Family, as the run does.
type workerSpec struct {
	Seed        uint64     `json:"seed"`
	Family      Family     `json:"family"`
	Proc        int        `json:"proc"`
	Proxies     [][]string `json:"proxies"` // per Client of this process, the node addresses it dials
	Resource    string     `json:"resource"`
	History     string     `json:"history"`
	FirstClient int        `json:"first_client"`
	FirstWorker int        `json:"first_worker"`
}

// worker is one goroutine that runs sessions on one Client.
type worker struct {
	proc, client, id int
	c                *redlock.Client
	spec             ClientSpec
	s                *Schedule
	res              *redis.Client
	h                *historyWriter
	r                *rand.Rand
	n                int
	owner            string // WithOwner's owner for every Acquire ("" none)
}

// clusterMember returns the ClusterClient of a Cluster member (NodeSpec.Cluster) that
// the Client reaches through its proxy at addr. The cluster's one master holds every
// slot; the slot map is given (ClusterSlots), so the client never learns the master's
// own address from CLUSTER SLOTS and every call goes through the proxy and its faults.
// A ClusterClient re-sends a command after a network error, CLUSTERDOWN or LOADING,
// and follows MOVED and ASK, up to MaxRedirects times (3 by default, whatever
// MaxRetries says): -1 turns that off, as MaxRetries is off for the plain nodes.
// Addrs names the member in the library's node names (cluster[addr]).
func clusterMember(addr string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{addr},
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: addr}}}}, nil
		},
		DialTimeout:  250 * time.Millisecond,
		ReadTimeout:  500 * time.Millisecond,
		WriteTimeout: 500 * time.Millisecond,
		MaxRetries:   -1,
		MaxRedirects: -1,
	})
}

// runWorker runs one worker process: it sets up its Clients, says "ready", starts on
// "go", stops starting sessions on "stop" (or when stdin closes), finishes the ones
// under way (releasing their locks), closes everything and says "done".
func runWorker(specJSON string) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	s := Generate(spec.Seed, spec.Family)
	h, err := newHistoryWriter(spec.History)
	if err != nil {
		return err
	}
	res := redis.NewClient(&redis.Options{Addr: spec.Resource, MaxRetries: -1})
	defer res.Close()

	var clients []*redlock.Client
	var rdbs []io.Closer
	var dups []*redlocktest.Duplicator
	var workers []*worker
	wid := spec.FirstWorker
	for i, cs := range s.Procs[spec.Proc] {
		global := spec.FirstClient + i
		nodes := make([]redis.UniversalClient, len(spec.Proxies[i]))
		for n, addr := range spec.Proxies[i] {
			if s.Nodes[n].Cluster {
				// No duplicates here: the Duplicator wraps a plain client's connection.
				cc := clusterMember(addr)
				rdbs = append(rdbs, cc)
				nodes[n] = cc
				continue
			}
			rdb := redis.NewClient(&redis.Options{
				Addr:         addr,
				DialTimeout:  250 * time.Millisecond,
				ReadTimeout:  500 * time.Millisecond,
				WriteTimeout: 500 * time.Millisecond,
				MaxRetries:   -1, // the quorum is the retry; duplicates come from the Duplicator
			})
			rdbs = append(rdbs, rdb)
			if cs.Duplicate > 0 {
				dopts := redlocktest.DuplicateOptions{
					Fraction: cs.Duplicate, MaxDelay: cs.DupDelay,
					Seed: spec.Seed*1000 + uint64(global)*10 + uint64(n),
				}
				if cs.DupHandoffs {
					dopts.Match = isHandoff
				}
				d := redlocktest.NewDuplicator(rdb.Options(), dopts)
				rdb.AddHook(d)
				dups = append(dups, d)
			}
			nodes[n] = rdb
		}
		c, err := redlock.New(nodes, redlock.Options{
			Fencing:     cs.Fencing,
			Fair:        cs.Fair,
			FairLease:   cs.FairLease,
			NodeTimeout: cs.NodeTimeout,
			RetryDelay:  redlock.ExponentialJitter(cs.RetryMax/25, cs.RetryMax),
		})
		if err != nil {
			return err
		}
		clients = append(clients, c)
		for range cs.Workers {
			workers = append(workers, &worker{
				proc: spec.Proc, client: global, id: wid, c: c, spec: cs, s: s, res: res, h: h,
				r: rand.New(rand.NewPCG(spec.Seed, uint64(wid)+1)), owner: workerOwner(cs, wid),
			})
			wid++
		}
	}

	// Warm up: connect every Client to every node and load the scripts, so that the
	// first attempts of the run are not the ones that dial (on a loaded machine a cold
	// start can take longer than a node timeout).
	// Until one whole Acquire and Release went through, each on a key of its own.
	for i, c := range clients {
		var err error
		for try, deadline := 0, time.Now().Add(20*time.Second); time.Now().Before(deadline); try++ {
			key := fmt.Sprintf("warm-up-%d-%d-%d", spec.Proc, i, try)
			wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var lock *redlock.Lock
			if lock, err = c.Acquire(wctx, key, time.Second); err == nil {
				err = lock.Release(wctx)
			}
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("warming up client %d: %w", spec.FirstClient+i, err)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() || in.Text() != "go" {
		return fmt.Errorf("expected \"go\" on stdin, got %q (%v)", in.Text(), in.Err())
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() { // "stop", or stdin closed
		for in.Scan() && strings.TrimSpace(in.Text()) != "stop" {
		}
		stop()
	}()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w.session(ctx)
			}
		}()
	}
	wg.Wait()
	stop()
	var errs []error
	for _, c := range clients {
		errs = append(errs, c.Close())
	}
	for _, d := range dups {
		errs = append(errs, d.Close())
	}
	for _, rdb := range rdbs {
		_ = rdb.Close()
	}
	errs = append(errs, h.Close())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

// isHandoff reports whether cmd is a script call with one key and three arguments:
// the handoff step (KEYS: the lock; ARGV: the releasing token, the new token, the
// TTL). reentrant_acquire.lua and reentrant_extend.lua have that shape too, but the
// handoff family, the one that narrows copies to handoffs, has no owners.
func isHandoff(cmd redis.Cmder) bool {
	args := cmd.Args()
	if n := cmd.Name(); (n != "evalsha" && n != "eval") || len(args) != 7 {
		return false
	}
	return fmt.Sprint(args[2]) == "1"
}

// between draws a duration uniformly from [lo, hi].
func (w *worker) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.r.Int64N(int64(hi-lo)+1))
}

// record fills in who did it and writes r.
func (w *worker) record(r Record) {
	r.Proc, r.Client, r.Worker = w.proc, w.client, w.id
	w.h.add(r)
}

// untilNs converts a lock's Until to CLOCK_MONOTONIC nanoseconds.
func untilNs(l *redlock.Lock) int64 {
	return monotonic() + int64(time.Until(l.Until()))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// session runs one session of a kind drawn from the Client's list.
func (w *worker) session(ctx context.Context) {
	w.n++
	kind := w.spec.Sessions[w.r.IntN(len(w.spec.Sessions))]
	key := w.s.Keys[w.r.IntN(len(w.s.Keys))]
	id := fmt.Sprintf("%d.%d.%d.%d", w.proc, w.client, w.id, w.n)
	ttl := w.s.TTL
	base := Record{Session: id, Kind: kind, Key: key, TTL: ttl.Milliseconds(), Owner: w.owner}
	// A pause between sessions, so that the key is sometimes free with nobody waiting.
	sleep(ctx, w.between(0, 30*time.Millisecond))
	if ctx.Err() != nil {
		return
	}
	if kind == SessDo {
		w.do(ctx, base, ttl)
		return
	}

	wait := w.between(ttl/2, 3*ttl)
	if kind == SessShortWait {
		wait = w.between(0, 3*time.Millisecond)
	}
	actx, cancel := context.WithTimeout(w.withOwner(ctx), wait)
	rec := base
	rec.Op = OpAcquire
	rec.Try = kind == SessTry
	rec.Inv = monotonic()
	rec.Deadline = rec.Inv + int64(wait)
	var lock *redlock.Lock
	var err error
	if rec.Try {
		lock, err = w.c.TryAcquire(actx, key, ttl)
	} else {
		lock, err = w.c.Acquire(actx, key, ttl)
	}
	rec.Ret = monotonic()
	cancel()
	rec.Ok, rec.Err = err == nil, errClass(err)
	if err != nil {
		rec.Detail = err.Error()
		w.record(rec)
		return
	}
	rec.Until, rec.Fence = untilNs(lock), lock.Fence()
	w.record(rec)

	switch kind {
	case SessNested:
		w.nested(ctx, base, lock)
		return
	case SessHold, SessTry, SessShortWait:
		hold := w.between(0, ttl/10)
		if w.s.Family == LateExtend { // in and out while a late extend is on its way
			hold = w.between(0, 5*time.Millisecond)
		}
		w.work(ctx, base, lock, hold)
	case SessAbandon:
		w.work(ctx, base, lock, w.between(0, ttl/10))
		w.end(base, lock, 0) // never released: valid until Until
		return
	case SessToUntil:
		w.work(ctx, base, lock, 0)
		sleep(ctx, time.Until(lock.Until()))
	case SessExtend:
		times := 1 + w.r.IntN(3)
		if w.s.Family == Handoff {
			times = 1
		}
		for range times {
			sleep(ctx, w.between(0, ttl/3))
			to := w.between(ttl, w.s.MaxTTL).Round(time.Millisecond)
			if w.s.Family == Handoff {
				to = w.s.MaxTTL
			}
			if !w.extend(ctx, base, lock, to) {
				break
			}
		}
		hold := w.between(0, time.Until(lock.Until())*3/4)
		if w.s.Family == Handoff { // to near the end of the extended validity
			hold = time.Until(lock.Until()) - w.between(0, ttl/4)
		}
		w.work(ctx, base, lock, hold)
	case SessLateExtend:
		sleep(ctx, time.Until(lock.Until())-w.between(0, 15*time.Millisecond))
		if w.extend(ctx, base, lock, w.s.MaxTTL) {
			w.work(ctx, base, lock, w.between(0, 20*time.Millisecond))
		}
	case SessKeepAlive:
		kctx, stop := lock.KeepAlive(ctx)
		rec := base
		rec.Op, rec.Inv = OpKeepAlive, monotonic()
		// Held for up to two TTLs: past the first Until, on the renewals alone
		// (kctx ends if they fail).
		if lock.Fence() > 0 {
			w.fencedIO(base, lock.Fence())
		}
		sleep(kctx, w.between(ttl/2, 2*ttl))
		stop()
		rec.Ret = monotonic()
		cause := context.Cause(kctx)
		rec.Ok = !errors.Is(cause, redlock.ErrLockLost)
		if !rec.Ok {
			rec.Err, rec.Detail = errClass(cause), cause.Error()
		}
		rec.Until = untilNs(lock)
		w.record(rec)
	}
	w.release(base, lock)
}

// extend runs one Extend and records it; it reports whether it succeeded.
func (w *worker) extend(ctx context.Context, base Record, lock *redlock.Lock, to time.Duration) bool {
	rec := base
	rec.Op, rec.TTL, rec.Inv = OpExtend, to.Milliseconds(), monotonic()
	err := lock.Extend(ctx, to)
	rec.Ret = monotonic()
	rec.Ok, rec.Err, rec.Until = err == nil, errClass(err), untilNs(lock)
	if err != nil {
		rec.Detail = err.Error()
	}
	w.record(rec)
	return err == nil
}

// work uses the lock for d (less if ctx ends or the lock's validity, as it is now, does):
// with a fencing token, a read and a write of the key's fenced resource.
func (w *worker) work(ctx context.Context, base Record, lock *redlock.Lock, d time.Duration) {
	deadline := time.Now().Add(d)
	if fence := lock.Fence(); fence > 0 {
		w.fencedIO(base, fence)
	}
	sleep(ctx, min(time.Until(deadline), time.Until(lock.Until())))
}

// fencedIO reads the key's resource and writes a value of this session with fence.
func (w *worker) fencedIO(base Record, fence uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resKey := "resource:" + base.Key
	rec := base
	rec.Op, rec.Inv = OpRead, monotonic()
	v, tok, err := fenced.Read(ctx, w.res, resKey)
	rec.Ret = monotonic()
	rec.Ok, rec.Value, rec.Fence = err == nil, v, tok
	if err != nil {
		rec.Detail = err.Error()
		rec.Ambiguous = true // a read changes nothing; an unknown result constrains nothing
	}
	w.record(rec)

	rec = base
	rec.Op, rec.Fence, rec.Value, rec.Inv = OpWrite, fence, fmt.Sprintf("%s/%d", base.Session, w.r.Uint32()), monotonic()
	err = fenced.Write(ctx, w.res, resKey, rec.Value, fence)
	rec.Ret = monotonic()
	switch {
	case err == nil:
		rec.Ok = true
	case errors.Is(err, fenced.ErrStale):
		rec.Err = "stale"
	default:
		rec.Err, rec.Detail, rec.Ambiguous = "other", err.Error(), true
	}
	w.record(rec)
}

// release records the end of the lock's window and releases it.
func (w *worker) release(base Record, lock *redlock.Lock) {
	inv := monotonic()
	w.end(base, lock, inv)
	rec := base
	rec.Op, rec.Inv = OpRelease, inv
	err := lock.Release(context.Background())
	rec.Ret = monotonic()
	rec.Ok, rec.Err = err == nil, errClass(err)
	if err != nil {
		rec.Detail = err.Error()
	}
	w.record(rec)
}

// end records the end of the lock's validity window: the earlier of its Until and
// released (the invocation of its Release; 0 when it is never released).
func (w *worker) end(base Record, lock *redlock.Lock, released int64) {
	rec := base
	rec.Op = OpEnd
	rec.Until = untilNs(lock)
	rec.Ret = rec.Until
	if released > 0 && released < rec.Ret {
		rec.Ret = released
	}
	rec.Inv = rec.Ret
	w.record(rec)
}

// do runs a session through Client.Do: the window is fn's run, which ends when fn's
// context ends (the lock could not be kept) or its work is done.
func (w *worker) do(ctx context.Context, base Record, ttl time.Duration) {
	rec := base
	rec.Op, rec.Inv = OpDo, monotonic()
	var start, stop int64
	hold := w.between(0, ttl)
	// No deadline: fn's context derives from ctx, and must end only with the lock
	// (or when the run stops).
	err := w.c.Do(w.withOwner(ctx), base.Key, ttl, func(fctx context.Context) error {
		start = monotonic()
		sleep(fctx, hold)
		stop = monotonic()
		return nil
	})
	if start == 0 { // Acquire failed: fn never ran
		rec.Ret = monotonic()
		rec.Err, rec.Detail = errClass(err), fmt.Sprint(err)
		w.record(rec)
		return
	}
	rec.Ret, rec.Ok = start, true
	if err != nil {
		rec.Err, rec.Detail = errClass(err), err.Error()
	}
	w.record(rec)
	end := base
	end.Op, end.Inv, end.Ret = OpEnd, stop, stop
	w.record(end)
}
