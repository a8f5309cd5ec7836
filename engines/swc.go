package engines

import "math"

// Sub-window counts of the sliding window counter (SUBWINDOWS n).
const (
	DefaultSubwindows = 2
	MinSubwindows     = 2
	MaxSubwindows     = 60
)

// swc is the sliding window counter with n counters. Each spans a sub-window of
// window/(n-1) ns, and the units in (now-window, now] are estimated as the
// current sub-window's counter, plus the n-2 full counters before it, plus the
// oldest counter weighted by the part of its sub-window still inside the
// window, floor(c*(S-elapsed)/S), where S is the current sub-window's length
// and elapsed the time since it began. With n = 2 this is exactly Cloudflare's
// estimate: current + previous*(unelapsed fraction of the current window).
//
// Boundaries are exact when window is not a multiple of m = n-1: sub-window k
// starts at ceil(k*window/m), so every window is aligned to the Unix epoch as
// in FWC, every m consecutive sub-windows span exactly window ns, and the
// lengths (floor or ceil of window/m) repeat with period m, which makes the
// oldest sub-window exactly as long as the current one and the weight exact.
//
// State (10 + 8n bytes): version, kind, newest int64 (the now of the last
// Commit), then n counters int64, the first for newest's sub-window, each next
// one for the sub-window before.
type swc struct {
	limit, window int64
	n             int   // counters
	m             int64 // sub-windows per window, n-1
	s, r          int64 // window = m*s + r, 0 <= r < m
}

const swcCounters = headerLen + 8 // offset of the first counter

// NewSWC returns a sliding window counter admitting about limit units in any
// window ns, with n counters (MinSubwindows..MaxSubwindows).
//
// Durations up to three windows must fit in int64 (window <= about 97 years),
// and limit <= MaxInt64/2 so that sums of counters cannot overflow; beyond
// both is ErrOverflow.
func NewSWC(limit, window, n int64) (Limiter, error) {
	if limit <= 0 || window <= 0 {
		return nil, ErrNotPositive
	}
	if n < MinSubwindows || n > MaxSubwindows || window < n-1 {
		return nil, ErrSubwindows
	}
	if window > math.MaxInt64/3 || limit > math.MaxInt64/2 {
		return nil, ErrOverflow
	}
	m := n - 1
	return swc{limit: limit, window: window, n: int(n), m: m, s: window / m, r: window % m}, nil
}

func (swc) Kind() Kind { return SWC }

// swcPos locates a time: in the epoch-aligned window q, sub-window j, off ns
// after the window's start.
type swcPos struct {
	q, j, off int64
}

func (l swc) pos(t int64) swcPos {
	q, off := floorDivMod(t, l.window)
	return swcPos{q: q, j: l.sub(off), off: off}
}

// sub returns the sub-window holding offset off of a window: floor(m*off/window).
func (l swc) sub(off int64) int64 {
	if l.m == 1 {
		return 0
	}
	j, _ := mulDiv(off, l.m, l.window) // off < window, so this is < m
	return int64(j)
}

// start returns the offset of sub-window j in its window, ceil(j*window/m),
// for 0 <= j <= m. Divisions dominate the cost of a decision, so the common
// case of a window that is a multiple of m needs none.
func (l swc) start(j int64) int64 {
	if l.r == 0 {
		return j * l.s
	}
	return j*l.s + ceilDiv(j*l.r, l.m) // j*r < m*m: tiny
}

// rel returns the start of the i-th sub-window after p's minus p's time, for
// 0 <= i <= m+1: <= 0 for i = 0, and below 3*window (NewSWC makes it fit).
func (l swc) rel(p swcPos, i int64) int64 {
	var q int64
	j := p.j + i
	for j >= l.m { // j <= 2m: at most two rounds, cheaper than dividing
		j -= l.m
		q++
	}
	return q*l.window + l.start(j) - p.off
}

// swcView reads the counters of a state as seen from a later sub-window.
type swcView struct {
	b     []byte // the encoded state; nil for a missing key
	ns    int    // counters stored (n of the writer; equal to l.n unless n changed)
	shift int    // sub-windows from the state's newest to the decision time
	add   int64  // units added to the current sub-window by the request decided
}

