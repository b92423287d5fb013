package nemesis

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// owned returns window's records with every record acquired for owner.
func owned(owner string, recs []Record) []Record {
	for i := range recs {
		recs[i].Owner = owner
	}
	return recs
}

func TestLeaseMutexOwners(t *testing.T) {
	// Holds of one owner overlap, from two workers; a nested hold outlives the
	// first; another owner comes after the last hold's window.
	ok := checkOnly(owned("A", window("a1", 0, 0, 1, 10)), owned("A", window("a2", 1, 2, 5, 20)),
		owned("A", window("a3", 2, 6, 8, 12)), owned("B", window("b", 3, 9, 21, 30)), window("p", 4, 22, 31, 40))
	if !ok.OK() {
		t.Errorf("one owner's overlapping holds rejected: %v", ok.Violations)
	}
	for name, recs := range map[string][][]Record{
		"another owner while the nested hold is open": {owned("A", window("a1", 0, 0, 1, 10)), owned("A", window("a2", 1, 2, 5, 20)), owned("B", window("b", 2, 9, 15, 30))},
		"a lock without owner inside an owner's hold": {owned("A", window("a1", 0, 0, 1, 10)), window("p", 1, 2, 5, 20)},
		"an owner inside a lock without owner":        {window("p", 0, 0, 1, 10), owned("A", window("a1", 1, 2, 5, 20))},
		"two owners whose names only share a prefix":  {owned("A", window("a1", 0, 0, 1, 10)), owned("AB", window("b", 1, 2, 5, 20))},
	} {
		rep := checkOnly(recs...)
		if rep.OK() || rep.Violations[0].Check != "lease mutex" {
			t.Errorf("%s: not seen (%v)", name, rep.Violations)
		}
	}
}

func TestFairnessCheck(t *testing.T) {
	m := int64(time.Millisecond)
	s := &Schedule{Keys: []string{"k"}, MaxTTL: time.Second, Checkers: Checks{Fairness: true}}
	// waiter: a blocking Acquire called at inv, granted at grant (0: gave up at its
	// deadline dl, returning 150 ms later: a slow leave).
	waiter := func(session string, worker int, inv, grant, dl int64) []Record {
		if grant > 0 {
			return window(session, worker, inv, grant, grant+10)
		}
		return []Record{{Op: OpAcquire, Session: session, Worker: worker, Key: "k", Inv: inv * m, Ret: (dl + 150) * m, Deadline: dl * m, Err: "not-acquired"}}
	}
	cases := []struct {
		name string
		recs [][]Record
		bad  bool
	}{
		{"in order", [][]Record{window("h", 0, 0, 1, 900), waiter("a", 1, 10, 900, 0), waiter("b", 2, 400, 910, 0)}, false},
		{"b called 300 ms after a, granted first", [][]Record{window("h", 0, 0, 1, 900), waiter("a", 1, 10, 1000, 0), waiter("b", 2, 310, 900, 0)}, true},
		{"a TryAcquire that jumps the queue", [][]Record{waiter("a", 1, 10, 1000, 0), tryGrant("t", 2, 500, 501, 600)}, true},
		{"b within the margin", [][]Record{window("h", 0, 0, 1, 900), waiter("a", 1, 10, 1000, 0), waiter("b", 2, 200, 900, 0)}, false},
		{"a gave up before b's grant", [][]Record{window("h", 0, 0, 1, 900), waiter("a", 1, 10, 0, 800), waiter("b", 2, 310, 900, 0)}, false},
		{"a gave up after b's grant", [][]Record{window("h", 0, 0, 1, 900), waiter("a", 1, 10, 0, 950), waiter("b", 2, 310, 900, 0)}, true},
		// Owner o holds from 1 to 900: o's second hold, called at 500, joins it ahead of
		// a (reentrancy); called at 950, after o's hold ended, it overtakes a.
		{"an owner's hold ahead of the queue", [][]Record{owned("o", window("h", 0, 0, 1, 900)), waiter("a", 1, 10, 1000, 0), owned("o", window("n", 3, 500, 520, 600))}, false},
		{"an owner's grant after its hold ended", [][]Record{owned("o", window("h", 0, 0, 1, 900)), waiter("a", 1, 10, 1100, 0), owned("o", window("n", 3, 950, 960, 1000))}, true},
		// o's hold ends at 900 and its Release returns at 930: a hold of o called at
		// 910 may find the key still o's on a majority.
		{"an owner's hold while its release is out", [][]Record{owned("o", slowRelease(window("h", 0, 0, 1, 900), 930)), waiter("a", 1, 10, 1100, 0), owned("o", window("n", 3, 910, 915, 1000))}, false},
		{"an owner's hold after its release returned", [][]Record{owned("o", slowRelease(window("h", 0, 0, 1, 900), 930)), waiter("a", 1, 10, 1100, 0), owned("o", window("n", 3, 940, 945, 1000))}, true},
		{"another owner's grant during o's hold", [][]Record{owned("o", window("h", 0, 0, 1, 900)), waiter("a", 1, 10, 1000, 0), owned("p", window("n", 3, 500, 520, 600))}, true},
		{"one owner's waiter and grant", [][]Record{window("h", 0, 0, 1, 900), owned("o", waiter("a", 1, 10, 1100, 0)), owned("o", window("n", 3, 950, 960, 1000))}, false},
	}
	for _, c := range cases {
		var all []Record
		for _, r := range c.recs {
			all = append(all, r...)
		}
		rep := Check(s, all, nil, 0)
		switch {
		case c.bad && !slices.ContainsFunc(rep.Violations, func(v Violation) bool { return v.Check == "fairness" }):
			t.Errorf("%s: not seen (%v)", c.name, rep.Violations)
		case !c.bad && !rep.OK():
			t.Errorf("%s: %v", c.name, rep.Violations)
		}
	}
}

