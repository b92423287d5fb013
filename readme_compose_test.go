package redlock_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFilesCanBeFetched (#15 section 5): a user who ran `go get` has no clone of
// this repository, so every repository file the README's quick start runs (such as
// docker/compose.yaml) must be named where that user has it, in the module's directory
// (`go list -m -f '{{.Dir}}'`, the copy `go get` made), or with the URL that fetches
// it; and that file must exist here.
func TestReadmeFilesCanBeFetched(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, quick, ok := strings.Cut(string(readme), "## Quick start\n")
	quick, _, _ = strings.Cut(quick, "\n## ")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	const (
		module = `"$(go list -m -f '{{.Dir}}' github.com/redlock-go/redlock)/`
		raw    = "https://raw.githubusercontent.com/redlock-go/redlock/main/"
	)
	for _, m := range regexp.MustCompile(`docker/[\w.-]+`).FindAllString(quick, -1) {
		if !strings.Contains(quick, module+m) && !strings.Contains(quick, raw+m) {
			t.Errorf("the quick start uses %s but does not say where a go get user has it (%s%s)", m, module, m)
		}
		if _, err := os.Stat(m); err != nil {
			t.Errorf("the quick start fetches %s: %v", m, err)
		}
	}
}
