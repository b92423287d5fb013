package redlock

import (
	"context"
	"time"
)

// Observer receives one Event for each step a Client's caller runs: each call of
// Acquire and TryAcquire, each Extend (KeepAlive's renewals included, marked Renewal),
// each Release, and a KeepAlive that gave up because the lock was lost without an
// Extend proving it. It is set with Options.Observer; nil means none, and then the
// steps do no work for it (no allocation, no extra clock reading). A call given a nil
// context is refused before anything else, with no event.
//
// Observe is called synchronously, once, after the step's outcome is known and after
// the step has let go of every lock and queue place it held, on the goroutine that ran
// the step, with the step's context, so that a tracer can join the caller's trace: for
// a renewal, the work's context KeepAlive returned (it carries the values of the one
// given to KeepAlive, and may be cancelled already); for OpKeepAlive, the context
// given to KeepAlive. A slow Observe delays the step's return,
// not other steps. It may be called concurrently from many goroutines. A panic in
// Observe is recovered: the step's result stands, the panic is counted
// (Client.ObserverPanics) and logged through Options.Logger.
//
// Observe may call back into the Client and its locks. The events of KeepAlive (a
// renewal, or OpKeepAlive) come from KeepAlive's goroutine: a Release or stop of that
// KeepAlive called meanwhile (from that Observe or from elsewhere) does not wait for
// the goroutine to end, which then ends without another renewal. Observe must not call
// Close, or Shutdown without a deadline, from such an event: they wait for every
// KeepAlive to end.
//
// Every lock that an Acquire event reported granted (Outcome OutcomeOK) later has
// exactly one event with Ended set: its first Release (the one that marked it
// released, not a concurrent one refused as already released), or the first Extend or
// KeepAlive event that found it lost (Lost set too), whichever comes first. So a
// count of locks held, up on a granted Acquire and down on Ended, returns to zero once
// every lock is released, and never drops below it. A lock the program drops without
// calling Release has no Ended event.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Event describes one step's outcome. Its fields are the observer's to keep: Nodes is
// a fresh slice for each event.
type Event struct {
	Op  Op
	Key string
	TTL time.Duration // the TTL asked for (Release: the lock's latest TTL)

	// Start is when the step began and Duration how long it took, on Options.Clock.
	Start    time.Time
	Duration time.Duration

	Outcome Outcome
	Err     error // what the step returned (for OpKeepAlive, the cause that ended it)

	// Attempts is the number of acquisition attempts an Acquire or TryAcquire made
	// (0 when it refused its arguments or the Client was closed). Other ops: 0.
	Attempts int

	// Nodes holds one reply per node, in the order of the Client's nodes, from the last
	// round the step sent: the last attempt of an Acquire, the Extend's round, the
	// Release's (or its handoff's) round. Nil when the step sent nothing.
	Nodes []NodeReply

	// FenceRefusals counts the node replies, over every round of the step, that refused
	// the proposed fencing token because the node's counter was already at or above
	// it (Options.Fencing). A refused round is retried with a higher token, so an
	// Acquire can succeed after refusals that its last round does not show.
	FenceRefusals int

	Fence   uint64 // the granted lock's fencing token (Lock.Fence); 0 otherwise
	Handoff bool   // Acquire: the lock was handed over by a Release of this Client; Release: it handed the lock to a waiter
	Renewal bool   // an Extend made by KeepAlive, or OpKeepAlive
	Ended   bool   // this event ends a lock reported granted (see Observer)
	Lost    bool   // Ended because the lock was found lost (validity over, token gone, renewals failed)
}

// Op names the step an Event reports.
type Op uint8

// The steps an Observer hears about.
const (
	OpAcquire   Op = iota + 1 // Acquire or TryAcquire
	OpExtend                  // Extend, or one of KeepAlive's renewals
	OpRelease                 // Release
	OpKeepAlive               // KeepAlive gave up without an Extend that proved the loss
)

// String returns the op's lower-case name: "acquire", "extend", "release", "keepalive".
func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "acquire"
	case OpExtend:
		return "extend"
	case OpRelease:
		return "release"
	case OpKeepAlive:
		return "keepalive"
	}
	return "unknown"
}

// Outcome classifies how a step ended, for counting by kind.
type Outcome uint8

// The outcomes, in the order a step's error is tested for them.
const (
	OutcomeOK          Outcome = iota // the step did what was asked
	OutcomeClosed                     // the Client was closed (ErrClosed)
	OutcomeLost                       // the lock is known lost (ErrLockLost)
	OutcomeCanceled                   // the caller's context ended (canceled or deadline)
	OutcomeInvalid                    // bad arguments, or a reply no retry can fix (ErrNodeConfig, a script error, ErrFenceExhausted)
	OutcomeNotAcquired                // held elsewhere (ErrNotAcquired)
	OutcomeUnavailable                // too many nodes failed (ErrUnavailable)
)

// String returns the outcome's name, fit for a metric attribute: "ok", "closed",
// "lost", "canceled", "invalid", "not_acquired", "unavailable".
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeClosed:
		return "closed"
	case OutcomeLost:
		return "lost"
	case OutcomeCanceled:
		return "canceled"
	case OutcomeInvalid:
		return "invalid"
	case OutcomeNotAcquired:
		return "not_acquired"
	case OutcomeUnavailable:
		return "unavailable"
	}
	return "unknown"
}

// NodeReply is one node's answer in the last round of a step.
type NodeReply struct {
	Node   string        // the node's name: its address or redacted URL, never a password
	At     time.Duration // when the answer came, since Event.Start (0 for ResultPending)
	Result Result
	Class  string // for ResultFailed, and for a refused fencing token: one of the Class constants; else ""
	Err    error  // the node's error for ResultFailed, else nil
}

// Result is what one node answered.
type Result uint8

// The results a node can give.
const (
	// ResultPending: no answer before the step was decided (a majority had already
	// said yes, or enough had said no); the call still finishes in the background.
	ResultPending Result = iota
	ResultYes            // did what was asked
	ResultNo             // refused: the key is held by another token, or ours is gone; or not asked, as not needed (a release to a node the lock's SET never left for)
	ResultFailed         // an error, or no answer within Options.NodeTimeout
)

// String returns "pending", "yes", "no" or "failed".
func (r Result) String() string {
	switch r {
	case ResultYes:
		return "yes"
	case ResultNo:
		return "no"
	case ResultFailed:
		return "failed"
	}
	return "pending"
}

// The classes of NodeReply.Class.
const (
	ClassTimeout      = "timeout"       // no answer within NodeTimeout, or a network timeout
	ClassRefused      = "refused"       // the connection was refused (nothing listens there)
	ClassReadonly     = "readonly"      // READONLY: a replica, during a failover
	ClassLoading      = "loading"       // LOADING: a node still reading its data set
	ClassPermanent    = "permanent"     // a reply no retry can fix (see Acquire)
	ClassBusy         = "busy"          // not sent: an earlier call of the lock to the node was still out
	ClassOther        = "other"         // any other error
	ClassFenceRefused = "fence-refused" // ResultNo: the node's fencing counter refused our token
)
