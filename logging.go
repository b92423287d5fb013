package redlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/redis/go-redis/v9"
)

// logEvery is the rate limit of Options.Logger: at most one line per kind of event
// and node (or lock, for lost locks: one slot for all) in this time. The next line
// printed for that slot says how many were left out.
const logEvery = time.Second

// logState writes a Client's log lines (Options.Logger), rate-limited per slot.
type logState struct {
	l     *slog.Logger
	keys  bool // Options.LogKeys
	clock Clock

	mu    sync.Mutex
	slots map[logSlot]*logLimit
}

// logSlot is what the rate limit counts by: a kind of event and a node name ("" for
// events of no node).
type logSlot struct{ kind, node string }

// logLimit is one slot's state: when it last printed and what it has left out since.
type logLimit struct {
	at         time.Time
	suppressed int
}

// The kinds of log line.
const (
	logLost     = "lost"
	logConfig   = "config"
	logObserver = "observer"
)

// newLogState returns the logger of a Client with options o, or nil without one.
func newLogState(o Options) *logState {
	if o.Logger == nil {
		return nil
	}
	return &logState{l: o.Logger, keys: o.LogKeys, clock: o.Clock, slots: make(map[logSlot]*logLimit)}
}

// allow reports whether a line for slot may be printed now, and how many lines of the
// slot were left out before it.
func (s *logState) allow(kind, node string) (ok bool, suppressed int) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	lim := s.slots[logSlot{kind, node}]
	if lim == nil {
		s.slots[logSlot{kind, node}] = &logLimit{at: now}
		return true, 0
	}
	if now.Sub(lim.at) < logEvery {
		lim.suppressed++
		return false, 0
	}
	suppressed, lim.at, lim.suppressed = lim.suppressed, now, 0
	return true, suppressed
}

// emit prints one line of kind for node, unless the rate limit holds it back.
func (s *logState) emit(level slog.Level, kind, node, msg string, attrs ...slog.Attr) {
	ok, suppressed := s.allow(kind, node)
	if !ok {
		return
	}
	if node != "" {
		attrs = append(attrs, slog.String("node", node))
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int("suppressed", suppressed))
	}
	s.l.LogAttrs(context.Background(), level, msg, attrs...)
}

// keyAttr returns the attribute that names key: the key itself with Options.LogKeys,
// else the first 12 hex digits of its SHA-256, enough to tell keys apart in logs.
func (s *logState) keyAttr(key string) slog.Attr {
	if s.keys {
		return slog.String("key", key)
	}
	sum := sha256.Sum256([]byte(key))
	return slog.String("key_hash", hex.EncodeToString(sum[:6]))
}

// lockLost logs a lock lost while KeepAlive kept it.
func (s *logState) lockLost(key string, cause error) {
	if s == nil {
		return
	}
	s.emit(slog.LevelWarn, logLost, "", "redlock: lock lost while kept alive",
		s.keyAttr(key), slog.String("cause", s.hideKey(cause.Error(), key)))
}

// hideKey returns text, an error's message, with the quoted key (as the library's
// errors quote it) replaced by its hash unless Options.LogKeys.
func (s *logState) hideKey(text, key string) string {
	if s.keys {
		return text
	}
	return strings.ReplaceAll(text, strconv.Quote(key), "key_hash:"+s.keyAttr(key).Value.String())
}

// configProblems logs the problems CheckNodes found (its *NodeError values): one line
// per node, with every problem of the node, since the rate limit lets one line per
// node through.
func (s *logState) configProblems(errs *multierror.Error) {
	if s == nil || errs == nil {
		return
	}
	var nodes []string             // in the order of their first problem
	found := map[string][]string{} // node → its problems
	for _, err := range errs.Errors {
		node := ""
		var ne *NodeError
		if errors.As(err, &ne) {
			node, err = ne.Node, ne.Err
		}
		if _, ok := found[node]; !ok {
			nodes = append(nodes, node)
		}
		found[node] = append(found[node], err.Error())
	}
	for _, node := range nodes {
		s.emit(slog.LevelWarn, logConfig, node, "redlock: node configuration problem",
			slog.String("error", strings.Join(found[node], "; ")))
	}
}

