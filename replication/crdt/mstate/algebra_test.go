package mstate

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// The engine algebra (crdt-design.md 6, test 1). A history is every part of
// one key that nodes made: its atoms, the smallest states a node could ship
// (one event, one entry, one version of a slot, one floor), each stamped.
// Replicas hold random parts of it, each complete below a random bound (it
// holds every atom stamped before the bound, and a debt log is folded below
// some point under it). The checks:
//
//   - Merge is commutative, associative and idempotent on the bytes;
//   - Fold(Merge(a, b), T) = Merge(Fold(a, T), Fold(b, T)) for T below both
//     bounds;
//   - the merge of every replica is the same bytes as the join of every atom
//     (folded as far as the replicas were), and decides exactly as one
//     single-node engine fed every admission in stamp order (the replay
//     oracle).
//
// Strings (str_algebra_test.go) have their own histories and mutants.
//
// Planted mutants (a merge that drops an element, a fold past completeness,
// TATs merged by max, counts summed, a floor taken from one side) run through
// the same checks, and each must be caught: the checks are not vacuous.

type atom struct {
	t     int64
	state []byte
}

type history struct {
	kind     Kind
	atoms    []atom
	lo, hi   int64 // the least and largest stamp
	foldable bool  // a debt log: replicas fold
	// oracle returns why a state holding every atom is not what the
	// single-node engine fed every admission says, or "".
	oracle func(merged []byte) string
}

// ops are the join and the fold under test.
type ops struct {
	name  string
	merge func(a, b []byte) ([]byte, error)
	fold  func(h *history, state []byte, complete int64) ([]byte, error)
}

var realOps = ops{
	name:  "real",
	merge: Merge,
	fold:  func(_ *history, state []byte, complete int64) ([]byte, error) { return Fold(state, complete) },
}

type replica struct {
	state    []byte
	complete int64 // it holds every atom stamped before
	folded   int64 // the bound it was folded at
}

