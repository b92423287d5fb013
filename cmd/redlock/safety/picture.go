package safety

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// picture is the SVG drawing of one timeline: its size, a label for screen readers,
// and its shapes in drawing order (later ones over earlier ones).
type picture struct {
	Width  int
	Height float64
	Label  string
	Shapes []shape
}

// shape is one element of a picture: exactly one of its fields is set.
type shape struct {
	Line *svgLine
	Rect *svgRect
	Text *svgText
}

type svgLine struct {
	Class          string
	X1, Y1, X2, Y2 float64
}

// svgRect is a rectangle; with a Title, hovering over it shows the Title, and with an
// Opacity (0 < Opacity < 1) it is drawn that faint.
type svgRect struct {
	Class      string
	X, Y, W, H float64
	Title      string
	Opacity    float64
}

type svgText struct {
	Class  string // may be empty
	X, Y   float64
	Anchor string // text-anchor; empty for the default (start)
	Text   string
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
	end time.Duration
}

func (c chart) x(t time.Duration) float64 {
	if c.end <= 0 {
		return labelW
	}
	return labelW + float64(plotW)*float64(min(max(t, 0), c.end))/float64(c.end)
}

// canvas collects a picture's shapes; nodesTop, workTop and workBottom are where the
// node rows begin, and the worker rows begin and end.
type canvas struct {
	chart
	nodesTop, workTop, workBottom float64
	shapes                        []shape
}

func (c *canvas) nodeY(n int) float64   { return c.nodesTop + float64(n)*(nodeRowH+rowGap) }
func (c *canvas) workerY(w int) float64 { return c.workTop + float64(w)*(workRowH+rowGap) }

func (c *canvas) line(class string, x1, y1, x2, y2 float64) {
	c.shapes = append(c.shapes, shape{Line: &svgLine{Class: class, X1: x1, Y1: y1, X2: x2, Y2: y2}})
}

func (c *canvas) text(class string, x, y float64, anchor, text string) {
	c.shapes = append(c.shapes, shape{Text: &svgText{Class: class, X: x, Y: y, Anchor: anchor, Text: text}})
}

// rect draws the stretch from..to, at least minW wide.
func (c *canvas) rect(class string, from, to time.Duration, y, h float64, minW float64, title string) {
	c.fadedRect(class, from, to, y, h, minW, title, 0)
}

func (c *canvas) fadedRect(class string, from, to time.Duration, y, h float64, minW float64, title string, opacity float64) {
	x0, x1 := c.x(from), c.x(to)
	c.shapes = append(c.shapes, shape{Rect: &svgRect{Class: class, X: x0, Y: y, W: max(x1-x0, minW), H: h, Title: title, Opacity: opacity}})
}

// drawPicture draws tl: grid and axis first, so that everything else is drawn over
// them, then lanes, shading, overlaps, sections and, last, the node faults.
func drawPicture(tl *Timeline) picture {
	s, r := scenarioOf(tl), reportOf(tl)
	workers := 0
	for _, sec := range r.Sections {
		workers = max(workers, sec.Worker+1)
	}
	rows := max(workers, 1)
	c := &canvas{chart: chart{end: max(tl.End, time.Millisecond)}, nodesTop: 4}
	c.workTop = c.nodesTop + float64(len(tl.Nodes))*(nodeRowH+rowGap) + groupGap
	c.workBottom = c.workTop + float64(rows)*(workRowH+rowGap) - rowGap

	c.drawAxis()
	c.drawLanes(tl, workers, rows)
	c.drawShading(tl.Faults)
	overlaps := overlapIntervals(r.Sections)
	for _, o := range mergeIntervals(overlaps) { // red across the worker rows
		c.rect("ovl-band", o.from, o.to, c.workTop, c.workBottom-c.workTop, 2, "")
	}
	c.drawSections(r.Sections)
	for _, o := range overlaps {
		for _, w := range []int{o.a, o.b} {
			c.rect("ovl", o.from, o.to, c.workerY(w)+5, workRowH-12, 2, fmt.Sprintf("workers %d and %d both inside for %s, from %s", o.a, o.b, ms(o.to-o.from), ms(o.from)))
		}
	}
	c.drawFaults(tl)
	return picture{Width: svgWidth, Height: c.workBottom + axisH, Label: string(s.Mode) + ": " + s.Name, Shapes: c.shapes}
}

