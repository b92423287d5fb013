package safety

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Markdown renders results as a table: one row per scenario, with what was expected,
// what the checker measured, and whether the two agree.
func Markdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| mode | fault | expected | grants | overlaps / 1,000 grants (longest) | lost updates | stale writes accepted / refused | acquire failures (unavailable / not acquired) | acquire p50 / p99 | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, res := range results {
		s, r := res.Scenario, res.Report
		if r == nil {
			r = &Report{}
		}
		verdict := "as expected"
		if res.Problem != "" {
			verdict = "**NOT as expected**: " + res.Problem
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %.1f (%s) | %d | %d / %d | %d / %d | %s / %s | %s |\n",
			s.Mode, s.Name, s.Expect, r.Grants, r.OverlapsPer1000(), ms(r.LongestOverlap),
			r.LostUpdates, r.StaleAccepted, r.StaleRefused, r.Unavailable, r.NotAcquired,
			ms(r.AcquireP50), ms(r.AcquireP99), verdict)
	}
	return b.String()
}

// ms formats d in milliseconds with two decimals ("0" for zero).
func ms(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// jsonResult is the JSON form of a Result.
type jsonResult struct {
	Mode            string  `json:"mode"`
	Fault           string  `json:"fault"`
	Expected        string  `json:"expected"`
	Why             string  `json:"why"`
	AsExpected      bool    `json:"as_expected"`
	Problem         string  `json:"problem,omitempty"`
	DurationMS      float64 `json:"duration_ms"`
	Grants          int     `json:"grants"`
	GrantsPerSecond float64 `json:"grants_per_second"`
	Overlaps        int     `json:"overlaps"`
	OverlapsPer1000 float64 `json:"overlaps_per_1000_grants"`
	LongestOverlap  float64 `json:"longest_overlap_ms"`
	LostUpdates     int     `json:"lost_updates"`
	StaleAccepted   int     `json:"stale_writes_accepted"`
	StaleRefused    int     `json:"stale_writes_refused"`
	Unavailable     int     `json:"acquire_unavailable"`
	NotAcquired     int     `json:"acquire_not_acquired"`
	OtherErrors     int     `json:"acquire_other_errors"`
	ReleaseLost     int     `json:"release_lock_lost"`
	AcquireP50      float64 `json:"acquire_p50_ms"`
	AcquireP99      float64 `json:"acquire_p99_ms"`
	Reacquire       float64 `json:"reacquire_after_crash_ms,omitempty"`
	FenceViolation  string  `json:"fence_violation,omitempty"`
}

// JSON renders results as an indented JSON array, one object per scenario.
func JSON(results []Result) ([]byte, error) {
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := make([]jsonResult, 0, len(results))
	for _, res := range results {
		s, r := res.Scenario, res.Report
		if r == nil {
			r = &Report{}
		}
		out = append(out, jsonResult{
			Mode: string(s.Mode), Fault: s.Name, Expected: s.Expect.String(), Why: s.Why,
			AsExpected: res.Problem == "", Problem: res.Problem,
			DurationMS: msf(r.Duration), Grants: r.Grants, GrantsPerSecond: r.GrantsPerSecond(),
			Overlaps: r.Overlaps, OverlapsPer1000: r.OverlapsPer1000(), LongestOverlap: msf(r.LongestOverlap),
			LostUpdates: r.LostUpdates, StaleAccepted: r.StaleAccepted, StaleRefused: r.StaleRefused,
			Unavailable: r.Unavailable, NotAcquired: r.NotAcquired, OtherErrors: r.OtherErrors,
			ReleaseLost: r.ReleaseLost, AcquireP50: msf(r.AcquireP50), AcquireP99: msf(r.AcquireP99),
			Reacquire: msf(r.Reacquire), FenceViolation: r.FenceViolation,
		})
	}
	return json.MarshalIndent(out, "", "  ")
}
