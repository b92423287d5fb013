package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryDoesNotLinkTesting: the redlock binary uses the fault kit and the safety
// lab, but not package testing, which would make every user's copy carry the test
// framework (and its flags' registration code). The kit's core (StartProcess) and its
// own T interface exist for that; this test keeps it so.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"-f", "{{.ImportPath}}:{{range .Imports}} {{.}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string]bool{}
	var importers []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		deps[pkg] = true
		for _, imp := range strings.Fields(imports) {
			if imp == "testing" || strings.HasPrefix(imp, "testing/") {
				importers = append(importers, pkg+" imports "+imp)
			}
		}
	}
	// The check means something only if the binary links what could pull testing in.
	for _, want := range []string{"github.com/redlock-go/redlock/redlocktest", "github.com/redlock-go/redlock/cmd/redlock/safety"} {
		if !deps[want] {
			t.Errorf("the binary no longer links %s; go list printed:\n%s", want, out)
		}
	}
	if deps["testing"] || len(importers) > 0 {
		t.Errorf("the redlock binary links package testing:\n%s", strings.Join(importers, "\n"))
	}
}
