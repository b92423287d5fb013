package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Nodes is the number of lock nodes of every schedule.
const Nodes = 5

// Family names a set of constraints on the generator: Mixed draws every fault and
// every kind of session; the others narrow the draws to the conditions under which a
// known-bad change (a mutant, see cmd/mutants) shows, and still draw everything else
// from the seed.
type Family string

// The families.
const (
	// Mixed: all faults, all sessions, all clients' settings.
	Mixed Family = "mixed"
	// Handoff: duplicated commands, several workers of one Client on one key
	// (handoffs), holders that extend past their handoff TTL.
	Handoff Family = "handoff"
	// Drift: every node's clock runs fast, inside the drift allowance; holders keep
	// the lock to its validity end; contenders retry fast.
	Drift Family = "drift"
	// Cleanup: Acquire calls with deadlines short enough to end attempts in flight,
	// no faults; the availability check looks for keys nobody holds.
	Cleanup Family = "cleanup"
	// LateExtend: extends sent just before a lock's validity end, through slow
	// requests, while other Clients take the key as soon as it is free.
	LateExtend Family = "late-extend"
	// Reentrant: every Client acquires for an owner (redlock.WithOwner), some owners
	// shared by Clients of both processes, others one per worker; nested holds; one
	// key; the faults of Mixed.
	Reentrant Family = "reentrant"
	// Fair: every Client uses Options.Fair on one key; half the schedules have no
	// faults, and there the fairness check looks for waiters overtaken by later
	// arrivals; the other half cut a minority off from one Client at a time.
	Fair Family = "fair"
	// Fenced: every Client uses Options.Fencing on one key, on durable nodes, with
	// the faults of Mixed: leases change hands between Clients all the time, so a
	// Client's last counter is often behind and it proposes a stale token.
	Fenced Family = "fenced"
	// Line: plain Clients (no fencing, owners or fairness) of one worker each on one
	// key, mostly short holds: every release goes across Clients, through the key's
	// line (docs/design.md, "The line of a plain key"); a minority cut off from one
	// Client at a time, as in Handoff, so that a head's lock often rests on a bare
	// majority that includes the line node.
	Line Family = "line"
)

// Families lists every family; a soak cycles through them.
var Families = []Family{Mixed, Handoff, Drift, Cleanup, LateExtend, Reentrant, Fair, Fenced, Line}

