package nemesis

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/redlock-go/redlock"
)

// Op names what a Record records.
type Op string

// The operations of a history.
const (
	OpAcquire   Op = "acquire"   // Acquire, or TryAcquire (Try set); Ret is the grant
	OpDo        Op = "do"        // Client.Do: Inv its call, Ret the start of fn (the grant)
	OpExtend    Op = "extend"    // Lock.Extend
	OpKeepAlive Op = "keepalive" // Lock.KeepAlive until stop: Ok unless the lock was lost
	OpRelease   Op = "release"   // Lock.Release
	OpEnd       Op = "end"       // a granted lock's validity window ended at Ret (see Record)
	OpWrite     Op = "write"     // fenced.Write to the resource of Key with Fence
	OpRead      Op = "read"      // fenced.Read of the resource of Key
)

// Record is one operation of a history: its invocation and completion on
// CLOCK_MONOTONIC (one clock for every process on the machine, so the histories of
// several processes merge exactly), its outcome, and what it concerned.
type Record struct {
	Proc    int         `json:"p"`
	Client  int         `json:"c"` // global client index
	Worker  int         `json:"w"` // global worker index
	Op      Op          `json:"op"`
	Session string      `json:"s"` // the lock this concerns: "proc.client.worker.n"
	Kind    SessionKind `json:"k,omitempty"`
	Key     string      `json:"key"`
	Try     bool        `json:"try,omitempty"`
	Inv     int64       `json:"inv"`
	Ret     int64       `json:"ret"`
	Ok      bool        `json:"ok"`
	Err     string      `json:"err,omitempty"` // the error class: not-acquired, unavailable, lock-lost, closed, context, other
	Detail  string      `json:"detail,omitempty"`
	Until   int64       `json:"until,omitempty"` // the lock's Until after the op, on the same clock
	TTL     int64       `json:"ttl,omitempty"`   // milliseconds
	Fence   uint64      `json:"fence,omitempty"`
	Owner   string      `json:"o,omitempty"` // the owner the lock was acquired for (WithOwner)
	// Deadline is when the call's context was to end (an Acquire's wait), on the same
	// clock; 0 when it had none.
	Deadline int64  `json:"dl,omitempty"`
	Value    string `json:"value,omitempty"` // written, or read
	// Ambiguous marks an operation whose effect is unknown (a write that failed with
	// a network error may or may not have been applied): it gets an open end.
	Ambiguous bool `json:"amb,omitempty"`
}

// An OpEnd record closes a granted lock's validity window: from the grant (the Ret of
// its OpAcquire or OpDo) to Ret, which is the earlier of the lock's final Until and the
// invocation of its Release (for Do: the moment fn saw its context end or returned).
// Until holds the final Until.

// errClass returns the class of a redlock error.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, redlock.ErrLockLost):
		return "lock-lost"
	case errors.Is(err, redlock.ErrNotAcquired):
		return "not-acquired"
	case errors.Is(err, redlock.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	}
	return "other"
}

// monotonic returns CLOCK_MONOTONIC in nanoseconds.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("nemesis: CLOCK_MONOTONIC: " + err.Error())
	}
	return ts.Nano()
}

// historyWriter appends records to a file as JSON lines, safe for concurrent use.
type historyWriter struct {
	mu  sync.Mutex
	f   *os.File
	buf *bufio.Writer
	enc *json.Encoder
}

func newHistoryWriter(path string) (*historyWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	buf := bufio.NewWriter(f)
	return &historyWriter{f: f, buf: buf, enc: json.NewEncoder(buf)}, nil
}

func (h *historyWriter) add(r Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.enc.Encode(r) // an error shows as a short history, and Close reports it
}

func (h *historyWriter) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.buf.Flush(); err != nil {
		h.f.Close()
		return err
	}
	return h.f.Close()
}

// ReadHistory reads the records of the given JSON-lines files and returns them
// sorted by invocation.
func ReadHistory(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bufio.NewReader(f))
		for {
			var r Record
			if err := dec.Decode(&r); err == io.EOF {
				break
			} else if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, r)
		}
		f.Close()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Inv < out[j].Inv })
	return out, nil
}
