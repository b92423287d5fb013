package fencecheck

import (
	"testing"
	"time"
)

func TestViolationDetects(t *testing.T) {
	at := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ok := []Grant{{at(0), at(1), 1, ""}, {at(2), at(3), 2, ""}, {at(2), at(4), 3, ""}} // overlapping calls may be in any order
	if err := Violation(ok); err != nil {
		t.Fatalf("valid history rejected: %v", err)
	}
	for name, bad := range map[string][]Grant{
		"duplicate":  {{at(0), at(1), 1, ""}, {at(2), at(3), 1, ""}},
		"regression": {{at(0), at(1), 5, ""}, {at(2), at(3), 4, ""}},
	} {
		if Violation(bad) == nil {
			t.Errorf("%s not detected", name)
		}
	}
}

// TestViolationOwners: the holds of one owner share a token, in any order and after
// each other; a token shared by two owners, by an owner and a lock without owner, or
// repeated by an owner after another holder's greater token, is a violation.
func TestViolationOwners(t *testing.T) {
	at := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ok := []Grant{
		{at(0), at(1), 1, "a"}, {at(2), at(3), 1, "a"}, {at(2), at(4), 1, "a"}, // holds of a's lease
		{at(5), at(6), 2, ""}, {at(7), at(8), 3, "b"}, {at(9), at(10), 3, "b"},
	}
	if err := Violation(ok); err != nil {
		t.Fatalf("valid history rejected: %v", err)
	}
	for name, bad := range map[string][]Grant{
		"two owners":             {{at(0), at(1), 1, "a"}, {at(2), at(3), 1, "b"}},
		"owner and plain":        {{at(0), at(1), 1, "a"}, {at(2), at(3), 1, ""}},
		"plain and owner":        {{at(0), at(1), 1, ""}, {at(2), at(3), 1, "a"}},
		"repeat after another":   {{at(0), at(1), 1, "a"}, {at(2), at(3), 2, "b"}, {at(4), at(5), 1, "a"}},
		"owner regression":       {{at(0), at(1), 5, "a"}, {at(2), at(3), 4, "a"}},
		"overlapping two owners": {{at(0), at(3), 1, "a"}, {at(1), at(2), 1, "b"}},
	} {
		if Violation(bad) == nil {
			t.Errorf("%s not detected", name)
		}
	}
}
