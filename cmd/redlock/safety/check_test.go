package safety

import (
	"strings"
	"testing"
	"time"
)

// TestOverlapsDetects: the checker sees overlapping sections and measures the overlap,
// and does not see one in back-to-back sections.
func TestOverlapsDetects(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	if n, _ := Overlaps([]Section{{Enter: ms(0), Exit: ms(10)}, {Enter: ms(10), Exit: ms(20)}}); n != 0 {
		t.Fatalf("back-to-back sections: %d overlaps", n)
	}
	n, longest := Overlaps([]Section{{Enter: ms(20), Exit: ms(30)}, {Enter: ms(0), Exit: ms(25)}, {Enter: ms(5), Exit: ms(8)}})
	if n != 2 || longest != ms(5) {
		t.Fatalf("got %d overlaps, longest %v; want 2, 5ms", n, longest)
	}
}

// TestReportRendering: the Markdown table and the JSON carry the verdicts.
func TestReportRendering(t *testing.T) {
	results := []Result{
		{Scenario: &Scenario{Name: "ok", Mode: Redlock5, Expect: Safe}, Report: &Report{Grants: 10}},
		{Scenario: &Scenario{Name: "bad", Mode: Single, Expect: Detected}, Report: &Report{Grants: 2}, Problem: "no overlap seen"},
	}
	md := Markdown(results)
	if !strings.Contains(md, "| Redlock N=5 | ok | 0 overlaps | 10 |") || !strings.Contains(md, "**NOT as expected**: no overlap seen") {
		t.Fatalf("markdown:\n%s", md)
	}
	js, err := JSON(results)
	if err != nil || !strings.Contains(string(js), `"as_expected": false`) {
		t.Fatalf("json (%v):\n%s", err, js)
	}
}
