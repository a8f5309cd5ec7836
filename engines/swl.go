package engines

import "math"

// MaxSWLLimit is the largest limit of a sliding window log. Each entry of the
// log holds at least one unit admitted in the window, so this bounds a key's
// state to 14 + 12*MaxSWLLimit bytes (about 1.2 MB).
const MaxSWLLimit = 100_000

// swl is the sliding window log: at most limit units in every window
// (t-window, t], exactly.
//
// State: a ring buffer of (t int64, cum uint32) entries, one per distinct
// admission time, oldest first. cum is the running total of units admitted up
// to and including the entry, modulo 2^32; the units of a run of entries are a
// difference of two cums, so a Check reads any suffix sum in O(1) and finds
// the oldest live entry by a search from the old end (see gallop), without
// scanning the log. Every difference taken is at most MaxSWLLimit, far below
// 2^32, so the wrap-around is harmless.
//
//	0   version, kind
//	2   head uint32  ring index of the oldest entry
//	6   n    uint32  entries in use, >= 1
//	10  base uint32  cum before the oldest entry (that of the last one dropped)
//	14  cap entries of 12 bytes: t int64, cum uint32
//
// The capacity starts at min(limit, 8), doubles when full, and never exceeds
// the largest limit the key was used with. It is not shrunk: an idle key
// expires one window after its last admission anyway.
type swl struct {
	limit, window int64
}

const (
	swlHeaderLen  = headerLen + 12
	swlEntryLen   = 12
	swlInitialCap = 8
)

// NewSWL returns a sliding window log admitting limit units in any window ns.
// A limit above MaxSWLLimit is ErrLimitTooLarge.
func NewSWL(limit, window int64) (Limiter, error) {
	if limit <= 0 || window <= 0 {
		return nil, ErrNotPositive
	}
	if limit > MaxSWLLimit {
		return nil, ErrLimitTooLarge
	}
	return swl{limit: limit, window: window}, nil
}

func (swl) Kind() Kind { return SWL }

// swlLog is a view of an encoded log. The zero swlLog is the empty log of a
// missing key.
type swlLog struct {
	b             []byte
	head, n, size int // size: capacity in entries
	base          uint32
}

// decodeSWL checks the layout of state. It does not read every entry, so a
// well-formed garbage log gives wrong answers, never a panic.
func decodeSWL(state []byte) (swlLog, error) {
	if len(state) == 0 {
		return swlLog{}, nil
	}
	if err := checkKind(state, SWL); err != nil {
		return swlLog{}, err
	}
	body := len(state) - swlHeaderLen
	if body < swlEntryLen || body%swlEntryLen != 0 || body/swlEntryLen > MaxSWLLimit {
		return swlLog{}, ErrCorruptState
	}
	lg := swlLog{
		b:    state,
		head: int(getU32(state, 2)),
		n:    int(getU32(state, 6)),
		size: body / swlEntryLen,
		base: getU32(state, 10),
	}
	if lg.head >= lg.size || lg.n == 0 || lg.n > lg.size {
		return swlLog{}, ErrCorruptState
	}
	// Each entry holds at least one unit and the log at most MaxSWLLimit.
	if total := lg.cum(lg.n-1) - lg.base; total > MaxSWLLimit || uint32(lg.n) > total {
		return swlLog{}, ErrCorruptState
	}
	return lg, nil
}

// off returns the byte offset of the i-th oldest entry.
func (lg *swlLog) off(i int) int {
	j := lg.head + i
	if j >= lg.size {
		j -= lg.size
	}
	return swlHeaderLen + j*swlEntryLen
}

func (lg *swlLog) time(i int) int64 { return getInt(lg.b, lg.off(i)) }

func (lg *swlLog) cum(i int) uint32 { return getU32(lg.b, lg.off(i)+8) }

// before returns the cum just before the i-th oldest entry.
func (lg *swlLog) before(i int) uint32 {
	if i == 0 {
		return lg.base
	}
	return lg.cum(i - 1)
}

// from returns the units in entries i.. (the whole log's suffix from i).
func (lg *swlLog) from(i int) int64 {
	if i >= lg.n {
		return 0
	}
	return int64(lg.cum(lg.n-1) - lg.before(i))
}

// now returns the time a decision uses: now, or the newest entry's time.
func (lg *swlLog) now(now int64) int64 {
	if lg.n == 0 {
		return now
	}
	return max(now, lg.time(lg.n-1))
}

// live returns the index of the oldest entry inside (now-window, now]; the
// ones before it have expired.
func (lg *swlLog) live(now, window int64) int {
	if now < math.MinInt64+window { // nothing is older than now-window
		return 0
	}
	cut := now - window
	return gallop(0, lg.n, func(i int) bool { return lg.time(i) > cut })
}

