package main

import (
	"html/template"
	"io"
	"strconv"
	"time"
)

// pageData is everything the page shows.
type pageData struct {
	Title, Source, Version string
	From, To               string
	RangeNote              string
	Width, Height          int
	Panels                 []panelView
	Queries                []queryRow
	Failures               []string
}

// queryRow is one query as sent, for the table under the panels.
type queryRow struct {
	Panel, RefID, Kind, Expr, Step, Result string
	Failed                                 bool
}

// queryRows lists every query of every panel in page order.
func queryRows(prs []panelResult) []queryRow {
	var rows []queryRow
	for _, pr := range prs {
		for _, t := range pr.Targets {
			r := queryRow{Panel: pr.Panel.Title, RefID: t.RefID, Kind: "range", Expr: t.Expr, Step: promDuration(t.Step)}
			if pr.Panel.Type == "stat" {
				r.Kind, r.Step = "instant", "-"
			}
			switch {
			case t.Err != nil:
				r.Result, r.Failed = "error: "+t.Err.Error(), true
			case t.Empty && t.Optional:
				r.Result = "no data (allowed)"
			case t.Empty:
				r.Result, r.Failed = "no data", true
			default:
				r.Result = plural(len(t.Series), "series", "series")
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// plural writes n with the right form of a noun.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// writePage renders the page; times are shown in UTC.
func writePage(w io.Writer, d pageData) error {
	return pageTemplate.Execute(w, d)
}

// utc formats a time for the header.
func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}: preview</title>
<style>
body{margin:0;padding:14px;background:#f4f5f5;font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222}
header{width:{{.Width}}px;margin-bottom:10px}
h1{font-size:19px;margin:0 0 4px}
.note{margin:2px 0;color:#333}
.window{color:#555}
.fail{color:#b00020;font-weight:600}
.grid{position:relative;width:{{.Width}}px;height:{{.Height}}px}
.panel{position:absolute;box-sizing:border-box;background:#fff;border:1px solid #d8d9da;border-radius:3px;overflow:hidden}
.panel h2{font-size:13px;font-weight:600;margin:0;padding:5px 8px;height:16px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.stat{position:absolute;left:0;right:0;bottom:0;top:26px;color:#fff;display:flex;flex-direction:column;align-items:center;justify-content:center}
.stat .v{font-size:30px;font-weight:600}
.stat .n{font-size:11px}
.panel .notes{position:absolute;left:8px;right:8px;bottom:4px;font-size:11px;color:#b00020;background:#fff8}
svg text{font-size:10px;fill:#555}
table.legend{width:100%;border-collapse:collapse;font-size:11px;margin:0 0 0 0}
table.legend td,table.legend th{padding:0 6px;height:14px;white-space:nowrap}
table.legend th{text-align:right;font-weight:600;color:#555}
table.legend td.num{text-align:right}
table.legend td.name{width:100%;overflow:hidden;text-overflow:ellipsis;max-width:1px}
.sw{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
table.q{border-collapse:collapse;margin-top:14px;font-size:11px;width:{{.Width}}px;background:#fff}
table.q td,table.q th{border:1px solid #ddd;padding:2px 5px;text-align:left;vertical-align:top}
table.q code{white-space:pre-wrap;word-break:break-all}
</style></head><body>
<header>
<h1>{{.Title}}</h1>
<p class="note">rendered from {{.Source}} by tools/dashpreview with Prometheus {{.Version}} evaluating every query; not Grafana</p>
<p class="window">window {{.From}} to {{.To}} ({{.RangeNote}}); time series: range queries, stats: instant queries at the window's end</p>
{{range .Failures}}<p class="fail">{{.}}</p>{{end}}
</header>
<div class="grid">
{{range .Panels}}<div class="panel" id="panel-{{.ID}}" style="left:{{.Box.Left}}px;top:{{.Box.Top}}px;width:{{.Box.Width}}px;height:{{.Box.Height}}px" title="{{.Description}}">
<h2>{{.Title}}</h2>
{{with .Stat}}<div class="stat" style="background:{{.Background}}">{{range .Values}}<div class="v">{{.Text}}</div>{{with .Name}}<div class="n">{{.}}</div>{{end}}{{end}}</div>{{end}}
{{with .Chart}}<svg width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" xmlns="http://www.w3.org/2000/svg">
{{$c := .}}{{range .YTicks}}<line x1="{{$c.PlotX}}" x2="{{$c.W}}" y1="{{.Pos}}" y2="{{.Pos}}" stroke="#e4e4e4"/><text x="{{$c.PlotX}}" dx="-4" y="{{.Pos}}" dy="3" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line x1="{{.Pos}}" x2="{{.Pos}}" y1="{{$c.PlotY}}" y2="{{$c.H}}" stroke="#eeeeee" transform="translate(0,-18)"/><text x="{{.Pos}}" y="{{$c.H}}" dy="-4" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Lines}}{{$col := .Color}}{{range .Areas}}<polygon points="{{.}}" fill="{{$col}}" fill-opacity="0.35" stroke="none"/>
{{end}}{{range .Runs}}<polyline points="{{.}}" fill="none" stroke="{{$col}}" stroke-width="1.6" stroke-linejoin="round"/>
{{end}}{{end}}</svg>
<table class="legend"><tr><th style="text-align:left">{{if .Legend}}series{{end}}</th>{{range .CalcNames}}<th>{{.}}</th>{{end}}</tr>
{{range .Legend}}<tr><td class="name"><span class="sw" style="background:{{.Color}}"></span>{{.Name}}</td>{{range .Calcs}}<td class="num">{{.}}</td>{{end}}</tr>
{{end}}{{if .LegendMore}}<tr><td>… {{.LegendMore}} more series</td></tr>{{end}}</table>{{end}}
{{if .Notes}}<div class="notes">{{range .Notes}}{{.}}<br>{{end}}</div>{{end}}
</div>
{{end}}</div>
<table class="q"><tr><th>panel</th><th>ref</th><th>query</th><th>expression as sent (variables substituted)</th><th>step</th><th>result</th></tr>
{{range .Queries}}<tr{{if .Failed}} class="fail"{{end}}><td>{{.Panel}}</td><td>{{.RefID}}</td><td>{{.Kind}}</td><td><code>{{.Expr}}</code></td><td>{{.Step}}</td><td>{{.Result}}</td></tr>
{{end}}</table>
</body></html>
`))
