package harness

import (
	"fmt"
	"io"
	"time"

	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

// Throughput is what the throughput parts of bench/crdt and bench/raft
// measure: redis-benchmark's figures for each setup (of type S) at each
// pipeline depth, one per measured run, and how they were measured.
type Throughput[S comparable] struct {
	Pipelines []int
	Runs      int
	Seconds   float64       // about how long a measured run lasts
	Clients   []int         // the spread setup's clients per node
	Rest      time.Duration // CPU per second the servers use at rest, together
	samples   map[depthSetup[S]]redisbench.Series
}

type depthSetup[S comparable] struct {
	pipeline int
	setup    S
}

// Add records one measured run of setup s at pipeline depth pl.
func (t *Throughput[S]) Add(pl int, s S, f redisbench.Figures) {
	if t.samples == nil {
		t.samples = map[depthSetup[S]]redisbench.Series{}
	}
	k := depthSetup[S]{pl, s}
	t.samples[k] = append(t.samples[k], f)
}

// Series are the runs of setup s at depth pl, in run order.
func (t *Throughput[S]) Series(pl int, s S) redisbench.Series {
	return t.samples[depthSetup[S]{pl, s}]
}

// Ratio is a line of a ratio table: the rps of setup Num over those of
// setup Den, paired run by run (see PairedRatio), at each pipeline depth.
type Ratio[S comparable] struct {
	Label    string
	Num, Den S
	Bar      float64 // the least the ratio should be; 0 for no bar
	BarAt    int     // the depth the bar holds at; 0 for every depth
}

// Applies says whether q's bar holds at depth pl.
func (q Ratio[S]) Applies(pl int) bool { return q.Bar > 0 && (q.BarAt == 0 || q.BarAt == pl) }

// WriteRatios writes a ratio table of the runs: its head (RatioHeader),
// then a row per ratio with, at each depth, the paired ratio as cell
// formats it, then each run's ratios, then the bar.
func (t *Throughput[S]) WriteRatios(w io.Writer, ratios []Ratio[S], cell func(q Ratio[S], pl int, v float64) string) {
	RatioHeader(w, t.Pipelines)
	for _, q := range ratios {
		fmt.Fprintf(w, "| %s |", q.Label)
		for _, pl := range t.Pipelines {
			fmt.Fprintf(w, " %s |", cell(q, pl, PairedRatio(t.Series(pl, q.Num).RPS(), t.Series(pl, q.Den).RPS())))
		}
		for _, pl := range t.Pipelines {
			fmt.Fprintf(w, " %s |", RunsCell(Ratios(t.Series(pl, q.Num).RPS(), t.Series(pl, q.Den).RPS())))
		}
		switch {
		case q.Bar > 0 && q.BarAt > 0:
			fmt.Fprintf(w, " ≥ %g at P=%d |\n", q.Bar, q.BarAt)
		case q.Bar > 0:
			fmt.Fprintf(w, " ≥ %g |\n", q.Bar)
		default:
			fmt.Fprintf(w, " - |\n")
		}
	}
}
