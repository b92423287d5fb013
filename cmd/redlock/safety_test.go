//go:build unix

package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSafety runs two scenarios of the matrix through the binary, one safe and one
// negative control, and checks the table, the files and the exit code.
func TestSafety(t *testing.T) {
	needRedisServer(t)
	dir := t.TempDir()
	md, js, page := filepath.Join(dir, "m.md"), filepath.Join(dir, "m.json"), filepath.Join(dir, "m.html")
	r := newCLI(t).run("", "safety", "--run", "single node/no fault|Redlock N=5/restart 1", "--md", md, "--json", js, "--html", page)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"| single node | no fault | 0 overlaps |",
		"| Redlock N=5 | restart 1 of A's 3 nodes empty at once (T7) | overlap detected |",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, r.stdout)
		}
	}
	if n := strings.Count(r.stdout, "| as expected |"); n != 2 {
		t.Errorf("%d rows as expected, want 2:\n%s", n, r.stdout)
	}
	// Not a terminal: one plain line per scenario, then the verdict.
	for _, want := range []string{"ok   [1/2] single node/no fault: as expected", "ok   [2/2] Redlock N=5/restart 1", "all 2 scenarios as expected"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "\r") {
		t.Errorf("a progress bar was drawn into a pipe:\n%q", r.stderr)
	}

	if data, err := os.ReadFile(md); err != nil || string(data) != r.stdout {
		t.Errorf("--md file differs from the table printed (%v):\n%s", err, data)
	}
	var results []struct {
		Mode       string `json:"mode"`
		Fault      string `json:"fault"`
		AsExpected bool   `json:"as_expected"`
		Grants     int    `json:"grants"`
		Overlaps   int    `json:"overlaps"`
	}
	if data, err := os.ReadFile(js); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(data, &results); err != nil {
		t.Errorf("--json: %v\n%s", err, data)
	}
	if len(results) != 2 || results[0].Mode != "single node" || results[1].Overlaps == 0 || !results[0].AsExpected || !results[1].AsExpected || results[0].Grants == 0 {
		t.Errorf("--json results: %+v", results)
	}

	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	if err := xml.Unmarshal(data, new(struct{})); err != nil { // strict XML: every element closed, no bare &
		t.Errorf("--html page not well-formed: %v", err)
	}
	if n := strings.Count(html, "<svg"); n != 2 {
		t.Errorf("%d timelines in the page, want 2", n)
	}
	for _, want := range []string{
		`class="ovl"`,             // T7's overlap, in red
		"killed, restarted empty", // node 3's restart
		"cut off from client B",   // T7's partition
		"worker 0 · client A",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "http://") && !strings.Contains(html, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Error("the page is not self-contained")
	}
}

func TestSafetyList(t *testing.T) {
	r := runInProcess(t, nil, "safety", "--list", "--run", "^Redlock N=5/kill")
	want := "Redlock N=5/kill 2 of 5 under load\nRedlock N=5/kill 3 of 5, restart after the TTL\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("exit %d, listed:\n%s\nwant:\n%s%s", r.code, r.stdout, want, r.stderr)
	}
}
