package gcra

import (
	"math"
	"math/bits"
)

// Leases (QUOTA.LEASE in package commands) take quantity units with one
// Decide and later give back the unused part (Credit), or, in lazy mode,
// record units already admitted elsewhere (Force).

// Credit moves tat back by up to qty emission intervals, the unused part of
// a lease whose Decide stored grantTAT, and returns the new TAT and how many
// intervals it gave back.
//
// Moving the TAT back by qty*T is not exact in general: the TAT is clamped to
// now whenever the bucket is full again, and a decision made after the grant
// may have relied on the bucket as it then was. What is certainly the lease's
// is the debt its grant left, drained to now: grantTAT - now. Credit moves
// it back by min(qty*T, min(grantTAT, tat) - now), which is never more than
// exact, and exact when nothing else was admitted since the grant; credited
// counts a part of an interval as one. docs/leases.md has the argument.
func Credit(tat, grantTAT int64, p Params, now, qty int64) (newTAT, credited int64, err error) {
	if _, err := p.tau(); err != nil {
		return tat, 0, err
	}
	if qty < 0 {
		return tat, 0, ErrNegative
	}
	top := min(grantTAT, tat)
	if top <= now {
		return tat, 0, nil
	}
	// top-now < 2^64: the unsigned difference is exact.
	amount := uint64(top) - uint64(now)
	if hi, lo := bits.Mul64(uint64(qty), uint64(p.Interval)); hi == 0 && lo < amount {
		amount = lo
	}
	// amount <= tat-now: tat-amount cannot wrap below now.
	c := int64(amount / uint64(p.Interval))
	if amount%uint64(p.Interval) != 0 {
		c++
	}
	return int64(uint64(tat) - amount), c, nil
}

// Force records quantity units at now whatever the limit: the TAT moves to
// max(tat, now) + quantity*T, past now + tau if need be, and Decide limits
// until it is back within reach. A result not fitting in int64 is ErrOverflow.
func Force(tat int64, p Params, now, quantity int64) (int64, error) {
	if _, err := p.tau(); err != nil {
		return tat, err
	}
	if quantity < 0 {
		return tat, ErrNegative
	}
	inc, err := mul(p.Interval, quantity)
	if err != nil {
		return tat, err
	}
	base := max(tat, now)
	if base > math.MaxInt64-inc {
		return tat, ErrOverflow
	}
	return base + inc, nil
}
