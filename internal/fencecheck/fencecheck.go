// Package fencecheck checks the fencing tokens of a run's grants against real time: the
// one check that both the library's tests and the safety lab apply to fencing.
package fencecheck

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Grant is one successful fenced Acquire: when the call started and returned, on one
// clock, and the fencing token it got.
type Grant struct {
	Start, End time.Duration
	Fence      uint64
}

// Violation returns an error unless the tokens are unique and non-zero and every
// grant whose Acquire started after another's returned has a greater token (grants
// whose calls overlapped may be in either order).
func Violation(grants []Grant) error {
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
