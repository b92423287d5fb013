package main

import (
	"math"
	"slices"
	"time"
)

// panelView is one panel as the page template draws it.
type panelView struct {
	ID                       int
	Title, Description, Type string
	Box                      box
	Chart                    *chart
	Stat                     *statView
	Notes                    []string // failures and allowed-empty queries, shown in the panel
}

// statView is a stat panel's value(s) and background colour.
type statView struct {
	Values     []statValue
	Background string
}

// statValue is one reduced series of a stat panel.
type statValue struct {
	Name, Text string
}

// thresholdColors maps the named colours of Grafana thresholds to hex values.
var thresholdColors = map[string]string{
	"green": "#3d8c40", "red": "#c4162a", "orange": "#e0752d", "yellow": "#c9a800",
	"blue": "#1f60c4", "purple": "#8f3bb8", "transparent": "#888888", "text": "#444444",
}

// views turns the evaluated panels into what the template draws.
func views(prs []panelResult) []panelView {
	out := make([]panelView, 0, len(prs))
	for _, pr := range prs {
		p := pr.Panel
		v := panelView{ID: p.ID, Title: p.Title, Description: p.Description, Type: p.Type, Box: pr.Box}
		for _, t := range pr.Targets {
			switch {
			case t.Err != nil:
				v.Notes = append(v.Notes, "query "+t.RefID+" failed: "+t.Err.Error())
			case t.Empty:
				v.Notes = append(v.Notes, "query "+t.RefID+": no data (allowed by -optional)")
			}
		}
		switch p.Type {
		case "timeseries":
			v.Chart = buildChart(pr)
		case "stat":
			v.Stat = buildStat(pr)
		}
		out = append(out, v)
	}
	return out
}

// buildStat reduces each series of a stat panel to its last number and colours the
// background by the thresholds the first value reaches.
func buildStat(pr panelResult) *statView {
	p := pr.Panel
	sv := &statView{Background: "#777777"}
	first := math.NaN()
	for _, d := range collectSeries(pr.Targets) {
		v := calc("lastNotNull", d.values)
		if len(sv.Values) == 0 {
			first = v
		}
		sv.Values = append(sv.Values, statValue{Name: d.name, Text: formatValue(v, p.FieldConfig.Defaults.Unit)})
	}
	if len(sv.Values) == 1 {
		sv.Values[0].Name = ""
	}
	if th := p.FieldConfig.Defaults.Thresholds; th != nil && !math.IsNaN(first) {
		for _, s := range th.Steps {
			if s.Value == nil || first >= *s.Value {
				sv.Background = colorOf(s.Color)
			}
		}
	}
	return sv
}

// colorOf returns a threshold colour's hex value (hex colours pass through).
func colorOf(name string) string {
	if c, ok := thresholdColors[name]; ok {
		return c
	}
	return name
}

// buildChart lays out a time series panel: the legend below the plot (as many rows
// as fit in half the panel, with calcs over the series' own values), axes with round
// ticks, one polyline per run of numbers, and for stacked panels the area each series
// adds.
func buildChart(pr panelResult) *chart {
	p := pr.Panel
	unit := p.FieldConfig.Defaults.Unit
	ss := collectSeries(pr.Targets)
	c := &chart{W: pr.Box.Width - 2, CalcNames: p.Options.Legend.Calcs}
	legendRows := min(len(ss), (pr.Box.Height-titleHeight)/2/legendRow)
	c.LegendMore = len(ss) - legendRows
	for i, d := range ss[:legendRows] {
		e := legendEntry{Color: palette[i%len(palette)], Name: d.name}
		for _, name := range c.CalcNames {
			e.Calcs = append(e.Calcs, formatValue(calc(name, d.values), unit))
		}
		c.Legend = append(c.Legend, e)
	}
	var bases [][]float64
	if p.FieldConfig.Defaults.Custom.Stacking.Mode == "normal" {
		bases = stack(ss)
	}
	c.H = pr.Box.Height - titleHeight - (legendRows+1)*legendRow - 6
	c.PlotX, c.PlotY, c.PlotW, c.PlotH = 62, 6, c.W-62-10, c.H-6-18
	from, to, lo, hi := extent(ss)
	if pr.To.After(pr.From) { // the whole window, also where there is no data
		from, to = float64(pr.From.UnixMilli())/1000, float64(pr.To.UnixMilli())/1000
	}
	step := 1.0
	if len(pr.Targets) > 0 {
		step = pr.Targets[0].Step.Seconds()
	}
	yt := niceTicks(lo, hi, 4)
	lo, hi = yt[0], yt[len(yt)-1]
	x := func(t float64) float64 { return float64(c.PlotX) + (t-from)/(to-from)*float64(c.PlotW) }
	y := func(v float64) float64 { return float64(c.PlotY+c.PlotH) - (v-lo)/(hi-lo)*float64(c.PlotH) }
	for _, v := range yt {
		c.YTicks = append(c.YTicks, tick{Pos: int(math.Round(y(v))), Label: formatValue(v, unit)})
	}
	for _, t := range timeTicks(from, to, max(2, c.PlotW/90)) {
		c.XTicks = append(c.XTicks, tick{Pos: int(math.Round(x(t))), Label: timeLabel(t)})
	}
	for i, d := range ss {
		l := line{Color: palette[i%len(palette)], Runs: runsOf(d, step, x, y)}
		if bases != nil {
			l.Areas = areasOf(d, bases[i], step, x, y)
		}
		c.Lines = append(c.Lines, l)
	}
	return c
}

// extent returns the time span and value range of the series (0 always included in
// the value range, as a dashboard's default axis does for non-negative data).
func extent(ss []drawn) (from, to, lo, hi float64) {
	from, to, lo, hi = math.Inf(1), math.Inf(-1), 0, 0
	for _, d := range ss {
		for i, t := range d.times {
			from, to = min(from, t), max(to, t)
			if v := d.values[i]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(from, 1) {
		now := float64(time.Now().Unix())
		from, to = now-60, now
	}
	if to <= from {
		to = from + 1
	}
	return from, to, lo, hi
}

// pageHeight is the height of the grid: the lowest panel's bottom.
func pageHeight(vs []panelView) int {
	h := 0
	for _, v := range vs {
		h = max(h, v.Box.Top+v.Box.Height)
	}
	return h
}

// sortViews orders panels top to bottom, left to right, as they are read.
func sortViews(vs []panelView) {
	slices.SortStableFunc(vs, func(a, b panelView) int {
		if a.Box.Top != b.Box.Top {
			return a.Box.Top - b.Box.Top
		}
		return a.Box.Left - b.Box.Left
	})
}
