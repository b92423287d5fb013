package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// Sentinel errors, matched with errors.Is. Every error the package returns for a failed
// step wraps exactly one of ErrNotAcquired, ErrUnavailable or ErrLockLost; on
// cancellation it also wraps the context's error.
var (
	// ErrNotAcquired means Acquire gave up without a majority because other holders
	// have the key on too many nodes (contention, not failure), or because its context
	// ended before any attempt showed that too many nodes were failing.
	ErrNotAcquired = errors.New("redlock: lock not acquired")

	// ErrUnavailable means too many nodes failed, timed out or answered too late for a
	// majority: an infrastructure problem, not contention. The per-node causes are
	// reachable with errors.As as *NodeError values.
	ErrUnavailable = errors.New("redlock: quorum unavailable")

	// ErrLockLost means a lock is known to be no longer held: its validity ran out, it
	// was already released, a loss was proven earlier, Extend found its token gone from
	// too many nodes, or Release found another token holding the key on too many nodes.
	ErrLockLost = errors.New("redlock: lock lost")

	// ErrTTLTooShort means a TTL that KeepAlive (and so Do) cannot keep renewed with the
	// Client's options: see Options.CheckKeepAliveTTL. Do returns it before acquiring
	// anything; KeepAlive cancels the context it returns with it, at once.
	ErrTTLTooShort = errors.New("redlock: ttl too short to keep alive")

	// ErrNotRun is matched by Do's error when fn did not run: Do refused its arguments,
	// or the lock was not acquired (the error also matches Acquire's: ErrNotAcquired,
	// ErrUnavailable, ErrClosed, the context's error). When fn ran, Do's error is a
	// *RunError instead; test for that first (errors.As), since fn's own error could
	// match ErrNotRun too.
	ErrNotRun = errors.New("redlock: not run")

	// ErrNodeTimeout is the cause recorded for a node that did not reply within
	// Options.NodeTimeout. Its call may still land later; the library undoes it.
	ErrNodeTimeout = errors.New("redlock: no reply within the node timeout")

	// errNodeBusy is the cause recorded when an extend waited behind the lock's previous
	// call to a node until the node timeout passed, and was dropped.
	errNodeBusy = errors.New("redlock: previous call to this node still in flight")
)

// NodeError is the failure of one node in one step: an error reply (WRONGTYPE,
// READONLY, NOSCRIPT without fallback, OOM, ...), a network error or ErrNodeTimeout.
type NodeError struct {
	// Node names the node: its address, or a redacted URL; never a password.
	Node string
	// Err is the cause.
	Err error
}

