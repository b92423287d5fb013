package redistest

import (
	"fmt"
	"runtime"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the calling
// goroutine, as testing's does, without failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestRestartAfterClose: a closed server stays closed. Restart after Close
// fails instead of starting a new process that nothing will stop (redlocktest's
// Process refuses it the same way). Before the fix it started one.
func TestRestartAfterClose(t *testing.T) {
	s := Start(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := &fatalRecorder{TB: t}
	s.t = rec
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Restart()
	}()
	<-done
	s.t = t
	if pid := s.PID(); pid != 0 {
		t.Errorf("Restart after Close started process %d", pid)
	}
	if rec.msg == "" {
		t.Errorf("Restart after Close did not fail")
	}
}