// counter returns the units of the i-th sub-window before the current one
// (i = 0: the current one).
func (v *swcView) counter(i int) int64 {
	c := int64(0)
	if i == 0 {
		c = v.add
	}
	if i -= v.shift; i >= 0 && i < v.ns {
		c += getInt(v.b, swcCounters+8*i)
	}
	return c
}

// view decodes state and returns it as seen from now (or from the newest
// recorded time when now is earlier), with that time and its position.
//
// A state written with another window or n is read under the current ones: its
// counters are the newest sub-windows up to newest's, those beyond n dropped.
func (l swc) view(state []byte, now int64) (v swcView, t int64, p swcPos, err error) {
	if len(state) == 0 {
		return swcView{}, now, l.pos(now), nil
	}
	if err := checkKind(state, SWC); err != nil {
		return v, 0, p, err
	}
	body := len(state) - swcCounters
	if body%8 != 0 || body/8 < MinSubwindows || body/8 > MaxSubwindows {
		return v, 0, p, ErrCorruptState
	}
	// Some counter is > 0: a Commit just added to the newest (a lease's
	// Credit may have emptied it since, not all of them).
	if !countersFit(state, body/8) || countersZero(state, body/8) {
		return v, 0, p, ErrCorruptState
	}
	v, t, p = l.viewAt(state, body/8, getInt(state, headerLen), now)
	return v, t, p, nil
}

// countersFit reports whether the ns counters encoded in b are >= 0 and their
// sum fits in int64, so that no sum taken by a decision can overflow.
func countersFit(b []byte, ns int) bool {
	var sum int64
	for i := range ns {
		c := getInt(b, swcCounters+8*i)
		if c < 0 || c > math.MaxInt64-sum {
			return false
		}
		sum += c
	}
	return true
}

// countersZero reports whether the ns counters encoded in b are all 0.
func countersZero(b []byte, ns int) bool {
	for i := range ns {
		if getInt(b, swcCounters+8*i) != 0 {
			return false
		}
	}
	return true
}

// viewAt is view for a decoded state: ns counters encoded in b as in a state,
// the first for newest's sub-window.
func (l swc) viewAt(b []byte, ns int, newest, now int64) (v swcView, t int64, p swcPos) {
	v = swcView{b: b, ns: ns}
	t = max(now, newest)
	p = l.pos(t)
	p0 := p
	// newest is usually in t's window: then its position needs no division
	// by the window. (t-newest is computed in uint64, where it cannot overflow.)
	if d := uint64(t) - uint64(newest); d <= uint64(p.off) {
		p0.off -= int64(d)
		p0.j = l.sub(p0.off)
	} else {
		p0 = l.pos(newest)
	}
	// The shift is (q-q0)*m + j-j0; anything >= ns drops every counter.
	switch dq := uint64(p.q) - uint64(p0.q); {
	case dq > 2:
		v.shift = MaxSubwindows + 1
	default:
		v.shift = int(int64(dq)*l.m + p.j - p0.j)
	}
	return v, t, p
}

// estimate returns the units counted in (t-window, t], t at p.
func (l swc) estimate(v *swcView, p swcPos) int64 {
	var full int64
	for i := range l.n - 1 {
		full += v.counter(i)
	}
	return full + weight(v.counter(l.n-1), l.rel(p, 1), l.start(p.j+1)-l.start(p.j))
}

// weight returns floor(c*x/size), the part of counter c still counted when x ns
// of its sub-window of size ns are inside the window (0 < x <= size).
func weight(c, x, size int64) int64 {
	q, _ := mulDiv(c, x, size) // c*x <= c*size: the quotient fits
	return int64(q)
}

// until returns the largest x at which weight(c, x, size) <= r, that is the
// largest x < (r+1)*size/c, for c > r >= 0. As the window slides, x shrinks, so
// from then on c counts at most r units.
func until(c, r, size int64) int64 {
	q, rem := mulDiv(r+1, size, c) // (r+1)*size < c*size: the quotient fits
	if rem != 0 {
		q++
	}
	return int64(q) - 1
}

