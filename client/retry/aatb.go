package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// AATBParams are AATB's (Table IV, defaults from Table V).
type AATBParams struct {
	BucketSize    float64
	InitialTokens float64
	InitialRate   float64 // per minute
	Sigma         float64 // the lowest rate after a 429, per minute
	Delta         float64 // the least raise, per minute
	// Alpha raises the rate of a client below 0.75 times the average
	// client's load, Beta the others'.
	Alpha, Beta float64
	// Omega is the telemetry window: a routine update every Omega.
	Omega time.Duration
}

// DefaultAATB are Table V's for its five-client synthetic scenario: ATB's
// with alpha 1.4, beta 1.2 and omega 30 s.
func DefaultAATB() AATBParams {
	return AATBParams{BucketSize: 40, InitialTokens: 1, InitialRate: 40,
		Sigma: 0.6, Delta: 0.6, Alpha: 1.4, Beta: 1.2, Omega: 30 * time.Second}
}

// Telemetry is AATB's telemetry server: a client reports how many requests
// it sent since its last report and whether it got a 429, and learns the
// group's aggregate over the last omega. The report never counts toward the
// quota. StoreTelemetry reports to throttled.
type Telemetry interface {
	Report(now time.Time, sent int64, got429 bool) (Aggregate, error)
}

// A Scheduler is a Telemetry that also hands out the group's slots: Reserve
// reports as Report does and reserves the group's next free slot at or
// after now + after; the slots are one interval of the limit's rate apart.
// The answer's Slot is how long from now the reserved one is. Hinted waits
// for a slot before each attempt at a saturated limit. StoreTelemetry is one
// (TELEMETRY.REPORT ... RESERVE).
type Scheduler interface {
	Telemetry
	Reserve(now time.Time, sent int64, got429 bool, after time.Duration) (Aggregate, error)
}

// Aggregate is the telemetry server's answer.
type Aggregate struct {
	Active     int64   // clients that reported within omega
	Total      int64   // requests they sent within omega
	Clients429 int64   // clients that saw a 429 within omega
	Rate       float64 // the limit's rate per minute; 0 when unknown
	// Slot is how long from now the slot a Reserve got is.
	Slot time.Duration
}

// AATB is the assisted adaptive token bucket (Table IV): ATB's bucket,
// whose rate the telemetry steers instead of each success.
type AATB struct {
	P   AATBParams
	tel Telemetry
	rng *rand.Rand
	b   bucket

	sent           int64 // since the last report
	lastRateChange time.Time
	lastCongestion time.Time // last_reported_congestion
	nextUpdate     time.Time // of the routine update
	nextAcquire    time.Time
	agg            Aggregate // the last answer
	load           int64     // the requests of the last report
}

// NewAATB returns AATB with p reporting to tel, starting at start; the
// first routine update is due at start + Omega.
func NewAATB(p AATBParams, tel Telemetry, rng *rand.Rand, start time.Time) *AATB {
	return &AATB{P: p, tel: tel, rng: rng,
		b:          bucket{tokens: p.InitialTokens, size: p.BucketSize, rate: p.InitialRate, last: start},
		nextUpdate: start.Add(p.Omega), lastCongestion: start.Add(-p.Omega), lastRateChange: start.Add(-p.Omega)}
}

// Wait is acquire: until a token is there and now >= next_acquire. It runs
// a routine update first when one is due, and never returns past the next
// one.
func (a *AATB) Wait(now time.Time) time.Duration {
	a.Update(now)
	d := max(a.b.wait(now), a.nextAcquire.Sub(now))
	return min(d, a.nextUpdate.Sub(now))
}

func (a *AATB) Sent(now time.Time) {
	a.b.take(now)
	a.sent++
}

// Done runs congestion_notification after a 429; a success changes nothing
// (the telemetry raises the rate).
func (a *AATB) Done(now time.Time, o Outcome) {
	if o.Limited {
		a.congestion(now)
	}
}

