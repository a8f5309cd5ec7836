package harness

import (
	"slices"
	"testing"
)

func TestSplits(t *testing.T) {
	if got := SplitEven(50, 3); !slices.Equal(got, []int{17, 17, 16}) {
		t.Errorf("SplitEven(50, 3) = %v", got)
	}
	if got := SplitEven(6, 3); !slices.Equal(got, []int{2, 2, 2}) {
		t.Errorf("SplitEven(6, 3) = %v", got)
	}
	if got := SplitByWeight(20000, []int{17, 17, 16}); !slices.Equal(got, []int{6800, 6800, 6400}) {
		t.Errorf("SplitByWeight = %v", got)
	}
	// Each node's run lasts about 5 s at its own rate; a slow one still
	// gets 10 requests per client.
	if got := SizeRuns([]float64{1000, 2000.5, 1}, 5, []int{17, 17, 16}); !slices.Equal(got, []int{5000, 10002, 160}) {
		t.Errorf("SizeRuns = %v", got)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for p, want := range map[float64]int64{50: 50, 99: 100, 90: 90, 91: 100, 10: 10, 1: 10, 100: 100} {
		if got := Percentile(sorted, p); got != want {
			t.Errorf("Percentile(%v) = %d, want %d", p, got, want)
		}
	}
	if got := Percentile([]int64{7}, 99); got != 7 {
		t.Errorf("Percentile of one value = %d", got)
	}
}

func TestLastLines(t *testing.T) {
	if got := LastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("LastLines = %q", got)
	}
	if got := LastLines("a", 5); got != "a" {
		t.Errorf("LastLines = %q", got)
	}
}
