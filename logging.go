package redlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
	logNode     = "node" // a node failing or recovering (one slot per node for both)
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
		s.keyAttr(key), slog.String("cause", cause.Error()))
}

// configProblems logs each problem CheckNodes found (its *NodeError values).
func (s *logState) configProblems(errs *multierror.Error) {
	if s == nil || errs == nil {
		return
	}
	for _, err := range errs.Errors {
		node := ""
		var ne *NodeError
		if errors.As(err, &ne) {
			node, err = ne.Node, ne.Err
		}
		s.emit(slog.LevelWarn, logConfig, node, "redlock: node configuration problem",
			slog.String("error", err.Error()))
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
// call it answers.
type nodeHealth struct {
	s       *logState
	name    string
	failing atomic.Bool
	failed  atomic.Int64 // calls failed since it went down
	since   time.Time    // when it went down; guarded by the transition (failing's CAS)
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
	if down {
		h.failed.Add(1)
	}
	if h.failing.Load() == down || !h.failing.CompareAndSwap(!down, down) {
		return
	}
	now := h.s.clock.Now()
	if down {
		h.since = now
		h.failed.Store(1)
		h.s.emit(slog.LevelWarn, logNode, h.name, "redlock: node failing",
			slog.String("class", class), slog.String("error", err.Error()))
		return
	}
	h.s.emit(slog.LevelInfo, logNode, h.name, "redlock: node recovered",
		slog.Int64("failed_calls", h.failed.Load()), slog.Duration("down_for", now.Sub(h.since)))
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
