package retry

import (
	"math/rand/v2"
	"time"
)

// A Strategy decides when a client's next attempt may go out and learns
// from each outcome. Its methods take the instant they happen at, never
// earlier than the one of the call before. A Strategy is not safe for
// concurrent use: Client serializes the calls.
type Strategy interface {
	// Wait returns how long from now the next attempt must wait; 0 means
	// it may go out now. A strategy with periodic work (AATB's routine
	// update) does it when due and may return less than the whole wait,
	// so the caller waits what it says and asks again.
	Wait(now time.Time) time.Duration
	// Sent records that an attempt went out at now (after Wait said 0).
	Sent(now time.Time)
	// Done records the outcome of the attempt sent last.
	Done(now time.Time, o Outcome)
}

// Outcome is what an attempt got back.
type Outcome struct {
	// Limited is true for a refusal by the rate limit (HTTP 429).
	Limited bool
	// Hint is what the response said of the limit; the zero Hint (or
	// NoHint) says nothing.
	Hint Hint
}

// Hint is what a response said of the limit, as throttled's reply (and a
// gateway's Retry-After and RateLimit fields) carry it. A field that was not
// there is -1 (0 for Limit); NoHint has none.
type Hint struct {
	// RetryAfter is how long until a refused attempt would pass.
	RetryAfter time.Duration
	// Remaining is how many more requests would pass now.
	Remaining int64
	// Reset is how long until the quota is whole again.
	Reset time.Duration
	// Limit is the most requests that pass at once (0: not said).
	Limit int64
}

// NoHint is a Hint that says nothing.
var NoHint = Hint{RetryAfter: -1, Remaining: -1, Reset: -1}

// Known reports whether h says anything a strategy can use: a retry_after
// for a refusal, or the remaining quota.
func (h Hint) Known() bool { return h.RetryAfter >= 0 || h.Remaining >= 0 }

// interval is how long the limit takes to give back one request, when h
// says it (the reset over the requests missing from the limit).
func (h Hint) interval() (time.Duration, bool) {
	if h.Reset <= 0 || h.Limit <= 0 || h.Remaining < 0 || h.Remaining >= h.Limit {
		return 0, false
	}
	return h.Reset / time.Duration(h.Limit-h.Remaining), true
}

// seconds converts a number of seconds to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// uniform draws from [lo, hi).
func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }
