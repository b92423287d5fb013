package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsCoverEverything keeps docs/cli.md in step with the code: every flag that a
// subcommand's --help lists, every exit code and every variable has its entry.
func TestDocsCoverEverything(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	flagName := regexp.MustCompile(`(?m)^  --([a-z-]+)`)
	for _, c := range commands() {
		r := runInProcess(t, nil, c.name, "--help")
		if !strings.Contains(doc, "## redlock "+c.name) {
			t.Errorf("docs/cli.md has no section for %s", c.name)
		}
		flags := flagName.FindAllStringSubmatch(r.stdout, -1)
		if len(flags) == 0 {
			t.Errorf("no flags found in the help of %s:\n%s", c.name, r.stdout)
		}
		for _, m := range flags {
			if !strings.Contains(doc, "`--"+m[1]) {
				t.Errorf("docs/cli.md does not document %s --%s", c.name, m[1])
			}
		}
	}
	for _, code := range []int{exitOK, exitError, exitUsage, exitUnavailable, exitNotAcquired, exitLost, exitExecFailure, exitCannotRun, exitNotFound} {
		if !strings.Contains(doc, fmt.Sprintf("\n| %d |", code)) {
			t.Errorf("docs/cli.md's exit code table lacks %d", code)
		}
	}
	for _, v := range []string{"REDLOCK_NODES", "REDLOCK_OWNER", "REDLOCK_KEY", "REDLOCK_TOKEN", "REDLOCK_FENCE", "REDLOCK_UNTIL", "REDLOCK_UNTIL_MS"} {
		if !strings.Contains(doc, "`"+v+"`") {
			t.Errorf("docs/cli.md does not document %s", v)
		}
	}
}