// ParseFamily returns the family named s.
func ParseFamily(s string) (Family, error) {
	for _, f := range Families {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("nemesis: unknown family %q (have %v)", s, Families)
}

// SessionKind is what a worker does with one lock, from getting it to letting it go.
type SessionKind string

// The kinds of session.
const (
	SessHold       SessionKind = "hold"        // Acquire, work, Release
	SessTry        SessionKind = "try"         // TryAcquire, work, Release
	SessExtend     SessionKind = "extend"      // Acquire, Extend once or more, Release
	SessKeepAlive  SessionKind = "keepalive"   // Acquire, KeepAlive over several TTLs, Release
	SessDo         SessionKind = "do"          // Client.Do around the work
	SessToUntil    SessionKind = "to-until"    // Acquire, keep it to its validity end, Release
	SessAbandon    SessionKind = "abandon"     // Acquire, work, never Release (a crashed holder)
	SessShortWait  SessionKind = "short-wait"  // Acquire with a deadline that can end it mid-attempt
	SessLateExtend SessionKind = "late-extend" // Acquire, Extend just before Until
	SessNested     SessionKind = "nested"      // an owner's Acquire, a second hold of it, both released (either first)
)

// ClientSpec is one redlock.Client of a worker process.
type ClientSpec struct {
	Fencing     bool
	Workers     int           // goroutines sharing the Client (several make handoffs)
	NodeTimeout time.Duration // Options.NodeTimeout
	RetryMax    time.Duration // Options.RetryDelay is ExponentialJitter(RetryMax/25, RetryMax)
	Duplicate   float64       // share of commands delivered twice (0: none)
	DupDelay    time.Duration // bound of a copy's delay
	// DupHandoffs narrows the copies to the handoff step (a script call with one
	// key and three arguments: two tokens and a TTL), so that late copies of
	// attempts do not block the key for everyone.
	DupHandoffs bool
	Sessions    []SessionKind // the kinds its workers draw from, with repeats as weights
	// Owner, when not "", makes the workers acquire for that owner
	// (redlock.WithOwner); with OwnerPerWorker each worker has an owner of its own
	// (Owner, "/" and the worker's global index).
	Owner          string
	OwnerPerWorker bool
	// Fair is Options.Fair, with FairLease its Options.FairLease. All Clients of a
	// schedule use Fair or none does (the two must not share a key).
	Fair      bool
	FairLease time.Duration
}

// NodeSpec is one lock node's settings for the whole schedule.
type NodeSpec struct {
	AOF  bool    // appendonly yes, appendfsync always (else no persistence)
	Rate float64 // wall-clock rate under libfaketime; 1 means a real clock
	// Cluster: the node is a Redis Cluster of one master holding every slot, and the
	// Clients reach it with a go-redis ClusterClient, as a Cluster member of the quorum
	// (the fencing counter and the fair queue then take Cluster key names).
	Cluster bool
}

// FaultKind names a fault of a schedule.
type FaultKind string

// The faults.
const (
	FaultKill        FaultKind = "kill"         // a node killed, restarted at End (with its AOF, or empty after more than the largest TTL)
	FaultPause       FaultKind = "pause"        // a node SIGSTOPped until End
	FaultPartition   FaultKind = "partition"    // one Client cut off from Nodes (both ways) until End
	FaultOneWay      FaultKind = "one-way"      // one Client's replies from Nodes dropped until End (its commands still run there)
	FaultLatency     FaultKind = "latency"      // one Client's traffic to Nodes delayed
	FaultClientPause FaultKind = "client-pause" // a worker process SIGSTOPped until End
)

// Fault is one fault, from Start to End on the schedule's clock.
type Fault struct {
	Kind       FaultKind
	Start, End time.Duration
	Nodes      []int // node indexes (kill, pause: one)
	Client     int   // global client index (partition, latency)
	Process    int   // worker process (client pause)
	Latency    time.Duration
	Jitter     time.Duration
	Requests   bool // latency on requests only
}

// String describes the fault for logs and reports.
func (f Fault) String() string {
	at := fmt.Sprintf("%v–%v", f.Start.Round(time.Millisecond), f.End.Round(time.Millisecond))
	switch f.Kind {
	case FaultKill, FaultPause:
		return fmt.Sprintf("%s %s node %d", at, f.Kind, f.Nodes[0]+1)
	case FaultPartition, FaultOneWay:
		return fmt.Sprintf("%s %s client %d from nodes %v", at, f.Kind, f.Client, plus1(f.Nodes))
	case FaultLatency:
		dir := "both ways"
		if f.Requests {
			dir = "requests"
		}
		return fmt.Sprintf("%s latency %v±%v (%s) client %d to nodes %v", at, f.Latency, f.Jitter, dir, f.Client, plus1(f.Nodes))
	case FaultClientPause:
		return fmt.Sprintf("%s pause worker process %d", at, f.Process)
	}
	return at + " " + string(f.Kind)
}

func plus1(ns []int) []int {
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = n + 1
	}
	return out
}

// Schedule is everything one run does, drawn from its seed: the nodes' settings, the
// Clients and their worker processes, the sessions, and the faults on a timeline.
type Schedule struct {
	Seed     uint64
	Family   Family
	Length   time.Duration // how long the workers run
	TTL      time.Duration // the TTL sessions start with
	MaxTTL   time.Duration // the largest TTL a session asks for (extends included)
	Keys     []string
	Nodes    [Nodes]NodeSpec
	Procs    [][]ClientSpec // Procs[p] are the Clients of worker process p
	Faults   []Fault
	Checkers Checks
}

// Checks says which checks apply to a schedule.
type Checks struct {
	// Availability: look for stretches in which Acquire calls waited, no lock was
	// held and no fault could explain it (off when commands are duplicated: a late
	// copy of an acquire legitimately leaves a key nobody holds until its TTL ends).
	Availability bool
	// Fairness: look for grants to Acquire calls that began well after another call
	// that was still waiting (see checkFairness); only in fault-free fair schedules.
	Fairness bool
}

// Clients returns every Client of the schedule in global order (process by process).
func (s *Schedule) Clients() []ClientSpec {
	var out []ClientSpec
	for _, p := range s.Procs {
		out = append(out, p...)
	}
	return out
}

