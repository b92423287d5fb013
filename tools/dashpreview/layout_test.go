package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestLayout(t *testing.T) {
	// 1400 px: 24 columns of 59 px (1408/24 = 58.67), 8 px between panels.
	cases := []struct {
		g    gridPos
		want box
	}{
		{gridPos{X: 0, Y: 0, W: 24, H: 8}, box{Left: 0, Top: 0, Width: 1400, Height: 296}},
		{gridPos{X: 0, Y: 0, W: 12, H: 8}, box{Left: 0, Top: 0, Width: 696, Height: 296}},
		{gridPos{X: 12, Y: 4, W: 12, H: 8}, box{Left: 704, Top: 152, Width: 696, Height: 296}},
		{gridPos{X: 18, Y: 0, W: 6, H: 4}, box{Left: 1056, Top: 0, Width: 344, Height: 144}},
	}
	for _, c := range cases {
		if got := layout(c.g, 1400); got != c.want {
			t.Errorf("layout(%+v) = %+v, want %+v", c.g, got, c.want)
		}
	}
}

// TestPageLayout checks the page against the dashboard's grid: every panel where its
// gridPos puts it, no two panels overlapping, side-by-side panels of one row at the
// same height and 8 px apart, and the page as wide as the grid.
func TestPageLayout(t *testing.T) {
	code, stderr, page, _ := runWith(t, okReply, "-width", "1200")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	d, err := loadDashboard("../../docs/grafana-redlock.json")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`id="panel-(\d+)" style="left:(\d+)px;top:(\d+)px;width:(\d+)px;height:(\d+)px"`)
	boxes := map[int]box{}
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		n := make([]int, 5)
		for i := range n {
			n[i], _ = strconv.Atoi(m[i+1])
		}
		boxes[n[0]] = box{Left: n[1], Top: n[2], Width: n[3], Height: n[4]}
	}
	col := float64(1200+gridGap) / 24
	for _, p := range d.Panels {
		b, ok := boxes[p.ID]
		if !ok {
			t.Errorf("panel %d (%s) not placed", p.ID, p.Title)
			continue
		}
		if math.Abs(float64(b.Left)-float64(p.GridPos.X)*col) > 1 || b.Top != p.GridPos.Y*38 ||
			b.Left+b.Width > 1200 || b.Height != p.GridPos.H*38-8 {
			t.Errorf("panel %d at %+v for gridPos %+v", p.ID, b, p.GridPos)
		}
		for q, c := range boxes {
			if q != p.ID && b.Left < c.Left+c.Width && c.Left < b.Left+b.Width && b.Top < c.Top+c.Height && c.Top < b.Top+b.Height {
				t.Errorf("panels %d %+v and %d %+v overlap", p.ID, b, q, c)
			}
		}
	}
	// Panels 5 (x 0, w 12) and 6 (x 12, w 12) share a row: same top, 8 px between.
	if a, b := boxes[5], boxes[6]; a.Top != b.Top || b.Left-(a.Left+a.Width) != gridGap || b.Left+b.Width != 1200 {
		t.Errorf("row of panels 5 and 6: %+v %+v", a, b)
	}
	// Page order follows the grid: top to bottom, then left to right.
	last := -1
	for _, id := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12} {
		i := strings.Index(page, fmt.Sprintf(`id="panel-%d"`, id))
		if i < last {
			t.Errorf("panel %d out of reading order", id)
		}
		last = i
	}
	if !strings.Contains(page, ".grid{position:relative;width:1200px;height:1360px}") {
		t.Error("the grid is not 1200 px wide and 36 units (1360 px) high")
	}
}

func TestFormatAndLegend(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0.00123, "s", "1.23 ms"}, {0.0000456, "s", "45.6 µs"}, {2.5, "s", "2.5 s"}, {90, "s", "1.5 min"},
		{1234.6, "reqps", "1235 req/s"}, {25000, "none", "25 k"}, {3, "none", "3"}, {0, "s", "0 s"},
		{math.NaN(), "s", "NaN"}, {0.5, "percentunit", "50%"}, {7, "bytes", "7 bytes"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	labels := map[string]string{"redlock_node": "127.0.0.1:7001", "error_type": "refused"}
	if got := legendName("{{redlock_node}} {{ error_type }}", labels, "x"); got != "127.0.0.1:7001 refused" {
		t.Errorf("legendFormat: %q", got)
	}
	if got := legendName("", labels, "x"); got != `{error_type="refused", redlock_node="127.0.0.1:7001"}` {
		t.Errorf("no legendFormat: %q", got)
	}
	if got := legendName("", nil, "sum(x)"); got != "sum(x)" {
		t.Errorf("no labels: %q", got)
	}
}

// TestStackedChart: a stacked panel draws each series on top of the ones before it,
// with the area it adds, while its legend's calcs are over its own values.
func TestStackedChart(t *testing.T) {
	var p panel
	p.Type, p.GridPos = "timeseries", gridPos{W: 12, H: 8}
	p.FieldConfig.Defaults.Unit = "none"
	p.FieldConfig.Defaults.Custom.Stacking.Mode = "normal"
	p.Options.Legend.Calcs = []string{"mean", "max"}
	pts := func(vs ...float64) []point {
		out := make([]point, len(vs))
		for i, v := range vs {
			out[i] = point{T: 1000 + float64(i), V: v}
		}
		return out
	}
	pr := panelResult{Panel: p, Box: layout(p.GridPos, 1400), Targets: []targetResult{{
		Legend: "{{k}}", Step: 1e9,
		Series: []series{{Labels: map[string]string{"k": "a"}, Points: pts(1, 1, 1)}, {Labels: map[string]string{"k": "b"}, Points: pts(2, 3, 2)}},
	}}}
	c := buildChart(pr)
	if len(c.Legend) != 2 || c.Legend[1].Name != "b" || c.Legend[1].Calcs[0] != "2.33" || c.Legend[1].Calcs[1] != "3" {
		t.Fatalf("legend %+v: want b with mean 2.33 and max 3, its own values", c.Legend)
	}
	if len(c.Lines) != 2 || len(c.Lines[0].Areas) != 1 || len(c.Lines[1].Areas) != 1 {
		t.Fatalf("lines %+v: want one area per series", c.Lines)
	}
	// The top tick is 4 (= 1 + 3 stacked): b's line reaches it, at the plot's top.
	if top := c.YTicks[len(c.YTicks)-1]; top.Label != "4" || top.Pos != c.PlotY {
		t.Errorf("top tick %+v, want 4 at %d", top, c.PlotY)
	}
	if !strings.Contains(c.Lines[1].Runs[0], fmt.Sprintf(",%d.0", c.PlotY)) {
		t.Errorf("b's line %q does not reach the stacked 4", c.Lines[1].Runs[0])
	}
	p.FieldConfig.Defaults.Custom.Stacking.Mode = "none"
	pr.Panel = p
	if c := buildChart(pr); c.Lines[0].Areas != nil || c.YTicks[len(c.YTicks)-1].Label != "3" {
		t.Errorf("unstacked: areas %v, top tick %+v", c.Lines[0].Areas, c.YTicks[len(c.YTicks)-1])
	}
}
