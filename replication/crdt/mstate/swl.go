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

func compareEntry(a, b entry) int {
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	return a.o.Compare(b.o)
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
	origins, ok := readTable(r, (*reader).origin, Origin.Compare)
	if !ok {
		return s, engines.ErrCorruptState
	}
	used := make([]bool, len(origins))
	n := r.u32()
	s.entries = make([]entry, 0, min(n, len(b)/18))
	for range n {
		e := entry{t: r.i64(), q: r.i64()}
		e.o = refer(r, origins, used)
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
	origins, err := tableOf(s.entries, func(e entry) Origin { return e.o }, Origin.Compare)
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

// mergeSWL joins two logs: the higher floor, and the union of the entries
// above it, each at its largest count.
func mergeSWL(a, b swlLog) swlLog {
	out := swlLog{floor: max(a.floor, b.floor)}
	out.entries = make([]entry, 0, len(a.entries)+len(b.entries))
	i, j := 0, 0
	for i < len(a.entries) || j < len(b.entries) {
		var e entry
		switch {
		case j == len(b.entries) || (i < len(a.entries) && compareEntry(a.entries[i], b.entries[j]) < 0):
			e, i = a.entries[i], i+1
		case i == len(a.entries) || compareEntry(a.entries[i], b.entries[j]) > 0:
			e, j = b.entries[j], j+1
		default:
			e = a.entries[i]
			e.q = max(e.q, b.entries[j].q)
			i, j = i+1, j+1
		}
		if e.t > out.floor {
			out.entries = append(out.entries, e)
		}
	}
	return out
}

// swlLimiter is the sliding window log on per-origin entries.
type swlLimiter struct {
	limit, window, skew int64
}

func (swlLimiter) Kind() Kind { return SWL }

// live returns the index of the oldest entry inside (t-window, t]; entries
// stamped after t count too (a clock running ahead mints nothing).
func (l swlLimiter) live(s *swlLog, t int64) int {
	if t < math.MinInt64+l.window { // nothing is older than t-window
		return 0
	}
	return after(s.entries, t-l.window)
}

// check decides qty at t as the engine's SWL does on the log of every
// origin's entries: limited when the units from the first live entry on
// leave no room; a limited request may retry when enough of the oldest have
// left, and the state is full when the newest has.
func (l swlLimiter) check(s *swlLog, t, qty int64) (engines.Result, error) {
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

func (l swlLimiter) Decide(state []byte, self Origin, now, qty int64) (engines.Result, []byte, int64, bool, error) {
	s, err := decodeSWL(state)
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	t := max(now, s.newest(self))
	res, err := l.check(&s, t, qty)
	if err != nil || res.Limited || qty == 0 {
		return res, state, 0, false, err
	}
	e := entry{t: t, o: self, q: qty}
	if i, found := slices.BinarySearchFunc(s.entries, e, compareEntry); found {
		if s.entries[i].q, err = add(s.entries[i].q, qty); err != nil {
			return engines.Result{}, state, 0, false, err
		}
	} else {
		s.entries = slices.Insert(s.entries, i, e)
	}
	// No node whose clock is within the skew counts an entry a window
	// older than t.
	s.retire(minus(minus(t, l.window), l.skew))
	fullAt, err := l.fullAt(&s)
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	next, err := s.encode()
	if err != nil {
		return engines.Result{}, state, 0, false, err
	}
	return res, next, fullAt, true, nil
}

func (l swlLimiter) FullAt(state []byte) (int64, error) {
	s, err := decodeSWL(state)
	if err != nil {
		return 0, err
	}
	return l.fullAt(&s)
}

// fullAt is when the newest entry leaves the window.
func (l swlLimiter) fullAt(s *swlLog) (int64, error) {
	if len(s.entries) == 0 {
		return math.MinInt64, nil
	}
	return add(s.entries[len(s.entries)-1].t, l.window)
}
