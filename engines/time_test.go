package engines_test

import (
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// TestTimeGoesBackwards is the regression test for golang/go issue 71360
// ("x/time/rate: Rate limit can be exceeded 5000x under high lock contention
// due to bug in advance"): x/time/rate rewinds its "last" time when handed an
// earlier now, so alternating stale and fresh timestamps mints tokens. Here
// every engine reads a stale now as its newest recorded time, so however now
// jumps around, admissions over the span stay within the algorithm's
// envelope.
func TestTimeGoesBackwards(t *testing.T) {
	const limit, window = 5, 500 * ms
	tests := []struct {
		l     engines.Limiter
		bound func(span int64) int64
	}{
		{must(engines.NewFWC(limit, window)), func(span int64) int64 { return limit * (span/window + 2) }},
		{must(engines.NewSWL(limit, window)), func(span int64) int64 { return limit * (span/window + 1) }},
		{must(engines.NewSWC(limit, window, 5)), func(span int64) int64 { return limit * (span/window + 2) }},
		{must(engines.NewTB(limit, 1, 100*ms)), func(span int64) int64 { return limit + span/(100*ms) }},
		{must(engines.NewLB(limit-1, 1, 100*ms)), func(span int64) int64 { return limit + span/(100*ms) }},
	}
	for _, tt := range tests {
		var state []byte
		var allowed int64
		minNow, maxNow := int64(math.MaxInt64), int64(math.MinInt64)
		// The fresh clock moves 10 ms per round; every other call comes from
		// a goroutine still holding a timestamp 1 s old, as under contention.
		for i := range int64(2000) {
			now := t0 + i*5*ms
			if i%2 == 1 {
				now -= s
			}
			minNow, maxNow = min(minNow, now), max(maxNow, now)
			res, err := tt.l.Check(state, now, 1)
			if err != nil {
				t.Fatalf("%v call %d: %v", tt.l.Kind(), i, err)
			}
			if res.Limited {
				continue
			}
			if state, _, err = tt.l.Commit(state, now, 1); err != nil {
				t.Fatalf("%v call %d: %v", tt.l.Kind(), i, err)
			}
			allowed++
		}
		if bound := tt.bound(maxNow - minNow); allowed > bound || allowed == 0 {
			t.Errorf("%v: allowed %d units over %d ms, want 1..%d", tt.l.Kind(), allowed, (maxNow-minNow)/ms, bound)
		}
	}
}

// fullAt is exact: from then on the state answers as a missing key, and 1 ns
// earlier it still had 1 ns to go.
func TestFullAt(t *testing.T) {
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(4, 10*s)),
		must(engines.NewSWL(4, 10*s)),
		must(engines.NewSWC(4, 10*s, 2)),
		must(engines.NewSWC(4, 10*s+1, 7)),
		must(engines.NewTB(4, 3, 10*s)),
		must(engines.NewLB(3, 3, 10*s)),
	} {
		var state []byte
		var fullAt int64
		for i, at := range []int64{0, 0, 3 * s, 7*s + 1, 13 * s} {
			next, f, err := l.Commit(state, t0+at, 1)
			if err != nil {
				t.Fatalf("%v commit %d: %v", l.Kind(), i, err)
			}
			state, fullAt = next, f
		}
		res, err := l.Check(state, fullAt-1, 0)
		if err != nil || res.ResetAfter != 1 {
			t.Errorf("%v: 1 ns before fullAt: got %+v, %v; want ResetAfter 1", l.Kind(), res, err)
		}
		for _, at := range []int64{fullAt, fullAt + 1, fullAt + 10*s, fullAt + 1000*s} {
			for _, qty := range []int64{0, 1, 4, 5} {
				got, err := l.Check(state, at, qty)
				want, _ := l.Check(nil, at, qty)
				if err != nil || got != want {
					t.Errorf("%v at fullAt%+d, qty %d: got %+v, %v; a missing key gives %+v", l.Kind(), at-fullAt, qty, got, err, want)
				}
			}
		}
	}
}
