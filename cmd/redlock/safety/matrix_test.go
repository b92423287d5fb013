package safety

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	RunWorkerIfAsked() // the holder processes of the SIGSTOP scenarios are this binary
	goleak.VerifyTestMain(m)
}

// MatrixOutEnv names a directory: when set, TestMatrix writes the measured table there
// as safety-matrix.md and safety-matrix.json.
const MatrixOutEnv = "REDLOCK_MATRIX_OUT"

// TestMatrix runs every scenario and fails when a result differs from what the
// documentation claims, negative controls included (they must see the overlap).
func TestMatrix(t *testing.T) {
	var results []Result
	for _, s := range Scenarios() {
		t.Run(string(s.Mode)+"/"+s.Name, func(t *testing.T) {
			res := s.Run(t)
			results = append(results, res)
			if r := res.Report; r != nil {
				t.Logf("grants %d, overlaps %d (longest %v), lost updates %d, stale accepted %d, refused %d, unavailable %d",
					r.Grants, r.Overlaps, r.LongestOverlap, r.LostUpdates, r.StaleAccepted, r.StaleRefused, r.Unavailable)
			}
			if res.Problem != "" {
				t.Fatalf("want %v: %s", s.Expect, res.Problem)
			}
		})
	}
	if dir := os.Getenv(MatrixOutEnv); dir != "" {
		js, err := JSON(results)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "safety-matrix.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "safety-matrix.md"), []byte(Markdown(results)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
