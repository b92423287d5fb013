package redlocktest

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestRunCleansUpAfterFatal(t *testing.T) {
	var pid int
	var dir string
	var ctx context.Context
	var order []string
	err := Run(func(tb testing.TB) {
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
	if err == nil || !strings.Contains(err.Error(), "stop 42") {
		t.Errorf("Run = %v, want an error with the Fatalf message", err)
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
	err := Run(func(tb testing.TB) {
		tb.Cleanup(func() { ran = true })
		tb.Skip("nothing to do")
	})
	if err != nil || !ran {
		t.Errorf("Run with Skip = %v, clean-up ran %v; want nil, true", err, ran)
	}
}
