package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Run calls fn with a T that belongs to no test, so that the kit's test helpers can be
// used outside `go test`: in runnable examples, or in a program that sets up nodes and
// faults for a demonstration. In a test, pass the test's own t instead; a program that
// only needs redis-server processes can use StartProcess, which needs no T.
//
// Everything registered with t.Cleanup runs, last first, when fn returns or ends
// through t.Fatalf or t.Skipf. Run returns an error whose text is the failure
// messages, one a line, when t failed, and nil otherwise (also when fn skipped). The
// failure messages are returned rather than logged, so a program can print them once;
// t.Logf goes to the standard logger. fn runs on a new goroutine, which Fatalf and
// Skipf end.
func Run(fn func(t T)) error {
	s := &standalone{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(s)
	}()
	<-done
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.runCleanups()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		msg := strings.Join(s.msgs, "\n")
		if strings.TrimSpace(msg) == "" { // Fatalf("") or Errorf("")
			msg = "redlocktest: failed"
		}
		return errors.New(msg)
	}
	return nil
}

// standalone is the T of Run: a complete implementation of T, with no test behind it.
type standalone struct {
	mu       sync.Mutex
	failed   bool
	msgs     []string
	cleanups []func()
	ctx      context.Context
	cancel   context.CancelFunc
}

// Helper does nothing: there are no test line numbers to adjust.
func (s *standalone) Helper() {}

// Logf writes to the standard logger.
func (s *standalone) Logf(format string, args ...any) {
	log.Printf("redlocktest.Run: %s", fmt.Sprintf(format, args...))
}

// Errorf records a failure message for Run's error.
func (s *standalone) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.msgs = append(s.msgs, msg)
}

// Fatalf records a failure message and ends the calling goroutine.
func (s *standalone) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

// Skipf logs the message and ends the calling goroutine without a failure.
func (s *standalone) Skipf(format string, args ...any) {
	s.Logf(format, args...)
	runtime.Goexit()
}

// Cleanup registers fn to run when Run's fn has ended.
func (s *standalone) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// runCleanups runs the clean-ups last first, each on its own goroutine so that a
// Fatalf inside one does not stop the others.
func (s *standalone) runCleanups() {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		fn := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			fn()
		}()
		<-done
	}
}

// TempDir returns a new directory, removed by a clean-up.
func (s *standalone) TempDir() string {
	dir, err := os.MkdirTemp("", "redlocktest-")
	if err != nil {
		s.Fatalf("TempDir: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Context returns a context that is cancelled just before the clean-ups run, as a
// test's is.
func (s *standalone) Context() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	return s.ctx
}