// reach returns the first entry k >= i such that entries i..k hold at least
// need units (need <= the units in i..): once k expires, need units have left
// the window.
func (lg *swlLog) reach(i int, need int64) int {
	base := lg.before(i)
	k := gallop(i, lg.n, func(k int) bool { return int64(lg.cum(k)-base) >= need })
	return min(k, lg.n-1) // n only for a garbled log
}

// gallop returns the first i in [lo, n) with ok(i), or n, for ok false then
// true over the range. It probes lo, lo+1, lo+3, lo+7, ... and then bisects,
// so an answer k entries after lo costs O(log k) probes. The answers sought
// are at the old end of the log, where in steady state only an entry or two
// have expired since the last Commit: a Check costs O(1), however long the log.
func gallop(lo, n int, ok func(int) bool) int {
	// Every i < lo is not ok; the answer is in [lo, hi] once ok(hi) or hi >= n.
	hi := lo
	for step := 1; hi < n && !ok(hi); step *= 2 {
		lo, hi = hi+1, hi+step
	}
	hi = min(hi, n)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Check implements Limiter. Remaining is limit minus the units in (now-window,
// now]; ResetAfter is the time until the newest entry leaves the window; a
// limited request may retry when enough of the oldest entries have left it.
func (l swl) Check(state []byte, now, qty int64) (Result, error) {
	if qty < 0 {
		return Result{}, ErrNegative
	}
	lg, err := decodeSWL(state)
	if err != nil {
		return Result{}, err
	}
	now = lg.now(now)
	first := lg.live(now, l.window)
	used := lg.from(first)
	res := Result{Limit: l.limit, RetryAfter: -1}
	switch {
	case qty > l.limit-used:
		res.Limited = true
		if qty <= l.limit {
			// used+qty-limit <= used units must leave; the entry whose expiry
			// frees the last of them is inside the window, so the wait is > 0.
			k := lg.reach(first, used+qty-l.limit)
			res.RetryAfter = l.window - (now - lg.time(k))
		}
	case qty > 0:
		// The new entry is at now and is the last to leave.
		res.Remaining = l.limit - used - qty
		res.ResetAfter = l.window
		return res, nil
	}
	res.Remaining = max(0, l.limit-used)
	if used > 0 {
		res.ResetAfter = l.window - (now - lg.time(lg.n-1))
	}
	return res, nil
}

// Commit implements Limiter: it drops the expired entries from the head, then
// adds qty to the newest entry when it is at now, or appends one. The state is
// full again one window after now.
func (l swl) Commit(state []byte, now, qty int64) ([]byte, int64, error) {
	if err := commitQty(qty); err != nil {
		return nil, 0, err
	}
	lg, err := decodeSWL(state)
	if err != nil {
		return nil, 0, err
	}
	now = lg.now(now)
	first := lg.live(now, l.window)
	if qty > l.limit-lg.from(first) {
		return nil, 0, ErrLimited
	}
	fullAt, err := add(now, l.window)
	if err != nil {
		return nil, 0, err
	}
	// Drop the expired entries.
	lg.base = lg.before(first)
	lg.head = (lg.head + first) % max(lg.size, 1)
	lg.n -= first
	if lg.n > 0 && lg.time(lg.n-1) == now {
		o := lg.off(lg.n-1) + 8
		putU32(lg.b, o, getU32(lg.b, o)+uint32(qty)) // qty <= MaxSWLLimit
	} else {
		if lg.n == lg.size {
			if err := lg.grow(l.limit); err != nil {
				return nil, 0, err
			}
		}
		last := lg.base
		if lg.n > 0 {
			last = lg.cum(lg.n - 1)
		}
		lg.n++
		o := lg.off(lg.n - 1)
		putInt(lg.b, o, now)
		putU32(lg.b, o+8, last+uint32(qty))
	}
	writeHeader(lg.b, SWL)
	putU32(lg.b, 2, uint32(lg.head))
	putU32(lg.b, 6, uint32(lg.n))
	putU32(lg.b, 10, lg.base)
	return lg.b, fullAt, nil
}

// grow moves the log into a new buffer of about twice the capacity, oldest
// entry first. The new capacity is at most limit: a full log of limit entries
// holds at least limit units, so it never needs to grow.
func (lg *swlLog) grow(limit int64) error {
	size := int(min(max(2*int64(lg.size), swlInitialCap), limit))
	if size <= lg.n { // only a log garbled into one-unit entries past limit
		return ErrCorruptState
	}
	b := make([]byte, swlHeaderLen+size*swlEntryLen)
	for i := range lg.n {
		copy(b[swlHeaderLen+i*swlEntryLen:], lg.b[lg.off(i):lg.off(i)+swlEntryLen])
	}
	lg.b, lg.head, lg.size = b, 0, size
	return nil
}