// slowRelease makes window recs' Release return at ret ms.
func slowRelease(recs []Record, ret int64) []Record {
	for i := range recs {
		if recs[i].Op == OpRelease {
			recs[i].Ret = ret * int64(time.Millisecond)
		}
	}
	return recs
}

// tryGrant is a granted TryAcquire's window.
func tryGrant(session string, worker int, inv, grant, end int64) []Record {
	recs := window(session, worker, inv, grant, end)
	recs[0].Try = true
	return recs
}

// TestGenerateModes checks the modes a thousand seeds draw: fair Clients all or none
// in a schedule, owners among them (never fenced: refused with Fair), never fenced while
// fairFencing is false; the Clients of one owner all fenced or all not; the reentrant
// and fair families made of their mode alone; and Mixed drawing each mode now and then,
// fenced owners included.
func TestGenerateModes(t *testing.T) {
	var mixedFair, mixedOwner, perWorker, fairOwner, fairQuiet int
	var fencedOwner [2]int // owners' fenced Clients: [0] in mixed, [1] in reentrant
	for seed := uint64(1); seed <= 1000; seed++ {
		for _, f := range Families {
			s := Generate(seed, f)
			fair := 0
			ownerFenced := map[string]bool{}
			for _, c := range s.Clients() {
				if c.Owner != "" {
					if was, ok := ownerFenced[c.Owner]; ok && was != c.Fencing {
						t.Fatalf("seed %d %s: Clients of owner %q differ in fencing", seed, f, c.Owner)
					}
					ownerFenced[c.Owner] = c.Fencing
					if c.Fencing && f == Mixed {
						fencedOwner[0]++
					} else if c.Fencing && f == Reentrant {
						fencedOwner[1]++
					}
				}
				nested := false
				for _, k := range c.Sessions {
					nested = nested || k == SessNested
				}
				switch {
				case c.Fair && ((c.Owner != "" && c.Fencing) || (c.Fencing && !fairFencing) || c.FairLease < 10*c.NodeTimeout):
					t.Fatalf("seed %d %s: a fair Client %+v", seed, f, c)
				case c.Owner != "" && !nested:
					t.Fatalf("seed %d %s: an owner's Client %+v", seed, f, c)
				case c.Owner == "" && nested:
					t.Fatalf("seed %d %s: nested holds without an owner: %+v", seed, f, c)
				case f == Reentrant && c.Owner == "", f == Fair && !c.Fair:
					t.Fatalf("seed %d %s: a Client without the family's mode: %+v", seed, f, c)
				case f != Mixed && f != Reentrant && f != Fair && (c.Fair || c.Owner != ""):
					t.Fatalf("seed %d %s: a mode outside mixed, reentrant and fair: %+v", seed, f, c)
				}
				if c.Fair {
					fair++
				}
				if c.Owner != "" && f == Mixed {
					mixedOwner++
				}
				if c.OwnerPerWorker {
					perWorker++
				}
				if c.Fair && c.Owner != "" {
					fairOwner++
				}
			}
			if fair != 0 && fair != len(s.Clients()) {
				t.Fatalf("seed %d %s: %d of %d Clients fair", seed, f, fair, len(s.Clients()))
			}
			if f == Mixed && fair > 0 {
				mixedFair++
			}
			// The fairness check runs in the fair schedules without faults (half of
			// them); the others cut a minority off from one Client at a time.
			if s.Checkers.Fairness != (f == Fair && len(s.Faults) == 0) {
				t.Fatalf("seed %d %s: fairness check %v with %d faults", seed, f, s.Checkers.Fairness, len(s.Faults))
			}
			if f == Fair {
				if len(s.Faults) == 0 {
					fairQuiet++
				}
				for _, ft := range s.Faults {
					if ft.Kind != FaultPartition || len(ft.Nodes) != 2 {
						t.Fatalf("seed %d fair: fault %+v, want minority cuts only", seed, ft)
					}
				}
			}
		}
	}
	if mixedFair < 150 || mixedOwner < 300 || perWorker == 0 {
		t.Errorf("mixed: %d fair schedules, %d owners' Clients, %d with an owner per worker, of 1000 seeds", mixedFair, mixedOwner, perWorker)
	}
	if fairQuiet < 400 || fairQuiet > 600 {
		t.Errorf("fair schedules without faults in 1000 seeds: %d, want about half", fairQuiet)
	}
	if fairOwner < 500 {
		t.Errorf("fair owners' Clients in 1000 seeds: %d", fairOwner)
	}
	if fencedOwner[0] < 100 || fencedOwner[1] < 300 {
		t.Errorf("fenced owners' Clients in 1000 seeds: %d in mixed, %d in reentrant", fencedOwner[0], fencedOwner[1])
	}
}

