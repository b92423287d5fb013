package safety

import (
	"cmp"
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// HTML renders timelines as one self-contained page (inline CSS and SVG; no script, no
// external resource): a summary table, then one picture per scenario. In a picture,
// each node has a row with its faults (down, paused, clock, network), each worker a
// row with its critical sections as bars from Enter to Exit; the part of a section
// past the lock's validity (Until) is orange, the validity itself (Grant to Until) a
// thin line under sections that used a good part of it, and every moment two
// workers were inside at once is red, across all worker rows. Kills and pauses are
// shaded over the worker rows. The page is also well-formed XML.
func HTML(title string, timelines []*Timeline) string {
	var b strings.Builder
	ok := 0
	for _, tl := range timelines {
		if tl.Problem == "" {
			ok++
		}
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), pageCSS)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	fmt.Fprintf(&b, "<p class=\"sub\">%d scenarios, %d as expected. One picture per scenario, time from left to right; hover over a bar for its times.</p>\n", len(timelines), ok)
	b.WriteString(legend)
	writeSummary(&b, timelines)
	for i, tl := range timelines {
		writeTimeline(&b, i, tl)
	}
	b.WriteString("</body>\n</html>\n")
	return b.String()
}

// esc escapes text for HTML and XML alike.
func esc(s string) string { return html.EscapeString(s) }

const pageCSS = `
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 24px; color: #222; max-width: 1040px; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2 { font-size: 16px; margin: 0 0 2px 0; font-weight: 600; }
p { margin: 2px 0; }
.sub { color: #555; margin-bottom: 12px; }
.mode { color: #555; font-weight: 400; }
.verdict { font-size: 12px; padding: 1px 6px; border-radius: 3px; margin-left: 6px; vertical-align: 1px; }
.ok .verdict, td.ok { background: #e3f4e1; color: #1d6b1d; }
.bad .verdict, td.bad { background: #fbe0e0; color: #a11; }
.why { color: #444; font-size: 13px; }
.stats { color: #555; font-size: 12px; }
section { border-top: 1px solid #ddd; padding: 10px 0 6px 0; }
section.bad { background: #fff7f7; }
table.summary { border-collapse: collapse; font-size: 12px; margin: 10px 0 18px 0; width: 100%; }
table.summary td:first-child, table.summary td:last-child, table.summary td:nth-child(3) { white-space: nowrap; }
table.summary th, table.summary td { border-bottom: 1px solid #e4e4e4; padding: 3px 8px; text-align: left; }
table.summary td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.summary a { color: inherit; }
svg { display: block; margin-top: 6px; }
ul.legend { list-style: none; padding: 0; margin: 6px 0 4px 0; font-size: 12px; color: #333; columns: 2; }
ul.legend li { margin: 2px 0; }
.sw { display: inline-block; width: 14px; height: 10px; margin-right: 6px; vertical-align: -1px; }
.sw-sec { background: #3b6fb6; } .sw-late { background: #f08c00; } .sw-ovl { background: #d62728; }
.sw-f-down { background: #5a5a5a; } .sw-f-paused { background: #c9a227; } .sw-f-clock { background: #2a9d8f; }
.sw-f-network { background: #8e6cc4; } .sw-valid { height: 0; border-top: 1px solid #3b6fb6; vertical-align: 3px; }
svg text { font-size: 11px; fill: #333; }
svg .lane { fill: #f4f4f4; }
svg .sec { fill: #3b6fb6; }
svg .late { fill: #f08c00; }
svg .valid { stroke: #3b6fb6; stroke-width: 1; opacity: 0.7; }
svg .ovl { fill: #d62728; }
svg .ovl-band { fill: #d62728; opacity: 0.16; }
svg .f-down { fill: #5a5a5a; }
svg .f-paused { fill: #c9a227; }
svg .f-clock { fill: #2a9d8f; }
svg .f-network { fill: #8e6cc4; }
svg .s-down { fill: #5a5a5a; opacity: 0.08; }
svg .s-paused { fill: #c9a227; opacity: 0.14; }
svg .jump { stroke: #2a9d8f; stroke-width: 1.5; stroke-dasharray: 4 3; }
svg .flabel { fill: #fff; }
svg .flabel-out { fill: #333; }
svg .axis { stroke: #999; stroke-width: 1; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .note { fill: #777; font-style: italic; }
`

