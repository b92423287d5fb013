package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// evalConfig is what one evaluation of a dashboard needs besides the dashboard.
type evalConfig struct {
	From, To       time.Time
	ScrapeInterval time.Duration
	PageWidth      int            // pixels; panels get their widths from gridPos
	Optional       *regexp.Regexp // "Panel title/refId" of queries allowed to return nothing
}

// targetResult is one query of a panel as sent and as answered.
type targetResult struct {
	RefID    string
	Expr     string // after substitution
	Legend   string // legendFormat
	Step     time.Duration
	Series   []series
	Empty    bool // no series, or nothing but NaN
	Optional bool // Empty is allowed for it
	Err      error
}

// panelResult is one panel with its queries' results and its place on the page.
type panelResult struct {
	Panel    panel
	Box      box
	From, To time.Time // the window drawn
	Targets  []targetResult
}

// evaluate runs every query of every panel against Prometheus as Grafana would send
// it: a range query per time series target, an instant query at the window's end per
// stat target. It returns the panels and one line per failure: a query that errored
// or came back empty (unless optional), a panel it cannot draw.
func evaluate(ctx context.Context, c *promClient, d *dashboard, cfg evalConfig) ([]panelResult, []string) {
	var failures []string
	dsVars, err := dataSourceVars(d)
	if err != nil {
		return nil, []string{"dashboard: " + err.Error()}
	}
	out := make([]panelResult, 0, len(d.Panels))
	for _, p := range d.Panels {
		pr := panelResult{Panel: p, Box: layout(p.GridPos, cfg.PageWidth), From: cfg.From, To: cfg.To}
		name := fmt.Sprintf("panel %q (id %d)", p.Title, p.ID)
		switch {
		case p.Type == "row" || (p.Type == "text" && len(p.Targets) == 0):
		case p.Type != "stat" && p.Type != "timeseries":
			failures = append(failures, fmt.Sprintf("%s: panel type %q is not drawn by the preview", name, p.Type))
		case len(p.Targets) == 0:
			failures = append(failures, name+": no queries")
		default:
			if err := checkDataSource(p.Datasource, dsVars); err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", name, err))
				break
			}
			for _, t := range p.Targets {
				if t.Hide {
					continue
				}
				tr := runTarget(ctx, c, p, t, pr.Box.Width, dsVars, cfg)
				if msg := judge(tr); msg != "" {
					failures = append(failures, fmt.Sprintf("%s query %s %q: %s", name, tr.RefID, tr.Expr, msg))
				}
				pr.Targets = append(pr.Targets, tr)
			}
		}
		out = append(out, pr)
	}
	return out, failures
}

// runTarget substitutes the variables of one target and runs it.
func runTarget(ctx context.Context, c *promClient, p panel, t target, width int, dsVars map[string]string, cfg evalConfig) targetResult {
	tr := targetResult{RefID: t.RefID, Expr: t.Expr, Legend: t.LegendFormat}
	tr.Optional = cfg.Optional != nil && cfg.Optional.MatchString(p.Title+"/"+t.RefID)
	if err := checkDataSource(t.Datasource, dsVars); err != nil {
		tr.Err = err
		return tr
	}
	var queryMin time.Duration
	if t.Interval != "" {
		d, err := time.ParseDuration(t.Interval)
		if err != nil {
			tr.Err = fmt.Errorf("interval %q: %v", t.Interval, err)
			return tr
		}
		queryMin = d
	}
	w := window{From: cfg.From, To: cfg.To, MaxDataPoints: width, ScrapeInterval: cfg.ScrapeInterval}
	vars, step := grafanaVars(w, queryMin, dsVars)
	tr.Step = step
	expr, err := substitute(t.Expr, vars)
	if err != nil {
		tr.Err = err
		return tr
	}
	tr.Expr = expr
	if p.Type == "stat" {
		tr.Series, tr.Err = c.query(ctx, expr, cfg.To)
	} else {
		// Grafana aligns a range query's ends to its step, so that panels refreshed
		// at different moments sample the same instants.
		start := cfg.From.Truncate(step)
		end := cfg.To.Truncate(step)
		tr.Series, tr.Err = c.queryRange(ctx, expr, start, end, step)
	}
	tr.Empty = tr.Err == nil && (len(tr.Series) == 0 || allNaN(tr.Series))
	return tr
}

// judge says what is wrong with a target's result, or "" when nothing is.
func judge(tr targetResult) string {
	switch {
	case tr.Err != nil:
		return tr.Err.Error()
	case tr.Empty && tr.Optional:
		return ""
	case tr.Empty && len(tr.Series) == 0:
		return "returned no series (the panel expects data; -optional allows it)"
	case tr.Empty:
		return "returned only NaN (the panel expects data; -optional allows it)"
	}
	if missing := missingLegendLabels(tr.Legend, tr.Series); len(missing) > 0 {
		return "legendFormat names " + strings.Join(missing, ", ") + ", which no series has"
	}
	return ""
}

// legendLabel matches a {{label}} of a legendFormat.
var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// missingLegendLabels returns the labels a legendFormat names that none of the series
// carries: a grouping the query lost, so the legend would be blank where it names it.
func missingLegendLabels(format string, ss []series) []string {
	var missing []string
	for _, m := range legendLabel.FindAllStringSubmatch(format, -1) {
		found := false
		for _, s := range ss {
			if _, ok := s.Labels[m[1]]; ok {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, m[1])
		}
	}
	return missing
}
