package safety

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// Timeline is a scenario's Result with what a picture of the run needs: the nodes and
// the faults injected into them, on the run's clock (the one of Report.Sections).
type Timeline struct {
	Result
	// Nodes are the nodes' names in start order: "node 1", "node 2", ... ("master",
	// "replica" for the replicated mode).
	Nodes []string
	// Faults are the node faults, ordered by start.
	Faults []Fault
	// Clients is the number of clients that reached the nodes through proxies of
	// their own (client A, B, ...: worker i uses client i mod Clients); 0 without
	// proxies.
	Clients int
	// End is the length of the picture: the run's duration, or later if a section
	// or a fault ended later.
	End time.Duration
}

// FaultKind classifies a Fault for the picture.
type FaultKind string

// The kinds of Fault.
const (
	FaultDown    FaultKind = "down"    // the process was killed (and maybe restarted at To)
	FaultPaused  FaultKind = "paused"  // SIGSTOP until SIGCONT
	FaultClock   FaultKind = "clock"   // a skewed clock rate, or a jump (From == To)
	FaultNetwork FaultKind = "network" // a proxy dropped, delayed or refused one client's traffic
)

// Fault is one fault of one node, on the run's clock. From == To marks an instant (a
// clock jump). A fault that began before the run (a partition set up first) starts at
// 0; one never undone lasts to the end.
type Fault struct {
	Node     int // index into Timeline.Nodes
	Kind     FaultKind
	Label    string // what happened, e.g. "killed, restarted empty", "cut off from client A"
	From, To time.Duration
}

// RunTimeline runs the scenario as Run does, and records the nodes it starts and the
// faults it injects through t (see redlocktest.Recorder).
func (s *Scenario) RunTimeline(t redlocktest.T) *Timeline {
	rec := &eventRecorder{T: t}
	begin := time.Now()
	res := s.Run(rec)
	end := time.Now()
	rec.mu.Lock()
	events := slices.Clone(rec.events)
	rec.done = true
	rec.mu.Unlock()
	return buildTimeline(res, events, begin, end)
}

// eventRecorder is the redlocktest.T of RunTimeline: the caller's t, plus a log of the
// fault kit's events.
type eventRecorder struct {
	redlocktest.T
	mu     sync.Mutex
	events []redlocktest.Event
	done   bool // the scenario has returned: later events are clean-ups
}

// RecordEvent implements redlocktest.Recorder.
func (r *eventRecorder) RecordEvent(e redlocktest.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.events = append(r.events, e)
	}
}

