package mstate

import (
	"cmp"
	"math"
	"slices"

	"github.com/throttleddb/throttled/engines"
)

// entry is one origin's admissions at one instant: a count that only grows,
// so copies merge by max.
type entry struct {
	t int64
	o Origin
	q int64 // > 0
}

func compareEntry(a, b entry) int { return cmp.Or(cmp.Compare(a.t, b.t), a.o.Compare(b.o)) }

// join returns the larger of two copies of one entry.
func (a entry) join(b entry) entry {
	a.q = max(a.q, b.q)
	return a
}

// swlLog is the decoded state of SWL (crdt-design.md 1.5): the log of every
// origin's admissions, and a floor below which entries are retired (they
// have left the window of every node within the skew). The floor is a max
// register; joins drop the entries at or below it.
type swlLog struct {
	floor   int64
	entries []entry // t > floor; ascending by (t, origin)
}

// Encoding, little-endian:
//
//	0   version, kind
//	2   floor int64
//	10  origins: count uint16, then (node uint64, inc uint64) ascending
//	    entries: count uint32, then each, ascending by (t, origin):
//	    t int64, q int64, origin uint16

func decodeSWL(b []byte) (swlLog, error) {
	s := swlLog{floor: math.MinInt64}
	if len(b) == 0 {
		return s, nil
	}
	r := &reader{b: b}
	if err := header(r, SWL); err != nil {
		return s, err
	}
	s.floor = r.i64()
	origins, ok := readTable(nil, r, (*reader).origin, Origin.Compare)
	if !ok {
		return s, engines.ErrCorruptState
	}
	used := make([]bool, len(origins))
	n := r.u32()
	s.entries = make([]entry, 0, min(n, len(b)/18))
	for range n {
		e := entry{t: r.i64(), q: r.i64()}
		e.o = refer(r, origins, used, r.u16())
		if r.bad || e.t <= s.floor || e.q <= 0 ||
			(len(s.entries) > 0 && compareEntry(s.entries[len(s.entries)-1], e) >= 0) {
			return s, engines.ErrCorruptState
		}
		s.entries = append(s.entries, e)
	}
	if r.bad || !r.done() || !allUsed(used) {
		return s, engines.ErrCorruptState
	}
	return s, nil
}

func (s *swlLog) encode() ([]byte, error) {
	origins, err := tableOf(nil, s.entries, func(e entry) Origin { return e.o }, Origin.Compare)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 12+16*len(origins)+18*len(s.entries))
	b = appendI64(append(b, version, byte(SWL)), s.floor)
	b = appendU32(appendTable(b, origins, appendOrigin), len(s.entries))
	for _, e := range s.entries {
		b = appendU16(appendI64(appendI64(b, e.t), e.q), indexIn(origins, e.o, Origin.Compare))
	}
	return b, nil
}

// retire raises the floor to f and drops the entries at or below it.
func (s *swlLog) retire(f int64) {
	s.floor = max(s.floor, f)
	s.entries = s.entries[after(s.entries, s.floor):]
}

// after returns the index of the first entry stamped after x.
func after(entries []entry, x int64) int {
	n, _ := slices.BinarySearchFunc(entries, x, func(e entry, x int64) int {
		if e.t <= x {
			return -1
		}
		return 1
	})
	return n
}

// join implements decoded: the higher floor, and the union of the entries
// above it, each at its largest count.
func (s *swlLog) join(o decoded) decoded {
	b := o.(*swlLog)
	out := &swlLog{floor: max(s.floor, b.floor)}
	out.entries = union(nil, s.entries, b.entries, compareEntry, entry.join, func(e entry) bool { return e.t > out.floor })
	return out
}

// swlParams are SWL's.
type swlParams struct {
	limit, window, skew int64
}

// live returns the index of the oldest entry inside (t-window, t]; entries
// stamped after t count too (a clock running ahead mints nothing).
func (l swlParams) live(s *swlLog, t int64) int {
	if t < math.MinInt64+l.window { // nothing is older than t-window
		return 0
	}
	return after(s.entries, t-l.window)
}

// check decides qty at t as the engine's SWL does on the log of every
// origin's entries: limited when the units from the first live entry on
// leave no room; a limited request may retry when enough of the oldest have
// left, and the state is full when the newest has.
func (l swlParams) check(s *swlLog, t, qty int64) (engines.Result, error) {
	if qty < 0 {
		return engines.Result{}, engines.ErrNegative
	}
	first := l.live(s, t)
	var used int64
	for _, e := range s.entries[first:] {
		var err error
		if used, err = add(used, e.q); err != nil {
			return engines.Result{}, err
		}
	}
	// leaves returns how long from t until an entry at x leaves the window.
	leaves := func(x int64) (int64, error) {
		if x <= t {
			return l.window - (t - x), nil // x > t-window: 0 < it <= window
		}
		return add(l.window, minus(x, t)) // a stamp from a clock ahead of ours
	}
	newest := t // the newest entry's stamp; t for an empty log
	if n := len(s.entries); n > 0 {
		newest = s.entries[n-1].t
	}
	res := engines.Result{Limit: l.limit, RetryAfter: -1}
	var err error
	switch {
	case qty > l.limit-used:
		res.Limited = true
		if qty <= l.limit {
			// used+qty-limit units must leave: wait for the entry that
			// takes the count of those gone past them.
			need := used + qty - l.limit
			for _, e := range s.entries[first:] {
				if need -= e.q; need <= 0 {
					res.RetryAfter, err = leaves(e.t)
					break
				}
			}
		}
	case qty > 0:
		// The new entry at t leaves last, unless a clock ahead stamped one later.
		res.Remaining = l.limit - used - qty
		res.ResetAfter, err = leaves(max(t, newest))
		return res, err
	}
	res.Remaining = max(0, l.limit-used)
	if used > 0 && err == nil {
		res.ResetAfter, err = leaves(newest)
	}
	return res, err
}

// newest returns o's newest stamp in the log, or MinInt64.
func (s *swlLog) newest(o Origin) int64 {
	t := int64(math.MinInt64)
	for _, e := range s.entries {
		if e.o == o {
			t = e.t
		}
	}
	return t
}

func (l swlParams) open(state []byte, self Origin) (view, error) {
	s, err := decodeSWL(state)
	return &swlView{swlLog: s, p: l, self: self}, err
}

// swlView is a view of a log of per-origin entries.
type swlView struct {
	swlLog
	windowExpiry
	p    swlParams
	self Origin
}

func (v *swlView) at(now int64) int64 { return max(now, v.newest(v.self)) }

func (v *swlView) check(t, _, qty int64) (engines.Result, error) { return v.p.check(&v.swlLog, t, qty) }

func (v *swlView) admit(t, qty int64, _ Bounds) error {
	e := entry{t: t, o: v.self, q: qty}
	if i, found := slices.BinarySearchFunc(v.entries, e, compareEntry); found {
		var err error
		if v.entries[i].q, err = add(v.entries[i].q, qty); err != nil {
			return err
		}
	} else {
		v.entries = slices.Insert(v.entries, i, e)
	}
	// No node whose clock is within the skew counts an entry a window
	// older than t.
	v.retire(minus(minus(t, v.p.window), v.p.skew))
	return nil
}

// fullAt is when the newest entry leaves the window.
func (v *swlView) fullAt() (int64, error) {
	if len(v.entries) == 0 {
		return math.MinInt64, nil
	}
	return add(v.entries[len(v.entries)-1].t, v.p.window)
}
