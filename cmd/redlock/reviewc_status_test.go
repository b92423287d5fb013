package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestReviewCStatusDamagedFence: a fencing counter that holds no decimal integer from 0
// to 2^63−1 (a negative number, text, a leading zero) makes every fenced acquire on the
// node fail (fence_read.lua). status must say so rather than show the text as a counter,
// show "-" (no counter) for a negative one, or hide the node's other, good counter.
func TestReviewCStatusDamagedFence(t *testing.T) {
	servers, urls := nodes(t, 3, redistest.Options{})
	set := func(i int, key, v string) {
		if err := servers[i].Client().Set(t.Context(), key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set(0, "job:fence", "-5") // a negative counter, no other name
	set(1, "fence:{job}", "abc")
	set(1, "job:fence", "7") // damaged, next to a good one
	set(2, "fence:{job}", "007")
	r := runInProcess(t, nil, "status", "--nodes", urls, "job")
	for i, s := range servers {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta("redis://"+s.Addr()) + ` .*$`).FindString(r.stdout)
		if !strings.Contains(row, "not a decimal integer") {
			t.Errorf("node %d: the damaged counter is not reported: %q\n%s", i+1, row, r.stdout)
		}
	}
	if row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta("redis://"+servers[1].Addr()) + ` +yes +- +- +(\S+)`).FindStringSubmatch(r.stdout); row == nil || row[1] != "7" {
		t.Errorf("node 2: want the good counter 7 shown beside the damaged one:\n%s", r.stdout)
	}
}
