package mstate

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

const (
	ms = 1_000_000 // ns
	s  = 1_000 * ms
	t0 = 1_700_000_000 * s
)

// single is a single-node limiter to compare with: engines.Apply, or
// gcra.Decide with the TAT as its state (8 bytes; nil is a missing key).
type single func(state []byte, now, qty int64) (res engines.Result, next []byte, fullAt int64, write bool, err error)

// pair is a limiter in both forms, and the time scale of its decisions.
type pair struct {
	single single
	merged Limiter
	scale  int64
}

func engine(l engines.Limiter) single {
	return func(state []byte, now, qty int64) (engines.Result, []byte, int64, bool, error) {
		res, next, fullAt, write, err := engines.Apply(l, bytes.Clone(state), now, qty)
		return res, next, fullAt, write, err
	}
}

func mergeable(l engines.Limiter, skew int64) Limiter {
	m, err := New(l, skew)
	if err != nil {
		panic(err)
	}
	return m
}

func mustLimiter(l engines.Limiter, err error) engines.Limiter {
	if err != nil {
		panic(err)
	}
	return l
}

// redisCell is gcra.Decide as CL.THROTTLE runs it: an admission stores the
// new TAT, which is also when the key is full.
func redisCell(p gcra.Params) single {
	return func(state []byte, now, qty int64) (engines.Result, []byte, int64, bool, error) {
		var tat int64
		if len(state) == 8 {
			tat = int64(binary.LittleEndian.Uint64(state))
		}
		newTAT, _, r, err := gcra.Decide(tat, p, now, qty)
		res := engines.Result{Limited: r.Limited, Limit: r.Limit, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
		if err != nil || r.Limited || qty == 0 {
			return res, state, 0, false, err
		}
		return res, binary.LittleEndian.AppendUint64(nil, uint64(newTAT)), newTAT, true, nil
	}
}

// oneWriterCases draw random parameters per algorithm. change says whether a
// run may switch parameters on a live key and stay exact: the window engines
// keep one more count (SWC) or entries for a skew (SWL) than the single-node
// engine does, which only shows when n or the window grows.
//
// GCRA runs from 1970 on: redis-cell reads a missing key as TAT 0, which is
// a full bucket only from then.
var oneWriterCases = []struct {
	kind           Kind
	change, before bool
	draw           func(r *rand.Rand, change bool) pair
}{
	{GCRA, true, false, func(r *rand.Rand, _ bool) pair {
		p, err := gcra.NewParams(r.Int64N(20), 1+r.Int64N(1000), 1+r.Int64N(60))
		if err != nil {
			panic(err)
		}
		m, _ := NewGCRA(p)
		return pair{redisCell(p), m, p.Interval}
	}},
	{TB, true, true, func(r *rand.Rand, _ bool) pair {
		c, k, per := 1+r.Int64N(20), 1+r.Int64N(10), 1+r.Int64N(3*s)
		l := mustLimiter(engines.NewTB(c, k, per))
		return pair{engine(l), mergeable(l, r.Int64N(s)), max(per/k, 1)}
	}},
	{LB, true, true, func(r *rand.Rand, _ bool) pair {
		c, k, per := 1+r.Int64N(20), 1+r.Int64N(10), 1+r.Int64N(3*s)
		l := mustLimiter(engines.NewLB(c, k, per))
		return pair{engine(l), mergeable(l, r.Int64N(s)), max(per/k, 1)}
	}},
	{FWC, true, true, func(r *rand.Rand, _ bool) pair {
		limit, window := 1+r.Int64N(20), 1+r.Int64N(10*s)
		l := mustLimiter(engines.NewFWC(limit, window))
		return pair{engine(l), mergeable(l, r.Int64N(s)), max(window/limit, 1)}
	}},
	{SWC, true, true, func(r *rand.Rand, change bool) pair {
		n := 2 + r.Int64N(engines.MaxSubwindows-1)
		if change {
			n = 4 // the same n all run long
		}
		limit, window := 1+r.Int64N(30), n-1+r.Int64N(10*s)
		l := mustLimiter(engines.NewSWC(limit, window, n))
		return pair{engine(l), mergeable(l, r.Int64N(s)), max(window/limit, 1)}
	}},
	{SWL, true, true, func(r *rand.Rand, change bool) pair {
		limit, window := 1+r.Int64N(30), 1+r.Int64N(10*s)
		skew := r.Int64N(s)
		if change {
			skew = 0 // entries kept for the skew would count under a longer window
		}
		l := mustLimiter(engines.NewSWL(limit, window))
		return pair{engine(l), mergeable(l, skew), max(window/limit, 1)}
	}},
}

// TestOneWriter is the long differential run: one writer's mergeable state
// answers exactly as the single-node limiter, step by step, on random
// timelines with bursts, peeks, quantities above the limit, stale and
// repeated instants, times before 1970, changes of parameters, keys that
// expire, and folds at random bounds (the cut may land on the writer's
// newest stamp, which its next decision can fall back onto).
func TestOneWriter(t *testing.T) {
	rng := newRand(t)
	runs, steps := 40, 1500
	if testing.Short() {
		runs = 5
	}
	for _, tc := range oneWriterCases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			for run := range runs {
				change := tc.change && run%2 == 1
				expire := run%4 >= 2
				oneWriterRun(t, rng, tc.draw, change, expire, tc.before, steps, fmt.Sprintf("run %d (change %v, expire %v)", run, change, expire))
			}
		})
	}
}

