package harness

import (
	"slices"
	"testing"

	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

func TestThroughput(t *testing.T) {
	var res Throughput[string]
	res.Add(1, "single", redisbench.Figures{RPS: 10})
	res.Add(16, "single", redisbench.Figures{RPS: 30})
	res.Add(1, "single", redisbench.Figures{RPS: 20})
	if got := res.Series(1, "single").RPS(); !slices.Equal(got, []float64{10, 20}) {
		t.Errorf("Series(1, single) = %v, want the runs at P=1 in order", got)
	}
	if got := res.Series(1, "mesh"); got != nil {
		t.Errorf("Series of a setup never added = %v", got)
	}
}
