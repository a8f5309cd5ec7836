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

// join returns the larger of two versions of one origin's slot, ordered by
// (newest, counts...): each admission raises newest, or keeps it and raises
// counts[0], so an origin's slot only grows in this order.
func (a slot) join(b slot) slot {
	if cmp.Or(cmp.Compare(a.newest, b.newest), slices.Compare(a.counts, b.counts)) < 0 {
		return b
	}
	return a
}

func compareOrigin(a, b slot) int { return a.o.Compare(b.o) }

// slots is the decoded state of FWC and SWC (crdt-design.md 1.3, 1.4): one
// slot per origin, and a floor below which slots are retired (no node counts
// them any more). The floor is a max register; joins drop the slots at or
// below it.
type slots struct {
	kind  Kind
	floor int64
	s     []slot // newest > floor; ascending by origin
}

// widthOK reports whether a slot of kind k may hold w counts: FWC its window
// and the one before; SWC between MinSubwindows+1 and MaxSubwindows+1 (n of
// the writer, plus one).
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

func (s *slots) encode() ([]byte, error) {
	size := 14
	for i := range s.s {
		size += 25 + 8*len(s.s[i].counts)
	}
	b := make([]byte, 0, size)
	b = appendU32(appendI64(append(b, version, byte(s.kind)), s.floor), len(s.s))
	for i := range s.s {
		sl := &s.s[i]
		b = append(appendI64(appendOrigin(b, sl.o), sl.newest), byte(len(sl.counts)))
		for _, c := range sl.counts {
			b = appendI64(b, c)
		}
	}
	return b, nil
}

// find returns the index of o's slot, or where it would go.
func (s *slots) find(o Origin) (int, bool) {
	return slices.BinarySearchFunc(s.s, o, func(sl slot, o Origin) int { return sl.o.Compare(o) })
}

// retire raises the floor to f and drops the slots at or below it.
func (s *slots) retire(f int64) {
	s.floor = max(s.floor, f)
	s.s = slices.DeleteFunc(s.s, func(sl slot) bool { return sl.newest <= s.floor })
}

// join implements decoded: the higher floor, and per origin the larger
// slot, unless the floor retires it.
func (s *slots) join(o decoded) decoded {
	b := o.(*slots)
	out := &slots{kind: s.kind, floor: max(s.floor, b.floor)}
	out.s = union(nil, s.s, b.s, compareOrigin, slot.join, func(sl slot) bool { return sl.newest > out.floor })
	return out
}

// windowExpiry is the expiry of a window kind's view: its bytes do not say
// (see Expiry), a part lives as long as it counts.
type windowExpiry struct{}

func (windowExpiry) expiry() (int64, error) { return math.MinInt64, nil }

// slotParams are FWC's or SWC's.
type slotParams struct {
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

// index is engines.Index, which cannot fail for FWC and SWC.
func (l slotParams) index(t int64) int64 {
	k, _ := engines.Index(l.eng, t)
	return k
}

// sum returns the counts of every slot as seen from (sub-)window kt: the
// i-th is the units of the i-th (sub-)window before kt.
func (l slotParams) sum(s *slots, kt int64) ([]int64, error) {
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

// admit adds qty to self's slot at t, shifting its counts as its
// single-node engine does.
func (l slotParams) admit(s *slots, self Origin, t, qty int64) error {
	kt := l.index(t)
	i, found := s.find(self)
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

func (l slotParams) open(state []byte, self Origin) (view, error) {
	s, err := decodeSlots(state, l.kind)
	return &slotView{slots: s, p: l, self: self}, err
}

// slotView is a view of per-origin slots.
type slotView struct {
	slots
	windowExpiry
	p    slotParams
	self Origin
}

func (v *slotView) at(now int64) int64 {
	if i, found := v.find(v.self); found {
		return max(now, v.s[i].newest)
	}
	return now
}

func (v *slotView) check(t, _, qty int64) (engines.Result, error) {
	counts, err := v.p.sum(&v.slots, v.p.index(t))
	if err != nil {
		return engines.Result{}, err
	}
	return engines.CheckCounts(v.p.eng, t, counts, t, qty)
}

func (v *slotView) admit(t, qty int64, _ Bounds) error {
	if err := v.p.admit(&v.slots, v.self, t, qty); err != nil {
		return err
	}
	// No node whose clock is within the skew counts a slot span after its
	// newest stamp: retiring it keeps dead origins (old incarnations,
	// removed peers) from piling up in a busy key.
	v.retire(minus(minus(t, v.p.skew), v.p.span))
	return nil
}

// fullAt decides a peek at the newest stamp of any slot: the state is full
// its ResetAfter later.
func (v *slotView) fullAt() (int64, error) {
	if len(v.s) == 0 {
		return math.MinInt64, nil
	}
	t := int64(math.MinInt64)
	for i := range v.s {
		t = max(t, v.s[i].newest)
	}
	res, err := v.check(t, t, 0)
	if err != nil {
		return 0, err
	}
	return add(t, res.ResetAfter)
}
