package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// ATBParams are ATB's (Table III, defaults from Table V). Rates are tokens
// per minute.
type ATBParams struct {
	BucketSize    float64 // the client's bucket, in tokens
	InitialTokens float64
	InitialRate   float64 // per minute
	// InitialCongestionRate is last_congestion_rate before the first 429:
	// below it a success raises the rate by Alpha, above it by Beta.
	InitialCongestionRate float64
	Sigma                 float64 // the lowest rate after a 429 (± 0.5), per minute
	Delta                 float64 // the least raise, per minute
	Alpha, Beta           float64
}

// DefaultATB are Table V's for its five-client synthetic scenario (a
// hundred clients: bucket 4, initial rate 4, initial congestion rate 12).
func DefaultATB() ATBParams {
	return ATBParams{BucketSize: 40, InitialTokens: 1, InitialRate: 40, InitialCongestionRate: 300,
		Sigma: 0.6, Delta: 0.6, Alpha: 1.2, Beta: 1.2}
}

// bucket is the client's own token bucket of ATB and AATB: tokens refill at
// rate per minute up to size.
type bucket struct {
	tokens, size, rate float64
	last               time.Time
}

func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = math.Min(b.size, b.tokens+now.Sub(b.last).Minutes()*b.rate)
		b.last = now
	}
}

// wait is how long until a token is there.
func (b *bucket) wait(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Minute))
}

// take spends a token (the study's acquire: what was waited for).
func (b *bucket) take(now time.Time) {
	b.refill(now)
	b.tokens = math.Max(b.tokens-1, 0)
}

// ATB is the adaptive token bucket (Table III): a send needs a token of the
// client's bucket, whose rate grows with each success (Increase_rate) and
// halves on a 429 (Decrease_rate).
type ATB struct {
	P   ATBParams
	rng *rand.Rand
	b   bucket
	// lastCongestion is last_congestion_rate: the rate at the last 429.
	lastCongestion float64
}

// NewATB returns ATB with p, starting at start.
func NewATB(p ATBParams, rng *rand.Rand, start time.Time) *ATB {
	return &ATB{P: p, rng: rng, lastCongestion: p.InitialCongestionRate,
		b: bucket{tokens: p.InitialTokens, size: p.BucketSize, rate: p.InitialRate, last: start}}
}

// Wait is Acquire: until a token is there.
func (a *ATB) Wait(now time.Time) time.Duration { return a.b.wait(now) }

func (a *ATB) Sent(now time.Time) { a.b.take(now) }

// Done is Increase_rate after a success and Decrease_rate after a 429.
func (a *ATB) Done(now time.Time, o Outcome) {
	a.b.refill(now)
	if o.Limited {
		a.decrease()
	} else {
		a.increase()
	}
}

// increase: if rate < last_congestion_rate, rate = max(rate + delta,
// rate * alpha), else max(rate + delta, rate * beta).
func (a *ATB) increase() {
	step := a.P.Beta
	if a.b.rate < a.lastCongestion {
		step = a.P.Alpha
	}
	a.b.rate = math.Max(a.b.rate+a.P.Delta, a.b.rate*step)
}

// decrease: last_congestion_rate = rate, tokens = 0,
// rate = max(sigma + U(-0.5, 0.5), rate / 2).
func (a *ATB) decrease() {
	a.lastCongestion = a.b.rate
	a.b.tokens = 0
	a.b.rate = math.Max(a.P.Sigma+uniform(a.rng, -0.5, 0.5), a.b.rate/2)
}

// Rate is the current rate per minute.
func (a *ATB) Rate() float64 { return a.b.rate }
