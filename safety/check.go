// Package safety measures whether a lock keeps its promise under faults: a workload of
// workers that take a lock, run a critical section on a shared resource and release it,
// a log of every critical section on one monotonic clock, and a checker that finds the
// overlaps, lost updates and stale writes in that log. The fault scenarios that use it
// are in scenario.go; `redlock safety` and the tests run them.
package safety

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Section is one holder's critical section, in time since the run started (one
// monotonic clock for every worker of the run).
type Section struct {
	Worker int
	Grant  time.Duration // when Acquire returned
	Until  time.Duration // the lock's validity end (Lock.Until)
	Enter  time.Duration // when the worker began using the resource
	Exit   time.Duration // when it stopped
	Fence  uint64        // the lock's fencing token, 0 without fencing
}

// Overlaps counts the sections that began before an earlier section had ended, and
// returns the longest such overlap.
func Overlaps(sections []Section) (count int, longest time.Duration) {
	s := slices.Clone(sections)
	sort.Slice(s, func(i, j int) bool { return s[i].Enter < s[j].Enter })
	var end time.Duration // the latest exit so far
	for i, x := range s {
		if i > 0 && x.Enter < end {
			count++
			longest = max(longest, min(end, x.Exit)-x.Enter)
		}
		end = max(end, x.Exit)
	}
	return count, longest
}

// Grant is one successful fenced Acquire: when the call started and returned, on one
// clock, and the fencing token it got.
type Grant struct {
	Start, End time.Duration
	Fence      uint64
}

// FenceViolation returns an error unless the tokens are unique and non-zero and every
// grant whose Acquire started after another's returned has a greater token (grants
// whose calls overlapped may be in either order).
func FenceViolation(grants []Grant) error {
	seen := make(map[uint64]bool, len(grants))
	for _, g := range grants {
		if g.Fence == 0 || seen[g.Fence] {
			return fmt.Errorf("fencing token %d is zero or duplicated", g.Fence)
		}
		seen[g.Fence] = true
	}
	byEnd := slices.Clone(grants)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End < byEnd[j].End })
	byStart := slices.Clone(grants)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].Start < byStart[j].Start })
	var highest uint64 // the highest token among grants that ended before b started
	i := 0
	for _, b := range byStart {
		for ; i < len(byEnd) && byEnd[i].End < b.Start; i++ {
			highest = max(highest, byEnd[i].Fence)
		}
		if b.Fence <= highest {
			return fmt.Errorf("token %d granted after token %d had been: not increasing in real time", b.Fence, highest)
		}
	}
	return nil
}

// percentile returns the p-th percentile (0 ≤ p ≤ 1) of sorted durations, 0 if none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1)+0.5)]
}
