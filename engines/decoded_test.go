package engines_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// decoded decides on state through the field-wise entry points, reading the
// fields at the offsets of the layouts in doc.go.
func decoded(l engines.Limiter, state []byte, now, qty int64) (engines.Result, error) {
	field := func(off int) int64 { return int64(binary.LittleEndian.Uint64(state[off:])) }
	switch l.Kind() {
	case engines.TB, engines.LB:
		if len(state) == 0 {
			return engines.CheckDebt(l, now, 0, 0, now, qty)
		}
		return engines.CheckDebt(l, field(2), field(10), field(18), now, qty)
	case engines.FWC:
		if len(state) == 0 {
			return engines.CheckCounts(l, now, nil, now, qty)
		}
		return engines.CheckCounts(l, field(2), []int64{field(10)}, now, qty)
	case engines.SWC:
		if len(state) == 0 {
			return engines.CheckCounts(l, now, nil, now, qty)
		}
		var counts []int64
		for off := 10; off < len(state); off += 8 {
			counts = append(counts, field(off))
		}
		return engines.CheckCounts(l, field(2), counts, now, qty)
	}
	panic("no decoded form for " + l.Kind().String())
}

// CheckDebt and CheckCounts answer as Check on the same state, stale and
// fresh times alike, all along random timelines.
func TestDecoded_SameAsCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(5, 10*s)),
		must(engines.NewSWC(5, 10*s, 2)),
		must(engines.NewSWC(7, 10*s+1, 5)),
		must(engines.NewTB(5, 3, 10*s)),
		must(engines.NewLB(4, 3, 10*s)),
	} {
		var state []byte
		clock := int64(t0)
		for i := range 2000 {
			clock += rng.Int64N(3 * s)
			now := clock - rng.Int64N(4*s) // often stale
			qty := rng.Int64N(7)
			got, err := decoded(l, state, now, qty)
			want, next, _, write, werr := engines.Apply(l, bytes.Clone(state), now, qty)
			if err != nil || werr != nil || got != want {
				t.Fatalf("%v step %d: got %+v, %v; Check says %+v, %v", l.Kind(), i, got, err, want, werr)
			}
			if write {
				state = next
			}
		}
	}
}

// Unlike stored states, decoded counts may be all 0, but never negative.
func TestDecoded_Counts(t *testing.T) {
	for _, l := range []engines.Limiter{must(engines.NewFWC(5, s)), must(engines.NewSWC(5, s, 3))} {
		got, err := engines.CheckCounts(l, t0, []int64{0, 0, 0}, t0, 1)
		if want, _ := l.Check(nil, t0, 1); err != nil || got != want {
			t.Errorf("%v zero counts: got %+v, %v; a missing key gives %+v", l.Kind(), got, err, want)
		}
		if _, err := engines.CheckCounts(l, t0, []int64{-1, 0, 0}, t0, 1); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%v negative count: got %v, want ErrCorruptState", l.Kind(), err)
		}
	}
	swc := must(engines.NewSWC(5, s, 3))
	if _, err := engines.CheckCounts(swc, t0, []int64{math.MaxInt64, 1}, t0, 0); !errors.Is(err, engines.ErrCorruptState) {
		t.Errorf("counts whose sum overflows: got %v, want ErrCorruptState", err)
	}
	tb := must(engines.NewTB(5, 1, s))
	for _, l := range []engines.Limiter{tb, must(engines.NewSWL(5, s))} {
		if _, err := engines.CheckCounts(l, t0, nil, t0, 1); !errors.Is(err, engines.ErrWrongKind) {
			t.Errorf("CheckCounts on %v: got %v, want ErrWrongKind", l.Kind(), err)
		}
		if _, err := engines.Index(l, t0); !errors.Is(err, engines.ErrWrongKind) {
			t.Errorf("Index on %v: got %v, want ErrWrongKind", l.Kind(), err)
		}
	}
	if _, err := engines.CheckDebt(swc, t0, 0, 0, t0, 1); !errors.Is(err, engines.ErrWrongKind) {
		t.Errorf("CheckDebt on swc: got %v, want ErrWrongKind", err)
	}
	if _, err := engines.CheckDebt(tb, t0, 1, 0, t0, 1); !errors.Is(err, engines.ErrCorruptState) {
		t.Errorf("CheckDebt with unit 0: got %v, want ErrCorruptState", err)
	}
}

// Index is floor(t*(n-1)/window), also at the ends of int64.
func TestIndex(t *testing.T) {
	for _, tt := range []struct{ window, n int64 }{{10, 2}, {10, 4}, {59, 60}, {s, 7}, {math.MaxInt64 / 3, 60}} {
		var l engines.Limiter = must(engines.NewSWC(1, tt.window, tt.n))
		m := tt.n - 1
		if tt.n == 2 {
			l, m = must(engines.NewFWC(1, tt.window)), 1
		}
		for _, at := range []int64{math.MinInt64, math.MinInt64 + 1, -tt.window - 1, -1, 0, 1, tt.window - 1, tt.window, t0, math.MaxInt64} {
			want := new(big.Int).Mul(big.NewInt(at), big.NewInt(m))
			want.Div(want, big.NewInt(tt.window)) // Euclidean: the floor for a positive divisor
			if got, err := engines.Index(l, at); err != nil || got != want.Int64() {
				t.Errorf("window %d, n %d, t %d: got %d, %v; want %v", tt.window, tt.n, at, got, err, want)
			}
		}
	}
}

func TestParamsOf(t *testing.T) {
	for _, tt := range []struct {
		l    engines.Limiter
		want engines.Params
	}{
		{must(engines.NewFWC(3, s)), engines.Params{Limit: 3, Window: s}},
		{must(engines.NewSWL(3, s)), engines.Params{Limit: 3, Window: s}},
		{must(engines.NewSWC(3, s, 4)), engines.Params{Limit: 3, Window: s, Subwindows: 4}},
		{must(engines.NewTB(3, 2, s)), engines.Params{Limit: 3, Unit: s, Rate: 2}},
		{must(engines.NewLB(3, 2, s)), engines.Params{Limit: 4, Unit: s, Rate: 2}},
	} {
		if got := engines.ParamsOf(tt.l); got != tt.want {
			t.Errorf("%v: got %+v, want %+v", tt.l.Kind(), got, tt.want)
		}
	}
}
