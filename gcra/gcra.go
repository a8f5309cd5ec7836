package gcra

import (
	"errors"
	"math"
	"math/bits"
)

// Sentinel errors. The command layer maps them to wire replies, so they carry no
// argument values; compare with errors.Is.
var (
	// ErrZeroRate reports an emission interval T = period*1e9/count that truncates to
	// 0: count 0, period 0, or count > period*1e9. redis-cell rejects the same inputs
	// with "Zero rates are not supported".
	ErrZeroRate = errors.New("gcra: zero rates are not supported")

	// ErrNegative reports a negative max_burst, count, period or quantity. redis-cell
	// accepts them and answers nonsense (or leaves a key without TTL); we refuse.
	ErrNegative = errors.New("gcra: negative value")

	// ErrOverflow reports an intermediate value that does not fit in int64.
	// redis-cell wraps around silently; we refuse and store nothing.
	ErrOverflow = errors.New("gcra: arithmetic overflow")
)

// nsPerSecond is the unit of period. maxPeriod is the largest period whose value in
// nanoseconds fits in int64 (9223372036 s, about 292 years).
const (
	nsPerSecond = 1_000_000_000
	nsPerMilli  = 1_000_000
	maxPeriod   = math.MaxInt64 / nsPerSecond
)

// Params is one limit. Interval is T in ns, Burst is max_burst (limit = Burst+1).
//
// Build it with NewParams. A literal Params is accepted by Decide too, and Decide
// re-checks it, because params travel with every command and are never stored.
type Params struct {
	Burst    int64
	Interval int64
}

// NewParams validates redis-cell's arguments (max_burst, count per period, period in
// whole seconds) and computes T = floor(period*1e9/count) exactly in integers.
//
// Errors are checked in this order, so the reply does not depend on how the checks
// are written: a negative argument (ErrNegative), period*1e9 overflowing
// (ErrOverflow), a zero rate (ErrZeroRate), then Burst+1 or T*(Burst+1) overflowing
// (ErrOverflow).
func NewParams(maxBurst, count, period int64) (Params, error) {
	if maxBurst < 0 || count < 0 || period < 0 {
		return Params{}, ErrNegative
	}
	if period > maxPeriod {
		return Params{}, ErrOverflow
	}
	// count == 0 must be caught before dividing; count > period*1e9 gives T == 0.
	if count == 0 {
		return Params{}, ErrZeroRate
	}
	t := period * nsPerSecond / count
	if t == 0 {
		return Params{}, ErrZeroRate
	}
	p := Params{Burst: maxBurst, Interval: t}
	if _, err := p.tau(); err != nil {
		return Params{}, err
	}
	return p, nil
}

// Limit returns Burst+1, the second element of the reply: from a full bucket Burst+1
// units pass at once, because tau is T*(Burst+1) and the test includes the request.
func (p Params) Limit() int64 { return p.Burst + 1 }

// Validate checks p as Decide does, with the errors of NewParams: a
// hand-built Params can be refused before any key is touched.
func (p Params) Validate() error {
	_, err := p.tau()
	return err
}

// tau validates p and returns T*(Burst+1). It is what Decide relies on, so a
// hand-built Params cannot divide by zero or wrap around.
func (p Params) tau() (int64, error) {
	switch {
	case p.Burst < 0 || p.Interval < 0:
		return 0, ErrNegative
	case p.Interval == 0:
		return 0, ErrZeroRate
	case p.Burst == math.MaxInt64:
		return 0, ErrOverflow
	}
	return mul(p.Interval, p.Burst+1)
}

// Result mirrors the CL.THROTTLE reply, with durations in ns.
type Result struct {
	Limited    bool
	Limit      int64
	Remaining  int64
	RetryAfter int64 // ns; -1 when allowed, and -1 when limited because quantity*T > tau (can never fit)
	ResetAfter int64 // ns until the bucket is full again (>= 0)
}

