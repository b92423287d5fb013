package safety

import (
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/redlocktest"
)

// syntheticTimeline is a run of three nodes and two workers, in milliseconds from the
// report's start: node 2 killed at 100 and restarted empty at 300, node 3 paused from
// 200 to 400, node 1's clock jumps at 500, and node 1 cut off from the second of two
// clients for the whole run. Worker 0 holds from 10 to 600 but its lock is valid only
// until 550; worker 1 enters at 580: an overlap from 580 to 600.
func syntheticTimeline() *Timeline {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	n := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	events := []redlocktest.Event{
		{At: at(-50), Kind: redlocktest.EventStart, Node: n[0], Binary: "redis-server"},
		{At: at(-40), Kind: redlocktest.EventStart, Node: n[1], Binary: "redis-server"},
		{At: at(-30), Kind: redlocktest.EventStart, Node: n[2], Binary: "redis-server"},
		{At: at(-20), Kind: redlocktest.EventProxy, Node: n[0], Proxy: "127.0.0.1:11"},
		{At: at(-20), Kind: redlocktest.EventProxy, Node: n[0], Proxy: "127.0.0.1:12"},
		{At: at(-10), Kind: redlocktest.EventBlackhole, Node: n[0], Proxy: "127.0.0.1:12", Detail: "both ways"},
		{At: at(100), Kind: redlocktest.EventKill, Node: n[1], Binary: "redis-server"},
		{At: at(200), Kind: redlocktest.EventPause, Node: n[2], Binary: "redis-server"},
		{At: at(300), Kind: redlocktest.EventRestart, Node: n[1], Binary: "redis-server", Detail: "persistence none"},
		{At: at(400), Kind: redlocktest.EventResume, Node: n[2], Binary: "redis-server"},
		{At: at(500), Kind: redlocktest.EventJump, Node: n[0], Binary: "redis-server", Detail: "+1s"},
	}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	sections := []Section{
		{Worker: 0, Grant: ms(5), Enter: ms(10), Exit: ms(600), Until: ms(550), Fence: 1},
		{Worker: 1, Grant: ms(575), Enter: ms(580), Exit: ms(700), Until: ms(1500), Fence: 2},
	}
	count, longest := Overlaps(sections)
	rep := &Report{Start: start, Duration: time.Second, Grants: 2, Overlaps: count, LongestOverlap: longest, Sections: sections}
	s := &Scenario{Name: "synthetic <faults> & overlaps", Mode: Redlock3, Expect: Detected, Why: "a test of the picture"}
	return buildTimeline(Result{Scenario: s, Report: rep}, events, start.Add(-time.Second), start.Add(2*time.Second))
}

func TestTimelineFaults(t *testing.T) {
	tl := syntheticTimeline()
	if got := strings.Join(tl.Nodes, ","); got != "node 1,node 2,node 3" {
		t.Errorf("nodes %s", got)
	}
	if tl.Clients != 2 {
		t.Errorf("Clients = %d, want 2", tl.Clients)
	}
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	want := []Fault{
		{Node: 0, Kind: FaultNetwork, Label: "cut off from client B", From: 0, To: ms(1000)},
		{Node: 1, Kind: FaultDown, Label: "killed, restarted empty", From: ms(100), To: ms(300)},
		{Node: 2, Kind: FaultPaused, Label: "paused (SIGSTOP)", From: ms(200), To: ms(400)},
		{Node: 0, Kind: FaultClock, Label: "clock jumps +1s", From: ms(500), To: ms(500)},
	}
	if len(tl.Faults) != len(want) {
		t.Fatalf("faults %+v\nwant %+v", tl.Faults, want)
	}
	for i, f := range tl.Faults {
		if f != want[i] {
			t.Errorf("fault %d = %+v, want %+v", i, f, want[i])
		}
	}
	if tl.End != time.Second {
		t.Errorf("End = %v, want the run's 1s", tl.End)
	}
}

func TestMergeClients(t *testing.T) {
	got := mergeClients([]Fault{
		{Node: 0, Kind: FaultNetwork, Label: "cut off from client A", To: time.Second},
		{Node: 0, Kind: FaultNetwork, Label: "cut off from client B", To: time.Second},
		{Node: 0, Kind: FaultNetwork, Label: "cut off from client C", From: time.Millisecond, To: time.Second},
		{Node: 1, Kind: FaultNetwork, Label: "cut off from client A", To: time.Second},
		{Node: 0, Kind: FaultNetwork, Label: "refuses client D", To: time.Second},
	})
	var labels []string
	for _, f := range got {
		labels = append(labels, f.Label)
	}
	if s := strings.Join(labels, "; "); s != "cut off from clients A, B, C; cut off from client A; refuses client D" {
		t.Errorf("merged: %s", s)
	}
}

