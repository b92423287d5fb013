// Command dashpreview draws a Grafana dashboard's panels from a real Prometheus
// server, without Grafana: it reads the dashboard JSON, substitutes the variables
// Grafana would ($__interval, $__rate_interval, $__range, data source variables) for
// the chosen window, runs every query of every panel through Prometheus's HTTP API,
// and writes one self-contained HTML page (inline SVG, no script) laid out by the
// panels' gridPos. It exits 1, naming the panel and the query, when a query fails or
// returns nothing where the panel expects data; the page is written all the same.
//
//	dashpreview -dashboard docs/grafana-redlock.json -prometheus http://127.0.0.1:9090 \
//	    -from 1764586800 -to 1764586890 -scrape-interval 1s -out dash.html
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line.
type options struct {
	dashboard, prometheus, out string
	promVersion                string
	from, to                   time.Time
	scrape                     time.Duration
	width                      int
	optional                   *regexp.Regexp
}

// parseArgs reads the command line.
func parseArgs(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("dashpreview", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var from, to, optional string
	fs.StringVar(&o.dashboard, "dashboard", "docs/grafana-redlock.json", "the dashboard JSON `file`")
	fs.StringVar(&o.prometheus, "prometheus", "http://127.0.0.1:9090", "the Prometheus server's base `URL`")
	fs.StringVar(&o.promVersion, "prometheus-version", "", "the `version` to name when the server reports none (a go install build: the module version)")
	fs.StringVar(&o.out, "out", "dashboard.html", "the HTML `file` to write")
	fs.StringVar(&from, "from", "", "the window's start: Unix seconds or RFC 3339 (required)")
	fs.StringVar(&to, "to", "", "the window's end: Unix seconds or RFC 3339 (default: now)")
	fs.DurationVar(&o.scrape, "scrape-interval", 15*time.Second, "the data source's scrape interval: the lowest step, and the base of $__rate_interval")
	fs.IntVar(&o.width, "width", 1400, "the page's width in `pixels` (24 grid columns)")
	fs.StringVar(&optional, "optional", "", "`regexp` of \"Panel title/refId\" whose queries may return no data")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.from, err = parseTime(from, time.Time{}); err != nil {
		return o, fmt.Errorf("-from: %w", err)
	}
	if o.to, err = parseTime(to, time.Now()); err != nil {
		return o, fmt.Errorf("-to: %w", err)
	}
	if !o.to.After(o.from) {
		return o, errors.New("-to must be after -from")
	}
	if o.scrape <= 0 || o.width < 240 {
		return o, errors.New("-scrape-interval must be positive and -width at least 240")
	}
	if optional != "" {
		if o.optional, err = regexp.Compile(optional); err != nil {
			return o, fmt.Errorf("-optional: %w", err)
		}
	}
	return o, nil
}

// parseTime reads Unix seconds (with a fraction) or RFC 3339; "" gives def, and is
// an error when def is zero.
func parseTime(s string, def time.Time) (time.Time, error) {
	if s == "" {
		if def.IsZero() {
			return def, errors.New("required")
		}
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(f * 1000)), nil
	}
	return time.Parse(time.RFC3339, s)
}

// run is the command; it returns the exit code: 0, 1 for a failed check (the page
// is written), 2 for a usage or setup error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "dashpreview:", err)
		}
		return 2
	}
	d, err := loadDashboard(o.dashboard)
	if err != nil {
		fmt.Fprintln(stderr, "dashpreview:", err)
		return 2
	}
	c := &promClient{base: strings.TrimRight(o.prometheus, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
	version, err := c.version(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "dashpreview: asking Prometheus its version:", err)
		return 2
	}
	switch {
	case version == "" && o.promVersion == "":
		fmt.Fprintln(stderr, "dashpreview: Prometheus reports no version (a go install build); name it with -prometheus-version")
		return 2
	case version == "":
		version = o.promVersion
	}
	prs, failures := evaluate(ctx, c, d, evalConfig{From: o.from, To: o.to, ScrapeInterval: o.scrape, PageWidth: o.width, Optional: o.optional})
	if err := writeOut(o, d, version, prs, failures); err != nil {
		fmt.Fprintln(stderr, "dashpreview:", err)
		return 2
	}
	queries := queryRows(prs)
	fmt.Fprintf(stdout, "dashpreview: %d panels, %d queries on Prometheus %s, %s to %s; wrote %s\n",
		len(prs), len(queries), version, utc(o.from), utc(o.to), o.out)
	for _, f := range failures {
		fmt.Fprintln(stderr, "dashpreview: FAIL:", f)
	}
	if len(failures) > 0 {
		return 1
	}
	return 0
}

// writeOut renders the page into o.out.
func writeOut(o options, d *dashboard, version string, prs []panelResult, failures []string) error {
	vs := views(prs)
	sortViews(vs)
	_, rate := intervals(window{From: o.from, To: o.to, MaxDataPoints: o.width / 2, ScrapeInterval: o.scrape}, 0)
	data := pageData{
		Title: d.Title, Source: o.dashboard, Version: version,
		From: utc(o.from), To: utc(o.to), Width: o.width, Height: pageHeight(vs),
		RangeNote: fmt.Sprintf("$__range %ds, scrape interval %s, $__rate_interval %s for a half-width panel",
			int(o.to.Sub(o.from).Round(time.Second).Seconds()), promDuration(o.scrape), promDuration(rate)),
		Panels: vs, Queries: queryRows(prs), Failures: failures,
	}
	f, err := os.Create(o.out)
	if err != nil {
		return err
	}
	if err := writePage(f, data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
