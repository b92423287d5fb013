package redlocktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// LibfaketimeEnv names the environment variable that gives the path of
// libfaketime.so.1 when it is not in one of the usual places.
const LibfaketimeEnv = "REDLOCKTEST_LIBFAKETIME"

const clockFileName = "faketime.rc"

// Clock is a skewed wall clock for a process node, applied with libfaketime (Debian
// package faketime). Only the wall clock (gettimeofday, CLOCK_REALTIME) is faked; the
// monotonic clock, which Redis uses for its event loop, stays real. Redis judges key
// expiry by its wall clock, so a skewed node expires keys early or late.
type Clock struct {
	// Offset is added to the real wall clock from the start.
	Offset time.Duration

	// Rate is how fast the node's wall clock runs next to real time: 1.10 makes it
	// gain 10% (an 11 s TTL passes in 10 real seconds). Zero means 1. libfaketime
	// counts the rate from the process's start, so a restarted node starts again
	// from its offset.
	Rate float64
}

// spec returns the libfaketime time specification for offset and rate.
func (c Clock) spec(offset time.Duration) string {
	s := fmt.Sprintf("%+.6f", offset.Seconds())
	if c.Rate != 0 && c.Rate != 1 {
		s += " x" + strconv.FormatFloat(c.Rate, 'f', -1, 64)
	}
	return s
}

// Jump moves the node's wall clock by d (forward when d > 0) at once, while it runs.
// A forward jump longer than a key's remaining TTL expires the key. Jump fails the
// test unless the node was started with Options.Clock.
func (p *Process) Jump(d time.Duration) {
	if p.t != nil {
		p.t.Helper()
	}
	if err := p.JumpErr(d); err != nil {
		p.fail(err)
	}
}

// JumpErr is Jump, returning its error instead of failing the test.
func (p *Process) JumpErr(d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clock == nil {
		return fmt.Errorf("redlocktest: Jump on %s: the node was not started with Options.Clock", redisproc.Loopback(p.port))
	}
	p.offset += d
	if err := p.writeClockLocked(); err != nil {
		return fmt.Errorf("redlocktest: Jump on %s: %w", redisproc.Loopback(p.port), err)
	}
	sign := ""
	if d >= 0 {
		sign = "+"
	}
	p.recordLocked(EventJump, sign+d.String())
	return nil
}

// clockDetail describes the node's clock for its start event: "" for the real clock.
func (p *Process) clockDetail() string {
	if p.clock == nil {
		return ""
	}
	return "clock " + p.clock.spec(p.offset)
}

// clockFile returns the path of the libfaketime specification file.
func (p *Process) clockFile() string { return filepath.Join(p.dir, clockFileName) }

// writeClockLocked replaces the specification file in one rename, so libfaketime,
// which rereads it on every call (FAKETIME_NO_CACHE), never sees a partial file.
func (p *Process) writeClockLocked() error {
	tmp := p.clockFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(p.clock.spec(p.offset)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p.clockFile())
}

// faketimeEnv returns the environment that runs a process under libfaketime with its
// time read from file on every call and a real monotonic clock.
//
// libfaketime 0.9.10 and jemalloc (which Debian's redis-server links) deadlock at start:
// jemalloc reads the clock while libfaketime initialises, and libfaketime allocates
// while it initialises. When tcmalloc (Debian package libtcmalloc-minimal4) is
// installed it is preloaded first, so libfaketime's own allocations do not enter
// jemalloc; Redis then allocates through tcmalloc too, which is fine for tests.
func faketimeEnv(file string) ([]string, error) {
	lib, err := findLibrary(os.Getenv(LibfaketimeEnv), "faketime/libfaketime.so.1")
	if err != nil {
		return nil, fmt.Errorf("libfaketime not found (%v); install it with `apt-get install -y faketime` or set %s", err, LibfaketimeEnv)
	}
	preload := lib
	if alloc, err := findLibrary("", "libtcmalloc_minimal.so.4"); err == nil {
		preload = alloc + ":" + lib
	}
	return []string{
		"LD_PRELOAD=" + preload,
		"FAKETIME_TIMESTAMP_FILE=" + file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}, nil
}

// faketimeHint explains libfaketime's recursion message when it shows in a log.
func faketimeHint(log string) string {
	if !strings.Contains(log, "recursive calls to clock_gettime") {
		return ""
	}
	return "\n(libfaketime clashes with jemalloc; install libtcmalloc-minimal4 so that it is preloaded first)"
}

// libDirs are the directories searched for preloaded libraries.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}

// findLibrary returns override when it is set, else the first existing dir/rel for
// the directories in libDirs (and any multiarch directory below /usr/lib).
func findLibrary(override, rel string) (string, error) {
	if override != "" {
		if _, err := os.Stat(override); err != nil {
			return "", err
		}
		return override, nil
	}
	dirs := append([]string(nil), libDirs...)
	if more, _ := filepath.Glob("/usr/lib/*-linux-gnu"); len(more) > 0 {
		dirs = append(dirs, more...)
	}
	for _, d := range dirs {
		path := filepath.Join(d, rel)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", errors.New(rel + " is in none of " + strings.Join(dirs, ", "))
}
