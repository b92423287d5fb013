//go:build linux

package main

import (
	"strings"
	"testing"
	"time"
)

// syncBuffer (from exec_tty_linux_test.go) is safe for the progress goroutine.

func TestProgressLive(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, true, 2, time.Second)
	p.begin("first step", func() string { return "42 cycles" })
	time.Sleep(250 * time.Millisecond) // two redraws
	p.end(true, "fine")
	p.begin("second step", nil)
	p.end(false, "broken")
	p.stop()
	s := out.String()
	for _, want := range []string{
		"\r\033[K", "1/2", "first step  42 cycles", "█", "░",
		"\r\033[Kok   [1/2] first step: fine (", "FAIL [2/2] second step: broken (",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%q", want, s)
		}
	}
	if !strings.HasSuffix(s, "\r\033[K") && !strings.HasSuffix(s, "\n") {
		t.Errorf("the bar was not cleared at the end: %q", s[max(0, len(s)-80):])
	}
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\033[K", "\n"), "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("a line of %d characters: %q", n, line)
		}
	}
}

func TestProgressPlain(t *testing.T) {
	var out syncBuffer
	p := newProgress(&out, false, 10, time.Second)
	p.begin("step", func() string { return "n" })
	p.end(true, "done")
	p.stop()
	if s := out.String(); !strings.HasPrefix(s, "ok   [ 1/10] step: done (") || strings.Contains(s, "\r") || strings.Count(s, "\n") != 1 {
		t.Errorf("plain output %q", s)
	}
}