// Decide applies quantity at now to a key whose stored TAT is tat (0 or any value <=
// now means "full bucket"; a missing key is passed as tat = 0).
//
// It returns the TAT to store and whether to store it, plus the reply. store is true
// exactly when the request is allowed, including quantity 0 peeks (redis-cell writes
// the key then too). A limited request writes nothing, and newTAT is then tat
// unchanged. On error nothing is to be stored.
//
// p is re-checked first with the errors of NewParams (a hand-built Params must not
// divide by zero). Then quantity < 0 is ErrNegative; T*quantity, max(tat,now)+inc or
// any other intermediate not fitting in int64 is ErrOverflow. now and tat may be any
// int64; only the overflow checks care about their range.
//
// Decide does not allocate: it runs once per command.
func Decide(tat int64, p Params, now, quantity int64) (newTAT int64, store bool, res Result, err error) {
	tau, err := p.tau()
	if err != nil {
		return tat, false, Result{}, err
	}
	if quantity < 0 {
		return tat, false, Result{}, ErrNegative
	}
	inc, err := mul(p.Interval, quantity)
	if err != nil {
		return tat, false, Result{}, err
	}
	// A TAT in the past means the bucket refilled completely; a TAT in the future is
	// kept even if now went backwards, so a stale now never adds capacity.
	base := max(tat, now)
	if base > math.MaxInt64-inc { // inc >= 0: only upward overflow is possible
		return tat, false, Result{}, ErrOverflow
	}
	candidate := base + inc // new_tat, stored only if allowed
	// wait = new_tat - now >= 0. It can only overflow when now is negative; checking
	// it here also bounds base-now below, which is no larger.
	if now < 0 && candidate > math.MaxInt64+now {
		return tat, false, Result{}, ErrOverflow
	}
	wait := candidate - now

	res.Limit = p.Burst + 1
	res.RetryAfter = -1
	var ttl int64
	// now - allow_at < 0  <=>  now - (new_tat - tau) < 0  <=>  new_tat - now > tau.
	if wait > tau {
		res.Limited = true
		// A request larger than the whole bucket can never pass: no point in waiting.
		if inc <= tau {
			res.RetryAfter = wait - tau // = allow_at - now > 0
		}
		ttl = base - now // the existing state, unchanged
		newTAT = tat
	} else {
		ttl = wait
		newTAT, store = candidate, true
	}
	res.ResetAfter = ttl
	// slack is the formula's next = tau - ttl; tau, ttl >= 0, so it cannot overflow.
	// For -T < next < 0 the formula's truncating division gives 0, and next <= -T
	// gives 0 by definition, so only a positive slack counts. slack <= tau = T*L
	// keeps remaining <= L.
	if slack := tau - ttl; slack > 0 {
		res.Remaining = slack / p.Interval
	}
	return newTAT, store, res, nil
}

// Seconds rounds a duration in ns to the whole seconds redis-cell 0.4/0.5 replies with:
// -1 passes through; otherwise ceil(floor_ms(d)/1000), i.e. whole seconds plus one if
// the sub-second part holds at least one whole millisecond (0.0004 s -> 0, 0.5 s -> 1,
// 1.000 s -> 1, 1.0004 s -> 1, 1.001 s -> 2).
//
// This is why a limited reply can carry retry_after 0: less than 1 ms is left.
// Decide never produces other negative durations; any negative d gives -1, which
// keeps Seconds monotone over all of int64.
func Seconds(d int64) int64 {
	if d < 0 {
		return -1
	}
	ms := d / nsPerMilli
	return (ms + 999) / 1000 // ms <= MaxInt64/1e6, so +999 cannot overflow
}

// TTL returns the key lifetime redis-cell sets after an allowed call: floor_ms(newTAT -
// now) in milliseconds. It is 0 when less than a millisecond is left, and Redis then
// keeps the key to the end of the current millisecond; it returns 0 when newTAT <= now.
func TTL(newTAT, now int64) int64 {
	if newTAT <= now {
		return 0
	}
	// newTAT-now < 2^64, so the unsigned difference is exact even if the signed one
	// would overflow, and dividing by 1e6 brings it back into int64 range.
	return int64((uint64(newTAT) - uint64(now)) / nsPerMilli)
}

// mul returns a*b for a, b >= 0, or ErrOverflow if it does not fit in int64.
func mul(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return int64(lo), nil
}
