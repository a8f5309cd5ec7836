package engines

import (
	"math"
	"math/bits"
)

// bucket is the debt bucket behind TB and LB (reference crdt-design.md 1.1):
// the state is a debt D >= 0 in units that drains at rate units per ns; a
// request of q costs q*unit units and is allowed iff D + q*unit <= size. With
// unit = the period (refill_period or leak_period) and rate = the count per
// period, one token or one request is exactly unit units and the drain is
// exactly count per period, so non-integer intervals (period/count) need no
// rounding anywhere.
//
//	TB  capacity C, refill k per P:  unit P, rate k, size C*P      (limit C)
//	LB  capacity c, leak k per P:    unit P, rate k, size (c+1)*P  (limit c+1)
//
// A token bucket holding C - D/P tokens; a leaky bucket as a queue whose next
// free leak slot is D/k ns away. GCRA is the same bucket with unit 1, rate 1.
//
// State (26 bytes): version, kind, cut int64 (the now of the last Commit),
// debt int64 (D at the cut), unit int64 (the period the debt is counted in).
// The unit is stored so that a key reused with another period converts its
// debt (rounding up: never mints tokens) instead of misreading it.
type bucket struct {
	kind  Kind
	limit int64 // the most units that pass at once from full
	unit  int64 // units per token or request: the period in ns
	rate  int64 // units drained per ns: the count per period
	size  int64 // limit*unit
}

const bucketLen = headerLen + 24

// NewTB returns a token bucket of capacity tokens that starts full and refills
// continuously with refillCount tokens every refillPeriod ns.
func NewTB(capacity, refillCount, refillPeriod int64) (Limiter, error) {
	return newBucket(TB, capacity, refillCount, refillPeriod)
}

// NewLB returns a leaky bucket as a queue: one request every
// leakPeriod/leakCount ns leaves the queue, and up to capacity requests may
// wait their turn. A request arriving at an empty queue leaves at once (delay
// 0), so capacity+1 requests pass at once from empty: the Limit it reports.
func NewLB(capacity, leakCount, leakPeriod int64) (Limiter, error) {
	if capacity <= 0 || leakCount <= 0 || leakPeriod <= 0 {
		return nil, ErrNotPositive
	}
	if capacity == math.MaxInt64 {
		return nil, ErrOverflow
	}
	return newBucket(LB, capacity+1, leakCount, leakPeriod)
}

// newBucket checks the arguments in the order of the other constructors: any
// value <= 0 is ErrNotPositive, then limit*period not fitting is ErrOverflow.
func newBucket(k Kind, limit, count, period int64) (Limiter, error) {
	if limit <= 0 || count <= 0 || period <= 0 {
		return nil, ErrNotPositive
	}
	size, err := mul(limit, period)
	if err != nil {
		return nil, err
	}
	return bucket{kind: k, limit: limit, unit: period, rate: count, size: size}, nil
}

func (b bucket) Kind() Kind { return b.kind }

// debt returns the time the decision uses (now, or the cut when now is
// earlier: the debt never grows back) and the debt then, in b.unit.
func (b bucket) debt(state []byte, now int64) (t, d int64, err error) {
	if len(state) == 0 {
		return now, 0, nil
	}
	if err := checkKind(state, b.kind); err != nil {
		return 0, 0, err
	}
	if len(state) != bucketLen {
		return 0, 0, ErrCorruptState
	}
	cut, d, unit := getInt(state, 2), getInt(state, 10), getInt(state, 18)
	if d < 0 || unit <= 0 {
		return 0, 0, ErrCorruptState
	}
	return DebtAt(cut, d, unit, now, b.rate, b.unit)
}

// DebtAt is the step of the debt bucket behind TB and LB (and GCRA, whose
// unit and rate are 1): a bucket that owed debt units of unit at cut owes d
// units of toUnit at t, draining rate units of toUnit per ns. t is now, or
// cut when now is earlier (the debt never grows back). The conversion keeps
// the number of tokens, rounding up, so a change of period never mints
// capacity. debt must be >= 0, unit > 0 unless debt is 0, and rate, toUnit >
// 0; a converted debt that does not fit in int64 is ErrOverflow.
//
// The active-active mode (package replication/crdt/mstate) replays its
// merged event log through this same step, so that a key with one writer owes
// exactly what it owes here.
func DebtAt(cut, debt, unit, now, rate, toUnit int64) (t, d int64, err error) {
	d = debt
	if unit != toUnit && d > 0 {
		// The same number of tokens in the new unit: ceil(d*toUnit/unit).
		hi, lo := bits.Mul64(uint64(d), uint64(toUnit))
		if hi >= uint64(unit) { // the quotient would not fit in 64 bits
			return 0, 0, ErrOverflow
		}
		q, r := bits.Div64(hi, lo, uint64(unit))
		if q > math.MaxInt64 || (r != 0 && q == math.MaxInt64) {
			return 0, 0, ErrOverflow
		}
		d = int64(q)
		if r != 0 {
			d++
		}
	}
	if now <= cut {
		return cut, d, nil
	}
	// now-cut may not fit in int64 (a cut far in the past), but it does in
	// uint64; the drain only matters while it is below d.
	hi, lo := bits.Mul64(uint64(now)-uint64(cut), uint64(rate))
	if hi != 0 || lo >= uint64(d) {
		return now, 0, nil
	}
	return now, d - int64(lo), nil
}

// Check implements Limiter. Remaining is the whole tokens left (TB) or the
// requests that could still join the queue now (LB); ResetAfter is the time
// until the debt is 0 (the bucket full, the queue empty and its last request's
// interval over). For LB, Delay is the time until the admitted request's leak
// slot (the queue ahead of it drained); a peek holds nothing.
func (b bucket) Check(state []byte, now, qty int64) (Result, error) {
	if qty < 0 {
		return Result{}, ErrNegative
	}
	_, d, err := b.debt(state, now)
	if err != nil {
		return Result{}, err
	}
	return b.check(d, qty), nil
}