// retryAfter returns how long from t at p until the estimate is at most
// avail. It walks the sub-windows from the current one on: in the i-th, the
// counters of the n-2 sub-windows before it count fully (future ones are 0)
// and the oldest decays linearly, so within one sub-window the first fitting
// instant has a closed form. By the m-th, only the current counter remains,
// weighted, and it fits by then at the latest (qty <= limit).
func (l swc) retryAfter(v *swcView, p swcPos, avail int64) int64 {
	m := int(l.m)
	var full int64
	for i := range m {
		full += v.counter(i)
	}
	for i := 0; i <= m; i++ {
		if full <= avail {
			c := v.counter(m - i)
			begin, end := l.rel(p, int64(i)), l.rel(p, int64(i)+1)
			if c <= avail-full { // fits from the sub-window's start (until needs c > r)
				return max(begin, 0)
			}
			return max(end-until(c, avail-full, end-begin), begin, 0)
		}
		full -= v.counter(m - 1 - i) // it becomes the oldest
	}
	return 0 // not reached: at i = m, full is 0
}

// resetAfter returns how long from t at p until the estimate is 0 for good:
// the newest non-zero counter, once it is the oldest, weighs 0.
func (l swc) resetAfter(v *swcView, p swcPos) int64 {
	m := int(l.m)
	for i := 0; i <= m; i++ {
		if c := v.counter(i); c > 0 {
			ahead := int64(m - i) // sub-windows until it is the oldest
			begin, end := l.rel(p, ahead), l.rel(p, ahead+1)
			return max(end-until(c, 0, end-begin), 0)
		}
	}
	return 0
}

// Check implements Limiter. Remaining is limit minus the estimate; ResetAfter is
// the time until the estimate is 0 for good; a limited request may retry at the
// first instant its units fit under the estimate.
func (l swc) Check(state []byte, now, qty int64) (Result, error) {
	if qty < 0 {
		return Result{}, ErrNegative
	}
	v, _, p, err := l.view(state, now)
	if err != nil {
		return Result{}, err
	}
	return l.check(&v, p, qty), nil
}

// check decides qty >= 0 on the counters v, seen from the time at p.
func (l swc) check(v *swcView, p swcPos, qty int64) Result {
	used := l.estimate(v, p)
	res := Result{Limit: l.limit, RetryAfter: -1}
	if qty > l.limit-used {
		res.Limited = true
		if qty <= l.limit {
			res.RetryAfter = l.retryAfter(v, p, l.limit-qty)
		}
		res.Remaining = max(0, l.limit-used)
	} else {
		v.add = qty // the estimate grows by exactly qty
		res.Remaining = l.limit - used - qty
	}
	res.ResetAfter = l.resetAfter(v, p)
	return res
}

// Commit implements Limiter: it shifts the counters to the current sub-window
// and adds qty to it. The state is full again when that counter, then the
// oldest, weighs 0.
func (l swc) Commit(state []byte, now, qty int64) ([]byte, int64, error) {
	if err := commitQty(qty); err != nil {
		return nil, 0, err
	}
	return l.commit(state, now, qty, false)
}

// commit is Commit of qty > 0; with force past the limit too (Force). The
// counters' sum must still fit in int64.
func (l swc) commit(state []byte, now, qty int64, force bool) ([]byte, int64, error) {
	v, t, p, err := l.view(state, now)
	if err != nil {
		return nil, 0, err
	}
	if !force && qty > l.limit-l.estimate(&v, p) {
		return nil, 0, ErrLimited
	}
	if force {
		var sum int64 // <= MaxInt64 (view checked it)
		for i := range l.n {
			sum += v.counter(i)
		}
		if qty > math.MaxInt64-sum {
			return nil, 0, ErrOverflow
		}
	}
	// Everything that can fail comes before the first write: state may be
	// the caller's stored value.
	v.add = qty
	fullAt, err := add(t, l.resetAfter(&v, p))
	if err != nil {
		return nil, 0, err
	}
	size := swcCounters + 8*l.n
	var next []byte
	if v.ns == l.n {
		// Shift in place: the counter of sub-window i moves to i+shift.
		next = state
		d := min(v.shift, l.n)
		copy(next[swcCounters+8*d:], next[swcCounters:size-8*d])
		clear(next[swcCounters : swcCounters+8*d])
		putInt(next, swcCounters, getInt(next, swcCounters)+qty)
	} else {
		// A missing key, or n changed: the counters move to a new layout.
		next = make([]byte, size)
		for i := range l.n {
			putInt(next, swcCounters+8*i, v.counter(i)) // qty included
		}
	}
	writeHeader(next, SWC)
	putInt(next, headerLen, t)
	return next, fullAt, nil
}