// legend explains the colours once, at the top of the page.
var legend = func() string {
	items := []struct{ class, text string }{
		{"sec", "critical section, Enter → Exit (pale where sections are shorter than a pixel: the share of time inside)"},
		{"late", "inside after the lock's validity ended"},
		{"ovl", "two holders at once: an overlap"},
		{"f-down", "node killed (shaded over the workers)"},
		{"f-paused", "node paused (shaded)"},
		{"f-clock", "node clock skewed; a dashed line: a jump"},
		{"f-network", "traffic between a node and one client cut or delayed"},
		{"valid", "thin line: the lock's validity, Grant → Until, under sections that used much of it"},
	}
	var b strings.Builder
	b.WriteString("<ul class=\"legend\">\n")
	for _, it := range items {
		fmt.Fprintf(&b, "<li><span class=\"sw sw-%s\"></span>%s</li>\n", it.class, esc(it.text))
	}
	b.WriteString("</ul>\n")
	return b.String()
}()

func writeSummary(b *strings.Builder, timelines []*Timeline) {
	b.WriteString("<table class=\"summary\">\n<tr><th>mode</th><th>fault</th><th>expected</th><th>grants</th><th>overlaps</th><th>lost updates</th><th>stale writes accepted / refused</th><th>result</th></tr>\n")
	for i, tl := range timelines {
		s, r := scenarioOf(tl), reportOf(tl)
		class, verdict := "ok", "as expected"
		if tl.Problem != "" {
			class, verdict = "bad", "NOT as expected"
		}
		fmt.Fprintf(b, "<tr><td>%s</td><td><a href=\"#s%d\">%s</a></td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d / %d</td><td class=\"%s\">%s</td></tr>\n",
			esc(string(s.Mode)), i+1, esc(s.Name), esc(s.Expect.String()), r.Grants, r.Overlaps, r.LostUpdates, r.StaleAccepted, r.StaleRefused, class, verdict)
	}
	b.WriteString("</table>\n")
}

func scenarioOf(tl *Timeline) *Scenario {
	if tl.Scenario == nil {
		return &Scenario{}
	}
	return tl.Scenario
}

func reportOf(tl *Timeline) *Report {
	if tl.Report == nil {
		return &Report{}
	}
	return tl.Report
}

// The picture's geometry, in pixels.
const (
	svgWidth  = 1000
	labelW    = 112 // the row labels on the left
	plotW     = svgWidth - labelW - 16
	nodeRowH  = 16
	workRowH  = 18
	rowGap    = 3
	groupGap  = 10
	axisH     = 26
	charWidth = 6.2 // an estimate of the width of a character of the 11px font
)

// chart maps the run's clock to the picture.
type chart struct {
	b   *strings.Builder
	end time.Duration
}

func (c chart) x(t time.Duration) float64 {
	if c.end <= 0 {
		return labelW
	}
	return labelW + float64(plotW)*float64(min(max(t, 0), c.end))/float64(c.end)
}