// buildTimeline turns the kit's events into faults on the report's clock. A report
// without a start (a scenario that made no workload run) is drawn from its first
// fault to the end of the scenario.
func buildTimeline(res Result, events []redlocktest.Event, begin, end time.Time) *Timeline {
	tl := &Timeline{Result: res}
	origin := time.Time{}
	if res.Report != nil {
		origin = res.Report.Start
	}
	if origin.IsZero() {
		origin = begin
		for _, e := range events {
			if e.Kind != redlocktest.EventStart && e.Kind != redlocktest.EventProxy {
				origin = e.At
				break
			}
		}
		tl.End = end.Sub(origin)
	}
	if r := res.Report; r != nil {
		tl.End = max(tl.End, r.Duration)
		for _, s := range r.Sections {
			tl.End = max(tl.End, s.Exit)
		}
	}
	at := func(e redlocktest.Event) time.Duration { return max(0, e.At.Sub(origin)) }

	// Nodes, in the order of their first event.
	node := map[string]int{}
	nodeOf := func(addr string) int {
		if i, ok := node[addr]; ok {
			return i
		}
		node[addr] = len(tl.Nodes)
		tl.Nodes = append(tl.Nodes, fmt.Sprintf("node %d", len(tl.Nodes)+1))
		return node[addr]
	}
	for _, e := range events {
		if e.Kind == redlocktest.EventStart && e.Binary != "redis-sentinel" {
			nodeOf(e.Node)
		}
	}
	if res.Scenario != nil && res.Scenario.Mode == Replica && len(tl.Nodes) == 2 {
		tl.Nodes = []string{"master", "replica"}
	}

	// Faults: open ones are closed by their counterpart event, or by the end.
	type key struct {
		node  string
		proxy string
		kind  FaultKind
	}
	open := map[key]int{} // index into tl.Faults
	begins := func(k key, f Fault) {
		if _, ok := open[k]; ok { // the same fault again: keep the first
			return
		}
		open[k] = len(tl.Faults)
		f.To = -1
		tl.Faults = append(tl.Faults, f)
	}
	ends := func(k key, to time.Duration, suffix string) {
		if i, ok := open[k]; ok {
			tl.Faults[i].To = to
			tl.Faults[i].Label += suffix
			delete(open, k)
		}
	}
	client := map[string]int{}  // proxy address → client index
	proxies := map[string]int{} // node address → proxies made to it so far
	for _, e := range events {
		t := at(e)
		k := key{node: e.Node, proxy: e.Proxy}
		switch e.Kind {
		case redlocktest.EventStart:
			if rate, ok := strings.CutPrefix(e.Detail, "clock "); ok && strings.Contains(rate, " x") {
				_, r, _ := strings.Cut(rate, " x")
				tl.Faults = append(tl.Faults, Fault{Node: nodeOf(e.Node), Kind: FaultClock, Label: "clock rate ×" + r, From: 0, To: -1})
			}
		case redlocktest.EventKill:
			k.kind = FaultDown
			begins(k, Fault{Node: nodeOf(e.Node), Kind: FaultDown, Label: "killed", From: t})
		case redlocktest.EventRestart:
			k.kind = FaultDown
			suffix := ", restarted"
			switch {
			case strings.HasSuffix(e.Detail, redlocktest.NoPersistence.String()):
				suffix = ", restarted empty"
			case strings.HasSuffix(e.Detail, redlocktest.AOFAlways.String()):
				suffix = ", restarted with its AOF"
			}
			ends(k, t, suffix)
		case redlocktest.EventPause:
			k.kind = FaultPaused
			begins(k, Fault{Node: nodeOf(e.Node), Kind: FaultPaused, Label: "paused (SIGSTOP)", From: t})
		case redlocktest.EventResume:
			k.kind = FaultPaused
			ends(k, t, "")
		case redlocktest.EventJump:
			tl.Faults = append(tl.Faults, Fault{Node: nodeOf(e.Node), Kind: FaultClock, Label: "clock jumps " + e.Detail, From: t, To: t})
		case redlocktest.EventProxy:
			client[e.Proxy] = proxies[e.Node]
			proxies[e.Node]++
			tl.Clients = max(tl.Clients, proxies[e.Node])
		case redlocktest.EventBlackhole, redlocktest.EventTimeout, redlocktest.EventResetPeer, redlocktest.EventLatency, redlocktest.EventDown:
			k.kind = FaultNetwork
			k.node += "/" + string(e.Kind) // each kind of proxy fault separately
			what := map[redlocktest.EventKind]string{
				redlocktest.EventBlackhole: "cut off from",
				redlocktest.EventTimeout:   "cut off from",
				redlocktest.EventResetPeer: "resets",
				redlocktest.EventLatency:   "delayed " + strings.SplitN(e.Detail, " ", 2)[0] + " for",
				redlocktest.EventDown:      "refuses",
			}[e.Kind]
			begins(k, Fault{Node: nodeOf(e.Node), Kind: FaultNetwork, Label: what + " client " + clientName(client[e.Proxy]), From: t})
		case redlocktest.EventHeal:
			for _, kind := range []redlocktest.EventKind{redlocktest.EventBlackhole, redlocktest.EventTimeout, redlocktest.EventResetPeer, redlocktest.EventLatency} {
				ends(key{node: e.Node + "/" + string(kind), proxy: e.Proxy, kind: FaultNetwork}, t, "")
			}
		case redlocktest.EventUp:
			ends(key{node: e.Node + "/" + string(redlocktest.EventDown), proxy: e.Proxy, kind: FaultNetwork}, t, "")
		}
	}
	for i := range tl.Faults {
		f := &tl.Faults[i]
		if f.To < 0 {
			f.To = max(tl.End, f.From)
		}
		tl.End = max(tl.End, f.To)
	}
	slices.SortStableFunc(tl.Faults, func(a, b Fault) int { return cmp.Compare(a.From, b.From) })
	tl.Faults = mergeClients(tl.Faults)
	return tl
}

// mergeClients makes one fault of the same network fault of one node for several
// clients at about the same time: "cut off from clients A, B".
func mergeClients(faults []Fault) []Fault {
	near := func(a, b time.Duration) bool { return max(a-b, b-a) < 5*time.Millisecond }
	var out []Fault
	for _, f := range faults {
		verb, who, ok := strings.Cut(f.Label, " client ")
		merged := false
		for i := range out {
			o := &out[i]
			if !ok || f.Kind != FaultNetwork || o.Kind != FaultNetwork || o.Node != f.Node || !near(o.From, f.From) || !near(o.To, f.To) {
				continue
			}
			if overb, owho, _ := strings.Cut(o.Label, " client "); overb == verb {
				o.Label = verb + " clients " + strings.TrimPrefix(owho, "s ") + ", " + who
				merged = true
				break
			}
			if overb, owho, _ := strings.Cut(o.Label, " clients "); overb == verb {
				o.Label = verb + " clients " + owho + ", " + who
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, f)
		}
	}
	return out
}

// clientName returns "A" for client 0, "B" for 1, ...
func clientName(i int) string {
	if i < 26 {
		return string(rune('A' + i))
	}
	return fmt.Sprint(i + 1)
}
