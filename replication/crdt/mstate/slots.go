package mstate

import (
	"cmp"
	"math"
	"slices"

	"github.com/throttleddb/throttled/engines"
)

// slot is one origin's part of an FWC or SWC key: the counts of its own
// admissions, as its single-node engine keeps them, plus one older count
// for the nodes whose clocks lag a (sub-)window behind.
type slot struct {
	o      Origin
	newest int64   // the stamp of its last admission
	counts []int64 // counts[i]: its units in the i-th (sub-)window before newest's; counts[0] > 0
}

// compare orders the versions of one origin's slot: each admission raises
// newest, or keeps it and raises counts[0], so an origin's slot only grows
// in this order, and replicas join its copies by taking the largest.
func (a *slot) compare(b *slot) int {
	if c := cmp.Compare(a.newest, b.newest); c != 0 {
		return c
	}
	return slices.Compare(a.counts, b.counts)
}

// slots is the decoded state of FWC and SWC (crdt-design.md 1.3, 1.4): one
// slot per origin, and a floor below which slots are retired (no node counts
// them any more). The floor is a max register; joins drop the slots at or
// below it.
type slots struct {
	kind  Kind
	floor int64
	s     []slot // newest > floor; ascending by origin
}

// widthOK reports whether a slot of kind k may hold w counts: FWC its window and the
// one before; SWC between MinSubwindows+1 and MaxSubwindows+1 (n of the
// writer, plus one).
func widthOK(k Kind, w int) bool {
	if k == FWC {
		return w == 2
	}
	return w >= engines.MinSubwindows+1 && w <= engines.MaxSubwindows+1
}

// Encoding, little-endian:
//
//	0   version, kind
//	2   floor int64
//	10  slots: count uint32, then each, ascending by origin:
//	    node uint64, inc uint64, newest int64, w uint8, w counts int64

func decodeSlots(b []byte, k Kind) (slots, error) {
	s := slots{kind: k, floor: math.MinInt64}
	if len(b) == 0 {
		return s, nil
	}
	r := &reader{b: b}
	if err := header(r, k); err != nil {
		return s, err
	}
	s.floor = r.i64()
	n := r.u32()
	s.s = make([]slot, 0, min(n, len(b)/41))
	for range n {
		sl := slot{o: r.origin(), newest: r.i64()}
		w := r.u8()
		if r.bad || !widthOK(k, w) || sl.newest <= s.floor ||
			(len(s.s) > 0 && s.s[len(s.s)-1].o.Compare(sl.o) >= 0) {
			return s, engines.ErrCorruptState
		}
		sl.counts = make([]int64, w)
		var sum int64
		for i := range sl.counts {
			c := r.i64()
			if r.bad || c < 0 || c > math.MaxInt64-sum || (i == 0 && c == 0) {
				return s, engines.ErrCorruptState
			}
			sl.counts[i], sum = c, sum+c
		}
		s.s = append(s.s, sl)
	}
	if r.bad || !r.done() {
		return s, engines.ErrCorruptState
	}
	return s, nil
}

func (s *slots) encode() []byte {
	b := make([]byte, 0, 14+len(s.s)*(25+8*(engines.MaxSubwindows+1)))
	b = appendU32(appendI64(append(b, version, byte(s.kind)), s.floor), len(s.s))
	for i := range s.s {
		sl := &s.s[i]
		b = append(appendI64(appendOrigin(b, sl.o), sl.newest), byte(len(sl.counts)))
		for _, c := range sl.counts {
			b = appendI64(b, c)
		}
	}
	return b
}

// retire raises the floor to f and drops the slots at or below it.
func (s *slots) retire(f int64) {
	s.floor = max(s.floor, f)
	s.s = slices.DeleteFunc(s.s, func(sl slot) bool { return sl.newest <= s.floor })
}

// mergeSlots joins two states: the higher floor, and per origin the larger
// slot, minus the slots the floor retires.
func mergeSlots(a, b slots) slots {
	out := slots{kind: a.kind, floor: max(a.floor, b.floor)}
	out.s = make([]slot, 0, len(a.s)+len(b.s))
	i, j := 0, 0
	for i < len(a.s) || j < len(b.s) {
		switch {
		case j == len(b.s) || (i < len(a.s) && a.s[i].o.Compare(b.s[j].o) < 0):
			out.s, i = append(out.s, a.s[i]), i+1
		case i == len(a.s) || a.s[i].o.Compare(b.s[j].o) > 0:
			out.s, j = append(out.s, b.s[j]), j+1
		default:
			sl := a.s[i]
			if sl.compare(&b.s[j]) < 0 {
				sl = b.s[j]
			}
			out.s, i, j = append(out.s, sl), i+1, j+1
		}
	}
	out.retire(out.floor)
	return out
}

