package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress shows how far a run of numbered steps has come: on a terminal a bar redrawn
// ten times a second under the finished steps, elsewhere one line per finished step.
type progress struct {
	w      io.Writer
	live   bool
	total  int
	expect time.Duration // a step's usual length, for the bar's share of the running step
	start  time.Time

	mu      sync.Mutex
	n       int // steps begun
	name    string
	count   func() string // what the running step has done so far, for the bar; may be nil
	begun   time.Time
	drawn   bool // a bar is on the screen
	stopped chan struct{}
	wg      sync.WaitGroup
}

func newProgress(w io.Writer, live bool, total int, expect time.Duration) *progress {
	p := &progress{w: w, live: live, total: total, expect: expect, start: time.Now(), stopped: make(chan struct{})}
	if live {
		p.wg.Add(1)
		go p.redraw()
	}
	return p
}

// begin starts the next step; count, if not nil, says what it has done so far.
func (p *progress) begin(name string, count func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.name, p.count, p.begun = name, count, time.Now()
	p.drawLocked()
}

// end finishes the step begun last with a line that says whether it went well, and how.
func (p *progress) end(ok bool, detail string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	took := time.Since(p.begun).Round(100 * time.Millisecond)
	mark := "ok  "
	if !ok {
		mark = "FAIL"
	}
	line := fmt.Sprintf("%s [%*d/%d] %s: %s (%v)", mark, len(fmt.Sprint(p.total)), p.n, p.total, p.name, detail, took)
	if p.live {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		p.drawn = false
		p.drawLocked()
		return
	}
	fmt.Fprintln(p.w, line)
}

// stop removes the bar.
func (p *progress) stop() {
	close(p.stopped)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *progress) redraw() {
	defer p.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stopped:
			return
		case <-tick.C:
			p.mu.Lock()
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

// drawLocked draws the bar: the finished steps and the running one's share of its
// expected length, the elapsed time, the running step's name and what it has done.
func (p *progress) drawLocked() {
	if !p.live || p.n == 0 {
		return
	}
	const width = 24
	done := float64(p.n-1) + min(time.Since(p.begun).Seconds()/p.expect.Seconds(), 0.95)
	fill := int(done / float64(p.total) * width)
	bar := strings.Repeat("█", fill) + strings.Repeat("░", width-fill)
	el := time.Since(p.start).Round(time.Second)
	line := fmt.Sprintf("%s %d/%d %s  %s", bar, p.n, p.total, el, p.name)
	if p.count != nil {
		line += "  " + p.count()
	}
	if r := []rune(line); len(r) > 79 {
		line = string(r[:78]) + "…"
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	p.drawn = true
}