// check decides qty >= 0 on a bucket that owes d units now.
func (b bucket) check(d, qty int64) Result {
	res := Result{Limit: b.limit, RetryAfter: -1}
	switch {
	case qty > b.limit:
		res.Limited = true // can never fit
	case qty*b.unit > b.size-d: // qty <= limit, so qty*unit <= size fits
		res.Limited = true
		// d+cost-size > 0 units must drain; it fits in int64 because
		// cost <= size.
		res.RetryAfter = ceilDiv(qty*b.unit-(b.size-d), b.rate)
	default:
		if b.kind == LB && qty > 0 {
			res.Delay = ceilDiv(d, b.rate)
		}
		d += qty * b.unit
	}
	res.Remaining = max(0, (b.size-d)/b.unit) // size-d < 0 after a lowered capacity
	res.ResetAfter = ceilDiv(d, b.rate)
	return res
}

// Commit implements Limiter: the cut moves to now and the debt grows by the
// cost. The state is full again once the debt has drained.
func (b bucket) Commit(state []byte, now, qty int64) ([]byte, int64, error) {
	if err := commitQty(qty); err != nil {
		return nil, 0, err
	}
	return b.commit(state, now, qty, false)
}

// commit is Commit of qty > 0; with force past the limit too (Force).
func (b bucket) commit(state []byte, now, qty int64, force bool) ([]byte, int64, error) {
	t, d, err := b.debt(state, now)
	if err != nil {
		return nil, 0, err
	}
	if !force && (qty > b.limit || qty*b.unit > b.size-d) {
		return nil, 0, ErrLimited
	}
	cost, err := mul(qty, b.unit)
	if err == nil {
		d, err = add(d, cost)
	}
	if err != nil {
		return nil, 0, err
	}
	fullAt, err := add(t, ceilDiv(d, b.rate))
	if err != nil {
		return nil, 0, err
	}
	next := reuse(state, bucketLen)
	writeHeader(next, b.kind)
	putInt(next, 2, t)
	putInt(next, 10, d)
	putInt(next, 18, b.unit)
	return next, fullAt, nil
}

// A bucket state packs (packed.go) when its debt is a whole number of
// tokens: the bucket was full at its last Commit, as every key of a flood of
// new names is (the endpoint-aware study's principal churn, its A4). Then d = q*unit, and the key's
// expiry, from fullAt = cut + ceil(d/rate), places the cut: the word holds
// q, the unit, a divisor r that plays the rate's part (any r with the same
// ceil(d/r) does) and a, how far before ref-1 fullAt is (under a
// millisecond), and the cut is ref-1-a-ceil(d/r):
//
//	bits 0-19:  a
//	bits 20-21: s, the unit's scale: unit = m * 1000^s (ns, µs, ms, s)
//	bits 22-26: wq, the width of q
//	bits 27-31: wr, the width of r
//	bits 32-63: q, then r above it, then m above both
//
// A debt that has drained in part, or numbers too wide, stay bytes.
const (
	bucketA     = 20
	bucketScale = 20
	bucketWQ    = 22
	bucketWR    = 27
	bucketBody  = 32
)

// bucketScales are the units a packed bucket's unit counts in.
var bucketScales = [4]uint64{1, 1e3, 1e6, 1e9}

// packBucket is Pack of a TB or LB state with a valid header.
func packBucket(state []byte, ref int64) (uint64, bool) {
	if len(state) != bucketLen {
		return 0, false
	}
	cut, debt, unit := getInt(state, 2), getInt(state, 10), getInt(state, 18)
	if debt < 0 || unit <= 0 || debt%unit != 0 || cut >= ref {
		return 0, false
	}
	d, q := uint64(debt), uint64(debt/unit)
	s := len(bucketScales) - 1
	for uint64(unit)%bucketScales[s] != 0 {
		s--
	}
	m := uint64(unit) / bucketScales[s]
	// The smallest r with ceil(d/r) <= span-1 gives the largest ceil(d/r)
	// and so the smallest a; r = 1 does for d = 0.
	span, r, c := uint64(ref)-uint64(cut), uint64(1), uint64(0)
	if d > 0 {
		if span < 2 {
			return 0, false
		}
		r = ceilDivU(d, span-1)
		c = ceilDivU(d, r)
	}
	a := span - 1 - c
	wq, wr := bits.Len64(q), bits.Len64(r)
	if a >= 1<<bucketA || wq+wr+bits.Len64(m) > 64-bucketBody {
		return 0, false
	}
	body := m<<(wq+wr) | r<<wq | q
	return body<<bucketBody | uint64(wr)<<bucketWR | uint64(wq)<<bucketWQ | uint64(s)<<bucketScale | a, true
}

// appendBucket appends the state of kind k that packBucket made word of.
func appendBucket(dst []byte, k Kind, word uint64, ref int64) []byte {
	a := word & (1<<bucketA - 1)
	s := word >> bucketScale & 3
	wq, wr := word>>bucketWQ&31, word>>bucketWR&31
	body := word >> bucketBody
	q, r, m := body&(1<<wq-1), body>>wq&(1<<wr-1), body>>(wq+wr)
	unit := m * bucketScales[s]
	d := q * unit
	dst, state := grow(dst, bucketLen)
	writeHeader(state, k)
	putInt(state, 2, int64(uint64(ref)-1-a-ceilDivU(d, r)))
	putInt(state, 10, int64(d))
	putInt(state, 18, int64(unit))
	return dst
}

// ceilDivU is ceil(a/b) for b > 0.
func ceilDivU(a, b uint64) uint64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
