package mstate

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// drain says how an event's cost drains: the unit it is counted in and the
// units that drain per ns after it. An event carries the drain of the call
// that admitted it, so a log replays the same whatever the parameters of
// later calls: folding needs no parameters, and equal knowledge folds to
// equal bytes on every node. TB and LB use (period, count), GCRA nsDrain.
type drain struct{ unit, rate int64 }

// nsDrain is GCRA's: costs in ns (T*quantity) that drain 1 ns per ns.
var nsDrain = drain{unit: 1, rate: 1}

func (a drain) compare(b drain) int {
	return cmp.Or(cmp.Compare(a.unit, b.unit), cmp.Compare(a.rate, b.rate))
}

// event is one origin's admissions at one instant under one drain: they
// form a single entry whose cost only grows, so copies merge by max. The
// rare caller that changes parameters within an instant starts a new segment
// of that instant, so that replay follows the order of admission.
type event struct {
	t    int64
	o    Origin
	seg  int // 0, 1, ...: the order of the origin's drains at t
	d    drain
	cost int64 // > 0, in d.unit
}

// compareKey orders events by (t, origin, segment): the order of the
// encoding and of the replay.
func compareKey(a, b event) int {
	return cmp.Or(cmp.Compare(a.t, b.t), a.o.Compare(b.o), cmp.Compare(a.seg, b.seg))
}

// join returns the larger of two copies of one event: the same drain (an
// origin sets it once) and the larger cost. Copies that disagree on the
// drain exist only in forged states; the larger (unit, rate, cost) keeps the
// join commutative, associative and idempotent even then.
func (a event) join(b event) event {
	if c := a.d.compare(b.d); c < 0 || (c == 0 && a.cost < b.cost) {
		return b
	}
	return a
}

// debtLog is the decoded state of GCRA, TB and LB (crdt-design.md 1.1): the
// events after the cut, and the base, the debt at the cut of every event at
// or before it.
type debtLog struct {
	kind   Kind
	cut    int64
	base   int64   // >= 0, in unit
	unit   int64   // the unit of base: 0 when base is 0
	events []event // stamped after cut, ascending by compareKey
}

// emptyDebt returns the state of a key nothing was admitted on.
func emptyDebt(k Kind) debtLog { return debtLog{kind: k, cut: math.MinInt64} }

// hasDrains reports whether events carry their drain in the encoding
// (GCRA's is always nsDrain).
func (s *debtLog) hasDrains() bool { return s.kind != GCRA }

// Encoding, little-endian (see the package doc):
//
//	0   version, kind
//	2   cut int64, base int64
//	18  TB, LB: unit int64 (0 iff base is 0)
//	    origins: count uint16, then (node uint64, inc uint64) ascending
//	    TB, LB: drains: count uint16, then (unit int64, rate int64) ascending
//	    events: count uint32, then each: t int64, cost int64, origin uint16,
//	    TB, LB: drain uint16, segment uint16

func decodeDebt(b []byte, k Kind) (debtLog, error) {
	s := emptyDebt(k)
	if len(b) == 0 {
		return s, nil
	}
	r := &reader{b: b}
	if err := header(r, k); err != nil {
		return s, err
	}
	s.cut, s.base = r.i64(), r.i64()
	switch {
	case !s.hasDrains():
		if s.base > 0 {
			s.unit = 1
		}
	default:
		s.unit = r.i64()
		if (s.base == 0) != (s.unit == 0) || s.unit < 0 {
			return s, engines.ErrCorruptState
		}
	}
	origins, ok := readTable(r, (*reader).origin, Origin.Compare)
	if !ok || s.base < 0 {
		return s, engines.ErrCorruptState
	}
	drains := []drain{nsDrain}
	if s.hasDrains() {
		getDrain := func(r *reader) drain { return drain{unit: r.i64(), rate: r.i64()} }
		if drains, ok = readTable(r, getDrain, drain.compare); !ok {
			return s, engines.ErrCorruptState
		}
	}
	usedO, usedD := make([]bool, len(origins)), make([]bool, len(drains))
	n := r.u32()
	s.events = make([]event, 0, min(n, len(b)/18))
	for range n {
		e := event{t: r.i64(), cost: r.i64(), d: nsDrain}
		e.o = refer(r, origins, usedO)
		if s.hasDrains() {
			e.d, e.seg = refer(r, drains, usedD), r.u16()
		}
		switch n := len(s.events); {
		case r.bad, e.t <= s.cut, e.cost <= 0, e.d.unit <= 0, e.d.rate <= 0,
			n > 0 && compareKey(s.events[n-1], e) >= 0:
			return s, engines.ErrCorruptState
		}
		s.events = append(s.events, e)
	}
	if r.bad || !r.done() || !allUsed(usedO) || (s.hasDrains() && !allUsed(usedD)) {
		return s, engines.ErrCorruptState
	}
	return s, nil
}

