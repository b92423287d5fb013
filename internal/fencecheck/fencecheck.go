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
// clock, the fencing token it got, and the owner it was acquired for (redlock.WithOwner;
// "" for a lock without owner).
type Grant struct {
	Start, End time.Duration
	Fence      uint64
	Owner      string
}

// Violation returns an error unless the tokens are non-zero, every grant whose Acquire
// started after another's returned has a greater token (grants whose calls overlapped
// may be in either order), and no two grants share a token, with one exception: the
// holds of one owner share their lease's token, so grants of the same owner may repeat
// the token of that owner's latest grant. A token of another owner's grant, or of a
// lock without owner, in between (started after the first returned, returned before
// the second started) is greater, and the repeat is then out of order.
func Violation(grants []Grant) error {
	owners := make(map[uint64]string, len(grants)) // token → the owner of its grants
	for _, g := range grants {
		prev, seen := owners[g.Fence]
		if g.Fence == 0 || (seen && (g.Owner == "" || prev != g.Owner)) {
			return fmt.Errorf("fencing token %d is zero or duplicated", g.Fence)
		}
		owners[g.Fence] = g.Owner
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
		if b.Fence < highest || (b.Fence == highest && b.Owner == "") {
			return fmt.Errorf("token %d granted after token %d had been: not increasing in real time", b.Fence, highest)
		}
	}
	return nil
}