// drawAxis draws the time axis and a grid line at each of its ticks.
func (c *canvas) drawAxis() {
	step := tickStep(c.end)
	for t := time.Duration(0); t <= c.end; t += step {
		x := c.x(t)
		c.line("grid", x, c.nodesTop, x, c.workBottom)
		c.line("axis", x, c.workBottom+2, x, c.workBottom+6)
		anchor := "middle"
		if t == 0 {
			anchor = "start"
		}
		c.text("", x, c.workBottom+18, anchor, tickLabel(t, step))
	}
	c.line("axis", labelW, c.workBottom+2, labelW+plotW, c.workBottom+2)
}

// drawLanes draws a row for each node and each worker, with its label.
func (c *canvas) drawLanes(tl *Timeline, workers, rows int) {
	lane := func(y, h float64) {
		c.shapes = append(c.shapes, shape{Rect: &svgRect{Class: "lane", X: labelW, Y: y, W: plotW, H: h}})
	}
	for n, name := range tl.Nodes {
		y := c.nodeY(n)
		lane(y, nodeRowH)
		c.text("", 0, y+nodeRowH-4, "", name)
	}
	for w := range rows {
		y := c.workerY(w)
		lane(y, workRowH)
		if workers == 0 {
			continue
		}
		label := fmt.Sprintf("worker %d", w)
		if tl.Clients > 0 {
			label += " · client " + clientName(w%tl.Clients)
		}
		c.text("", 0, y+workRowH-5, "", label)
	}
	if workers == 0 {
		c.text("note", labelW+8, c.workTop+workRowH-5, "", "no lock was granted, so no critical section")
	}
}

// drawShading shades kills and pauses over the workers (once where several nodes are
// down at the same time), and draws clock jumps as dashed lines.
func (c *canvas) drawShading(faults []Fault) {
	shade := map[FaultKind][]interval{}
	for _, f := range faults {
		switch {
		case f.From == f.To:
			x := c.x(f.From)
			c.line("jump", x, c.nodesTop, x, c.workBottom)
		case f.Kind == FaultDown || f.Kind == FaultPaused:
			shade[f.Kind] = append(shade[f.Kind], interval{from: f.From, to: f.To})
		}
	}
	for _, kind := range []FaultKind{FaultDown, FaultPaused} {
		for _, v := range mergeIntervals(shade[kind]) {
			c.rect("s-"+string(kind), v.from, v.to, c.workTop, c.workBottom-c.workTop, 1, "")
		}
	}
}

// drawSections draws the critical sections, the part of each past its lock's
// validity, and the validity line under those that used a good part of it.
func (c *canvas) drawSections(sections []Section) {
	for _, m := range sectionMarks(sections, c.chart) {
		opacity := 0.0 // drawn on its own
		if m.opacity < 1 {
			opacity = m.opacity
		}
		c.fadedRect("sec", m.from, m.to, c.workerY(m.worker)+2, workRowH-6, 1, m.title, opacity)
	}
	for _, sec := range sections {
		y := c.workerY(sec.Worker)
		if sec.Until > 0 && sec.Exit > sec.Until {
			c.rect("late", max(sec.Enter, sec.Until), sec.Exit, y+2, workRowH-6, 1, fmt.Sprintf("worker %d inside %s after its lock's validity ended (Until %s)", sec.Worker, ms(sec.Exit-max(sec.Enter, sec.Until)), ms(sec.Until)))
		}
		if sec.Until > sec.Grant && 4*(sec.Exit-sec.Grant) >= sec.Until-sec.Grant {
			yl := y + workRowH - 2
			c.line("valid", c.x(sec.Grant), yl, c.x(sec.Until), yl)
			c.line("valid", c.x(sec.Until), yl-4, c.x(sec.Until), yl)
		}
	}
}

// drawFaults draws each node's faults in its row, with a label inside the bar, after
// it, or before it, wherever it fits.
func (c *canvas) drawFaults(tl *Timeline) {
	for _, f := range tl.Faults {
		y := c.nodeY(f.Node)
		title := fmt.Sprintf("%s: %s, %s", tl.Nodes[f.Node], f.Label, ms(f.From))
		if f.To > f.From {
			title += " to " + ms(f.To)
		}
		c.rect("f-"+string(f.Kind), f.From, f.To, y+1, nodeRowH-2, 3, title)
		x0, x1 := c.x(f.From), max(c.x(f.To), c.x(f.From)+3)
		textW := charWidth * float64(len([]rune(f.Label)))
		switch {
		case x1-x0 >= textW+8:
			c.text("flabel", x0+4, y+nodeRowH-4, "", f.Label)
		case x1+4+textW <= labelW+plotW:
			c.text("flabel-out", x1+4, y+nodeRowH-4, "", f.Label)
		default:
			c.text("flabel-out", x0-4, y+nodeRowH-4, "end", f.Label)
		}
	}
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
