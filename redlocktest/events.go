package redlocktest

import (
	"time"
)

// EventKind names what happened in an Event.
type EventKind string

// The kinds of Event. Process nodes report EventStart, EventKill, EventRestart,
// EventPause, EventResume and EventJump; Duplicate reports EventDuplicate; proxies
// report the others.
const (
	EventStart     EventKind = "start"     // a process node answers for the first time
	EventKill      EventKind = "kill"      // a running process node was killed (also the kill of a restart)
	EventRestart   EventKind = "restart"   // a restarted process node answers again
	EventPause     EventKind = "pause"     // SIGSTOP
	EventResume    EventKind = "resume"    // SIGCONT
	EventJump      EventKind = "jump"      // the node's wall clock jumped by Detail
	EventProxy     EventKind = "proxy"     // a proxy to Node was made (at Proxy)
	EventLatency   EventKind = "latency"   // Proxy.Latency
	EventBlackhole EventKind = "blackhole" // Proxy.Blackhole
	EventTimeout   EventKind = "timeout"   // Proxy.Timeout
	EventResetPeer EventKind = "reset"     // Proxy.ResetPeer
	EventDown      EventKind = "down"      // Proxy.Down
	EventUp        EventKind = "up"        // Proxy.Up
	EventHeal      EventKind = "heal"      // Proxy.Heal
	EventDuplicate EventKind = "duplicate" // Duplicate installed a Duplicator on a client of Node
)

// Event is one thing the kit did to a node or a proxy, reported to a Recorder at the
// moment it took effect: after a killed process was reaped, after a restarted one
// answers PING, after a fault was installed on a proxy.
type Event struct {
	At   time.Time
	Kind EventKind
	// Node is the address of the node concerned ("127.0.0.1:PORT"); for a proxy
	// event, the proxy's upstream.
	Node string
	// Proxy is the proxy's address for proxy events, "" otherwise.
	Proxy string
	// Binary is the process's program ("redis-server", "redis-sentinel") for process
	// events, "" otherwise.
	Binary string
	// Detail qualifies the event: the clock ("offset +0s rate ×1.1") of a start under
	// Options.Clock, the persistence of a restart, the size of a jump, the delay and
	// direction of a latency, the direction of a blackhole.
	Detail string
}

// Recorder is implemented by a T that wants to know what the kit does. When
// the t given to Start, StartN, NewNetwork (and the functions built on them) implements
// it, every node start and fault is reported to RecordEvent, on the goroutine that
// caused it; RecordEvent must be safe for concurrent use. Wrap a test's t to record:
//
//	type recorder struct {
//		T
//		mu     sync.Mutex
//		events []redlocktest.Event
//	}
//
//	func (r *recorder) RecordEvent(e redlocktest.Event) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }
type Recorder interface {
	RecordEvent(Event)
}

// record reports e to t, stamped with the current time, if t is a Recorder.
func record(t T, e Event) {
	if r, ok := t.(Recorder); ok {
		e.At = time.Now()
		r.RecordEvent(e)
	}
}

// String returns "both ways", "requests" or "replies".
func (d Direction) String() string {
	switch d {
	case Requests:
		return "requests"
	case Replies:
		return "replies"
	}
	return "both ways"
}