func (c chart) rect(class string, from, to time.Duration, y, h float64, minW float64, title string) {
	x0, x1 := c.x(from), c.x(to)
	w := max(x1-x0, minW)
	if title == "" {
		fmt.Fprintf(c.b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", class, x0, y, w, h)
		return
	}
	fmt.Fprintf(c.b, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>%s</title></rect>\n", class, x0, y, w, h, esc(title))
}

func writeTimeline(b *strings.Builder, i int, tl *Timeline) {
	s, r := scenarioOf(tl), reportOf(tl)
	class, verdict := "ok", "as expected"
	if tl.Problem != "" {
		class, verdict = "bad", "NOT as expected: "+tl.Problem
	}
	fmt.Fprintf(b, "<section id=\"s%d\" class=\"%s\">\n<h2><span class=\"mode\">%s ·</span> %s<span class=\"verdict\">%s</span></h2>\n", i+1, class, esc(string(s.Mode)), esc(s.Name), esc(verdict))
	fmt.Fprintf(b, "<p class=\"why\">Expected: %s. %s.</p>\n", esc(s.Expect.String()), esc(upperFirst(s.Why)))
	fmt.Fprintf(b, "<p class=\"stats\">%d grants in %s · %d overlaps (longest %s) · %d lost updates · stale writes %d accepted, %d refused · acquire failures: %d unavailable, %d not acquired · acquire p50 %s, p99 %s</p>\n",
		r.Grants, ms(r.Duration), r.Overlaps, ms(r.LongestOverlap), r.LostUpdates, r.StaleAccepted, r.StaleRefused, r.Unavailable, r.NotAcquired, ms(r.AcquireP50), ms(r.AcquireP99))

	workers := 0
	for _, sec := range r.Sections {
		workers = max(workers, sec.Worker+1)
	}
	rows := max(workers, 1)
	nodesTop := 4.0
	workTop := nodesTop + float64(len(tl.Nodes))*(nodeRowH+rowGap) + groupGap
	workBottom := workTop + float64(rows)*(workRowH+rowGap) - rowGap
	height := workBottom + axisH
	c := chart{b: b, end: max(tl.End, time.Millisecond)}
	fmt.Fprintf(b, "<svg width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-label=\"%s\">\n",
		svgWidth, height, svgWidth, height, esc(string(s.Mode)+": "+s.Name))

	// Grid and axis first, so everything else is drawn over them.
	step := tickStep(c.end)
	for t := time.Duration(0); t <= c.end; t += step {
		x := c.x(t)
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, nodesTop, x, workBottom)
		fmt.Fprintf(b, "<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, workBottom+2, x, workBottom+6)
		anchor := "middle"
		if t == 0 {
			anchor = "start"
		}
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>\n", x, workBottom+18, anchor, tickLabel(t, step))
	}
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", labelW, workBottom+2, labelW+plotW, workBottom+2)

	// Lanes and labels.
	for n, name := range tl.Nodes {
		y := nodesTop + float64(n)*(nodeRowH+rowGap)
		fmt.Fprintf(b, "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>\n", labelW, y, plotW, nodeRowH)
		fmt.Fprintf(b, "<text x=\"0\" y=\"%.1f\">%s</text>\n", y+nodeRowH-4, esc(name))
	}
	for w := range rows {
		y := workTop + float64(w)*(workRowH+rowGap)
		fmt.Fprintf(b, "<rect class=\"lane\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>\n", labelW, y, plotW, workRowH)
		if workers == 0 {
			continue
		}
		label := fmt.Sprintf("worker %d", w)
		if tl.Clients > 0 {
			label += " · client " + clientName(w%tl.Clients)
		}
		fmt.Fprintf(b, "<text x=\"0\" y=\"%.1f\">%s</text>\n", y+workRowH-5, esc(label))
	}
	if workers == 0 {
		fmt.Fprintf(b, "<text class=\"note\" x=\"%d\" y=\"%.1f\">no lock was granted, so no critical section</text>\n", labelW+8, workTop+workRowH-5)
	}

	// Kills and pauses shaded over the workers (once where several nodes are down at
	// the same time); clock jumps as dashed lines.
	shade := map[FaultKind][]interval{}
	for _, f := range tl.Faults {
		switch {
		case f.From == f.To:
			x := c.x(f.From)
			fmt.Fprintf(b, "<line class=\"jump\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", x, nodesTop, x, workBottom)
		case f.Kind == FaultDown || f.Kind == FaultPaused:
			shade[f.Kind] = append(shade[f.Kind], interval{from: f.From, to: f.To})
		}
	}
	for _, kind := range []FaultKind{FaultDown, FaultPaused} {
		for _, v := range mergeIntervals(shade[kind]) {
			c.rect("s-"+string(kind), v.from, v.to, workTop, workBottom-workTop, 1, "")
		}
	}

	// Overlaps: red across the worker rows wherever two sections intersect.
	overlaps := overlapIntervals(r.Sections)
	for _, o := range mergeIntervals(overlaps) {
		c.rect("ovl-band", o.from, o.to, workTop, workBottom-workTop, 2, "")
	}

	// Sections.
	for _, m := range sectionMarks(r.Sections, c) {
		y := workTop + float64(m.worker)*(workRowH+rowGap)
		if m.opacity < 1 {
			fmt.Fprintf(b, "<g opacity=\"%.2f\">\n", m.opacity)
		}
		c.rect("sec", m.from, m.to, y+2, workRowH-6, 1, m.title)
		if m.opacity < 1 {
			b.WriteString("</g>\n")
		}
	}
	for _, sec := range r.Sections {
		y := workTop + float64(sec.Worker)*(workRowH+rowGap)
		if sec.Until > 0 && sec.Exit > sec.Until {
			c.rect("late", max(sec.Enter, sec.Until), sec.Exit, y+2, workRowH-6, 1, fmt.Sprintf("worker %d inside %s after its lock's validity ended (Until %s)", sec.Worker, ms(sec.Exit-max(sec.Enter, sec.Until)), ms(sec.Until)))
		}
		if sec.Until > sec.Grant && 4*(sec.Exit-sec.Grant) >= sec.Until-sec.Grant {
			yl := y + workRowH - 2
			fmt.Fprintf(b, "<line class=\"valid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", c.x(sec.Grant), yl, c.x(sec.Until), yl)
			fmt.Fprintf(b, "<line class=\"valid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", c.x(sec.Until), yl-4, c.x(sec.Until), yl)
		}
	}
	for _, o := range overlaps {
		for _, w := range []int{o.a, o.b} {
			y := workTop + float64(w)*(workRowH+rowGap)
			c.rect("ovl", o.from, o.to, y+5, workRowH-12, 2, fmt.Sprintf("workers %d and %d both inside for %s, from %s", o.a, o.b, ms(o.to-o.from), ms(o.from)))
		}
	}

	// Node faults last, with their labels.
	for _, f := range tl.Faults {
		y := nodesTop + float64(f.Node)*(nodeRowH+rowGap)
		title := fmt.Sprintf("%s: %s, %s", tl.Nodes[f.Node], f.Label, ms(f.From))
		if f.To > f.From {
			title += " to " + ms(f.To)
		}
		c.rect("f-"+string(f.Kind), f.From, f.To, y+1, nodeRowH-2, 3, title)
		x0, x1 := c.x(f.From), max(c.x(f.To), c.x(f.From)+3)
		textW := charWidth * float64(len([]rune(f.Label)))
		switch {
		case x1-x0 >= textW+8:
			fmt.Fprintf(b, "<text class=\"flabel\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", x0+4, y+nodeRowH-4, esc(f.Label))
		case x1+4+textW <= labelW+plotW:
			fmt.Fprintf(b, "<text class=\"flabel-out\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", x1+4, y+nodeRowH-4, esc(f.Label))
		default:
			fmt.Fprintf(b, "<text class=\"flabel-out\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0-4, y+nodeRowH-4, esc(f.Label))
		}
	}
	b.WriteString("</svg>\n</section>\n")
}

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	return strings.ToUpper(string(r[0])) + string(r[1:])
}

// tickStep returns a round interval that puts 5 to 10 ticks on an axis of length end.
func tickStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
		25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
		500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
		if end/s <= 10 {
			return s
		}
	}
	return time.Minute
}