// parsedPage is what TestHTML reads back from the page, parsed as XML: the page's
// title, and per picture its label, the hover titles of its bars and its texts.
type parsedPage struct {
	Title    string `xml:"head>title"`
	Pictures []struct {
		Label string `xml:"aria-label,attr"`
		Rects []struct {
			Title string `xml:"title"`
		} `xml:"rect"`
		Texts []string `xml:"text"`
	} `xml:"body>section>svg"`
}

// parse decodes page as strict XML: it fails on an unclosed or misnested element, a
// bare & or <, or an HTML-only entity.
func parse(page string) (parsedPage, error) {
	var p parsedPage
	err := xml.Unmarshal([]byte(page), &p)
	return p, err
}

// TestHTML: the page is well-formed, escapes text, and draws the overlap, the late
// part of a section, each kind of fault and the validity line.
func TestHTML(t *testing.T) {
	tl := syntheticTimeline()
	ok := *tl
	ok.Problem = ""
	bad := *tl
	bad.Problem = "something <odd>"
	page := HTML("a <title>", []*Timeline{&ok, &bad})
	if _, err := parse(page); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	for _, want := range []string{
		"<title>a &lt;title&gt;</title>",
		"synthetic &lt;faults&gt; &amp; overlaps",
		`id="s1"`, `id="s2"`, `href="#s2"`,
		`class="ovl"`, `class="ovl-band"`, `class="late"`, `class="valid"`,
		`class="f-down"`, `class="s-down"`, `class="f-paused"`, `class="s-paused"`, `class="f-network"`, `class="jump"`,
		"killed, restarted empty", "cut off from client B", "worker 1 · client B",
		"NOT as expected: something &lt;odd&gt;", "2 scenarios, 1 as expected",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(page, "<svg"); n != 2 {
		t.Errorf("%d pictures, want 2", n)
	}
	// The parse check can fail: the same page with one element left open is refused.
	if _, err := parse(strings.Replace(page, "</rect>", "", 1)); err == nil {
		t.Error("a page with an unclosed <rect> parsed")
	}
}

// TestHTMLEscapesSVG: text that looks like markup comes back unchanged from every
// place it lands in a picture (an attribute, a <title> inside SVG, a <text>), escaped
// once: neither raw nor escaped twice.
func TestHTMLEscapesSVG(t *testing.T) {
	tl := syntheticTimeline()
	tl.Scenario.Name = `a "quoted" <name> & 'more' +1`
	tl.Nodes[1] = "node <2> & co"
	tl.Faults[1].Label = `killed "hard" <now> & restarted`
	page := HTML(`t <"'&+>`, []*Timeline{tl})
	p, err := parse(page)
	if err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, page)
	}
	if p.Title != `t <"'&+>` {
		t.Errorf("title read back as %q", p.Title)
	}
	if len(p.Pictures) != 1 {
		t.Fatalf("%d pictures read back, want 1", len(p.Pictures))
	}
	pic := p.Pictures[0]
	if want := "Redlock N=3: " + tl.Scenario.Name; pic.Label != want {
		t.Errorf("aria-label read back as %q, want %q", pic.Label, want)
	}
	var titles []string
	for _, r := range pic.Rects {
		titles = append(titles, r.Title)
	}
	wantTitle := `node <2> & co: killed "hard" <now> & restarted, 100.00 ms to 300.00 ms`
	if !slices.Contains(titles, wantTitle) {
		t.Errorf("no bar has the title %q; titles:\n%s", wantTitle, strings.Join(titles, "\n"))
	}
	for _, want := range []string{"node <2> & co", tl.Faults[1].Label} {
		if !slices.Contains(pic.Texts, want) {
			t.Errorf("no text %q in the picture: %q", want, pic.Texts)
		}
	}
}

// TestHTMLDenseSections: thousands of short sections become strips per pixel column,
// not a bar each, and an empty report still renders.
func TestHTMLDenseSections(t *testing.T) {
	var secs []Section
	for i := range 5000 {
		at := time.Duration(i) * 300 * time.Microsecond
		secs = append(secs, Section{Worker: i % 4, Grant: at, Enter: at, Exit: at + 200*time.Microsecond, Until: at + time.Second})
	}
	dense := &Timeline{Result: Result{Scenario: &Scenario{Name: "dense"}, Report: &Report{Start: time.Now(), Duration: 1500 * time.Millisecond, Sections: secs}}, End: 1500 * time.Millisecond}
	empty := &Timeline{Result: Result{Scenario: &Scenario{Name: "empty"}}}
	page := HTML("dense", []*Timeline{dense, empty})
	if _, err := parse(page); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	if n := strings.Count(page, `class="sec"`); n > 4*900 {
		t.Errorf("%d section marks for 5000 sections over 4 rows of ~880 pixels", n)
	}
	if !strings.Contains(page, "no lock was granted") {
		t.Error("the empty report has no note")
	}
	if strings.Contains(page, `class="ovl"`) {
		t.Error("an overlap drawn where there is none")
	}
}