// String describes the schedule in a few lines, for the log of a run.
func (s *Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d family %s length %v ttl %v (max %v) keys %v\n", s.Seed, s.Family, s.Length, s.TTL, s.MaxTTL, s.Keys)
	for i, n := range s.Nodes {
		fmt.Fprintf(&b, "  node %d: aof %v rate %.4f cluster %v\n", i+1, n.AOF, n.Rate, n.Cluster)
	}
	c := 0
	for p, cs := range s.Procs {
		for _, cl := range cs {
			fmt.Fprintf(&b, "  client %d (process %d): %d workers, fencing %v, node timeout %v, duplicates %.2f up to %v, sessions %v%s\n",
				c, p, cl.Workers, cl.Fencing, cl.NodeTimeout, cl.Duplicate, cl.DupDelay, cl.Sessions, cl.modes())
			c++
		}
	}
	for _, f := range s.Faults {
		fmt.Fprintf(&b, "  fault %s\n", f)
	}
	return b.String()
}

// Generate draws the schedule of seed in family f. The same seed and family always
// give the same schedule.
func Generate(seed uint64, f Family) *Schedule {
	r := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	s := &Schedule{Seed: seed, Family: f, Length: 6 * time.Second}
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	chance := func(p float64) bool { return r.Float64() < p }
	pick := func(kinds ...SessionKind) []SessionKind { return kinds }

	s.TTL = []time.Duration{time.Second, 1500 * time.Millisecond}[r.IntN(2)]
	s.MaxTTL = 2 * s.TTL
	s.Keys = []string{"k0"}
	if f == Mixed {
		s.Keys = []string{"k0", "k1", "k2", "k3"}[:2+r.IntN(3)]
	}
	s.Checkers.Availability = true

	fencing := f == Mixed && chance(0.5) || f == Fenced
	for i := range s.Nodes {
		s.Nodes[i] = NodeSpec{AOF: fencing || chance(0.5), Rate: 1}
		if f == Mixed && chance(0.3) {
			// Inside the drift allowance (1 % of the TTL): at most half of it.
			s.Nodes[i].Rate = 1 + (r.Float64()-0.5)/100
		}
	}

	// Clients: 2 worker processes with 2 or 3 Clients each.
	all := pick(SessHold, SessHold, SessHold, SessTry, SessTry, SessExtend, SessKeepAlive, SessDo, SessToUntil, SessAbandon, SessShortWait, SessLateExtend)
	s.Procs = make([][]ClientSpec, 2)
	for p := range s.Procs {
		for range 2 + r.IntN(2) {
			c := ClientSpec{Workers: 1 + r.IntN(3), NodeTimeout: 50 * time.Millisecond, RetryMax: 50 * time.Millisecond, Sessions: all}
			if fencing {
				c.Fencing = f == Fenced || chance(0.6)
			}
			if f == Mixed && chance(0.25) {
				c.Duplicate, c.DupDelay = 0.05+0.3*r.Float64(), between(10*time.Millisecond, s.TTL)
			}
			s.Procs[p] = append(s.Procs[p], c)
		}
	}

	switch f {
	case Handoff:
		// One Client per process with three workers on one key: handoffs; a handoff
		// call may come again, up to the handoff TTL later; holders extend to three
		// times the TTL and keep the lock nearly to its end.
		s.TTL, s.MaxTTL = time.Second, 3*time.Second
		s.Length = 10 * time.Second
		for p := range s.Procs {
			s.Procs[p] = s.Procs[p][:1]
			s.Procs[p][0].Workers = 3
			s.Procs[p][0].Duplicate = 0.5 + 0.4*r.Float64()
			s.Procs[p][0].DupDelay = s.TTL
			s.Procs[p][0].DupHandoffs = true
			s.Procs[p][0].Sessions = pick(SessExtend)
		}
	case Drift:
		// Clocks up to 0.6 % fast (inside the 1 % allowance) on every node, a long TTL
		// so that the early expiry is tens of milliseconds; holders use the whole
		// validity, contenders try every few milliseconds.
		s.TTL, s.MaxTTL = 3*time.Second, 3*time.Second
		s.Length = 10 * time.Second
		for i := range s.Nodes {
			s.Nodes[i].Rate = 1.004 + 0.002*r.Float64()
		}
		for p := range s.Procs {
			for c := range s.Procs[p] {
				s.Procs[p][c].Sessions = pick(SessToUntil, SessToUntil, SessTry, SessHold)
				s.Procs[p][c].RetryMax = 10 * time.Millisecond
			}
		}
	case Cleanup:
		// Attempts cut short by their deadline while their SETs are out; a long TTL,
		// so a key left behind blocks everyone for seconds.
		s.TTL, s.MaxTTL = 3*time.Second, 3*time.Second
		s.Length = 8 * time.Second
		for p := range s.Procs {
			for c := range s.Procs[p] {
				s.Procs[p][c].Sessions = pick(SessShortWait, SessShortWait, SessHold)
			}
		}
	case Line:
		for p := range s.Procs {
			for c := range s.Procs[p] {
				cl := &s.Procs[p][c]
				cl.Workers = 1
				cl.Sessions = pick(SessHold, SessHold, SessHold, SessHold, SessTry, SessShortWait, SessExtend, SessDo)
			}
		}
	case Reentrant:
		// Holds of several owners on one key; TTL 1 s so that abandoned and kept
		// holds cost other owners less of the run.
		s.TTL, s.MaxTTL = time.Second, 2*time.Second
		s.Length = 8 * time.Second
	case LateExtend:
		// In each process one Client's holders extend right before their validity
		// ends, through slow requests; one other Client, a single worker that retries
		// every few milliseconds, takes the key once it is free and lets it go at once
		// (one worker, so no handoff keeps the key taken).
		s.TTL, s.MaxTTL = time.Second, 2*time.Second
		s.Length = 8 * time.Second
		for p := range s.Procs {
			s.Procs[p] = s.Procs[p][:2]
			for c := range s.Procs[p] {
				cl := &s.Procs[p][c]
				cl.NodeTimeout, cl.Workers, cl.Duplicate = 300*time.Millisecond, 1, 0
				cl.Sessions, cl.RetryMax = pick(SessTry, SessHold), 5*time.Millisecond
				if c == 0 {
					cl.Sessions, cl.RetryMax = pick(SessLateExtend), 50*time.Millisecond
				}
			}
		}
	}
	drawModes(s)
	drawMembers(s)
	for _, p := range s.Procs {
		for _, c := range p {
			if c.Duplicate > 0 {
				s.Checkers.Availability = false
			}
		}
	}
	s.Faults = faults(r, s)
	s.Checkers.Fairness = s.Family == Fair && len(s.Faults) == 0
	return s
}

