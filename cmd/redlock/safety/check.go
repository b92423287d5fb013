// Package safety measures whether a lock keeps its promise under faults: a workload of
// workers that take a lock, run a critical section on a shared resource and release it,
// a log of every critical section on one monotonic clock, and a checker that finds the
// overlaps, lost updates and stale writes in that log. The fault scenarios that use it
// are in scenario.go and scenario_faults.go (reentrant.go and fair.go add their rows);
// `redlock safety` and the tests run them.
package safety

import (
	"slices"
	"sort"
	"time"

	"github.com/redlock-go/redlock/internal/fencecheck"
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

// Grant is one granted Acquire for FenceViolation (internal/fencecheck, shared with the
// library's own tests).
type Grant = fencecheck.Grant

// FenceViolation returns an error unless the tokens are unique and non-zero and every
// grant whose Acquire started after another's returned has a greater token.
func FenceViolation(grants []Grant) error { return fencecheck.Violation(grants) }

// percentile returns the p-th percentile (0 ≤ p ≤ 1) of sorted durations, 0 if none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(p*float64(len(sorted)-1)+0.5)]
}