// TestRunShortReentrant runs a short reentrant schedule on real redis-server
// processes: it must pass the checks, and must have done what it is there for: holds
// of one owner overlapping (nested in one worker, and across workers), and other
// owners granted after them.
func TestRunShortReentrant(t *testing.T) {
	// The schedule's sessions are random: a short run now and then has no overlap of one
	// owner's holds to show, and in some schedules (seeds 2, 7, 13, 16, 45) the shared
	// owner's workers overlap without a break, so no other owner is ever granted (one
	// logical holder may keep a key, docs/reentrant.md). A violation fails at once;
	// missing coverage tries the next seed whose schedule has an owner shared by two
	// Clients, up to ten: in CI on 2026-12-04 the first five all missed (seed 5, which
	// covers in most runs, had no overlap under -race on a busy box).
	tried := 0
	for seed := uint64(1); seed <= 200 && tried < 10; seed++ {
		s := Generate(seed, Reentrant)
		if !sharesOwner(s) {
			continue
		}
		tried++
		s.Length = 3 * time.Second
		res := runPassing(t, s)
		nested, shared, owners := reentrantCoverage(res)
		t.Logf("seed %d: %d grants, %d nested holds, %d overlaps of one owner's holds across workers, %d owners", seed, res.Check.Grants, nested, shared, owners)
		if nested > 0 && shared > 0 && owners >= 2 {
			return
		}
	}
	t.Errorf("%d seeds with a shared owner without nested holds, one owner's holds overlapping across workers, and two owners granted", tried)
}

// sharesOwner reports whether two Clients of s acquire for one shared owner.
func sharesOwner(s *Schedule) bool {
	seen := map[string]bool{}
	for _, c := range s.Clients() {
		if c.Owner == "" || c.OwnerPerWorker {
			continue
		}
		if seen[c.Owner] {
			return true
		}
		seen[c.Owner] = true
	}
	return false
}

// TestRunShortReentrantFenced runs short reentrant schedules whose owners fence on
// real redis-server processes: they must pass the checks (the fencing order among
// them, which lets one owner's holds share their lease's token), and must show holds
// of one owner that overlap with one token. Missing coverage tries the next fenced
// seed, up to three.
func TestRunShortReentrantFenced(t *testing.T) {
	tried := 0
	for seed := uint64(1); seed <= 200 && tried < 3; seed++ {
		s := Generate(seed, Reentrant)
		fenced := false
		for _, c := range s.Clients() {
			fenced = fenced || c.Fencing
		}
		if !fenced {
			continue
		}
		tried++
		s.Length = 3 * time.Second
		res := runPassing(t, s)
		tokens, sharedToken := fencedCoverage(res)
		t.Logf("seed %d: %d grants, %d fenced, %d overlaps of one owner's holds with one token", seed, res.Check.Grants, tokens, sharedToken)
		if tokens > 0 && sharedToken > 0 {
			return
		}
	}
	t.Errorf("%d fenced reentrant seeds without overlapping holds of one owner that share a token", tried)
}