func (e *NodeError) Error() string { return "node " + e.Node + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports a step (acquire, extend or release) that did not obtain a majority,
// with the count of each kind of answer and the failure of every node that failed. A step
// stops as soon as refusals rule a majority out, so nodes whose answer was still out
// are in none of the counts (Agreed + Refused + Failed can be below Nodes).
// It matches ErrNotAcquired, ErrUnavailable or ErrLockLost with errors.Is, the
// caller's context error when the step was cancelled, and each *NodeError with errors.As.
type QuorumError struct {
	Op      string // "acquire", "extend" or "release"
	Key     string // the lock key
	Nodes   int    // how many nodes the client has
	Needed  int    // the majority: Nodes/2 + 1
	Agreed  int    // nodes that did what was asked
	Refused int    // nodes that said no: held elsewhere, fencing token refused, or (extend) ours gone
	Failed  int    // nodes that returned an error or did not reply in time

	// Late reports that the validity had run out: for acquire and extend, a majority
	// agreed only after it had; for release, it had before the release.
	Late bool

	// Errors holds one *NodeError per failed node, or is nil.
	Errors *multierror.Error

	kind   error         // ErrNotAcquired, ErrUnavailable or ErrLockLost
	quorum time.Duration // acquire: how long until a majority had answered (0: never)
	ctxErr error         // the caller's context error, if the step was cancelled
	gaveUp string        // KeepAlive's loss cause: why it gave up after this failed renewal
	note   string        // why a step that a majority agreed to still failed, if not Late
	round  *round        // the step's last round, for Options.Observer (acquire only)
	turn   bool          // acquire: the key's line node kept the key for another Client's turn (line.go)
	// goneHere, acquire: a node's key still held the token whose release the attempt
	// followed (replyGoneHere): that release had not landed everywhere yet.
	goneHere bool
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	if e.gaveUp != "" {
		fmt.Fprintf(&b, "%v: keep alive %q: %s; last %s: ", e.kind, e.Key, e.gaveUp, e.Op)
	} else {
		fmt.Fprintf(&b, "%v: %s %q: ", e.kind, e.Op, e.Key)
	}
	fmt.Fprintf(&b, "%d of %d nodes agreed, %d needed", e.Agreed, e.Nodes, e.Needed)
	if e.Refused > 0 {
		fmt.Fprintf(&b, ", %d refused", e.Refused)
	}
	if e.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", e.Failed)
	}
	if e.Late {
		b.WriteString(", after the validity ran out")
	}
	if e.note != "" {
		b.WriteString(", but " + e.note)
	}
	if e.ctxErr != nil {
		fmt.Fprintf(&b, " (%v)", e.ctxErr)
	}
	if e.Errors != nil {
		b.WriteString(": ")
		b.WriteString(e.Errors.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel, the context error (if any) and the per-node errors.
func (e *QuorumError) Unwrap() []error {
	errs := []error{e.kind}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	if e.Errors != nil {
		errs = append(errs, e.Errors)
	}
	return errs
}

// hopeless reports whether a majority of the nodes failed with a reply that no retry
// can fix (permanent): Acquire then stops at once instead of retrying until its
// context ends.
func (e *QuorumError) hopeless() bool {
	if e.Errors == nil {
		return false
	}
	n := 0
	for _, err := range e.Errors.Errors {
		var ne *NodeError
		if errors.As(err, &ne) && permanent(ne.Err) {
			n++
		}
	}
	return n >= e.Needed
}

// permanentReplies are the beginnings of the error replies that no retry can fix:
// someone must first change the node's settings or the data under the key.
var permanentReplies = []string{
	"CROSSSLOT",                  // a script's keys in two slots of a Cluster
	"NOPERM",                     // an ACL user without the right to run scripts or touch the key
	"NOAUTH",                     // a password is required
	"WRONGPASS",                  // wrong user name or password
	"WRONGTYPE",                  // the key (or its fencing counter) holds another type
	"ERR unknown command",        // EVALSHA or EVAL renamed away, or a proxy without them
	"ERR user_script:",           // a script's run-time error (Redis 7)
	"ERR Error running script",   // the same before Redis 7
	"ERR Error compiling script", // a script the server cannot compile
}

// permanent reports whether err is an error reply that no retry can fix. Network
// errors, timeouts and replies such as READONLY, LOADING, BUSY, OOM, MOVED or
// CLUSTERDOWN pass with time or a failover, and are not permanent.
func permanent(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	if strings.HasPrefix(msg, "ERR Error running script") {
		// Before Redis 7 an error that a command inside the script raised comes
		// wrapped, its own reply after ": -" (READONLY during a failover, OOM for a
		// moment): that reply decides. Without one, the script itself failed.
		if i := strings.Index(msg, ": -"); i >= 0 {
			msg = msg[i+len(": -"):]
		}
	}
	for _, p := range permanentReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// joinNodeErrors formats per-node errors on one line: "node a: x; node b: y".
func joinNodeErrors(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

// renewalsFailed is KeepAlive's loss cause when its renewals kept failing until none
// could be confirmed in time: a *QuorumError matching ErrLockLost (only) that carries the
// last failed renewal's counts and per-node errors, so that the log says which nodes
// stopped answering.
func renewalsFailed(last *QuorumError, why string) *QuorumError {
	qe := *last
	qe.kind, qe.ctxErr, qe.gaveUp = ErrLockLost, nil, why
	return &qe
}

// notRunError is Do's error when fn did not run: the cause's text, matching ErrNotRun
// and the cause.
type notRunError struct{ cause error }

func (e *notRunError) Error() string   { return e.cause.Error() }
func (e *notRunError) Unwrap() []error { return []error{ErrNotRun, e.cause} }

// RunError is Do's error when fn ran: fn's error, the cause that ended the lock while fn
// ran, or Release's error (at most one of Lost and Release is set). errors.Is and
// errors.As see all three: errors.Is(err, ErrLockLost) holds when the lock was lost
// while fn ran (errors.As then finds the *QuorumError of the last renewal, naming the
// nodes that failed), errors.Is(err, ErrUnavailable) when only the Release failed that
// way (the lock's keys then expire after the TTL).
//
// Its text never says the same thing twice: fn's error alone when its text already
// contains the lock's (fn returned context.Cause(ctx), or wrapped it with %w or %v),
// else the non-nil parts
// joined by "; " in the order Err, Lost, Release.
type RunError struct {
	// Key is the lock's key.
	Key string
	// Err is fn's error, or nil.
	Err error
	// Lost is the cause that ended fn's context because the lock was lost (it matches
	// ErrLockLost), or nil.
	Lost error
	// Release is Release's error when the lock was not lost while fn ran, or nil.
	Release error
}

func (e *RunError) Error() string {
	lockErr := e.Lost
	if lockErr == nil {
		lockErr = e.Release
	}
	switch {
	case e.Err == nil && lockErr == nil:
		return fmt.Sprintf("redlock: do %q: no error", e.Key) // a RunError made by hand
	case lockErr == nil:
		return e.Err.Error()
	case e.Err == nil:
		return lockErr.Error()
	}
	fnText, lockText := e.Err.Error(), lockErr.Error()
	// By text only: fn's error may wrap the lock's (errors.Is finds it) without
	// printing it, and the lock's text must then still be said.
	if strings.Contains(fnText, lockText) {
		return fnText
	}
	return fnText + "; " + lockText
}

// Unwrap returns the non-nil errors among Err, Lost and Release.
func (e *RunError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Err, e.Lost, e.Release} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// lostError reports a lock that is known to be lost without asking any node.
func lostError(op, key, why string) error {
	return fmt.Errorf("%w: %s %q: %s", ErrLockLost, op, key, why)
}
