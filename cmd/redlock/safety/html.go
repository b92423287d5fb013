package safety

import (
	_ "embed"
	"html/template"
	"strconv"
	"strings"
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
	p := pageView{Title: title}
	for i, tl := range timelines {
		v := scenarioView{
			ID:           "s" + strconv.Itoa(i+1),
			Class:        "ok",
			ShortVerdict: "as expected",
			Verdict:      "as expected",
			Scenario:     scenarioOf(tl),
			Report:       reportOf(tl),
			Picture:      drawPicture(tl),
		}
		v.Why = upperFirst(v.Scenario.Why)
		if tl.Problem != "" {
			v.Class, v.ShortVerdict, v.Verdict = "bad", "NOT as expected", "NOT as expected: "+tl.Problem
		} else {
			p.AsExpected++
		}
		p.Scenarios = append(p.Scenarios, v)
	}
	var b strings.Builder
	if err := pageTemplate.Execute(&b, p); err != nil {
		// Only a defect in the template can fail here (the values are plain strings
		// and numbers); say so on the page rather than write half of one.
		return "<!DOCTYPE html>\n<html lang=\"en\">\n<body>\n<p>The report could not be rendered: " +
			template.HTMLEscapeString(err.Error()) + "</p>\n</body>\n</html>\n"
	}
	return b.String()
}

// pageView is what the page template shows.
type pageView struct {
	Title      string
	AsExpected int // scenarios whose result matched the expectation
	Scenarios  []scenarioView
}

// scenarioView is one scenario: a row of the summary and a section with its picture.
type scenarioView struct {
	ID           string // the section's anchor, for the summary's link
	Class        string // "ok" or "bad"
	ShortVerdict string // for the summary
	Verdict      string // for the section, with the problem if there is one
	Why          string
	Scenario     *Scenario
	Report       *Report
	Picture      picture
}

//go:embed page.html.tmpl
var pageSource string

// pageTemplate is the page; html/template escapes each value for its context.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"ms": ms,
	"px": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
}).Parse(pageSource))

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

// upperFirst returns s with its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	return strings.ToUpper(string(r[0])) + string(r[1:])
}
