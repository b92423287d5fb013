package bench

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestUnitsCoverMetrics fails when a benchmark reports a metric (a literal unit passed
// to ReportMetric) that units gives no direction: benchstat and the ratio tool would
// then print it as "?".
func TestUnitsCoverMetrics(t *testing.T) {
	known := make(map[string]bool)
	for _, u := range units {
		known[strings.Fields(u)[1]] = true
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`ReportMetric\([^\n]*, "([^"]+)"\)`)
	found := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			found++
			if !known[m[1]] {
				t.Errorf("%s reports %q, which units does not list", f, m[1])
			}
		}
	}
	if found < 10 {
		t.Fatalf("found %d ReportMetric calls with a literal unit; the pattern no longer matches the code", found)
	}
}
