package harness

import (
	"fmt"
	"slices"
	"strings"
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

func TestWriteRatios(t *testing.T) {
	res := Throughput[string]{Pipelines: []int{1, 16}}
	for _, run := range []struct {
		a, b float64
	}{{10, 20}, {30, 40}} {
		for _, pl := range res.Pipelines {
			res.Add(pl, "a", redisbench.Figures{RPS: run.a * float64(pl)})
			res.Add(pl, "b", redisbench.Figures{RPS: run.b})
		}
	}
	var b strings.Builder
	res.WriteRatios(&b, []Ratio[string]{
		{Label: "a/b", Num: "a", Den: "b", Bar: 0.5, BarAt: 16},
		{Label: "b/a", Num: "b", Den: "a", Bar: 0.1},
		{Label: "a/a", Num: "a", Den: "a"},
	}, func(q Ratio[string], pl int, v float64) string {
		return fmt.Sprintf("%.3f %v", v, q.Applies(pl))
	})
	want := ratioHeader([]int{1, 16}) +
		"| a/b | 0.625 false | 10.000 true | 0.50 0.75 | 8.00 12.00 | ≥ 0.5 at P=16 |\n" +
		"| b/a | 1.667 true | 0.104 true | 2.00 1.33 | 0.12 0.08 | ≥ 0.1 |\n" +
		"| a/a | 1.000 false | 1.000 false | 1.00 1.00 | 1.00 1.00 | - |\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
