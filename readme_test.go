package redlock_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeQuickStart keeps the README's quick start identical to Example, which the
// compiler checks, so the README never shows code that does not build.
func TestReadmeQuickStart(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func Example() {\n")
	body, _, ok2 := strings.Cut(body, "\n}\n")
	if !ok || !ok2 {
		t.Fatal("no func Example in example_test.go")
	}
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	if code := "```go\n" + strings.Join(lines, "\n") + "\n```"; !strings.Contains(string(readme), code) {
		t.Fatalf("README.md's quick start differs from Example in example_test.go; it should read:\n%s", code)
	}
	if !strings.Contains(string(readme), "make test") {
		t.Fatal("README.md does not name the test command")
	}
}
