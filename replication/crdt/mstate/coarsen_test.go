package mstate

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// alone are the bounds of a writer whose events nobody else folds, in a
// partition: it folds nothing and may coarsen all of its own events.
var alone = Bounds{Complete: NoBound, Unfolded: NoBound}

// ownCost sums o's costs in a GCRA log (its base is 0: nothing folded).
func ownCost(t *testing.T, state []byte, o Origin) (cost int64, events int) {
	t.Helper()
	s, err := decodeDebt(state, GCRA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.base != 0 {
		t.Fatalf("base %d: the test folds nothing", s.base)
	}
	for _, e := range s.events {
		if e.o == o {
			cost += e.cost
			events++
		}
	}
	return cost, events
}

// A key decided 10,000 times a second for two seconds, never folded (a
// partition), keeps at most capEvents events, not 20,000. Its log
// still holds every admission's cost; moved later, the cost can only make
// the debt last longer than the exact writer's, by at most a quarter of
// the time elapsed (the drain lost before its first event, here). A peer's
// copy of its fine events joins in without counting them twice.
func TestCoarsen_BusyKey(t *testing.T) {
	p := gcra.Params{Burst: 1_000_000, Interval: 200_000} // 5,000/s: always in debt at 10,000/s
	g, err := NewGCRA(p)
	if err != nil {
		t.Fatal(err)
	}
	a := Origin{Node: 1, Inc: 1}
	var coarse, early []byte
	var exact int64                 // the single node's TAT
	const n, step = 20_000, 100_000 // every 100 us
	most := 0
	for i := range n {
		now := t0 + int64(i)*step
		res, next, _, _, err := decide(g, coarse, a, now, 1, alone)
		if err != nil {
			t.Fatal(err)
		}
		var want gcra.Result
		if exact, _, want, err = gcra.Decide(exact, p, now, 1); err != nil {
			t.Fatal(err)
		}
		if extra := res.ResetAfter - want.ResetAfter; res.Limited != want.Limited || extra < 0 || extra > int64(i)*step/ageDivision {
			t.Fatalf("decision %d: coarsened %+v, exact %+v", i, res, want)
		}
		coarse = next
		if s, _ := decodeDebt(coarse, GCRA, nil); s.events[len(s.events)-1] != (event{t: now, o: a, d: nsDrain, cost: 200_000}) {
			// A quantum reaching the decision would move the writer's
			// later decisions to its end (debtView.at).
			t.Fatalf("decision %d: newest event %+v, want the admission at %d as it is", i, s.events[len(s.events)-1], now)
		}
		_, events := ownCost(t, coarse, a)
		most = max(most, events)
		if i == n/2 {
			early = coarse // what a peer got halfway through, before later coarsening
		}
	}
	if most > capEvents {
		t.Errorf("the log held up to %d events, want at most %d", most, capEvents)
	}
	if cost, _ := ownCost(t, coarse, a); cost != n*200_000 {
		t.Errorf("coarsened log's cost %d, want every admission's, %d", cost, n*200_000)
	}
	if tat, _ := TAT(coarse); tat < exact || tat-exact > n*step/ageDivision {
		t.Errorf("TAT %d, exact %d", tat, exact)
	}
	for _, pair := range [][2][]byte{{early, coarse}, {coarse, early}, {coarse, coarse}} {
		j, err := Merge(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(j, coarse) {
			t.Errorf("a fine copy joined into the coarsened log changed it")
		}
	}
}

// Below its rate the key's debt drains between calls: a coarsened log may
// then look fuller than the exact one, never emptier (nothing admitted is
// lost), and only its old events are merged.
func TestCoarsen_Conservative(t *testing.T) {
	p := gcra.Params{Burst: 3, Interval: 400_000} // 2,500/s
	g, _ := NewGCRA(p)
	a := Origin{Node: 1, Inc: 1}
	var coarse []byte
	var exact int64 // the single node's TAT
	for i := range 5_000 {
		now := t0 + int64(i)*500_000 + int64(i%7)*30_000 // about 2,000/s, jittered
		res, next, _, write, err := decide(g, coarse, a, now, 1, alone)
		if err != nil {
			t.Fatal(err)
		}
		var want gcra.Result
		if exact, _, want, err = gcra.Decide(exact, p, now, 1); err != nil {
			t.Fatal(err)
		}
		if !res.Limited && want.Limited {
			t.Fatalf("decision %d: coarsened allowed what the exact writer limited", i)
		}
		if res.Remaining > want.Remaining {
			t.Fatalf("decision %d: coarsened remaining %d > exact %d", i, res.Remaining, want.Remaining)
		}
		if write {
			coarse = next
		}
	}
	if tat, _ := TAT(coarse); tat < exact {
		t.Errorf("coarsened TAT %d before the exact %d: debt lost", tat, exact)
	}
}

// Only quanta at or after Unfolded are merged, and none that reaches the
// decision instant.
func TestCoarsen_Bounds(t *testing.T) {
	g, _ := NewGCRA(gcra.Params{Burst: 1_000_000, Interval: 1000})
	a, b := Origin{Node: 1, Inc: 1}, Origin{Node: 2, Inc: 1}
	var state []byte
	last := int64(0)
	unfolded := int64(t0 + 50*ms)
	for i := range 1000 {
		last = t0 + int64(i)*100_000
		_, next, _, _, err := decide(g, state, a, last, 1, Bounds{Complete: NoBound, Unfolded: unfolded})
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // another writer's events are never merged
			if _, next, _, _, err = decide(g, next, b, last, 1, Exact); err != nil {
				t.Fatal(err)
			}
		}
		state = next
	}
	s, _ := decodeDebt(state, GCRA, nil)
	coarse, others := 0, 0
	for _, e := range s.events {
		switch {
		case e.o == b:
			others++
			if e.g != 0 {
				t.Errorf("b's event at %d merged", e.t)
			}
		case e.g > 0:
			coarse++
			if start := e.t + 1 - e.g; start < unfolded || e.t >= last {
				t.Errorf("a coarse event over [%d, %d]: before Unfolded %d or not before the last decision %d", start, e.t, unfolded, last)
			}
		}
	}
	if coarse == 0 || others != 100 {
		t.Errorf("%d coarse events of a, %d events of b; want some and 100", coarse, others)
	}
	if _, _, _, _, err := decide(g, state, a, last+1, 1, Exact); err != nil {
		t.Fatal(err)
	}
}

// A coarse event's encoding: the origin index's top bit, then log2 of its
// quantum; decoders take only canonical ones.
func TestCoarsen_Encoding(t *testing.T) {
	a := Origin{Node: 1, Inc: 1}
	q := int64(1) << 20
	base := t0 - t0%q
	coarseAt := base + q - 1
	s := debtLog{kind: GCRA, cut: math.MinInt64, events: []event{{t: coarseAt, o: a, d: nsDrain, cost: 5, g: q}}}
	good, err := s.encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeDebt(good, GCRA, nil)
	if err != nil || !slices.Equal(back.events, s.events) {
		t.Fatalf("round trip: %+v, %v", back.events, err)
	}
	for name, events := range map[string][]event{
		"not aligned":    {{t: coarseAt - 1, o: a, d: nsDrain, cost: 5, g: q}},
		"covered, fine":  {{t: base + 3, o: a, d: nsDrain, cost: 1}, {t: coarseAt, o: a, d: nsDrain, cost: 5, g: q}},
		"covered, finer": {{t: base + q/2 - 1, o: a, d: nsDrain, cost: 1, g: q / 2}, {t: coarseAt, o: a, d: nsDrain, cost: 5, g: q}},
	} {
		bad, err := (&debtLog{kind: GCRA, cut: math.MinInt64, events: events}).encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeDebt(bad, GCRA, nil); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: decoded (%v), want ErrCorruptState", name, err)
		}
	}
	// Another origin's events inside the quantum are not covered.
	other := []event{{t: base + 3, o: Origin{Node: 2}, d: nsDrain, cost: 1}, {t: coarseAt, o: a, d: nsDrain, cost: 5, g: q}}
	b, _ := (&debtLog{kind: GCRA, cut: math.MinInt64, events: other}).encode()
	if _, err := decodeDebt(b, GCRA, nil); err != nil {
		t.Errorf("another origin's event inside a quantum: %v", err)
	}
	// exponent 0 and 63 are not quanta
	for _, exp := range []byte{0, 63} {
		b := slices.Clone(good)
		b[len(b)-1] = exp
		if _, err := decodeDebt(b, GCRA, nil); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("exponent %d: %v, want ErrCorruptState", exp, err)
		}
	}
}

// The fuzz targets' busy samples do hold coarse events.
func TestBusySamples(t *testing.T) {
	fine, coarse := busySamples(t)
	s, err := decodeDebt(coarse, GCRA, nil)
	if err != nil || !slices.ContainsFunc(s.events, func(e event) bool { return e.g > 0 }) {
		t.Errorf("busy sample %x: %v, no coarse event", coarse, err)
	}
	if m, err := Merge(fine, coarse); err != nil || !bytes.Equal(m, coarse) {
		t.Errorf("the earlier log does not join into the coarsened one: %v", err)
	}
}
