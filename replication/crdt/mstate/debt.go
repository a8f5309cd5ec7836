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
//
// A coarse event (g > 0) sums its origin's admissions over an aligned
// quantum of g ns, [t+1-g, t], stamped at the quantum's last instant: the
// writer merges its own events so into fewer (coarsen). It covers every
// finer event of its origin in the quantum, which copies elsewhere may still
// hold, and a join drops those (uncovered): the coarse one counts them.
type event struct {
	t    int64
	o    Origin
	seg  int // 0, 1, ...: the order of the origin's drains at t; 0 if coarse
	d    drain
	cost int64 // > 0, in d.unit
	g    int64 // 0, or the quantum of a coarse event: a power of two
}

// compareKey orders events by (t, origin, segment): the order of the
// encoding and of the replay.
func compareKey(a, b event) int {
	if c := cmp.Compare(a.t, b.t); c != 0 {
		return c
	}
	if c := a.o.Compare(b.o); c != 0 {
		return c
	}
	return cmp.Compare(a.seg, b.seg)
}

// join returns the larger of two copies of one event: the coarser (a
// coarse event at an instant sums the finer ones there), then the same
// drain (an origin sets it once) and the larger cost. Copies that disagree
// on the drain exist only in forged states; the larger (g, unit, rate, cost)
// keeps the join commutative, associative and idempotent even then.
func (a event) join(b event) event {
	if c := cmp.Or(cmp.Compare(a.g, b.g), a.d.compare(b.d)); c < 0 || (c == 0 && a.cost < b.cost) {
		return b
	}
	return a
}

// uncovered drops, in place, the events a coarse event of their origin
// covers (see event), and reports whether it dropped any. events are
// ascending by compareKey. Aligned quanta nest or are disjoint, and a coarse
// event comes after what it covers, so one pass from the newest down finds
// them.
func uncovered(events []event) ([]event, bool) {
	type cover struct {
		o     Origin
		start int64
	}
	var covers []cover // the oldest start seen so far per origin
	keep := len(events)
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		j := slices.IndexFunc(covers, func(c cover) bool { return c.o == e.o })
		if j >= 0 && e.t >= covers[j].start {
			continue // inside a coarser event of its origin
		}
		if e.g > 0 {
			if j < 0 {
				covers = append(covers, cover{o: e.o})
				j = len(covers) - 1
			}
			covers[j].start = e.t - (e.g - 1)
		}
		keep--
		events[keep] = e
	}
	dropped := keep > 0
	return append(events[:0], events[keep:]...), dropped
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
//	    coarse: log2 of g uint8, TB, LB: drain uint16, segment uint16
//
// An event's origin index has its top bit set when the event is coarse
// (coarseRef), so an origin table holds at most 32,767 origins.

// coarseRef marks a coarse event's origin index.
const coarseRef = 1 << 15

// stackEvents is how many events the buffers that Join, Expiry and Newest
// keep on their stacks hold (see tableOf): a key's log seldom has more.
const stackEvents = 8

