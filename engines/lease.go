package engines

// Leases (QUOTA.LEASE in package commands) take a batch of units with one
// Commit, and later give back the part the holder did not use (Credit), or,
// in lazy mode, record units the holder already admitted (Force). Both are
// pure, like Check and Commit: same inputs, same bytes.

// A Grant locates the units of an earlier Commit in a state, so that Credit
// can take them back. GrantOf reads it from the state the Commit returned.
type Grant struct {
	At   int64 // the time the Commit used (the state's newest time after it)
	Debt int64 // TB, LB: the debt right after the Commit, in Unit
	Unit int64 // TB, LB: the unit that debt is counted in
}

// leaser is what an engine implements for leases; every Limiter of this
// package does, and lazy leases need force (SWL has none: see Force).
type leaser interface {
	grantOf(next []byte) (Grant, error)
	credit(state []byte, now int64, g Grant, qty int64) (next []byte, fullAt, credited int64, err error)
}

type forcer interface {
	force(state []byte, now, qty int64) (next []byte, fullAt int64, err error)
}

// GrantOf returns the Grant of the Commit that returned next.
func GrantOf(l Limiter, next []byte) (Grant, error) {
	if err := checkKind(next, l.Kind()); err != nil {
		return Grant{}, err
	}
	return l.(leaser).grantOf(next)
}

// Credit gives back up to qty >= 0 of the units of the Commit g describes, at
// now, and returns how many it gave back. It never gives back more than
// exact: the state after it is never more permissive than the state the
// Commit would have left with credited fewer units.
//
//   - FWC, SWL, SWC: the units come off the count of the window, log entry or
//     sub-window the Commit wrote, while it is still held; then credited is
//     min(qty, what that count holds) and the result is exact.
//   - TB, LB: a debt drains and is clamped at 0, so the Commit's units may
//     already be paid off by time. The debt the Commit left, drained to now,
//     bounds the part of today's debt that is the Commit's; Credit takes off
//     at most that (see docs/leases.md for the proof and the case where it
//     gives back less than exact); credited counts a part of a unit as one.
//
// credited 0 means nothing changed (write nothing). Otherwise next is the
// state to store until fullAt, or nil when it is back to full (the key may
// go). state must be the caller's own: it may be updated in place.
func Credit(l Limiter, state []byte, now int64, g Grant, qty int64) (next []byte, fullAt, credited int64, err error) {
	if qty < 0 {
		return nil, 0, 0, ErrNegative
	}
	if qty == 0 || len(state) == 0 {
		return nil, 0, 0, nil
	}
	if err := checkKind(state, l.Kind()); err != nil {
		return nil, 0, 0, err
	}
	return l.(leaser).credit(state, now, g, qty)
}

// CanForce reports whether l supports Force. The sliding window log does
// not: its log holds at most limit units in a window, which is what bounds
// its memory per key.
func CanForce(l Limiter) bool {
	_, ok := l.(forcer)
	return ok
}

// Force records qty > 0 units at now whatever the limit: units a lazy lease's
// holder has already admitted. The state may then hold more than the limit;
// Check refuses until enough has drained or slid out. Otherwise as Commit.
func Force(l Limiter, state []byte, now, qty int64) (next []byte, fullAt int64, err error) {
	f, ok := l.(forcer)
	if !ok {
		return nil, 0, ErrWrongKind
	}
	if err := commitQty(qty); err != nil {
		return nil, 0, err
	}
	return f.force(state, now, qty)
}

// FWC.

func (fwc) grantOf(next []byte) (Grant, error) {
	if len(next) != fwcLen {
		return Grant{}, ErrCorruptState
	}
	return Grant{At: getInt(next, 2)}, nil
}

func (l fwc) credit(state []byte, now int64, g Grant, qty int64) ([]byte, int64, int64, error) {
	t, used, end, err := l.at(state, now)
	if err != nil {
		return nil, 0, 0, err
	}
	qg, _ := floorDivMod(g.At, l.window)
	if qt, _ := floorDivMod(t, l.window); qg != qt || used == 0 {
		return nil, 0, 0, nil // the grant's window is over: its units count no more
	}
	c := min(qty, used)
	if c == used {
		return nil, 0, c, nil
	}
	next := reuse(state, fwcLen)
	writeHeader(next, FWC)
	putInt(next, 2, t)
	putInt(next, 10, used-c)
	return next, end, c, nil
}

func (l fwc) force(state []byte, now, qty int64) ([]byte, int64, error) {
	return l.commit(state, now, qty, true)
}

// SWL.

func (swl) grantOf(next []byte) (Grant, error) {
	lg, err := decodeSWL(next)
	if err != nil {
		return Grant{}, err
	}
	return Grant{At: lg.time(lg.n - 1)}, nil
}