func (s *debtLog) encode() ([]byte, error) {
	origins, err := tableOf(s.events, func(e event) Origin { return e.o }, Origin.Compare)
	if err != nil {
		return nil, err
	}
	var drains []drain
	if s.hasDrains() {
		if drains, err = tableOf(s.events, func(e event) drain { return e.d }, drain.compare); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, 40+16*(len(origins)+len(drains))+20*len(s.events))
	b = append(b, version, byte(s.kind))
	b = appendI64(appendI64(b, s.cut), s.base)
	if s.hasDrains() {
		b = appendI64(b, s.unit)
	}
	b = appendTable(b, origins, appendOrigin)
	if s.hasDrains() {
		b = appendTable(b, drains, func(b []byte, d drain) []byte { return appendI64(appendI64(b, d.unit), d.rate) })
	}
	b = appendU32(b, len(s.events))
	for _, e := range s.events {
		b = appendI64(appendI64(b, e.t), e.cost)
		b = appendU16(b, indexIn(origins, e.o, Origin.Compare))
		if s.hasDrains() {
			b = appendU16(appendU16(b, indexIn(drains, e.d, drain.compare)), e.seg)
		}
	}
	return b, nil
}

// replay runs the debt recurrence from the base over the events, each
// stamped at min(its t, t): an event stamped after t counts as if at t, so a
// node whose clock runs ahead mints nothing on the others. It returns the
// time of the last step (the cut when there is no event), the debt then and
// its unit. t must not be before the cut.
func (s *debtLog) replay(events []event, t int64) (at, d, unit int64, err error) {
	at, d, unit = s.cut, s.base, s.unit
	for _, e := range events {
		// Each step is the engines' own: convert to the event's unit,
		// drain at its rate since the last step, add its cost.
		if at, d, err = engines.DebtAt(at, d, unit, min(e.t, t), e.d.rate, e.d.unit); err != nil {
			return 0, 0, 0, err
		}
		if d, err = add(d, e.cost); err != nil {
			return 0, 0, 0, err
		}
		unit = e.d.unit
	}
	return at, d, unit, nil
}

// fold folds the events stamped before complete into the base and moves the
// cut to the newest of them (an event time, not complete itself, so that
// nodes with equal knowledge hold equal bytes whatever their bounds). It
// reports whether anything moved.
func (s *debtLog) fold(complete int64) (bool, error) {
	n, _ := slices.BinarySearchFunc(s.events, complete, func(e event, t int64) int { return cmp.Compare(e.t, t) })
	if n == 0 {
		return false, nil
	}
	at, d, unit, err := s.replay(s.events[:n], math.MaxInt64)
	if err != nil {
		return false, err
	}
	s.cut, s.base, s.events = at, d, s.events[n:]
	s.unit = 0
	if d > 0 {
		s.unit = unit
	}
	return true, nil
}

// compareBase orders the (cut, base) registers of two logs: by cut, then by
// the base's debt in tokens (base/unit, compared exactly as base*unit' vs
// base'*unit), then by unit. Folds happen only below what is known complete,
// so equal cuts carry equal bases unless a writer charged at its cut, which
// only adds tokens: the larger is the later.
func compareBase(a, b *debtLog) int {
	if c := cmp.Compare(a.cut, b.cut); c != 0 {
		return c
	}
	ahi, alo := bits.Mul64(uint64(a.base), uint64(b.unit))
	bhi, blo := bits.Mul64(uint64(b.base), uint64(a.unit))
	if c := cmp.Or(cmp.Compare(ahi, bhi), cmp.Compare(alo, blo)); c != 0 {
		return c
	}
	return cmp.Compare(a.unit, b.unit)
}

// newest returns o's newest stamp in the log, or MinInt64.
func (s *debtLog) newest(o Origin) int64 {
	t := int64(math.MinInt64)
	for _, e := range s.events {
		if e.o == o {
			t = e.t
		}
	}
	return t
}

