package doccheck

import (
	"strings"
	"testing"
)

// maxBenchmarksLines is the most lines BENCHMARKS.md may hold: the
// current figures only; earlier ones stay in git.
const maxBenchmarksLines = 300

func TestBENCHMARKSSize(t *testing.T) {
	s := readFile(t, "BENCHMARKS.md")
	if n := strings.Count(s, "\n"); n > maxBenchmarksLines {
		t.Errorf("BENCHMARKS.md holds %d lines, at most %d: keep the current figures, history stays in git", n, maxBenchmarksLines)
	}
}
