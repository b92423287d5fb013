package nemesis

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunWorkerIfAsked() // the worker processes of a run are this binary
	os.Exit(m.Run())
}

// The environment of TestSoak (see the Makefile's soak target).
const (
	DurationEnv = "NEMESIS_DURATION" // how long to soak, e.g. 60s; unset: TestSoak skips
	SeedEnv     = "NEMESIS_SEED"     // replay this one seed (with NEMESIS_FAMILY, default cycling)
	FamilyEnv   = "NEMESIS_FAMILY"   // only this family
	OutEnv      = "NEMESIS_OUT"      // where a failing run's pictures go (default: a new temporary directory)
)

func TestGenerateRepeats(t *testing.T) {
	for _, f := range Families {
		a, b := Generate(7, f), Generate(7, f)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: seed 7 gave two different schedules:\n%s\n%s", f, a, b)
		}
	}
	if reflect.DeepEqual(Generate(7, Mixed), Generate(8, Mixed)) {
		t.Error("seeds 7 and 8 gave the same schedule")
	}
}

// TestGenerateStaysInsideAssumptions checks a thousand schedules against the
// documented assumptions: a majority of nodes never killed or paused, a node without
// persistence down for longer than the largest TTL, clock rates within half the drift
// allowance, fencing only on durable nodes, client pauses shorter than the margin.
func TestGenerateStaysInsideAssumptions(t *testing.T) {
	for seed := uint64(1); seed <= 1000; seed++ {
		for _, f := range Families {
			s := Generate(seed, f)
			fencing := false
			for _, c := range s.Clients() {
				fencing = fencing || c.Fencing
			}
			for i, n := range s.Nodes {
				if n.Rate < 0.995 || n.Rate > 1.006 {
					t.Fatalf("seed %d %s: node %d clock rate %v", seed, f, i+1, n.Rate)
				}
				if fencing && !n.AOF {
					t.Fatalf("seed %d %s: fencing with node %d not durable", seed, f, i+1)
				}
			}
			for _, x := range s.Faults {
				switch x.Kind {
				case FaultKill:
					if !s.Nodes[x.Nodes[0]].AOF && x.End-x.Start <= s.MaxTTL {
						t.Fatalf("seed %d %s: %s: an empty restart before the largest TTL %v", seed, f, x, s.MaxTTL)
					}
				case FaultClientPause:
					if x.End-x.Start > s.TTL/10-50*time.Millisecond { // KeepAlive's margin, less scheduling slack
						t.Fatalf("seed %d %s: %s longer than the safety margin", seed, f, x)
					}
				}
				if x.Kind != FaultKill && x.Kind != FaultPause {
					continue
				}
				down := 0
				for _, y := range s.Faults {
					end := y.End
					if y.Kind == FaultKill && s.Nodes[y.Nodes[0]].Cluster {
						end += clusterWritableDelay // refusing keyed commands after its restart
					}
					if (y.Kind == FaultKill || y.Kind == FaultPause) && y.Start <= x.Start && x.Start < end {
						down++
					}
				}
				if down > 2 {
					t.Fatalf("seed %d %s: %d nodes down at %v", seed, f, down, x.Start)
				}
			}
		}
	}
}

// window builds the records of one granted lock: granted at grant (ms), valid to end.
func window(session string, worker int, inv, grant, end int64) []Record {
	m := int64(time.Millisecond)
	return []Record{
		{Op: OpAcquire, Session: session, Worker: worker, Key: "k", Inv: inv * m, Ret: grant * m, Ok: true, Until: end * m},
		{Op: OpEnd, Session: session, Worker: worker, Key: "k", Inv: end * m, Ret: end * m, Until: end * m},
		{Op: OpRelease, Session: session, Worker: worker, Key: "k", Inv: end * m, Ret: end*m + m, Ok: true},
	}
}

func checkOnly(recs ...[]Record) *Report {
	var all []Record
	for _, r := range recs {
		all = append(all, r...)
	}
	return Check(&Schedule{Keys: []string{"k"}, MaxTTL: time.Second}, all, nil, 0)
}