// slotLimiter is FWC or SWC on per-origin slots.
type slotLimiter struct {
	kind Kind
	eng  engines.Limiter
	// read is how many counts a decision reads, from its own (sub-)window
	// back: 1 for FWC, n for SWC. Slots hold one more.
	read int
	// future says whether a slot's counts stamped after the decision's
	// (sub-)window count as in it. SWC: yes, a clock running ahead mints
	// nothing. FWC: no, they belong to a later window, which resets the
	// count anyway (crdt-design.md 1.3).
	future bool
	span   int64 // a slot counts for no decision made span after its newest stamp
	skew   int64
}

func (l slotLimiter) Kind() Kind { return l.kind }

// index is engines.Index, which cannot fail for FWC and SWC.
func (l slotLimiter) index(t int64) int64 {
	k, _ := engines.Index(l.eng, t)
	return k
}

// sum returns the counts of every slot as seen from (sub-)window kt: the
// i-th is the units of the i-th (sub-)window before kt.
func (l slotLimiter) sum(s *slots, kt int64) ([]int64, error) {
	counts := make([]int64, l.read)
	for i := range s.s {
		sl := &s.s[i]
		shift := minus(kt, l.index(sl.newest)) // sl's (sub-)window is shift before kt's
		for j, c := range sl.counts {
			rel := int64(j) + shift
			if rel >= int64(l.read) {
				break
			}
			if rel < 0 {
				if !l.future {
					continue
				}
				rel = 0
			}
			var err error
			if counts[rel], err = add(counts[rel], c); err != nil {
				return nil, err
			}
		}
	}
	return counts, nil
}

// admit adds qty to self's slot at t, in (sub-)window kt, shifting its
// counts as its single-node engine does.
func (l slotLimiter) admit(s *slots, self Origin, t, kt, qty int64) error {
	i, found := slices.BinarySearchFunc(s.s, self, func(sl slot, o Origin) int { return sl.o.Compare(o) })
	counts := make([]int64, l.read+1)
	if found {
		old := s.s[i].counts
		shift := minus(kt, l.index(s.s[i].newest)) // >= 0: t is at least its newest
		for j := range counts {
			if src := int64(j) - shift; src >= 0 && src < int64(len(old)) {
				counts[j] = old[src]
			}
		}
	}
	var err error
	if counts[0], err = add(counts[0], qty); err != nil {
		return err
	}
	sl := slot{o: self, newest: t, counts: counts}
	if found {
		s.s[i] = sl
	} else {
		s.s = slices.Insert(s.s, i, sl)
	}
	return nil
}

func (l slotLimiter) Decide(state []byte, self Origin, now, qty int64) (engines.Result, []byte, int64, bool, error) {
	s, err := decodeSlots(state, l.kind)
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	t := now
	if i, found := slices.BinarySearchFunc(s.s, self, func(sl slot, o Origin) int { return sl.o.Compare(o) }); found {
		t = max(t, s.s[i].newest)
	}
	kt := l.index(t)
	counts, err := l.sum(&s, kt)
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	res, err := engines.CheckCounts(l.eng, t, counts, t, qty)
	if err != nil || res.Limited || qty == 0 {
		return res, state, 0, false, err
	}
	if err := l.admit(&s, self, t, kt, qty); err != nil {
		return engines.Result{}, state, 0, false, err
	}
	// No node whose clock is within the skew counts a slot span after its
	// newest stamp: retiring it keeps dead origins (old incarnations,
	// removed peers) from piling up in a busy key.
	s.retire(minus(minus(t, l.skew), l.span))
	fullAt, err := l.fullAt(&s)
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	return res, s.encode(), fullAt, true, nil
}

func (l slotLimiter) FullAt(state []byte) (int64, error) {
	if len(state) == 0 {
		return math.MinInt64, nil
	}
	s, err := decodeSlots(state, l.kind)
	if err != nil {
		return 0, err
	}
	return l.fullAt(&s)
}

// fullAt decides a peek at the newest stamp of any slot: the state is full
// its ResetAfter later.
func (l slotLimiter) fullAt(s *slots) (int64, error) {
	if len(s.s) == 0 {
		return math.MinInt64, nil
	}
	t := int64(math.MinInt64)
	for i := range s.s {
		t = max(t, s.s[i].newest)
	}
	counts, err := l.sum(s, l.index(t))
	if err != nil {
		return 0, err
	}
	res, err := engines.CheckCounts(l.eng, t, counts, t, 0)
	if err != nil {
		return 0, err
	}
	return add(t, res.ResetAfter)
}
