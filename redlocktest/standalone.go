package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Run calls fn with a testing.TB that belongs to no test, so that the kit can be used
// outside `go test`: in runnable examples, or in a program that sets up nodes and faults
// for a demonstration. In a test, pass the test's own t instead.
//
// Everything registered with t.Cleanup runs, last first, when fn returns or ends
// through t.FailNow, t.Fatal or t.Skip. Run returns an error whose text is the failure
// messages, one a line, when t failed, and nil otherwise (also when fn skipped). The
// failure messages are returned rather than logged, so a program can print them once;
// t.Log and t.Logf go to the standard logger. fn runs on a new goroutine, which
// FailNow and SkipNow end.
func Run(fn func(t testing.TB)) error {
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
		if len(s.msgs) == 0 { // t.Fail or t.FailNow without a message
			return errors.New("redlocktest: failed")
		}
		return errors.New(strings.Join(s.msgs, "\n"))
	}
	return nil
}

// standalone is the testing.TB of Run. The embedded interface is nil: it only
// satisfies testing.TB's unexported method; every method is implemented below.
type standalone struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
	ctx      context.Context
	cancel   context.CancelFunc
}

func (s *standalone) Name() string { return "redlocktest.Run" }
func (s *standalone) Helper()      {}

func (s *standalone) Log(args ...any) { s.Logf("%s", fmt.Sprintln(args...)) }

func (s *standalone) Logf(format string, args ...any) {
	log.Printf("%s: %s", s.Name(), fmt.Sprintf(format, args...))
}

func (s *standalone) Fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
}

func (s *standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *standalone) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

func (s *standalone) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.msgs = append(s.msgs, msg)
}

func (s *standalone) FailNow() {
	s.Fail()
	runtime.Goexit()
}

func (s *standalone) Fatal(args ...any) { s.Error(args...); runtime.Goexit() }

func (s *standalone) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

func (s *standalone) SkipNow() {
	s.mu.Lock()
	s.skipped = true
	s.mu.Unlock()
	runtime.Goexit()
}

func (s *standalone) Skip(args ...any) { s.Log(args...); s.SkipNow() }

func (s *standalone) Skipf(format string, args ...any) { s.Logf(format, args...); s.SkipNow() }

func (s *standalone) Skipped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

func (s *standalone) Cleanup(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, fn)
}

// runCleanups runs the clean-ups last first, each on its own goroutine so that a
// FailNow inside one does not stop the others.
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

func (s *standalone) TempDir() string {
	dir, err := os.MkdirTemp("", "redlocktest-")
	if err != nil {
		s.Fatalf("TempDir: %v", err)
	}
	s.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (s *standalone) ArtifactDir() string { return s.TempDir() }

func (s *standalone) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		s.Fatalf("Setenv: %v", err)
	}
	s.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

func (s *standalone) Chdir(dir string) {
	old, err := os.Getwd()
	if err != nil {
		s.Fatalf("Chdir: %v", err)
	}
	if err := os.Chdir(dir); err != nil {
		s.Fatalf("Chdir: %v", err)
	}
	s.Cleanup(func() { _ = os.Chdir(old) })
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

func (s *standalone) Attr(key, value string) { s.Logf("attr %s=%s", key, value) }

func (s *standalone) Output() io.Writer { return log.Writer() }