func oneWriterRun(t *testing.T, rng *rand.Rand, draw func(*rand.Rand, bool) pair, change, expire, before1970 bool, steps int, name string) {
	t.Helper()
	self := Origin{Node: rng.Uint64(), Inc: rng.Uint64()}
	p := draw(rng, change)
	clock := t0 + rng.Int64N(1000*s)
	if before1970 && rng.IntN(4) == 0 {
		clock = -clock
	}
	var ref, merged []byte
	var fullAt, stamp int64 // of the last admission: the key's expiry, the writer's newest stamp
	for i := range steps {
		if change && rng.IntN(50) == 0 {
			p = draw(rng, change)
		}
		switch x := rng.IntN(20); {
		case x == 0:
			clock += 20 * p.scale * (1 + rng.Int64N(10))
		case x < 4:
			// the same instant
		default:
			clock += rng.Int64N(2 * p.scale)
		}
		now := clock
		if rng.IntN(8) == 0 {
			now -= rng.Int64N(3 * p.scale) // a stale timestamp
		}
		if expire && ref != nil && clock >= fullAt {
			ref, merged = nil, nil
		}
		qty := int64(1)
		switch x := rng.IntN(10); {
		case x == 0:
			qty = 0
		case x < 3:
			qty = rng.Int64N(25)
		}
		before := bytes.Clone(merged)
		res, next, f, write, err := p.single(ref, now, qty)
		if err != nil {
			t.Fatalf("%s step %d: single node: %v", name, i, err)
		}
		// Decide folds below the bound it is given: everything before the
		// writer's newest stamp is complete, and a little less.
		complete := NoBound
		if len(merged) > 0 && rng.IntN(2) == 0 {
			complete = stamp + 1 - rng.Int64N(2*p.scale)
		}
		mres, mnext, mf, mwrite, err := decide(p.merged, merged, self, now, qty, Bounds{Complete: complete, Unfolded: Fixed})
		if err != nil || mres != res || mwrite != write || (write && mf != f) {
			t.Fatalf("%s step %d (now %d, qty %d): mergeable got (%+v, write %v, fullAt %d, %v), single node (%+v, write %v, fullAt %d)",
				name, i, now, qty, mres, mwrite, mf, err, res, write, f)
		}
		if !bytes.Equal(merged, before) {
			t.Fatalf("%s step %d: Decide modified its input", name, i)
		}
		if !write {
			continue
		}
		if len(before) == 0 { // a new key: no stamp to keep to
			stamp = now
		}
		ref, merged, fullAt, stamp = next, mnext, f, max(now, stamp)
		if got, err := p.merged.FullAt(merged); err != nil || got != fullAt {
			t.Fatalf("%s step %d: FullAt got %d, %v; Decide said %d", name, i, got, err, fullAt)
		}
		if rng.IntN(3) == 0 {
			// Every event this writer will make is stamped at least at its
			// newest stamp, so anything up to one past it is complete.
			bound := stamp + 1 // everything, the newest stamp included
			if rng.IntN(2) == 0 {
				bound -= rng.Int64N(2 * p.scale)
			}
			folded, err := Fold(merged, bound)
			if err != nil {
				t.Fatalf("%s step %d: Fold: %v", name, i, err)
			}
			if got, err := p.merged.FullAt(folded); err != nil || got != fullAt {
				t.Fatalf("%s step %d: FullAt after a fold got %d, %v; want %d", name, i, got, err, fullAt)
			}
			merged = folded
		}
	}
}