// clusterWritableDelay is how long after its restart a Cluster node still refuses
// keyed commands: Redis keeps a restarted master's cluster state failing for 2 s
// (CLUSTER_WRITABLE_DELAY), plus a margin for the cluster cron.
const clusterWritableDelay = 2100 * time.Millisecond

// faults draws the fault timeline of s. At most two nodes are killed or paused at any
// moment (a majority stays up); a node without persistence stays down for longer than
// the largest TTL (the documented condition for a restart without persistence).
func faults(r *rand.Rand, s *Schedule) []Fault {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	clients := len(s.Clients())
	var out []Fault
	switch s.Family {
	case Cleanup, Drift:
		return nil // the mutant's conditions alone; faults would only add noise
	case Fair:
		// Half the schedules have no faults, for the fairness check. The other half
		// cut a minority off from one Client now and then, as Handoff does: that
		// Client's locks rest on a bare majority, and a node it cannot reach frees the
		// key to its own head, which the nodes' hand-over gives the key there. A
		// waiter that took a lock on one node's hand notice (the mutant
		// fair-hand-one-node) then overlaps the holder; without the cuts it survived
		// one run of 13 schedules in three.
		if r.Float64() < 0.5 {
			return nil
		}
		return minorityCuts(r, clients, s.Length, between)
	case LateExtend:
		// Requests of client 0 of each process, to every node, delayed by a time that
		// varies a lot from command to command (jitter as large as the latency), so an
		// extend can take much longer to arrive than the acquire before it did.
		c := 0
		for _, p := range s.Procs {
			lat := between(40*time.Millisecond, 100*time.Millisecond)
			out = append(out, Fault{Kind: FaultLatency, Start: 0, End: s.Length, Nodes: []int{0, 1, 2, 3, 4}, Client: c, Latency: lat, Jitter: lat, Requests: true})
			c += len(p)
		}
		return out
	case Handoff, Line:
		// A minority cut off from one Client now and then leaves that Client's locks
		// on a bare majority, where one shortened key (or, in Line, one node that
		// only said yes) lets another Client in.
		return minorityCuts(r, clients, s.Length, between)
	}
	down := make([][2]time.Duration, 0) // kill and pause windows, to keep a majority up
	busy := func(from, to time.Duration) int {
		n := 0
		for _, w := range down {
			if w[0] < to && from < w[1] {
				n++
			}
		}
		return n
	}
	nodeBusy := map[int][][2]time.Duration{}
	free := func(node int, from, to time.Duration) bool {
		for _, w := range nodeBusy[node] {
			if w[0] < to+100*time.Millisecond && from < w[1]+100*time.Millisecond {
				return false
			}
		}
		return true
	}
	n := 3 + r.IntN(5)
	for range n {
		start := between(200*time.Millisecond, s.Length-time.Second)
		var f Fault
		switch k := r.IntN(7); k {
		case 0, 1: // kill
			node := r.IntN(Nodes)
			d := between(50*time.Millisecond, 1500*time.Millisecond)
			if !s.Nodes[node].AOF {
				d = s.MaxTTL + between(200*time.Millisecond, 800*time.Millisecond)
			}
			f = Fault{Kind: FaultKill, Start: start, End: start + d, Nodes: []int{node}}
		case 2: // pause
			node := r.IntN(Nodes)
			f = Fault{Kind: FaultPause, Start: start, End: start + between(20*time.Millisecond, 1500*time.Millisecond), Nodes: []int{node}}
		case 3: // partition, sometimes asymmetric (the client sees only two nodes)
			k := 1 + r.IntN(2)
			if r.IntN(4) == 0 {
				k = 3
			}
			f = Fault{Kind: FaultPartition, Start: start, End: start + between(100*time.Millisecond, 2*time.Second), Nodes: r.Perm(Nodes)[:k], Client: r.IntN(clients)}
			if r.IntN(3) == 0 {
				f.Kind = FaultOneWay
			}
		case 4, 5: // latency and jitter
			k := 1 + r.IntN(Nodes)
			f = Fault{Kind: FaultLatency, Start: start, End: start + between(100*time.Millisecond, 2*time.Second), Nodes: r.Perm(Nodes)[:k], Client: r.IntN(clients),
				Latency: between(time.Millisecond, 60*time.Millisecond), Jitter: between(0, 20*time.Millisecond), Requests: r.IntN(2) == 0}
		case 6: // a worker process paused for well under KeepAlive's margin (TTL/10)
			f = Fault{Kind: FaultClientPause, Start: start, End: start + between(5*time.Millisecond, 40*time.Millisecond), Process: r.IntN(len(s.Procs))}
		}
		if f.Kind == FaultKill || f.Kind == FaultPause {
			end := f.End
			if f.Kind == FaultKill && s.Nodes[f.Nodes[0]].Cluster {
				// A restarted Cluster node answers PING at once but refuses keyed
				// commands (CLUSTERDOWN) until its state is ok, about 2 s later.
				end += clusterWritableDelay
			}
			if busy(f.Start, end) >= 2 || !free(f.Nodes[0], f.Start, end) {
				continue
			}
			down = append(down, [2]time.Duration{f.Start, end})
			nodeBusy[f.Nodes[0]] = append(nodeBusy[f.Nodes[0]], [2]time.Duration{f.Start, end})
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.Start - b.Start) })
	return out
}

// minorityCuts draws, for each of the clients, partitions that cut it off from two
// random nodes (a minority) for 1 to 3 s every 1.5 to 3 s of a schedule of length
// n, sorted by start.
func minorityCuts(r *rand.Rand, clients int, n time.Duration, between func(lo, hi time.Duration) time.Duration) []Fault {
	var out []Fault
	for c := range clients {
		for at := between(0, time.Second); at < n-time.Second; at += between(1500*time.Millisecond, 3*time.Second) {
			end := at + between(time.Second, 3*time.Second)
			out = append(out, Fault{Kind: FaultPartition, Start: at, End: end, Nodes: r.Perm(Nodes)[:2], Client: c})
		}
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.Start - b.Start) })
	return out
}
