package nemesis

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redlock-go/redlock/cmd/redlock/safety"
)

// The checks of a history, each against what the library promises:
//
//   - lease mutex (porcupine): a granted lock is valid from the moment its Acquire (or
//     TryAcquire, or Do's call of fn) returned until its final Until, or until its
//     Release was invoked if that came first (for Do: until fn saw its context end; with
//     KeepAlive: at least until the worker saw KeepAlive's context end).
//     No two such windows of one key overlap, unless both are holds of one owner
//     (redlock.WithOwner): an owner's holds share its lease and may overlap each other,
//     never a window of another owner or of a lock without owner. Each grant is an
//     acquire operation from the call's invocation to its return, and its window's end
//     a release operation; the history must be linearizable against a mutex whose
//     holder is an owner with a set of holds. Failed calls granted nothing and are left
//     out.
//   - fenced register (porcupine): reads and writes of each key's resource through
//     fenced.Read and fenced.Write are linearizable against a register that accepts a
//     write only with a token at least the highest accepted, and refuses it otherwise.
//     A write that failed with a network error is ambiguous: it may have landed at any
//     time after its call (an open end).
//   - fencing order: the tokens of fenced grants increase in real-time order and are
//     unique, but for the holds of one owner, which share their lease's token
//     (safety.FenceViolation).
//   - availability (a liveness check, where Schedule.Checkers.Availability): no
//     stretch of more than AvailabilityGap in which Acquire calls waited for a key,
//     no lock of it was held, and no fault was on (or had been within the largest TTL):
//     a key nobody holds blocks everyone.
//   - fairness (where Schedule.Checkers.Fairness: fault-free fair schedules): no grant
//     to a call that began more than OvertakeMargin after a blocking Acquire that was
//     still waiting when the grant came (see checkFairness).

// AvailabilityGap is the longest a key may stay unusable, with Acquire calls waiting
// and no lock and no fault to explain it, before the availability check complains.
const AvailabilityGap = 1200 * time.Millisecond

// CheckTimeout bounds each porcupine check.
const CheckTimeout = 30 * time.Second

// Violation is one thing the checker found.
type Violation struct {
	Check string // "lease mutex", "fenced register", "fencing order", "availability", "fairness"
	Key   string
	Text  string
}

// String returns "check on key: what was found".
func (v Violation) String() string { return fmt.Sprintf("%s on %s: %s", v.Check, v.Key, v.Text) }

// Report is the checker's verdict on one history.
type Report struct {
	Ops        int // operations checked by porcupine (both models)
	Grants     int
	Violations []Violation

	// For the pictures of a failing history: each key's porcupine input and result.
	Mutex    map[string]*Checked
	Register map[string]*Checked
	Windows  map[string][]Window
}

// Checked is one porcupine check: its model, history and linearization info.
type Checked struct {
	Model  porcupine.Model
	Ops    []porcupine.Operation
	Result porcupine.CheckResult
	Info   porcupine.LinearizationInfo
}

// OK reports whether the history passed every check.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Window is a granted lock's validity window, relative to the run's base.
type Window struct {
	Session       string
	Worker        int
	Kind          SessionKind
	Owner         string // the owner of a reentrant hold ("" for a lock without owner)
	Inv           int64  // the Acquire call's invocation
	Grant, End    int64
	Until         int64
	Fence         uint64
	Kept          int64 // a KeepAlive session: when the worker stopped relying on its context
	Released      bool  // its Release was called
	LastActivity  int64
	ReleaseOK     bool
	ReleaseReturn int64
}

// Check runs every check on the merged history recs of schedule s, whose faults
// happened as given; times in the report are relative to base (CLOCK_MONOTONIC when
// the run began, the zero of the faults' times).
func Check(s *Schedule, recs []Record, faults []Executed, base int64) *Report {
	rep := &Report{Mutex: map[string]*Checked{}, Register: map[string]*Checked{}, Windows: map[string][]Window{}}
	for _, key := range s.Keys {
		var mine []Record
		for _, r := range recs {
			if r.Key == key {
				mine = append(mine, r)
			}
		}
		ws := windows(mine, base)
		rep.Windows[key] = ws
		rep.Grants += len(ws)
		rep.checkMutex(key, ws)
		rep.checkRegister(key, mine, base)
		rep.checkFences(key, ws)
		if s.Checkers.Availability {
			rep.checkAvailability(s, key, mine, ws, faults, base)
		}
		if s.Checkers.Fairness {
			rep.checkFairness(key, mine, ws, base)
		}
	}
	return rep
}

