package engines

// The functions below decide on states given as fields rather than bytes.
// The active-active mode (package replication/crdt/mstate) keeps each
// writer's part of a key apart, combines the parts into one of these
// single-node states at decision time, and decides on it here: a key with one
// writer then answers exactly as Check does, with no second copy of the
// arithmetic to drift from it.

// Params are a Limiter's parameters, in the units its decisions use.
type Params struct {
	Limit      int64 // the Limit of its Results
	Window     int64 // FWC, SWL, SWC: the window, ns
	Subwindows int64 // SWC: the number of counters n
	Unit       int64 // TB, LB: units per token or request (the period, ns)
	Rate       int64 // TB, LB: units drained per ns (the count per period)
}

// ParamsOf returns l's parameters. l must come from this package's
// constructors.
func ParamsOf(l Limiter) Params {
	switch l := l.(type) {
	case fwc:
		return Params{Limit: l.limit, Window: l.window}
	case swl:
		return Params{Limit: l.limit, Window: l.window}
	case swc:
		return Params{Limit: l.limit, Window: l.window, Subwindows: int64(l.n)}
	case bucket:
		return Params{Limit: l.limit, Unit: l.unit, Rate: l.rate}
	}
	return Params{}
}

// CheckDebt is Check for a TB or LB l on the state (cut, debt, unit): a
// bucket that owed debt units of unit at cut (see DebtAt). Another kind of l
// is ErrWrongKind.
func CheckDebt(l Limiter, cut, debt, unit, now, qty int64) (Result, error) {
	b, ok := l.(bucket)
	if !ok {
		return Result{}, ErrWrongKind
	}
	if qty < 0 {
		return Result{}, ErrNegative
	}
	if debt < 0 || (debt > 0 && unit <= 0) {
		return Result{}, ErrCorruptState
	}
	_, d, err := DebtAt(cut, debt, unit, now, b.rate, b.unit)
	if err != nil {
		return Result{}, err
	}
	return b.check(d, qty), nil
}

// CheckCounts is Check for an FWC or SWC l on a state whose newest recorded
// time is newest and whose counts, of newest's window (FWC) or sub-window
// (SWC) and then of each one before, are counts: FWC reads counts[0], SWC
// the first n (missing ones are 0). Counts must be >= 0 with a sum that fits
// in int64 (ErrCorruptState); unlike a stored state's, they may all be 0.
// Another kind of l is ErrWrongKind.
func CheckCounts(l Limiter, newest int64, counts []int64, now, qty int64) (Result, error) {
	if qty < 0 {
		return Result{}, ErrNegative
	}
	switch l := l.(type) {
	case fwc:
		var count int64
		if len(counts) > 0 {
			count = counts[0]
		}
		if count < 0 {
			return Result{}, ErrCorruptState
		}
		t, used, end, err := l.counted(newest, count, now)
		if err != nil {
			return Result{}, err
		}
		return l.check(t, used, end, qty), nil
	case swc:
		ns := min(len(counts), MaxSubwindows)
		b := make([]byte, swcCounters+8*ns)
		for i, c := range counts[:ns] {
			putInt(b, swcCounters+8*i, c)
		}
		if !countersFit(b, ns) {
			return Result{}, ErrCorruptState
		}
		v, _, p := l.viewAt(b, ns, newest, now)
		return l.check(&v, p, qty), nil
	}
	return Result{}, ErrWrongKind
}

// Index returns the number of the window (FWC) or sub-window (SWC) that
// holds t: windows are numbered from the one starting at the Unix epoch, and
// sub-window k of an SWC starts at ceil(k*window/(n-1)), so its number is
// floor(t*(n-1)/window). Another kind of l is ErrWrongKind.
func Index(l Limiter, t int64) (int64, error) {
	switch l := l.(type) {
	case fwc:
		q, _ := floorDivMod(t, l.window)
		return q, nil
	case swc:
		// k = q*m + j lies between t and 0, since m <= window. q*m alone
		// can fall below MinInt64 when t is near it, but (q+1)*m cannot.
		p := l.pos(t)
		if p.q < 0 {
			return (p.q+1)*l.m - (l.m - p.j), nil
		}
		return p.q*l.m + p.j, nil
	}
	return 0, ErrWrongKind
}
