package harness

import (
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