// windows returns the validity windows of the granted locks in recs, times relative
// to base.
func windows(recs []Record, base int64) []Window {
	bySession := map[string]*Window{}
	var order []string
	for _, r := range recs {
		w := bySession[r.Session]
		switch r.Op {
		case OpAcquire, OpDo:
			if !r.Ok {
				continue
			}
			w = &Window{Session: r.Session, Worker: r.Worker, Kind: r.Kind, Owner: r.Owner, Inv: r.Inv - base, Grant: r.Ret - base,
				End: -1, Until: r.Until - base, Fence: r.Fence}
			if r.Op == OpDo {
				w.Until = -1 // unknown to fn: its window ends when its context does
			}
			bySession[r.Session] = w
			order = append(order, r.Session)
		case OpEnd:
			if w != nil {
				w.End = r.Ret - base
				if r.Until != 0 {
					w.Until = r.Until - base
				}
			}
		case OpKeepAlive:
			// The worker relied on KeepAlive's context until it saw it end (or stopped
			// it): KeepAlive promises the lock valid all that time, whatever Until said
			// before a renewal.
			if w != nil {
				w.Kept = max(w.Kept, r.Ret-base)
			}
		case OpRelease:
			if w != nil {
				w.Released, w.ReleaseOK, w.ReleaseReturn = true, r.Ok, r.Ret-base
			}
		}
		if w != nil {
			w.LastActivity = max(w.LastActivity, r.Ret-base)
		}
	}
	out := make([]Window, 0, len(order))
	for _, s := range order {
		w := *bySession[s]
		if w.End < 0 { // no end recorded (the worker died): valid to its Until at least
			w.End = max(w.Until, w.Grant)
		}
		w.End = max(w.End, w.Kept)
		out = append(out, w)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Grant < out[j].Grant })
	return out
}

// mutexInput is a lease-mutex operation: a grant taking the lock, or the end of its
// window giving it back. Holder is who holds the lock by this grant: the owner for a
// reentrant hold, the session itself otherwise.
type mutexInput struct {
	Acquire bool
	Session string
	Holder  string
}

// mutexState is the lease mutex's state: the holder ("" when free) and its holds (the
// sessions whose windows are open), sorted and joined with spaces so that states
// compare with ==.
type mutexState struct {
	Holder, Holds string
}

// leaseMutex is the lease-mutex model: a grant is allowed when the key is free or its
// holder is the grant's (another hold of the same owner); the key is free again when
// the last open hold's window ends.
var leaseMutex = porcupine.Model{
	Init: func() any { return mutexState{} },
	Step: func(state, input, output any) (bool, any) {
		in, st := input.(mutexInput), state.(mutexState)
		holds := strings.Fields(st.Holds)
		at := slices.Index(holds, in.Session)
		if in.Acquire {
			if (st.Holder != "" && st.Holder != in.Holder) || at >= 0 {
				return false, st
			}
			holds = append(holds, in.Session)
			slices.Sort(holds)
			return true, mutexState{Holder: in.Holder, Holds: strings.Join(holds, " ")}
		}
		if at < 0 {
			return false, st
		}
		holds = slices.Delete(holds, at, at+1)
		if len(holds) == 0 {
			return true, mutexState{}
		}
		return true, mutexState{Holder: st.Holder, Holds: strings.Join(holds, " ")}
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in := input.(mutexInput)
		if in.Acquire {
			return "granted " + in.Session
		}
		return "valid no more: " + in.Session
	},
	DescribeState: func(state any) string {
		st := state.(mutexState)
		switch {
		case st.Holder == "":
			return "free"
		case st.Holder == st.Holds:
			return "held by " + st.Holds
		}
		return "held by " + st.Holder + ": " + st.Holds
	},
}

