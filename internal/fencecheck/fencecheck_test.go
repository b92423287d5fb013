package fencecheck

import (
	"testing"
	"time"
)

func TestViolationDetects(t *testing.T) {
	at := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ok := []Grant{{at(0), at(1), 1}, {at(2), at(3), 2}, {at(2), at(4), 3}} // overlapping calls may be in any order
	if err := Violation(ok); err != nil {
		t.Fatalf("valid history rejected: %v", err)
	}
	for name, bad := range map[string][]Grant{
		"duplicate":  {{at(0), at(1), 1}, {at(2), at(3), 1}},
		"regression": {{at(0), at(1), 5}, {at(2), at(3), 4}},
	} {
		if Violation(bad) == nil {
			t.Errorf("%s not detected", name)
		}
	}
}
