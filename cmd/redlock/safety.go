package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/redlock-go/redlock/cmd/redlock/safety"
	"github.com/redlock-go/redlock/redlocktest"
)

const safetyAbout = `
Runs the fault matrix of package safety: a lock workload against a single Redis node,
a master with a replica and Sentinel, and Redlock over 3 and 5 independent nodes,
while nodes are killed, restarted with and without their data, paused, partitioned,
slowed down or given skewed clocks. Each scenario starts its own redis-server
processes on loopback (redis-sentinel, libfaketime and tcmalloc for some: see
tools/install-deps.sh) and stops them by PID. Prints the table of results; --html
draws one timeline per scenario. The whole matrix takes about a minute.
Exit code 0 when every result is as the documentation claims (negative controls
included: they must show the overlap), 1 otherwise.`

// safetyConfig is the safety subcommand's command line.
type safetyConfig struct {
	run                  string
	list                 bool
	jsonOut, md, htmlOut string
}

// runSafety is the safety subcommand.
func runSafety(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet("safety", "redlock safety [flags]", safetyAbout)
	var cfg safetyConfig
	fs.StringVar(&cfg.run, "run", "", "run only the scenarios whose \"mode/fault\" matches this `regexp`")
	fs.BoolVar(&cfg.list, "list", false, "list the scenarios (as \"mode/fault\") and exit")
	fs.StringVar(&cfg.jsonOut, "json", "", "also write the results as JSON to `file`")
	fs.StringVar(&cfg.md, "md", "", "also write the Markdown table to `file`")
	fs.StringVar(&cfg.htmlOut, "html", "", "write a self-contained HTML page with one timeline per scenario to `file`")
	pos, done, code := fs.parse(e, args, true)
	if done {
		return code
	}
	if len(pos) > 0 {
		return reportSetup(e, "safety", usagef("unexpected argument %q", pos[0]), exitError)
	}
	scenarios, err := selectScenarios(safety.Scenarios(), cfg.run)
	if err != nil {
		return reportSetup(e, "safety", err, exitError)
	}
	if cfg.list {
		for _, s := range scenarios {
			fmt.Fprintln(e.out(), scenarioName(s))
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	prog := newProgress(e.errw(), isTerminal(e.stderr), len(scenarios), 4*time.Second)
	var timelines []*safety.Timeline
	for _, s := range scenarios {
		prog.begin(scenarioName(s), nil)
		tl := runScenario(ctx, s)
		if ctx.Err() != nil {
			prog.stop()
			fmt.Fprintln(e.errw(), "redlock safety: interrupted; every node it started is stopped")
			return 130
		}
		timelines = append(timelines, tl)
		if tl.Problem != "" {
			prog.end(false, "NOT as expected: "+tl.Problem)
		} else {
			prog.end(true, "as expected")
		}
	}
	prog.stop()

	results := make([]safety.Result, len(timelines))
	failed := 0
	for i, tl := range timelines {
		results[i] = tl.Result
		if tl.Problem != "" {
			failed++
		}
	}
	io.WriteString(e.out(), safety.Markdown(results))
	if err := writeReports(cfg, results, timelines); err != nil {
		fmt.Fprintf(e.errw(), "redlock safety: %v\n", err)
		return exitError
	}
	if failed > 0 {
		fmt.Fprintf(e.errw(), "redlock safety: %d of %d scenarios NOT as expected\n", failed, len(timelines))
		return exitError
	}
	all := "all " + plural(int64(len(timelines)), "scenario")
	if len(timelines) == 1 {
		all = "the one scenario"
	}
	fmt.Fprintf(e.errw(), "redlock safety: %s as expected\n", all)
	return exitOK
}

// scenarioName is what --run matches: "mode/fault".
func scenarioName(s *safety.Scenario) string { return string(s.Mode) + "/" + s.Name }

// selectScenarios returns the scenarios whose name matches expr (all when it is empty).
func selectScenarios(all []*safety.Scenario, expr string) ([]*safety.Scenario, error) {
	if expr == "" {
		return all, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, usagef("--run: %v", err)
	}
	var out []*safety.Scenario
	for _, s := range all {
		if re.MatchString(scenarioName(s)) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, usagef("--run %q matches no scenario (see --list)", expr)
	}
	return out, nil
}

// runScenario runs s on nodes of its own, through redlocktest.Run, which stops them
// (by PID) before it returns. Cancelling ctx ends the scenario's workload early.
func runScenario(ctx context.Context, s *safety.Scenario) *safety.Timeline {
	var tl *safety.Timeline
	err := redlocktest.Run(func(t redlocktest.T) {
		tctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		tl = s.RunTimeline(&ctxT{T: t, ctx: tctx})
	})
	if tl == nil { // the scenario ended through t.Fatal: a node could not start, say
		tl = &safety.Timeline{Result: safety.Result{Scenario: s}}
	}
	if err != nil && tl.Problem == "" {
		tl.Problem = err.Error()
	}
	return tl
}

// ctxT is a redlocktest.T whose Context also ends with the command's.
type ctxT struct {
	redlocktest.T
	ctx context.Context
}

// Context returns the context that also ends with the command's.
func (c *ctxT) Context() context.Context { return c.ctx }

// writeReports writes the files asked for with --json, --md and --html.
func writeReports(cfg safetyConfig, results []safety.Result, timelines []*safety.Timeline) error {
	if cfg.jsonOut != "" {
		js, err := safety.JSON(results)
		if err != nil {
			return err
		}
		if err := os.WriteFile(cfg.jsonOut, append(js, '\n'), 0o644); err != nil {
			return err
		}
	}
	if cfg.md != "" {
		if err := os.WriteFile(cfg.md, []byte(safety.Markdown(results)), 0o644); err != nil {
			return err
		}
	}
	if cfg.htmlOut != "" {
		page := safety.HTML("redlock safety: one lock under faults, single node vs replication vs quorum", timelines)
		if err := os.WriteFile(cfg.htmlOut, []byte(page), 0o644); err != nil {
			return err
		}
	}
	return nil
}
