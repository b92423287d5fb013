package nemesis

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redlock-go/redlock/cmd/redlock/safety"
)

// Render writes the pictures of a checked run into dir and returns their paths: for
// each key whose history porcupine rejected, its visualization (the operations per
// worker, the faults as annotations, the longest linearizable prefix), and one page of
// safety's timeline (nodes with their faults, workers with their validity windows,
// overlaps in red) for every key.
func Render(dir string, res *Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	annotations := faultAnnotations(res)
	for _, key := range res.Schedule.Keys {
		for _, c := range []struct {
			name string
			ch   *Checked
		}{{"mutex", res.Check.Mutex[key]}, {"register", res.Check.Register[key]}} {
			if c.ch == nil || c.ch.Result == porcupine.Ok {
				continue
			}
			c.ch.Info.AddAnnotations(annotations)
			path := filepath.Join(dir, fmt.Sprintf("porcupine-%s-%s.html", c.name, key))
			if err := porcupine.VisualizePath(c.ch.Model, c.ch.Info, path); err != nil {
				return files, err
			}
			files = append(files, path)
		}
	}
	path := filepath.Join(dir, "timeline.html")
	title := fmt.Sprintf("nemesis seed %d (%s)", res.Schedule.Seed, res.Schedule.Family)
	if err := os.WriteFile(path, []byte(safety.HTML(title, Timelines(res))), 0o644); err != nil {
		return files, err
	}
	files = append(files, path)
	sched := filepath.Join(dir, "schedule.txt")
	var b strings.Builder
	b.WriteString(res.Schedule.String())
	for _, v := range res.Check.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	if err := os.WriteFile(sched, []byte(b.String()), 0o644); err != nil {
		return files, err
	}
	return append(files, sched), nil
}

// faultAnnotations shows the executed faults in porcupine's visualization, one row per
// node or worker process.
func faultAnnotations(res *Result) []porcupine.Annotation {
	var out []porcupine.Annotation
	for _, f := range res.Faults {
		tag := "faults"
		switch f.Kind {
		case FaultKill, FaultPause:
			tag = fmt.Sprintf("node %d", f.Nodes[0]+1)
		case FaultClientPause:
			tag = fmt.Sprintf("process %d", f.Process)
		default:
			tag = fmt.Sprintf("client %d", f.Client)
		}
		out = append(out, porcupine.Annotation{
			Tag: tag, Start: f.From, End: max(f.To, f.From+1),
			Description: string(f.Kind), Details: f.Fault.String(),
			BackgroundColor: "#f3e3b5",
		})
	}
	return out
}

// Timelines returns one safety timeline per key of the run: the nodes and the faults
// injected into them, and each granted lock as a section from its grant to the end of
// its validity window.
func Timelines(res *Result) []*safety.Timeline {
	s := res.Schedule
	var nodeFaults []safety.Fault
	var end time.Duration
	for i, n := range s.Nodes {
		if n.Rate != 1 {
			nodeFaults = append(nodeFaults, safety.Fault{Node: i, Kind: safety.FaultClock, Label: fmt.Sprintf("clock rate ×%.4f", n.Rate), From: 0, To: s.Length})
		}
	}
	for _, f := range res.Faults {
		from, to := time.Duration(f.From), time.Duration(f.To)
		end = max(end, to)
		switch f.Kind {
		case FaultKill:
			label := "killed, restarted empty"
			if s.Nodes[f.Nodes[0]].AOF {
				label = "killed, restarted with its AOF"
			}
			nodeFaults = append(nodeFaults, safety.Fault{Node: f.Nodes[0], Kind: safety.FaultDown, Label: label, From: from, To: to})
		case FaultPause:
			nodeFaults = append(nodeFaults, safety.Fault{Node: f.Nodes[0], Kind: safety.FaultPaused, Label: "paused (SIGSTOP)", From: from, To: to})
		case FaultPartition, FaultOneWay, FaultLatency:
			what := map[FaultKind]string{FaultPartition: "cut off from", FaultOneWay: "replies lost to", FaultLatency: "delayed " + f.Latency.String() + " for"}[f.Kind]
			for _, n := range f.Nodes {
				nodeFaults = append(nodeFaults, safety.Fault{Node: n, Kind: safety.FaultNetwork, Label: fmt.Sprintf("%s client %d", what, f.Client), From: from, To: to})
			}
		}
	}
	var out []*safety.Timeline
	for _, key := range s.Keys {
		rep := &safety.Report{Duration: s.Length}
		for _, w := range res.Check.Windows[key] {
			until := w.Until
			if until < 0 {
				until = w.End
			}
			rep.Sections = append(rep.Sections, safety.Section{Worker: w.Worker, Grant: time.Duration(w.Grant),
				Until: time.Duration(until), Enter: time.Duration(w.Grant), Exit: time.Duration(w.End), Fence: w.Fence})
			end = max(end, time.Duration(w.End))
		}
		rep.Grants = len(rep.Sections)
		rep.Overlaps, rep.LongestOverlap = safety.Overlaps(rep.Sections)
		var problems []string
		for _, v := range res.Check.Violations {
			if v.Key == key {
				problems = append(problems, v.Check+": "+v.Text)
			}
		}
		tl := &safety.Timeline{
			Result: safety.Result{
				Scenario: &safety.Scenario{Name: fmt.Sprintf("seed %d, %s, key %s", s.Seed, s.Family, key), Mode: safety.Redlock5, Expect: safety.Safe,
					Why: "randomized faults within the documented assumptions; each bar is a lock's validity window"},
				Report:  rep,
				Problem: strings.Join(problems, "; "),
			},
			Faults: nodeFaults,
			End:    max(end, s.Length),
		}
		for i := range s.Nodes {
			tl.Nodes = append(tl.Nodes, fmt.Sprintf("node %d", i+1))
		}
		out = append(out, tl)
	}
	return out
}