// observerPanic logs a recovered panic of the Observer, the total-th.
func (s *logState) observerPanic(p any, total uint64) {
	if s == nil {
		return
	}
	s.emit(slog.LevelError, logObserver, "", "redlock: observer panicked",
		slog.String("panic", panicText(p)), slog.Uint64("panics", total))
}

// nodeHealth follows one node's state for the log: failing from a call that failed
// for a reason of the node's own (not a reply about the data), up again from the next
// call it answers. A change is printed at once unless the node had a line in the last
// logEvery; then it is printed logEvery after that line (a timer, so that the last
// line does not stay stale on an idle Client), or with the first call after that, if
// the state still differs from the last one printed, saying how many changes were
// left out.
type nodeHealth struct {
	s    *logState
	name string

	mu       sync.Mutex  // orders the sender's goroutine, its successors and the timer
	failing  bool        // the node's state
	shown    bool        // the state the last line printed (false: up, as at the start)
	printed  time.Time   // when the last line was printed
	changes  int         // changes of state since then
	failed   int64       // calls failed since it went down
	since    time.Time   // when it went down
	class    string      // the latest failure's class
	lastFail error       // and error
	due      *time.Timer // armed while a change is held back: prints it in time
	armed    uint64      // timers armed so far: tells a stopped timer's late call
	closed   bool        // the Client closed: no more lines
}

// node returns the health record of the node named name, or nil without a logger.
func (s *logState) node(name string) *nodeHealth {
	if s == nil {
		return nil
	}
	return &nodeHealth{s: s, name: name}
}

// note records the outcome of one call sent to the node and logs a change of state.
func (h *nodeHealth) note(out outcome, err error) {
	class := ""
	if out == outFailed {
		class = errorClass(err)
	}
	down := class != "" && class != ClassPermanent && class != ClassBusy
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.s.clock.Now()
	if down {
		if !h.failing {
			h.since, h.failed = now, 0
		}
		h.failed++
		h.class, h.lastFail = class, err
	}
	if down != h.failing {
		h.failing = down
		h.changes++
	}
	h.report(now, false)
}

// report prints the node's state if it differs from the last line printed, at once or,
// unless due (the timer fired), once logEvery has passed since that line. The caller
// holds h.mu.
func (h *nodeHealth) report(now time.Time, due bool) {
	if h.failing == h.shown || h.closed {
		h.disarm() // nothing held back
		return
	}
	if wait := logEvery - now.Sub(h.printed); !due && !h.printed.IsZero() && wait > 0 {
		if h.due == nil {
			h.armed++
			armed := h.armed
			h.due = time.AfterFunc(min(wait, logEvery), func() { h.fire(armed) })
		}
		return
	}
	h.disarm()
	attrs := []slog.Attr{slog.String("node", h.name)}
	if h.changes > 1 {
		attrs = append(attrs, slog.Int("suppressed", h.changes-1))
	}
	h.shown, h.printed, h.changes = h.failing, now, 0
	if h.failing {
		attrs = append(attrs, slog.String("class", h.class), slog.String("error", h.lastFail.Error()))
		h.s.l.LogAttrs(context.Background(), slog.LevelWarn, "redlock: node failing", attrs...)
		return
	}
	attrs = append(attrs, slog.Int64("failed_calls", h.failed), slog.Duration("down_for", now.Sub(h.since)))
	h.s.l.LogAttrs(context.Background(), slog.LevelInfo, "redlock: node recovered", attrs...)
}

// fire prints the change held back when the armed-th timer was armed, if that timer
// is still the one.
func (h *nodeHealth) fire(armed uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.due != nil && h.armed == armed {
		h.due = nil
		h.report(h.s.clock.Now(), true)
	}
}

// disarm stops the timer of a held-back change. The caller holds h.mu.
func (h *nodeHealth) disarm() {
	if h.due != nil {
		h.due.Stop()
		h.due = nil
	}
}

// close ends the node's lines when the Client has closed. h may be nil.
func (h *nodeHealth) close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.disarm()
}

// errorClass returns the NodeReply.Class of a node's error.
func errorClass(err error) string {
	var ne net.Error
	var reply redis.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errNodeBusy):
		return ClassBusy
	case errors.Is(err, ErrNodeTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return ClassTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ClassRefused
	case permanent(err):
		return ClassPermanent
	case errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "READONLY"):
		return ClassReadonly
	case errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "LOADING"):
		return ClassLoading
	}
	return ClassOther
}
