package engines

import "math/bits"

// fwc is the fixed window counter: at most limit units per window, windows
// aligned to the Unix epoch ([i*window, (i+1)*window) for integer i).
//
// State (18 bytes): version, kind, newest int64 (the now of the last Commit),
// count int64 (units admitted in newest's window, > 0).
type fwc struct {
	limit, window int64
}

const fwcLen = headerLen + 16

// NewFWC returns a fixed window counter admitting limit units per window ns.
func NewFWC(limit, window int64) (Limiter, error) {
	if limit <= 0 || window <= 0 {
		return nil, ErrNotPositive
	}
	return fwc{limit: limit, window: window}, nil
}

func (fwc) Kind() Kind { return FWC }

// at returns the time the decision uses (now, or the newest recorded time when
// now is earlier), the units already counted in that time's window, and the
// window's end.
//
// Only newest is stored, not its window: after a change of window length the
// count is charged to the new window that holds newest, which never moves
// counted units into the past.
func (l fwc) at(state []byte, now int64) (t, used, end int64, err error) {
	newest, count := now, int64(0) // a missing key: nothing counted
	if len(state) > 0 {
		if err := checkKind(state, FWC); err != nil {
			return 0, 0, 0, err
		}
		if len(state) != fwcLen {
			return 0, 0, 0, ErrCorruptState
		}
		newest, count = getInt(state, 2), getInt(state, 10)
		if count <= 0 {
			return 0, 0, 0, ErrCorruptState
		}
	}
	return l.counted(newest, count, now)
}

// counted is at for a decoded state: count units recorded at newest.
func (l fwc) counted(newest, count, now int64) (t, used, end int64, err error) {
	now = max(now, newest)
	_, off := floorDivMod(now, l.window)
	// start = now - off >= MinInt64 needs now >= MinInt64 + off.
	if off > 0 && now-off > now {
		return 0, 0, 0, ErrOverflow
	}
	start := now - off
	if end, err = add(start, l.window); err != nil {
		return 0, 0, 0, err
	}
	if newest >= start {
		used = count
	}
	return now, used, end, nil
}

// Check implements Limiter. Remaining is limit minus the units counted in the
// current window; ResetAfter is the time to the window's end when anything is
// counted; a limited request may retry when the next window starts.
func (l fwc) Check(state []byte, now, qty int64) (Result, error) {
	if qty < 0 {
		return Result{}, ErrNegative
	}
	now, used, end, err := l.at(state, now)
	if err != nil {
		return Result{}, err
	}
	return l.check(now, used, end, qty), nil
}

// check decides qty >= 0 at now, used units being counted in now's window,
// which ends at end.
func (l fwc) check(now, used, end, qty int64) Result {
	res := Result{Limit: l.limit, RetryAfter: -1}
	// used >= 0 and limit > 0, so limit-used cannot overflow; it is negative
	// when the limit was lowered below what this window already counts.
	if qty > l.limit-used {
		res.Limited = true
		if qty <= l.limit {
			res.RetryAfter = end - now
		}
	} else {
		used += qty
	}
	res.Remaining = max(0, l.limit-used)
	if used > 0 {
		res.ResetAfter = end - now
	}
	return res
}

// Commit implements Limiter. The state is full again when the window ends.
func (l fwc) Commit(state []byte, now, qty int64) ([]byte, int64, error) {
	if err := commitQty(qty); err != nil {
		return nil, 0, err
	}
	return l.commit(state, now, qty, false)
}

// commit is Commit of qty > 0; with force past the limit too (Force).
func (l fwc) commit(state []byte, now, qty int64, force bool) ([]byte, int64, error) {
	now, used, end, err := l.at(state, now)
	if err != nil {
		return nil, 0, err
	}
	if !force && qty > l.limit-used {
		return nil, 0, ErrLimited
	}
	count, err := add(used, qty)
	if err != nil {
		return nil, 0, err
	}
	next := reuse(state, fwcLen)
	writeHeader(next, FWC)
	putInt(next, 2, now)
	putInt(next, 10, count)
	return next, end, nil
}

// An FWC state packs (packed.go) counting newest back from ref, which the
// window's end precedes, so it needs only as many bits as the window:
//
//	bits 58-63: w, the width of d = ref - newest (0..58)
//	bits w-57:  count
//	bits 0..w-1: d
const (
	packWidthShift = 58
	packBody       = 1<<packWidthShift - 1
)

// packFWC is Pack of an FWC state with a valid header: it fits when newest
// is not after ref and ref - newest and the count fit in 58 bits together.
func packFWC(state []byte, ref int64) (uint64, bool) {
	if len(state) != fwcLen {
		return 0, false
	}
	newest, count := getInt(state, 2), getInt(state, 10)
	if newest > ref || count < 0 {
		return 0, false
	}
	d := uint64(ref) - uint64(newest) // exact: newest <= ref
	w := bits.Len64(d)
	if w > packWidthShift || bits.Len64(uint64(count)) > packWidthShift-w {
		return 0, false
	}
	return uint64(w)<<packWidthShift | uint64(count)<<w | d, true
}

// appendFWC appends the FWC state packFWC made word of.
func appendFWC(dst []byte, word uint64, ref int64) []byte {
	w := word >> packWidthShift
	d := word & (1<<w - 1)
	dst, state := grow(dst, fwcLen)
	writeHeader(state, FWC)
	putInt(state, 2, int64(uint64(ref)-d))
	putInt(state, 10, int64(word&packBody>>w))
	return dst
}