// charge records an admission of cost at t by o under d. t is never before
// the cut. At the cut itself (possible only when the caller's stamps fall
// back onto a fold, which the mesh's watermarks exclude) the cost joins the
// base, as the engine's Commit would add it: exact for a single writer,
// whose events it joins. The base then holds more tokens than before, so it
// wins the merge with an older copy (see compareBase).
func (s *debtLog) charge(t int64, o Origin, d drain, cost int64) error {
	if t == s.cut {
		_, base, err := engines.DebtAt(t, s.base, s.unit, t, d.rate, d.unit)
		if err == nil {
			base, err = add(base, cost)
		}
		if err == nil {
			s.base, s.unit = base, d.unit
		}
		return err
	}
	// The origin's last segment at t grows if it has the same drain.
	e := event{t: t, o: o, seg: math.MaxInt, d: d, cost: cost}
	i, _ := slices.BinarySearchFunc(s.events, e, compareKey)
	e.seg = 0
	if i > 0 && s.events[i-1].t == t && s.events[i-1].o == o {
		last := &s.events[i-1]
		if last.d == d {
			var err error
			last.cost, err = add(last.cost, cost)
			return err
		}
		if e.seg = last.seg + 1; e.seg > maxTable {
			return engines.ErrOverflow
		}
	}
	s.events = slices.Insert(s.events, i, e)
	return nil
}

// join implements decoded: the larger (cut, base) register, and the union of
// the events after its cut, each at its largest cost.
func (s *debtLog) join(o decoded) decoded {
	a, b := s, o.(*debtLog)
	if compareBase(a, b) < 0 {
		a, b = b, a
	}
	out := &debtLog{kind: a.kind, cut: a.cut, base: a.base, unit: a.unit}
	out.events = union(a.events, b.events, compareKey, event.join, func(e event) bool { return e.t > out.cut })
	return out
}

// debtParams are GCRA's, TB's or LB's.
type debtParams struct {
	kind  Kind
	gcra  gcra.Params     // GCRA
	eng   engines.Limiter // TB, LB
	drain drain           // the drain of this call's admissions
}

// check decides qty at t on a log whose replay up to t ended at (at, d,
// unit), and returns the cost to record when it is admitted. GCRA decides
// at the caller's now, as redis-cell does (a stale now looks fuller), the
// engines at t.
func (p debtParams) check(at, d, unit, t, now, qty int64) (engines.Result, int64, error) {
	if p.kind != GCRA {
		res, err := engines.CheckDebt(p.eng, at, d, unit, t, qty)
		return res, qty * p.drain.unit, err // qty*unit fits when admitted: it is at most the size
	}
	if at > math.MaxInt64-d {
		return engines.Result{}, 0, gcra.ErrOverflow
	}
	// The TAT is the time the debt is repaid; a drained bucket's is t.
	tat := max(t, at+d)
	newTAT, _, r, err := gcra.Decide(tat, p.gcra, now, qty)
	res := engines.Result{Limited: r.Limited, Limit: r.Limit, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
	return res, newTAT - tat, err // tat >= now, so newTAT = tat + T*qty
}

func (p debtParams) open(state []byte, self Origin) (view, error) {
	s, err := decodeDebt(state, p.kind)
	return &debtView{debtLog: s, p: p, self: self}, err
}

// debtView is a view of a debt log.
type debtView struct {
	debtLog
	p    debtParams
	self Origin
	cost int64 // of the admission check allowed
}

func (v *debtView) at(now int64) int64 { return max(now, v.cut, v.newest(v.self)) }

func (v *debtView) check(t, now, qty int64) (engines.Result, error) {
	at, d, unit, err := v.replay(v.events, t)
	if err != nil {
		return engines.Result{}, err
	}
	res, cost, err := v.p.check(at, d, unit, t, now, qty)
	v.cost = cost
	return res, err
}

// admit folds what is complete (never at or past t, so the new event stays
// an event) and records the admission.
func (v *debtView) admit(t, _, complete int64) error {
	if _, err := v.fold(min(complete, t)); err != nil {
		return err
	}
	return v.charge(t, v.self, v.p.drain, v.cost)
}

// fullAt replays the whole log, from its newest stamp on under this call's
// drain: the debt is repaid, and the key may go, at its newest stamp plus
// the reply's ResetAfter.
func (v *debtView) fullAt() (int64, error) {
	t := v.cut
	if n := len(v.events); n > 0 {
		t = v.events[n-1].t
	}
	at, d, unit, err := v.replay(v.events, t)
	if err != nil {
		return 0, err
	}
	res, _, err := v.p.check(at, d, unit, t, t, 0)
	if err != nil {
		return 0, err
	}
	return add(t, res.ResetAfter)
}