// holder returns who holds the key by w's grant, for the lease-mutex model.
func (w Window) holder() string {
	if w.Owner != "" {
		return "owner " + w.Owner
	}
	return w.Session
}

func (rep *Report) checkMutex(key string, ws []Window) {
	var ops []porcupine.Operation
	for _, w := range ws {
		ops = append(ops,
			porcupine.Operation{ClientId: w.Worker, Input: mutexInput{Acquire: true, Session: w.Session, Holder: w.holder()}, Call: w.Inv, Return: w.Grant},
			porcupine.Operation{ClientId: w.Worker, Input: mutexInput{Session: w.Session, Holder: w.holder()}, Call: w.End, Return: w.End})
	}
	rep.Ops += len(ops)
	res, info := porcupine.CheckOperationsVerbose(leaseMutex, ops, CheckTimeout)
	rep.Mutex[key] = &Checked{Model: leaseMutex, Ops: ops, Result: res, Info: info}
	if res == porcupine.Ok {
		return
	}
	text := fmt.Sprintf("porcupine: %s", res)
	// Name the overlapping windows.
	n := 0
	for i, a := range ws {
		for _, b := range ws[i+1:] {
			if b.Grant < a.End && a.holder() != b.holder() && n < 3 {
				text += fmt.Sprintf("; %s (worker %d, %s) valid %s–%s and %s (worker %d, %s) granted at %s",
					a.Session, a.Worker, a.Kind, ms(a.Grant), ms(a.End), b.Session, b.Worker, b.Kind, ms(b.Grant))
				n++
			}
		}
	}
	rep.Violations = append(rep.Violations, Violation{Check: "lease mutex", Key: key, Text: text})
}

// ms formats a time relative to the run's base.
func ms(ns int64) string { return fmt.Sprintf("%.1fms", float64(ns)/1e6) }

// regInput and regOutput are fenced-register operations.
type regInput struct {
	Write bool
	Token uint64
	Value string
}

type regOutput struct {
	Ok      bool   // a write accepted (false: refused as stale)
	Unknown bool   // a write whose outcome is unknown
	Value   string // read
	Token   uint64 // read
}

type regState struct {
	Token uint64
	Value string
}

// fencedRegister is the fenced-register model: a write is accepted iff its token is
// at least the highest accepted so far; a read returns the last accepted write.
var fencedRegister = porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(regState), input.(regInput), output.(regOutput)
		if !in.Write {
			if out.Value == st.Value && out.Token == st.Token {
				return []any{st}
			}
			return nil
		}
		next := regState{Token: in.Token, Value: in.Value}
		switch {
		case out.Unknown:
			if in.Token >= st.Token {
				return []any{st, next}
			}
			return []any{st}
		case out.Ok:
			if in.Token >= st.Token {
				return []any{next}
			}
			return nil
		default:
			if in.Token < st.Token {
				return []any{st}
			}
			return nil
		}
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if !in.Write {
			return fmt.Sprintf("read %q (token %d)", out.Value, out.Token)
		}
		switch {
		case out.Unknown:
			return fmt.Sprintf("write %q token %d: ?", in.Value, in.Token)
		case out.Ok:
			return fmt.Sprintf("write %q token %d: accepted", in.Value, in.Token)
		}
		return fmt.Sprintf("write %q token %d: refused", in.Value, in.Token)
	},
	DescribeState: func(state any) string {
		st := state.(regState)
		return fmt.Sprintf("%q (token %d)", st.Value, st.Token)
	},
}