// decodeDebt decodes a debt log, its events into buf (see tableOf).
func decodeDebt(b []byte, k Kind, buf []event) (debtLog, error) {
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
	var originBuf [stackTable]Origin
	origins, ok := readTable(originBuf[:0], r, (*reader).origin, Origin.Compare)
	if !ok || s.base < 0 || len(origins) >= coarseRef {
		return s, engines.ErrCorruptState
	}
	drainBuf := [stackTable]drain{nsDrain}
	drains := drainBuf[:1]
	if s.hasDrains() {
		getDrain := func(r *reader) drain { return drain{unit: r.i64(), rate: r.i64()} }
		if drains, ok = readTable(drains, r, getDrain, drain.compare); !ok {
			return s, engines.ErrCorruptState
		}
	}
	usedO, usedD := make([]bool, len(origins)), make([]bool, len(drains))
	n := r.u32()
	// Room for one more: a decision inserts its admission.
	s.events = slices.Grow(buf[:0], min(n, len(b)/18)+1)
	coarse := false
	for range n {
		e := event{t: r.i64(), cost: r.i64(), d: nsDrain}
		ref := r.u16()
		if ref&coarseRef != 0 {
			if exp := r.u8(); exp >= 1 && exp <= 62 {
				e.g = 1 << exp
			}
			coarse = true
		}
		e.o = refer(r, origins, usedO, ref&^coarseRef)
		if s.hasDrains() {
			e.d, e.seg = refer(r, drains, usedD, r.u16()), r.u16()
		}
		switch n := len(s.events); {
		case r.bad, e.t <= s.cut, e.cost <= 0, e.d.unit <= 0, e.d.rate <= 0,
			n > 0 && compareKey(s.events[n-1], e) >= 0,
			ref&coarseRef != 0 && (e.g == 0 || e.seg != 0 || (e.t%e.g+e.g)%e.g != e.g-1):
			return s, engines.ErrCorruptState
		}
		s.events = append(s.events, e)
	}
	if r.bad || !r.done() || !allUsed(usedO) || (s.hasDrains() && !allUsed(usedD)) {
		return s, engines.ErrCorruptState
	}
	if coarse {
		// A canonical state holds no event a coarse one covers.
		var dropped bool
		if s.events, dropped = uncovered(s.events); dropped {
			return s, engines.ErrCorruptState
		}
	}
	return s, nil
}