// origins returns n distinct origins, some of them one node's incarnations.
func origins(rng *rand.Rand, n int) []Origin {
	var out []Origin
	for len(out) < n {
		o := Origin{Node: rng.Uint64N(4), Inc: rng.Uint64N(3)}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// versions returns the growing costs an entry of final cost c went through
// that a node may have shipped: sometimes a smaller one first.
func versions(rng *rand.Rand, c int64) []int64 {
	if c > 1 && rng.IntN(3) == 0 {
		return []int64{1 + rng.Int64N(c-1), c}
	}
	return []int64{c}
}

func (h *history) add(t int64, state []byte) {
	h.atoms = append(h.atoms, atom{t, state})
	h.lo, h.hi = min(h.lo, t), max(h.hi, t)
}

func newHistory(k Kind) *history {
	return &history{kind: k, lo: math.MaxInt64, hi: math.MinInt64, foldable: k == GCRA || k == TB || k == LB}
}

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// debtHistory: admissions by a few origins on a coarse time grid (so that
// instants repeat), under one drain or a few (a TB or LB key whose
// parameters changed), some at one instant under two drains.
func debtHistory(rng *rand.Rand, k Kind) *history {
	h := newHistory(k)
	os := origins(rng, 2+rng.IntN(3))
	interval := 1 + rng.Int64N(s) // GCRA's T
	drains := []drain{nsDrain}
	if k != GCRA {
		drains = nil
		for range 1 + rng.IntN(2)*rng.IntN(3) {
			drains = append(drains, drain{unit: 1 + rng.Int64N(s), rate: 1 + rng.Int64N(10)})
		}
	}
	grid, base := 1+rng.Int64N(100*ms), t0+rng.Int64N(1000*s)
	var final []event
	for range 3 + rng.IntN(40) {
		e := event{t: base + grid*rng.Int64N(30), o: os[rng.IntN(len(os))], d: drains[rng.IntN(len(drains))]}
		q := 1 + rng.Int64N(4)
		e.cost = q * e.d.unit
		if k == GCRA {
			e.cost = q * interval
		}
		i := slices.IndexFunc(final, func(f event) bool { return f.t == e.t && f.o == e.o })
		switch {
		case i < 0:
		case final[i].d != e.d:
			e.seg = final[i].seg + 1 // the origin's parameters changed at that instant
			if slices.ContainsFunc(final, func(f event) bool { return f.t == e.t && f.o == e.o && f.seg == e.seg }) {
				continue
			}
		default:
			continue
		}
		final = append(final, e)
	}
	slices.SortFunc(final, compareKey)
	for _, e := range final {
		for _, c := range versions(rng, e.cost) {
			v := e
			v.cost = c
			atom := debtLog{kind: k, cut: math.MinInt64, events: []event{v}}
			h.add(e.t, mustEncode(atom.encode()))
		}
	}
	h.oracle = debtOracle(rng, k, final, interval)
	return h
}

// debtOracle feeds every final event, in key order, to the single-node
// limiter with that event's parameters and a capacity no history fills, and
// compares its replies at later instants with the merged state's.
func debtOracle(rng *rand.Rand, k Kind, final []event, interval int64) func([]byte) string {
	last := final[len(final)-1]
	at := []int64{last.t, last.t + rng.Int64N(20*s)}
	if k == GCRA {
		p := gcra.Params{Burst: 1 << 20, Interval: interval}
		var tat int64
		for _, e := range final {
			tat, _, _, _ = gcra.Decide(tat, p, e.t, e.cost/interval)
		}
		m, _ := NewGCRA(p)
		return func(merged []byte) string {
			for _, r := range at {
				_, _, want, _ := gcra.Decide(tat, p, r, 0)
				got, _, _, _, err := decide(m, merged, Origin{Node: 99}, r, 0, Exact)
				if err != nil || got.ResetAfter != want.ResetAfter || got.Remaining != want.Remaining {
					return fmt.Sprintf("at %d: got %+v, %v; one engine fed everything says %+v", r, got, err, want)
				}
			}
			// redis-cell's TAT over the set: max over e of t_e + the costs from t_e on.
			var closed int64
			for _, e := range final {
				var sum int64
				for _, f := range final {
					if f.t >= e.t {
						sum += f.cost
					}
				}
				closed = max(closed, e.t+sum)
			}
			if full, err := m.FullAt(merged); err != nil || full != tat || tat != closed {
				return fmt.Sprintf("full at %d, %v; the engine's TAT is %d, the closed form's %d", full, err, tat, closed)
			}
			return ""
		}
	}
	limiter := func(d drain) engines.Limiter {
		if k == LB {
			return mustLimiter(engines.NewLB(1<<20, d.rate, d.unit))
		}
		return mustLimiter(engines.NewTB(1<<20, d.rate, d.unit))
	}
	adm := make([]admission, len(final))
	for i, e := range final {
		adm[i] = admission{limiter(e.d), e.t, e.cost / e.d.unit}
	}
	state, fullAt := feed(adm)
	l := limiter(last.d)
	m := mergeable(l, 0)
	return func(merged []byte) string {
		for _, r := range at {
			want, _ := l.Check(state, r, 0)
			got, _, _, _, err := decide(m, merged, Origin{Node: 99}, r, 0, Exact)
			if err != nil || got != want {
				return fmt.Sprintf("at %d: got %+v, %v; one engine fed everything says %+v", r, got, err, want)
			}
		}
		if full, err := m.FullAt(merged); err != nil || full != fullAt {
			return fmt.Sprintf("full at %d, %v; the engine says %d", full, err, fullAt)
		}
		return ""
	}
}

// swlHistory: entries by a few origins, and floors low enough that no
// decision after the last stamp counts what they drop.
func swlHistory(rng *rand.Rand) *history {
	h := newHistory(SWL)
	os := origins(rng, 2+rng.IntN(3))
	window, skew := 1+rng.Int64N(5*s), rng.Int64N(s)
	grid, base := 1+rng.Int64N(window/10+1), t0+rng.Int64N(1000*s)
	var final []entry
	for range 3 + rng.IntN(40) {
		e := entry{t: base + grid*rng.Int64N(60), o: os[rng.IntN(len(os))], q: 1 + rng.Int64N(4)}
		if !slices.ContainsFunc(final, func(f entry) bool { return compareEntry(e, f) == 0 }) {
			final = append(final, e)
		}
	}
	slices.SortFunc(final, compareEntry)
	for _, e := range final {
		for _, q := range versions(rng, e.q) {
			atom := swlLog{floor: math.MinInt64, entries: []entry{{e.t, e.o, q}}}
			h.add(e.t, mustEncode(atom.encode()))
		}
	}
	l := mustLimiter(engines.NewSWL(engines.MaxSWLLimit, window))
	adm := make([]admission, len(final))
	for i, e := range final {
		adm[i] = admission{l, e.t, e.q}
	}
	h.endWindows(rng, adm, skew, window, func(f int64) []byte { return mustEncode((&swlLog{floor: f}).encode()) })
	return h
}

// slotHistory: each origin's admissions in stamp order, and every version of
// its slot they went through, computed here from the admissions; floors as
// in swlHistory.
func slotHistory(rng *rand.Rand, k Kind) *history {
	h := newHistory(k)
	window, skew := 1+rng.Int64N(5*s), rng.Int64N(s)
	var l engines.Limiter
	read, span := 1, window
	if k == FWC {
		l = mustLimiter(engines.NewFWC(1<<40, window))
	} else {
		n := 2 + rng.Int64N(6)
		window = max(window, n-1)
		l = mustLimiter(engines.NewSWC(1<<40, window, n))
		read, span = int(n), 2*window
	}
	index := func(t int64) int64 { k, _ := engines.Index(l, t); return k }
	grid, base := 1+rng.Int64N(window/4+1), t0+rng.Int64N(1000*s)
	var all []admission
	for _, o := range origins(rng, 2+rng.IntN(3)) {
		var adm []admission
		for range rng.IntN(12) {
			adm = append(adm, admission{l, base + grid*rng.Int64N(40), 1 + rng.Int64N(4)})
		}
		slices.SortFunc(adm, func(a, b admission) int { return cmp.Compare(a.t, b.t) })
		for i, a := range adm {
			sl := slot{o: o, newest: a.t, counts: make([]int64, read+1)}
			for _, b := range adm[:i+1] {
				if rel := index(a.t) - index(b.t); rel <= int64(read) {
					sl.counts[rel] += b.q
				}
			}
			atom := slots{kind: k, floor: math.MinInt64, s: []slot{sl}}
			h.add(a.t, mustEncode(atom.encode()))
		}
		all = append(all, adm...)
	}
	if len(all) == 0 {
		return slotHistory(rng, k)
	}
	slices.SortFunc(all, func(a, b admission) int { return cmp.Compare(a.t, b.t) })
	h.endWindows(rng, all, skew, span, func(f int64) []byte { return mustEncode((&slots{kind: k, floor: f}).encode()) })
	return h
}

// admission is one admission to feed to the single-node limiter l.
type admission struct {
	l    engines.Limiter
	t, q int64
}

// feed commits every admission in order from no state: the single-node
// engine fed everything. It returns the state and when it is full.
func feed(adm []admission) (state []byte, fullAt int64) {
	for _, a := range adm {
		var err error
		if state, fullAt, err = a.l.Commit(state, a.t, a.q); err != nil {
			panic(err)
		}
	}
	return state, fullAt
}

// endWindows adds to a window history a few floors low enough that no
// decision after the last admission counts what they retire (each as made
// by a decision span+skew after it), and the oracle: the engine fed every
// admission, in stamp order.
func (h *history) endWindows(rng *rand.Rand, adm []admission, skew, span int64, floor func(f int64) []byte) {
	last, l := adm[len(adm)-1].t, adm[0].l
	window := engines.ParamsOf(l).Window
	for range rng.IntN(3) {
		f := last - span - skew - rng.Int64N(window)
		h.add(f+span+skew, floor(f))
	}
	state, _ := feed(adm)
	m := mergeable(l, skew)
	at := []int64{last, last + rng.Int64N(window), last + rng.Int64N(3*window)}
	h.oracle = func(merged []byte) string {
		for _, r := range at {
			want, _ := l.Check(state, r, 0)
			got, _, _, _, err := decide(m, merged, Origin{Node: 99}, r, 0, Exact)
			if err != nil || got != want {
				return fmt.Sprintf("at %d: got %+v, %v; one engine fed everything says %+v", r, got, err, want)
			}
		}
		return ""
	}
}

// replicas makes 2-5 replicas of h with o.
func replicas(rng *rand.Rand, h *history, o ops) ([]replica, error) {
	reps := make([]replica, 2+rng.IntN(4))
	parts := make([][]int, len(reps))
	for r := range reps {
		reps[r].complete = h.lo + rng.Int64N(h.hi-h.lo+2)
	}
	for i, a := range h.atoms {
		owner := rng.IntN(len(reps)) // every atom reaches some replica
		for r := range reps {
			if a.t < reps[r].complete || r == owner || rng.IntN(2) == 0 {
				parts[r] = append(parts[r], i)
			}
		}
	}
	for r := range reps {
		rng.Shuffle(len(parts[r]), func(i, j int) { parts[r][i], parts[r][j] = parts[r][j], parts[r][i] })
		var err error
		for _, i := range parts[r] {
			if reps[r].state, err = o.merge(reps[r].state, h.atoms[i].state); err != nil {
				return nil, err
			}
		}
		reps[r].folded = math.MinInt64
		if h.foldable {
			reps[r].folded = h.lo + rng.Int64N(reps[r].complete-h.lo+1)
			if reps[r].state, err = o.fold(h, reps[r].state, reps[r].folded); err != nil {
				return nil, err
			}
		}
	}
	return reps, nil
}

// checkAlgebra returns the checks h fails under o.
func checkAlgebra(rng *rand.Rand, h *history, o ops) []string {
	reps, err := replicas(rng, h, o)
	if err != nil {
		return []string{"building replicas: " + err.Error()}
	}
	var fails []string
	fail := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	merge := func(a, b []byte) []byte {
		m, err := o.merge(a, b)
		if err != nil {
			fail("merge: %v", err)
		}
		return m
	}
	pick := func() replica { return reps[rng.IntN(len(reps))] }
	for range 10 {
		a, b, c := pick(), pick(), pick()
		if ab, ba := merge(a.state, b.state), merge(b.state, a.state); !bytes.Equal(ab, ba) {
			fail("not commutative:\n%x\n%x", ab, ba)
		}
		if l, r := merge(merge(a.state, b.state), c.state), merge(a.state, merge(b.state, c.state)); !bytes.Equal(l, r) {
			fail("not associative:\n%x\n%x", l, r)
		}
		if aa := merge(a.state, a.state); !bytes.Equal(aa, a.state) {
			fail("not idempotent:\n%x\n%x", aa, a.state)
		}
		if h.foldable {
			bound := min(a.complete, b.complete) - rng.Int64N(h.hi-h.lo+1)
			fa, err1 := o.fold(h, a.state, bound)
			fb, err2 := o.fold(h, b.state, bound)
			fm, err3 := o.fold(h, merge(a.state, b.state), bound)
			if err1 != nil || err2 != nil || err3 != nil || !bytes.Equal(fm, merge(fa, fb)) {
				fail("fold at %d after merge differs from merge after fold", bound)
			}
		}
	}
	rng.Shuffle(len(reps), func(i, j int) { reps[i], reps[j] = reps[j], reps[i] })
	var all []byte
	folded := int64(math.MinInt64)
	for _, r := range reps {
		all, folded = merge(all, r.state), max(folded, r.folded)
	}
	// The join of every atom with the real operations.
	var want []byte
	for _, a := range h.atoms {
		want, _ = Merge(want, a.state)
	}
	if h.foldable {
		want, _ = Fold(want, folded)
	}
	if !bytes.Equal(all, want) {
		fail("the merge of every replica is not the join of every atom:\n%x\n%x", all, want)
	}
	if why := h.oracle(all); why != "" {
		fail("replay oracle: %s", why)
	}
	return fails
}

// A merge that drops the first element of its result (an event, an entry or
// a slot) when both sides had one.
func dropOne(k Kind) ops {
	return ops{name: "drop an element", fold: realOps.fold, merge: func(a, b []byte) ([]byte, error) {
		m, err := Merge(a, b)
		if err != nil || len(a) == 0 || len(b) == 0 {
			return m, err
		}
		switch k {
		case GCRA, TB, LB:
			s, _ := decodeDebt(m, k, nil)
			if len(s.events) > 0 {
				s.events = s.events[1:]
			}
			return s.encode()
		case SWL:
			s, _ := decodeSWL(m)
			if len(s.entries) > 0 {
				s.entries = s.entries[1:]
			}
			return s.encode()
		}
		s, _ := decodeSlots(m, k)
		if len(s.s) > 0 {
			s.s = s.s[1:]
		}
		return s.encode()
	}}
}

// A fold a third of the history past the bound it was given.
var foldPast = ops{name: "fold past completeness", merge: Merge, fold: func(h *history, state []byte, complete int64) ([]byte, error) {
	return Fold(state, complete+(h.hi-h.lo)/3+1)
}}

// A merge that keeps the side with the later TAT (the debt at its newest
// stamp, from that stamp): the design the study shows losing admissions.
func maxTAT(k Kind) ops {
	tat := func(b []byte) int64 {
		s, _ := decodeDebt(b, k, nil)
		t := s.cut
		if n := len(s.events); n > 0 {
			t = s.events[n-1].t
		}
		at, d, _, _ := s.replay(s.events, t)
		return at + d
	}
	return ops{name: "merge TATs by max", fold: realOps.fold, merge: func(a, b []byte) ([]byte, error) {
		if len(a) == 0 || (len(b) > 0 && tat(b) > tat(a)) {
			return bytes.Clone(b), nil
		}
		return bytes.Clone(a), nil
	}}
}

// A merge that adds the counts of the copies of one slot (or entry) that
// both sides hold instead of taking the larger.
func sumCounts(k Kind) ops {
	return ops{name: "sum counts", fold: realOps.fold, merge: func(a, b []byte) ([]byte, error) {
		if k == SWL {
			x, _ := decodeSWL(a)
			y, _ := decodeSWL(b)
			m := x.join(&y).(*swlLog)
			for i, e := range m.entries {
				same := func(f entry) bool { return compareEntry(e, f) == 0 }
				if ix, iy := slices.IndexFunc(x.entries, same), slices.IndexFunc(y.entries, same); ix >= 0 && iy >= 0 {
					m.entries[i].q = x.entries[ix].q + y.entries[iy].q
				}
			}
			return m.encode()
		}
		x, _ := decodeSlots(a, k)
		y, _ := decodeSlots(b, k)
		m := x.join(&y).(*slots)
		for i, sl := range m.s {
			same := func(o slot) bool { return o.o == sl.o }
			if ix, iy := slices.IndexFunc(x.s, same), slices.IndexFunc(y.s, same); ix >= 0 && iy >= 0 {
				m.s[i].counts = slices.Clone(sl.counts)
				m.s[i].counts[0] = x.s[ix].counts[0] + y.s[iy].counts[0]
			}
		}
		return m.encode()
	}}
}

// A merge that keeps the first side's floor.
func floorOfA(k Kind) ops {
	return ops{name: "floor of one side", fold: realOps.fold, merge: func(a, b []byte) ([]byte, error) {
		m, err := Merge(a, b)
		if err != nil || len(a) == 0 {
			return m, err
		}
		if k == SWL {
			x, _ := decodeSWL(a)
			s, _ := decodeSWL(m)
			s.floor = x.floor
			return s.encode()
		}
		x, _ := decodeSlots(a, k)
		s, _ := decodeSlots(m, k)
		s.floor = x.floor
		return s.encode()
	}}
}

func TestAlgebra(t *testing.T) {
	rng := newRand(t)
	type algebraCase struct {
		kind    Kind
		history func(*rand.Rand) *history
		mutants []ops
	}
	debt := func(k Kind) algebraCase {
		return algebraCase{k, func(r *rand.Rand) *history { return debtHistory(r, k) }, []ops{dropOne(k), foldPast, maxTAT(k)}}
	}
	slot := func(k Kind) algebraCase {
		return algebraCase{k, func(r *rand.Rand) *history { return slotHistory(r, k) }, []ops{dropOne(k), sumCounts(k), floorOfA(k)}}
	}
	cases := []algebraCase{debt(GCRA), debt(TB), debt(LB), slot(FWC), slot(SWC),
		{SWL, swlHistory, []ops{dropOne(SWL), sumCounts(SWL), floorOfA(SWL)}},
		{Str, strHistory, strMutants}}
	for _, tc := range cases {
		t.Run(tc.kind.String(), func(t *testing.T) {
			// Strings are cheap, and some of their mutants show in a
			// quarter of the histories only: they keep all 40.
			histories := 40
			if testing.Short() && tc.kind != Str {
				histories = 10
			}
			caught := make([]int, len(tc.mutants))
			for i := range histories {
				h := tc.history(rng)
				// Each run gets its own stream, so the mutants see the
				// same replicas as the real operations.
				seed := rng.Uint64()
				if fails := checkAlgebra(rand.New(rand.NewPCG(seed, 1)), h, realOps); len(fails) > 0 {
					t.Fatalf("history %d (%d atoms): %d checks fail, first: %s", i, len(h.atoms), len(fails), fails[0])
				}
				for j, m := range tc.mutants {
					if len(checkAlgebra(rand.New(rand.NewPCG(seed, 1)), h, m)) > 0 {
						caught[j]++
					}
				}
			}
			for j, m := range tc.mutants {
				t.Logf("mutant %q caught in %d of %d histories", m.name, caught[j], histories)
				if caught[j] == 0 {
					t.Errorf("mutant %q passed every check: the checks are vacuous", m.name)
				}
			}
		})
	}
}