func (rep *Report) checkRegister(key string, recs []Record, base int64) {
	var ops []porcupine.Operation
	var last int64
	for _, r := range recs {
		last = max(last, r.Ret-base)
	}
	for _, r := range recs {
		switch {
		case r.Op == OpRead && !r.Ambiguous:
			ops = append(ops, porcupine.Operation{ClientId: r.Worker, Input: regInput{}, Output: regOutput{Value: r.Value, Token: r.Fence},
				Call: r.Inv - base, Return: r.Ret - base})
		case r.Op == OpWrite:
			op := porcupine.Operation{ClientId: r.Worker, Input: regInput{Write: true, Token: r.Fence, Value: r.Value},
				Output: regOutput{Ok: r.Ok, Unknown: r.Ambiguous}, Call: r.Inv - base, Return: r.Ret - base}
			if r.Ambiguous {
				op.Return = last + 1 // an open end: it may take effect any time after its call
			}
			ops = append(ops, op)
		}
	}
	if len(ops) == 0 {
		return
	}
	rep.Ops += len(ops)
	model := fencedRegister.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, ops, CheckTimeout)
	rep.Register[key] = &Checked{Model: model, Ops: ops, Result: res, Info: info}
	if res != porcupine.Ok {
		rep.Violations = append(rep.Violations, Violation{Check: "fenced register", Key: key,
			Text: fmt.Sprintf("porcupine: %s over %d reads and writes", res, len(ops))})
	}
}

func (rep *Report) checkFences(key string, ws []Window) {
	var grants []safety.Grant
	for _, w := range ws {
		if w.Fence > 0 {
			grants = append(grants, safety.Grant{Start: time.Duration(w.Inv), End: time.Duration(w.Grant), Fence: w.Fence, Owner: w.Owner})
		}
	}
	if err := safety.FenceViolation(grants); err != nil {
		rep.Violations = append(rep.Violations, Violation{Check: "fencing order", Key: key, Text: err.Error()})
	}
}

// checkAvailability looks for stretches longer than AvailabilityGap in which some
// Acquire (or Do) call of key was waiting, no lock of key could still have keys on the
// nodes, and no fault was on or had been within the largest TTL.
func (rep *Report) checkAvailability(s *Schedule, key string, recs []Record, ws []Window, faults []Executed, base int64) {
	type span struct{ from, to int64 }
	var busy, waiting, excluded []span
	slack := int64(s.MaxTTL)*101/100 + int64(100*time.Millisecond)
	for _, w := range ws {
		end := w.LastActivity
		if !(w.Released && w.ReleaseOK) {
			// Not released (or not for sure): its keys may live a TTL after its last call.
			end += slack
		}
		busy = append(busy, span{w.Grant, end})
	}
	for _, r := range recs {
		if (r.Op == OpAcquire && !r.Try) || r.Op == OpDo {
			waiting = append(waiting, span{r.Inv - base, r.Ret - base})
		}
	}
	excluded = append(excluded, span{-1, int64(300 * time.Millisecond)}) // the start
	for _, f := range faults {
		excluded = append(excluded, span{f.From - int64(50*time.Millisecond), f.To + slack + int64(400*time.Millisecond)})
	}
	// Sweep: each boundary starts or ends spans; track counts per class.
	type edge struct {
		at    int64
		class int // 0 busy, 1 waiting, 2 excluded
		delta int
	}
	var edges []edge
	for c, spans := range [][]span{busy, waiting, excluded} {
		for _, sp := range spans {
			if sp.to > sp.from {
				edges = append(edges, edge{sp.from, c, 1}, edge{sp.to, c, -1})
			}
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return b.delta - a.delta // starts before ends: touching spans leave no gap
	})
	var count [3]int
	idle := func() bool { return count[0] == 0 && count[1] > 0 && count[2] == 0 }
	from, prev := int64(-1), int64(0)
	finish := func(to int64) {
		if gap := time.Duration(to - from); from >= 0 && gap > AvailabilityGap {
			rep.Violations = append(rep.Violations, Violation{Check: "availability", Key: key,
				Text: fmt.Sprintf("for %v (%s–%s) Acquire calls waited, no lock was held and no fault was on: a key that nobody holds?",
					gap.Round(time.Millisecond), ms(from), ms(to))})
		}
		from = -1
	}
	for _, e := range edges {
		if e.at > prev { // the segment [prev, e.at) had the current counts
			if idle() {
				if from < 0 {
					from = prev
				}
			} else {
				finish(prev)
			}
		}
		count[e.class] += e.delta
		prev = e.at
	}
	finish(prev)
}