func TestLeaseMutexModel(t *testing.T) {
	// Back to back, and a waiter whose call overlapped the first window: fine.
	if rep := checkOnly(window("a", 0, 0, 1, 10), window("b", 1, 2, 10, 20), window("c", 2, 5, 25, 30)); !rep.OK() {
		t.Errorf("disjoint windows rejected: %v", rep.Violations)
	}
	// b granted while a was still valid.
	rep := checkOnly(window("a", 0, 0, 1, 10), window("b", 1, 2, 9, 20))
	if rep.OK() || rep.Violations[0].Check != "lease mutex" || !strings.Contains(rep.Violations[0].Text, "a (worker 0") {
		t.Errorf("overlapping windows: %v", rep.Violations)
	}
	if rep.Grants != 2 || rep.Ops != 4 {
		t.Errorf("grants %d ops %d, want 2 and 4", rep.Grants, rep.Ops)
	}
}

func TestFencedRegisterModel(t *testing.T) {
	m := int64(time.Millisecond)
	w := func(tok uint64, v string, ok bool, inv, ret int64) Record {
		r := Record{Op: OpWrite, Key: "k", Fence: tok, Value: v, Ok: ok, Inv: inv * m, Ret: ret * m}
		if !ok {
			r.Err = "stale"
		}
		return r
	}
	rd := func(tok uint64, v string, inv, ret int64) Record {
		return Record{Op: OpRead, Key: "k", Fence: tok, Value: v, Ok: true, Inv: inv * m, Ret: ret * m}
	}
	good := []Record{w(1, "a", true, 0, 1), rd(1, "a", 2, 3), w(3, "b", true, 4, 5), w(2, "c", false, 6, 7), rd(3, "b", 8, 9)}
	if rep := checkOnly(good); !rep.OK() {
		t.Errorf("a good history rejected: %v", rep.Violations)
	}
	lower := []Record{w(3, "b", true, 0, 1), w(2, "c", true, 2, 3)} // a lower token accepted
	if rep := checkOnly(lower); rep.OK() {
		t.Error("a lower token accepted after a higher one: not seen")
	}
	stale := []Record{w(1, "a", true, 0, 1), rd(0, "", 2, 3)} // a read that missed a completed write
	if rep := checkOnly(stale); rep.OK() {
		t.Error("a stale read: not seen")
	}
	amb := w(5, "x", false, 0, 1)
	amb.Err, amb.Ambiguous = "other", true // may land any time after its call
	if rep := checkOnly([]Record{amb, rd(0, "", 2, 3), rd(5, "x", 4, 5)}); !rep.OK() {
		t.Errorf("an ambiguous write that landed late rejected: %v", rep.Violations)
	}
}

func TestAvailabilityCheck(t *testing.T) {
	s := &Schedule{Keys: []string{"k"}, MaxTTL: time.Second, Checkers: Checks{Availability: true}}
	m := int64(time.Millisecond)
	waiter := Record{Op: OpAcquire, Session: "w", Worker: 3, Key: "k", Inv: 500 * m, Ret: 4000 * m, Err: "not-acquired"}
	var recs []Record
	recs = append(recs, window("a", 0, 400, 400, 600)...)
	recs = append(recs, waiter)
	rep := Check(s, recs, nil, 0)
	if rep.OK() || rep.Violations[0].Check != "availability" {
		t.Fatalf("3.4 s of waiting with the key free: %v", rep.Violations)
	}
	// The same with a fault on meanwhile: explained.
	rep = Check(s, recs, []Executed{{Fault: Fault{Kind: FaultPause, Nodes: []int{0}}, From: 700 * m, To: 2000 * m}}, 0)
	if !rep.OK() {
		t.Errorf("a gap during and after a fault: %v", rep.Violations)
	}
}