// credit takes the units off the entry at g.At, dropping it when empty. The
// log is rewritten oldest first into a buffer of the same capacity.
func (l swl) credit(state []byte, now int64, g Grant, qty int64) ([]byte, int64, int64, error) {
	lg, err := decodeSWL(state)
	if err != nil {
		return nil, 0, 0, err
	}
	now = lg.now(now)
	first := lg.live(now, l.window)
	k := gallop(first, lg.n, func(i int) bool { return lg.time(i) >= g.At })
	if k == lg.n || lg.time(k) != g.At {
		return nil, 0, 0, nil // slid out of the window: its units count no more
	}
	units := int64(lg.cum(k) - lg.before(k))
	c := min(qty, units)
	if c == lg.from(first) {
		return nil, 0, c, nil // nothing left in the window
	}
	b := make([]byte, len(state))
	base, n := lg.before(first), 0
	for i := first; i < lg.n; i++ {
		cum := lg.cum(i)
		if i >= k {
			cum -= uint32(c)
		}
		if i == k && c == units {
			continue
		}
		o := swlHeaderLen + n*swlEntryLen
		putInt(b, o, lg.time(i))
		putU32(b, o+8, cum)
		n++
	}
	writeHeader(b, SWL)
	putU32(b, 2, 0)
	putU32(b, 6, uint32(n))
	putU32(b, 10, base)
	last := swlHeaderLen + (n-1)*swlEntryLen
	fullAt, err := add(getInt(b, last), l.window)
	if err != nil {
		return nil, 0, 0, err
	}
	return b, fullAt, c, nil
}

// SWC.

func (swc) grantOf(next []byte) (Grant, error) {
	if len(next) < swcCounters {
		return Grant{}, ErrCorruptState
	}
	return Grant{At: getInt(next, headerLen)}, nil
}

// credit takes the units off the counter of g.At's sub-window while the
// state still holds it.
func (l swc) credit(state []byte, now int64, g Grant, qty int64) ([]byte, int64, int64, error) {
	v, _, p, err := l.view(state, now)
	if err != nil {
		return nil, 0, 0, err
	}
	newest := getInt(state, headerLen)
	in, _ := Index(l, newest)
	ig, _ := Index(l, g.At)
	i := in - ig
	if v.ns != l.n || i < 0 || i >= int64(v.ns) {
		return nil, 0, 0, nil // n changed, or the sub-window is gone
	}
	o := swcCounters + 8*int(i)
	have := getInt(state, o)
	c := min(qty, have)
	if c == 0 {
		return nil, 0, 0, nil
	}
	putInt(state, o, have-c)
	if countersZero(state, v.ns) {
		return nil, 0, c, nil // full again
	}
	fullAt, err := add(max(now, newest), l.resetAfter(&v, p))
	if err != nil {
		putInt(state, o, have) // as it was
		return nil, 0, 0, err
	}
	return state, fullAt, c, nil
}

func (l swc) force(state []byte, now, qty int64) ([]byte, int64, error) {
	return l.commit(state, now, qty, true)
}

// TB, LB.

func (b bucket) grantOf(next []byte) (Grant, error) {
	if len(next) != bucketLen {
		return Grant{}, ErrCorruptState
	}
	return Grant{At: getInt(next, 2), Debt: getInt(next, 10), Unit: getInt(next, 18)}, nil
}

// credit takes off min(qty units, the grant's debt drained to now, the
// debt); credited counts a part of a unit as one.
func (b bucket) credit(state []byte, now int64, g Grant, qty int64) ([]byte, int64, int64, error) {
	t, d, err := b.debt(state, now)
	if err != nil {
		return nil, 0, 0, err
	}
	if g.Unit != b.unit || g.Debt < 0 {
		return nil, 0, 0, nil // another period since: the debts do not compare
	}
	_, left, err := DebtAt(g.At, g.Debt, g.Unit, t, b.rate, b.unit)
	if err != nil {
		return nil, 0, 0, err
	}
	amount := min(left, d)
	if cost, err := mul(qty, b.unit); err == nil {
		amount = min(amount, cost)
	}
	if amount == 0 {
		return nil, 0, 0, nil
	}
	c := ceilDiv(amount, b.unit) // part of a unit when the debt was less
	d -= amount
	if d == 0 {
		return nil, 0, c, nil
	}
	fullAt, err := add(t, ceilDiv(d, b.rate))
	if err != nil {
		return nil, 0, 0, err
	}
	next := reuse(state, bucketLen)
	writeHeader(next, b.kind)
	putInt(next, 2, t)
	putInt(next, 10, d)
	putInt(next, 18, b.unit)
	return next, fullAt, c, nil
}

func (b bucket) force(state []byte, now, qty int64) ([]byte, int64, error) {
	return b.commit(state, now, qty, true)
}