// fencedCoverage counts a run's fenced grants and the overlaps of two holds of one
// owner with the same token.
func fencedCoverage(res *Result) (tokens, sharedToken int) {
	for _, ws := range res.Check.Windows {
		for i, a := range ws {
			if a.Fence == 0 {
				continue
			}
			tokens++
			for _, b := range ws[i+1:] {
				if b.Grant < a.End && a.Owner == b.Owner && a.Fence == b.Fence {
					sharedToken++
				}
			}
		}
	}
	return tokens, sharedToken
}

// runPassing runs schedule s on real redis-server processes and fails the test unless
// the run ended and its history passed every check.
func runPassing(t *testing.T, s *Schedule) *Result {
	t.Helper()
	res, err := Run(t, s, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	if !res.Check.OK() {
		t.Fatalf("violations %v; files %v\n%s", res.Check.Violations, res.Files, s)
	}
	return res
}

// reentrantCoverage counts what a reentrant run exercised: nested holds, overlaps of one
// owner's holds across workers, and the owners granted.
func reentrantCoverage(res *Result) (nested, shared, owners int) {
	seen := map[string]bool{}
	for _, ws := range res.Check.Windows {
		for i, a := range ws {
			if strings.HasSuffix(a.Session, "n") {
				nested++
			}
			if !seen[a.Owner] {
				seen[a.Owner] = true
				owners++
			}
			for _, b := range ws[i+1:] {
				if b.Grant < a.End && a.Owner == b.Owner && a.Worker != b.Worker {
					shared++
				}
			}
		}
	}
	return nested, shared, owners
}

// TestRunShortFair runs a short fair schedule on real redis-server processes: it
// must pass the checks, the fairness check included, with waiters that waited.
func TestRunShortFair(t *testing.T) {
	s := Generate(1, Fair)
	s.Length = 4 * time.Second // a fair run grants little: waiters queue behind long holds
	res, err := Run(t, s, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Stderr)
	}
	if !res.Check.OK() {
		t.Fatalf("violations %v; files %v\n%s", res.Check.Violations, res.Files, s)
	}
	waited := 0
	for _, r := range res.Records {
		if r.Op == OpAcquire && r.Ok && !r.Try && r.Ret-r.Inv > int64(OvertakeMargin) {
			waited++
		}
	}
	t.Logf("%d grants, %d of them after more than %v of waiting", res.Check.Grants, waited, OvertakeMargin)
	if res.Check.Grants == 0 || waited == 0 {
		t.Errorf("grants %d, waited longer than the margin %d: want both > 0\n%s", res.Check.Grants, waited, s)
	}
}

// TestRunShortClusterMembers runs a short mixed schedule with fenced Clients and a
// short fair schedule, each with Cluster members among its nodes (NodeSpec.Cluster:
// a one-master Redis Cluster reached through a ClusterClient), on real redis-server
// processes: they must pass the checks and grant locks, fenced ones in the first.
func TestRunShortClusterMembers(t *testing.T) {
	for _, f := range []Family{Mixed, Fair} {
		var s *Schedule
		for seed := uint64(1); seed <= 300 && s == nil; seed++ {
			g := Generate(seed, f)
			members, fenced := 0, false
			for _, n := range g.Nodes {
				if n.Cluster {
					members++
				}
			}
			for _, c := range g.Clients() {
				fenced = fenced || c.Fencing
			}
			if members > 0 && (fenced || f == Fair) {
				s = g
			}
		}
		if s == nil {
			t.Fatalf("no %s seed up to 300 with Cluster members", f)
		}
		s.Length = 3 * time.Second
		res := runPassing(t, s)
		tokens, _ := fencedCoverage(res)
		t.Logf("%s seed %d: %d grants, %d fenced", f, s.Seed, res.Check.Grants, tokens)
		if res.Check.Grants == 0 || f == Mixed && tokens == 0 {
			t.Errorf("%s seed %d: %d grants, %d fenced, want both above 0\n%s", f, s.Seed, res.Check.Grants, tokens, s)
		}
	}
}