// tickLabel formats t for an axis whose ticks are step apart.
func tickLabel(t, step time.Duration) string {
	if step < time.Second && t < time.Second {
		return fmt.Sprintf("%d ms", t.Milliseconds())
	}
	return fmt.Sprintf("%g s", t.Seconds())
}

// interval is a stretch of the run's clock; a and b are the workers of an overlap.
type interval struct {
	from, to time.Duration
	a, b     int
}

// overlapIntervals returns, for every pair of sections of different workers that
// were inside at once, the time both were.
func overlapIntervals(sections []Section) []interval {
	s := slices.Clone(sections)
	slices.SortFunc(s, func(x, y Section) int { return cmp.Compare(x.Enter, y.Enter) })
	var out []interval
	for i, x := range s {
		for _, y := range s[i+1:] {
			if y.Enter >= x.Exit {
				break
			}
			if y.Worker != x.Worker {
				out = append(out, interval{from: y.Enter, to: min(x.Exit, y.Exit), a: x.Worker, b: y.Worker})
			}
		}
	}
	return out
}

// mergeIntervals returns the union of the intervals, sorted.
func mergeIntervals(in []interval) []interval {
	s := slices.Clone(in)
	slices.SortFunc(s, func(x, y interval) int { return cmp.Compare(x.from, y.from) })
	var out []interval
	for _, v := range s {
		if n := len(out); n > 0 && v.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, v.to)
			continue
		}
		out = append(out, v)
	}
	return out
}

