package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Pixel sizes of the page: Grafana's grid is 24 columns wide and counts heights in
// units of 30 px, with 8 px between panels.
const (
	gridColumns = 24
	gridUnit    = 30
	gridGap     = 8
	titleHeight = 26
	legendRow   = 15
)

// box is a panel's place on the page, in pixels.
type box struct{ Left, Top, Width, Height int }

// layout turns a gridPos into pixels on a page pageWidth wide.
func layout(g gridPos, pageWidth int) box {
	col := float64(pageWidth+gridGap) / gridColumns
	return box{
		Left:   int(math.Round(float64(g.X) * col)),
		Top:    g.Y * (gridUnit + gridGap),
		Width:  int(math.Round(float64(g.W)*col)) - gridGap,
		Height: g.H*(gridUnit+gridGap) - gridGap,
	}
}

// palette colours series in order, as a dashboard does.
var palette = []string{"#629e51", "#e5ac0e", "#3274d9", "#e0752d", "#bf1b00",
	"#8f3bb8", "#1f9bb0", "#806eb7", "#c15c17", "#447ebc", "#0a437c", "#6d1f62"}

// tick is one labelled mark on an axis, at pixel Pos.
type tick struct {
	Pos   int
	Label string
}

// line is one series drawn: its colour and its runs of points ("x,y x,y ...") split
// where values are missing or NaN.
type line struct {
	Color string
	Runs  []string
	Areas []string // stacked panels: the polygons under each run, down to the series below
}

// legendEntry is one row of a legend: the series' colour, name and calcs.
type legendEntry struct {
	Color string
	Name  string
	Calcs []string
}

// chart is a time series panel drawn as SVG.
type chart struct {
	W, H                       int
	PlotX, PlotY, PlotW, PlotH int
	YTicks, XTicks             []tick
	Lines                      []line
	CalcNames                  []string
	Legend                     []legendEntry
	LegendMore                 int // legend rows left out for lack of room
}

// drawn is one series ready to draw: its name and values on the common time axis.
type drawn struct {
	name   string
	times  []float64
	values []float64
}

// collectSeries names every series of the panel's targets, in target order.
func collectSeries(targets []targetResult) []drawn {
	var out []drawn
	for _, t := range targets {
		for _, s := range t.Series {
			d := drawn{name: legendName(t.Legend, s.Labels, t.Expr)}
			for _, p := range s.Points {
				d.times = append(d.times, p.T)
				d.values = append(d.values, p.V)
			}
			out = append(out, d)
		}
	}
	return out
}

// stack adds each series' values to the sum of those before it at the same instant,
// as "stacking: normal" draws them (NaN counts as nothing), and returns each value's
// base: the sum below it.
func stack(ss []drawn) [][]float64 {
	sum := map[float64]float64{}
	bases := make([][]float64, len(ss))
	for i := range ss {
		bases[i] = make([]float64, len(ss[i].values))
		for j, t := range ss[i].times {
			bases[i][j] = sum[t]
			v := ss[i].values[j]
			if math.IsNaN(v) {
				continue
			}
			sum[t] += v
			ss[i].values[j] = sum[t]
		}
	}
	return bases
}

// niceTicks returns about n round values covering lo..hi (1, 2, 2.5 or 5 × 10^k apart).
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Floor(lo/step) * step; v <= hi+step*1e-9; v += step {
		out = append(out, v)
	}
	if out[len(out)-1] < hi {
		out = append(out, out[len(out)-1]+step)
	}
	return out
}

// timeTicks returns labelled instants between from and to at a round spacing that
// gives at most n of them, in UTC.
func timeTicks(from, to float64, n int) []float64 {
	spacing := 1.0
	for _, s := range []float64{1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400} {
		spacing = s
		if (to-from)/s <= float64(n) {
			break
		}
	}
	var out []float64
	for t := math.Ceil(from/spacing) * spacing; t <= to; t += spacing {
		out = append(out, t)
	}
	return out
}

// calc computes one legend calculation over the numbers of values.
func calc(name string, values []float64) float64 {
	var nums []float64
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			nums = append(nums, v)
		}
	}
	if len(nums) == 0 {
		return math.NaN()
	}
	switch name {
	case "mean":
		s := 0.0
		for _, v := range nums {
			s += v
		}
		return s / float64(len(nums))
	case "max":
		return slicesMax(nums)
	case "min":
		return -slicesMax(negate(nums))
	case "last", "lastNotNull":
		return nums[len(nums)-1]
	case "sum":
		s := 0.0
		for _, v := range nums {
			s += v
		}
		return s
	}
	return math.NaN()
}

func slicesMax(v []float64) float64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}

func negate(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return out
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// timeLabel writes a Unix time as hh:mm:ss UTC.
func timeLabel(t float64) string {
	return time.Unix(int64(t), 0).UTC().Format("15:04:05")
}

// runIndices splits a series into runs of consecutive numbers: a run ends at NaN and
// at a gap longer than 1.5 steps (a target that was not scraped).
func runIndices(d drawn, step float64) [][]int {
	var runs [][]int
	var cur []int
	last := math.Inf(-1)
	for i, t := range d.times {
		v := d.values[i]
		number := !math.IsNaN(v) && !math.IsInf(v, 0)
		if (!number || t-last > 1.5*step) && len(cur) > 0 {
			runs = append(runs, cur)
			cur = nil
		}
		if number {
			cur = append(cur, i)
		}
		last = t
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs
}

// runsOf returns the polyline point lists of one series, one per run; a lone point
// becomes a short dash, so that it shows.
func runsOf(d drawn, step float64, x, y func(float64) float64) []string {
	var out []string
	for _, run := range runIndices(d, step) {
		pts := make([]string, 0, len(run)+1)
		for _, i := range run {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(d.times[i]), y(d.values[i])))
		}
		if len(run) == 1 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(d.times[run[0]])+2, y(d.values[run[0]])))
		}
		out = append(out, strings.Join(pts, " "))
	}
	return out
}

// areasOf returns, for a stacked series, the polygons between it and the series
// below it (base, at the same instants), one per run.
func areasOf(d drawn, base []float64, step float64, x, y func(float64) float64) []string {
	var out []string
	for _, run := range runIndices(d, step) {
		pts := make([]string, 0, 2*len(run))
		for _, i := range run {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(d.times[i]), y(d.values[i])))
		}
		for k := len(run) - 1; k >= 0; k-- {
			i := run[k]
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(d.times[i]), y(base[i])))
		}
		out = append(out, strings.Join(pts, " "))
	}
	return out
}