func (s *debtLog) encode() ([]byte, error) {
	var originBuf [stackTable]Origin
	origins, err := tableOf(originBuf[:0], s.events, func(e event) Origin { return e.o }, Origin.Compare)
	if err != nil {
		return nil, err
	}
	if len(origins) >= coarseRef {
		return nil, engines.ErrOverflow
	}
	var drainBuf [stackTable]drain
	var drains []drain
	if s.hasDrains() {
		if drains, err = tableOf(drainBuf[:0], s.events, func(e event) drain { return e.d }, drain.compare); err != nil {
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
		if ref := indexIn(origins, e.o, Origin.Compare); e.g > 0 {
			b = append(appendU16(b, ref|coarseRef), byte(bits.TrailingZeros64(uint64(e.g))))
		} else {
			b = appendU16(b, ref)
		}
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

// join returns the join with o, its events in buf: the larger (cut, base)
// register, and the union of the events after its cut, each at its largest
// cost.
func (s *debtLog) join(o *debtLog, buf []event) debtLog {
	a, b := s, o
	if compareBase(a, b) < 0 {
		a, b = b, a
	}
	out := debtLog{kind: a.kind, cut: a.cut, base: a.base, unit: a.unit}
	cut := a.cut
	out.events = union(buf, a.events, b.events, compareKey, event.join, func(e event) bool { return e.t > cut })
	out.events, _ = uncovered(out.events)
	return out
}

// joinDebt is join (see Join) for two debt logs of kind k, decoded, joined
// and encoded with their events on the stack (see tableOf).
func joinDebt(a, b []byte, k Kind) (j Joined, expiryErr, err error) {
	var bufA, bufB, bufJ [stackEvents]event
	if len(a) == 0 {
		a, b = b, a // a holds a state
	}
	x, err := decodeDebt(a, k, bufA[:0])
	if err != nil {
		return j, nil, err
	}
	if len(b) == 0 {
		// The decoder takes only canonical bytes: a state is its own
		// encoding.
		j.State = slices.Clone(a)
	} else {
		y, err := decodeDebt(b, k, bufB[:0])
		if err != nil {
			return j, nil, err
		}
		x = x.join(&y, bufJ[:0])
		if j.State, err = x.encode(); err != nil {
			return Joined{}, nil, err
		}
	}
	j.Kind = k
	j.Expiry, expiryErr = x.expiry()
	return j, expiryErr, nil
}

// Coarsening (crdt-design.md 1.1, "Cap"): a debt log keeps every event
// after its cut, so a key decided thousands of times a second holds
// thousands of them (its last 100 ms or so), and one decided through a
// partition every event since the split; each decision reads and writes
// them all. So once a log holds more than capEvents events of its writer,
// the writer merges its own events, each into the aligned quantum of at most
// a quarter of its age (so the recent ones stay exact), one coarse event at
// the quantum's end with their summed cost. Moving cost later only makes
// the debt last longer, by less than the quantum: nothing is lost, and the
// log keeps a few events per doubling of age.
//
// Only the writer merges its events, and only in quanta that
//   - end before the decision instant t (the age rule sees to it): its
//     later stamps are never earlier than t (see debtView.at), so no event
//     of its can join a quantum afterwards, and its decisions stay at their
//     own instant;
//   - start at or after b.Unfolded: no node has folded an event there, so
//     the finer copies the coarse event covers are dropped in a join
//     (uncovered), never counted twice from a base;
//   - hold events of one drain (a change of parameters stays exact).
const (
	capEvents   = 64
	minQuantum  = 1 << 17 // ns, about 131 us
	ageDivision = 4       // a quantum is at most a quarter of its events' age
)

// coarsen merges o's events as above when it has more than capEvents.
func (s *debtLog) coarsen(o Origin, unfolded, t int64) error {
	own := 0
	for _, e := range s.events {
		if e.o == o {
			own++
		}
	}
	if own <= capEvents {
		return nil
	}
	out := make([]event, 0, len(s.events))
	var group []event // o's events in the quantum [start, start+g)
	var start, g int64
	flush := func() error {
		if len(group) < 2 || g < 2 || slices.ContainsFunc(group, func(e event) bool { return e.d != group[0].d }) {
			out = append(out, group...)
			group = group[:0]
			return nil
		}
		c := event{t: start + g - 1, o: o, d: group[0].d, g: g}
		for _, e := range group {
			var err error
			if c.cost, err = add(c.cost, e.cost); err != nil {
				return err
			}
		}
		out = append(out, c)
		group = group[:0]
		return nil
	}
	for _, e := range s.events {
		switch {
		case e.o != o:
			out = append(out, e)
			continue
		case len(group) > 0 && e.t <= start+g-1:
			group = append(group, e)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		start, g = quantum(e, unfolded, t)
		group = append(group, e)
	}
	if err := flush(); err != nil {
		return err
	}
	slices.SortFunc(out, compareKey)
	s.events = out
	return nil
}

// quantum returns the aligned quantum e may be merged in (see coarsen): the
// largest of at most a quarter of its age that starts at or after unfolded,
// no finer than e's own; e's own instant when none. Such a quantum ends
// before t: it starts at or before e.t and is shorter than t-e.t.
func quantum(e event, unfolded, t int64) (start, g int64) {
	if most := minus(t, e.t) / ageDivision; most > 0 {
		for g = int64(1) << (bits.Len64(uint64(most)) - 1); g >= max(minQuantum, e.g); g >>= 1 {
			if start = e.t - ((e.t%g)+g)%g; start >= unfolded {
				return start, g
			}
		}
	}
	return e.t, 1
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
	v := &debtView{p: p, self: self}
	var err error
	v.debtLog, err = decodeDebt(state, p.kind, v.buf[:0])
	return v, err
}

// debtView is a view of a debt log.
type debtView struct {
	debtLog
	p    debtParams
	self Origin
	cost int64 // of the admission check allowed
	// buf holds the events of a short log, so that the view is one
	// allocation: room for a key's usual one event and the admission.
	buf [2]event
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
// an event), records the admission and coarsens the writer's events.
func (v *debtView) admit(t, _ int64, b Bounds) error {
	if _, err := v.fold(min(b.Complete, t)); err != nil {
		return err
	}
	if err := v.charge(t, v.self, v.p.drain, v.cost); err != nil {
		return err
	}
	return v.coarsen(v.self, b.Unfolded, t)
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