// mark is what one worker row shows over a stretch of time: a section wide enough to
// draw on its own, or, where sections are narrower than a pixel, a strip whose opacity
// is the share of the time the worker was inside.
type mark struct {
	worker   int
	from, to time.Duration
	opacity  float64 // 1 for a section drawn on its own
	title    string
}

// sectionMarks returns the marks of every worker row. Narrow sections are summed per
// pixel column, so that a run of thousands of millisecond sections neither weighs
// down the page nor looks like one long section.
func sectionMarks(sections []Section, c chart) []mark {
	pixel := float64(c.end) / plotW
	type column struct {
		inside time.Duration
		n      int
	}
	cols := map[int][]column{}
	var out []mark
	for _, s := range sections {
		if float64(s.Exit-s.Enter) >= 2*pixel {
			title := fmt.Sprintf("worker %d: granted at %s, inside %s to %s, valid until %s", s.Worker, ms(s.Grant), ms(s.Enter), ms(s.Exit), ms(s.Until))
			if s.Fence != 0 {
				title += fmt.Sprintf(", fencing token %d", s.Fence)
			}
			out = append(out, mark{worker: s.Worker, from: s.Enter, to: s.Exit, opacity: 1, title: title})
			continue
		}
		col := cols[s.Worker]
		if col == nil {
			col = make([]column, plotW+1)
			cols[s.Worker] = col
		}
		first := min(int(float64(s.Enter)/pixel), plotW)
		col[first].n++
		for i := first; i <= plotW; i++ { // spread the section over the columns it covers
			lo := max(s.Enter, time.Duration(float64(i)*pixel))
			hi := min(s.Exit, time.Duration(float64(i+1)*pixel))
			if hi <= lo {
				break
			}
			col[i].inside += hi - lo
		}
	}
	for w, col := range cols {
		level := func(i int) float64 { // quarters, rounded up so that a short section still shows
			if col[i].inside <= 0 {
				return 0
			}
			return min(1, math.Ceil(4*float64(col[i].inside)/pixel)/4)
		}
		for i := 0; i <= plotW; {
			q := level(i)
			j, n, inside := i, 0, time.Duration(0)
			for ; j <= plotW && level(j) == q; j++ {
				n += col[j].n
				inside += col[j].inside
			}
			if q > 0 {
				from, to := time.Duration(float64(i)*pixel), time.Duration(float64(j)*pixel)
				m := mark{worker: w, from: from, to: to, opacity: q}
				if j-i >= 8 { // a title on every sliver would weigh more than the picture
					m.title = fmt.Sprintf("worker %d: %d sections from %s to %s, inside %.0f%% of the time", w, n, ms(from), ms(to), 100*float64(inside)/float64(to-from))
				}
				out = append(out, m)
			}
			i = j
		}
	}
	slices.SortFunc(out, func(x, y mark) int { return cmp.Or(cmp.Compare(x.worker, y.worker), cmp.Compare(x.from, y.from)) })
	return out
}
