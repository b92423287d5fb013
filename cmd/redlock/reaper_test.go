//go:build unix

package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestReaperArgs: what redlock exec puts on the reaper's command line comes back the
// same, a command line with dashes and spaces included.
func TestReaperArgs(t *testing.T) {
	want := reaperConfig{foreground: true, leftovers: leftoversKill, grace: 250 * time.Millisecond, lease: 123456789,
		path: "/bin/sh", argv: []string{"sh", "-c", "echo --lease=1 -- x", "--", "-foreground=false"}}
	args := want.args()
	if args[0] != reaperArg {
		t.Fatalf("args %q do not start with %q", args, reaperArg)
	}
	got, err := parseReaperArgs(args[1:])
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %+v (%v), want %+v", got, err, want)
	}
	if _, err := parseReaperArgs([]string{"-lease=5"}); err == nil {
		t.Error("a reaper command line without a program was accepted")
	}
}

// TestReaperRefusesWithoutPipes: started by hand, the reaper runs nothing.
func TestReaperRefusesWithoutPipes(t *testing.T) {
	marker := t.TempDir() + "/ran"
	cmd := newCLI(t).command("", reaperArg, "-lease=1", "--", "/usr/bin/touch", "touch", marker)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "started by redlock exec only") {
		t.Errorf("exit %v, output %q (%v): want a usage error", cmd.ProcessState, out, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the reaper ran its command without redlock exec")
	}
}
