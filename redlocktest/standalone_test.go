package redlocktest

import (
	"bytes"
	"context"
	"log"
	"os"
	"strings"
	"testing"
)

func TestRunCleansUpAfterFatal(t *testing.T) {
	var pid int
	var dir string
	var ctx context.Context
	var order []string
	err := Run(func(tb T) {
		tb.Cleanup(func() { order = append(order, "first registered") })
		p := Start(tb, Options{})
		pid, dir, ctx = p.PID(), p.Dir(), tb.Context()
		tb.Cleanup(func() {
			order = append(order, "last registered")
			if ctx.Err() == nil {
				t.Error("Context not cancelled before the clean-ups")
			}
		})
		tb.Fatalf("stop %d", 42)
		t.Error("Fatalf returned")
	})
	if err == nil || err.Error() != "stop 42" {
		t.Errorf("Run = %v, want the error %q", err, "stop 42")
	}
	assertGone(t, []int{pid})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("TempDir %s still exists after Run: %v", dir, err)
	}
	if strings.Join(order, ",") != "last registered,first registered" {
		t.Errorf("clean-ups ran in order %q, want last registered first", order)
	}
}

func TestRunSkipIsNotAnError(t *testing.T) {
	ran := false
	err := Run(func(tb T) {
		tb.Cleanup(func() { ran = true })
		tb.Skipf("nothing to do")
	})
	if err != nil || !ran {
		t.Errorf("Run with Skip = %v, clean-up ran %v; want nil, true", err, ran)
	}
}

// TestRunReturnsEveryFailure: the error holds each message once, one a line, and they
// are not logged as well (a program prints the error itself).
func TestRunReturnsEveryFailure(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	err := Run(func(tb T) {
		tb.Logf("a note")
		tb.Errorf("first %d", 1)
		tb.Cleanup(func() { tb.Errorf("second") })
	})
	if err == nil || err.Error() != "first 1\nsecond" {
		t.Errorf("Run = %q, want %q", err, "first 1\nsecond")
	}
	if out := logged.String(); !strings.Contains(out, "a note") || strings.Contains(out, "first") {
		t.Errorf("logged %q, want the note and no failure message", out)
	}
	if err := Run(func(tb T) { tb.Fatalf("") }); err == nil || err.Error() == "" {
		t.Errorf("Run after Fatalf with an empty message = %v, want a non-empty error", err)
	}
}