// Update runs routine_update when it is due (every Omega), and returns when
// the next one is. A driver that keeps idle clients reporting calls it.
//
// routine_update, skipped within Omega of a congestion report: report; if
// a client saw a 429, next_acquire = now + omega + U(-2, 2) s; else, if the
// rate has not changed for omega, rate = max(rate * alpha, rate + delta)
// for a client whose load is below 0.75 times the average, max(rate *
// beta, rate + delta) for the others, and last_rate_change = now.
func (a *AATB) Update(now time.Time) time.Time {
	if now.Before(a.nextUpdate) {
		return a.nextUpdate
	}
	for !now.Before(a.nextUpdate) {
		a.nextUpdate = a.nextUpdate.Add(a.P.Omega)
	}
	if now.Sub(a.lastCongestion) < a.P.Omega {
		return a.nextUpdate
	}
	load := a.report(now, false)
	switch {
	case a.agg.Clients429 > 0:
		a.nextAcquire = now.Add(a.P.Omega + seconds(uniform(a.rng, -2, 2)))
	case now.Sub(a.lastRateChange) >= a.P.Omega:
		a.b.refill(now)
		step := a.P.Beta
		if float64(load) < 0.75*a.average() {
			step = a.P.Alpha
		}
		a.b.rate = math.Max(a.b.rate*step, a.b.rate+a.P.Delta)
		a.lastRateChange = now
	}
	return a.nextUpdate
}

// congestion is congestion_notification: last_reported_congestion = now;
// report; rate = max(sigma, rate / 2) for a client whose load is below half
// the average, max(sigma, rate / 3) for the others; tokens = 1.1;
// last_rate_change = now; next_acquire = now + reported_429 / token_rate +
// U(0, 1) s.
func (a *AATB) congestion(now time.Time) {
	a.lastCongestion = now
	load := a.report(now, true)
	a.b.refill(now)
	div := 3.0
	if float64(load) < 0.5*a.average() {
		div = 2
	}
	a.b.rate = math.Max(a.P.Sigma, a.b.rate/div)
	a.b.tokens = 1.1
	a.lastRateChange = now
	wait := uniform(a.rng, 0, 1)
	if a.agg.Rate > 0 {
		wait += float64(a.agg.Clients429) / a.agg.Rate * 60
	}
	a.nextAcquire = now.Add(seconds(wait))
}

// report sends the requests sent since the last report and returns them
// (the client's load). When the server does not answer, the client goes on
// as if alone: its own load, its own 429.
func (a *AATB) report(now time.Time, got429 bool) int64 {
	load := a.sent
	a.sent = 0
	agg, err := a.tel.Report(now, load, got429)
	if err != nil {
		agg = Aggregate{Active: 1, Total: load}
		if got429 {
			agg.Clients429 = 1
		}
	}
	a.agg, a.load = agg, load
	return load
}

// reserve reserves the group's next free slot at or after now + after
// (see Scheduler), reporting got429 but no requests: those go with the
// routine report, so the load AATB and Hinted read stays the requests of an
// omega. It returns how long from now the slot is; ok is false when the
// telemetry is no Scheduler or did not answer.
func (a *AATB) reserve(now time.Time, got429 bool, after time.Duration) (slot time.Duration, ok bool) {
	s, ok := a.tel.(Scheduler)
	if !ok {
		return 0, false
	}
	agg, err := s.Reserve(now, 0, got429, after)
	if err != nil {
		return 0, false
	}
	a.agg = agg
	return agg.Slot, true
}

// average is the average client's load in the last answer.
func (a *AATB) average() float64 {
	return float64(a.agg.Total) / float64(max(a.agg.Active, 1))
}

// Rate is the current rate per minute.
func (a *AATB) Rate() float64 { return a.b.rate }

// Aggregate is the telemetry's last answer.
func (a *AATB) Aggregate() Aggregate { return a.agg }
