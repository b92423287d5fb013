package xmlcheck

import "testing"

func TestWellFormed(t *testing.T) {
	if err := WellFormed(`<html><body><p>ok &amp; fine</p></body></html>`); err != nil {
		t.Fatalf("well-formed page rejected: %v", err)
	}
	for _, bad := range []string{`<html><body></html>`, `<html><p>a & b</p></html>`, `<html>`} {
		if WellFormed(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