// TestRunShort runs one short randomized schedule on real redis-server processes and
// checks it: the whole machinery, in a few seconds.
func TestRunShort(t *testing.T) {
	s := Generate(1, Mixed)
	s.Length = 3 * time.Second
	res, err := Run(t, s, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	t.Logf("%d records, %d grants, %d operations checked, %d faults", len(res.Records), res.Check.Grants, res.Check.Ops, len(res.Faults))
	if !res.Check.OK() {
		t.Fatalf("violations %v; files %v\n%s", res.Check.Violations, res.Files, s)
	}
	if res.Check.Grants == 0 {
		t.Errorf("no grant in 3 s\n%s", res.Stderr)
	}
}

// TestSoak runs randomized schedules with checking for NEMESIS_DURATION, printing
// each seed, and stops at the first violation with the paths of its pictures.
// NEMESIS_SEED replays one seed (of NEMESIS_FAMILY, or of every family).
func TestSoak(t *testing.T) {
	durS, seedS, famS := os.Getenv(DurationEnv), os.Getenv(SeedEnv), os.Getenv(FamilyEnv)
	if durS == "" && seedS == "" {
		t.Skipf("set %s (e.g. 60s) or %s to soak", DurationEnv, SeedEnv)
	}
	var dur time.Duration
	if durS != "" {
		var err error
		if dur, err = time.ParseDuration(durS); err != nil {
			t.Fatalf("%s: %v", DurationEnv, err)
		}
	}
	families := Families
	if famS != "" {
		f, err := ParseFamily(famS)
		if err != nil {
			t.Fatal(err)
		}
		families = []Family{f}
	}
	first := rand.Uint64() % 1_000_000_000
	replay := seedS != ""
	if replay {
		n, err := strconv.ParseUint(seedS, 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", SeedEnv, err)
		}
		first = n
	}
	fmt.Printf("nemesis soak: first seed %d, families %v, duration %v\n", first, families, dur)
	start := time.Now()
	var schedules, ops, grants, records int
	for i := 0; ; i++ {
		seed := first + uint64(i)/uint64(len(families))
		family := families[i%len(families)]
		if replay {
			if i >= len(families) {
				break
			}
			seed = first
		} else if time.Since(start) >= dur {
			break
		}
		s := Generate(seed, family)
		var res *Result
		ok := t.Run(fmt.Sprintf("seed=%d/%s", seed, family), func(t *testing.T) {
			var err error
			res, err = Run(t, s, os.Getenv(OutEnv))
			if err != nil {
				t.Fatalf("seed %d %s: %v\n%s", seed, family, err, res.Stderr)
			}
		})
		if !ok {
			t.FailNow()
		}
		schedules++
		ops += res.Check.Ops
		grants += res.Check.Grants
		records += len(res.Records)
		members := 0
		for _, n := range res.Schedule.Nodes {
			if n.Cluster {
				members++
			}
		}
		fmt.Printf("nemesis: seed %d family %s: %d records, %d grants, %d operations checked, %d faults, %d Cluster members, %v\n",
			seed, family, len(res.Records), res.Check.Grants, res.Check.Ops, len(res.Faults), members, res.WorkersRun.Round(time.Millisecond))
		if !res.Check.OK() {
			for _, v := range res.Check.Violations {
				fmt.Printf("NEMESIS VIOLATION seed=%d family=%s: %s\n", seed, family, v)
			}
			for _, f := range res.Files {
				fmt.Printf("  picture: %s\n", f)
			}
			fmt.Printf("  replay: make soak SEED=%d FAMILY=%s\n%s", seed, family, s)
			t.Fatalf("seed %d family %s: %d violations", seed, family, len(res.Check.Violations))
		}
	}
	fmt.Printf("nemesis soak: %d schedules, %d operations checked (%d grants, %d records), no violation, %v\n",
		schedules, ops, grants, records, time.Since(start).Round(time.Second))
}

// TestRenderFailingHistory: a rejected history gets porcupine's visualization (with
// the faults as annotations) and safety's timeline, and the report names the pair.
func TestRenderFailingHistory(t *testing.T) {
	s := &Schedule{Seed: 9, Family: Mixed, Length: time.Second, Keys: []string{"k"}, MaxTTL: time.Second}
	var recs []Record
	recs = append(recs, window("0.0.0.1", 0, 0, 1, 300)...)
	recs = append(recs, window("1.1.1.1", 1, 2, 200, 400)...)
	m := int64(time.Millisecond)
	faults := []Executed{{Fault: Fault{Kind: FaultPause, Nodes: []int{2}, Start: 100 * time.Millisecond, End: 250 * time.Millisecond}, From: 100 * m, To: 250 * m}}
	res := &Result{Schedule: s, Records: recs, Faults: faults, Check: Check(s, recs, faults, 0)}
	if res.Check.OK() {
		t.Fatal("overlap not seen")
	}
	files, err := Render(t.TempDir(), res)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"porcupine-mutex-k.html": {"granted 0.0.0.1", "valid no more: 0.0.0.1", "node 3", "pause"},
		"timeline.html":          {"seed 9, mixed, key k", "paused (SIGSTOP)", "lease mutex"},
		"schedule.txt":           {"VIOLATION lease mutex on k"},
	}
	if len(files) != len(want) {
		t.Errorf("files %v, want %d", files, len(want))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range want[filepath.Base(f)] {
			if !strings.Contains(string(b), s) {
				t.Errorf("%s does not mention %q", filepath.Base(f), s)
			}
		}
	}
}
