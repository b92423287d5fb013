package redlockotel_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocShowsWiring keeps the code sample of docs/observability.md identical to the
// body of Example_wiring, which the compiler checks.
func TestDocShowsWiring(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "func Example_wiring() {\n")
	if !ok {
		t.Fatal("no Example_wiring in example_test.go")
	}
	body, _, _ = strings.Cut(body, "\n}\n")
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	code := "```go\n" + strings.Join(lines, "\n") + "\n```"
	doc, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), code) {
		t.Fatalf("docs/observability.md's wiring sample differs from Example_wiring; it should read:\n%s", code)
	}
}
