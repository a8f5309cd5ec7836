package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// Hinted is our strategy for a limit that says when to come back, as
// throttled does: every refusal carries its exact retry_after, every answer
// the remaining quota and the time until it is whole (Retry-After and the
// IETF RateLimit fields over HTTP).
//
//   - After a refusal that says retry_after r, the client waits r plus a
//     random share of the contention: U(0, max(n, 2^k)) intervals of the
//     limit (the time it gives back one request), k the refusals in a row,
//     so clients refused together do not come back together.
//   - After a success that says r requests remain, the client waits until
//     the limit will have given back enough for every contender to send
//     once and a reserve: (n + reserve - r) intervals, times 1 + Slack, or
//     not at all when r >= n + reserve. Together the clients send a little
//     below the limit's rate instead of finding its edge by 429s.
//   - A request that comes to an idle client while the group's telemetry
//     says the limit is saturated takes a random place, U(0, n)
//     intervals, before its first attempt.
//   - An answer that says nothing (no helper fields) hands that attempt's
//     outcome, and the waits until the next hinted answer, to the fallback.
//
// n, the contenders, comes from the fallback's telemetry when it is an AATB
// (reporting from the first attempt on), else it is 1.
//
// The random places above only make a herd less likely: with a hundred
// clients refused at once, some still draw the same interval and all but
// one of them are refused again, and a request arriving at an idle client
// whose telemetry is not yet saturated takes a request the waiting ones
// were promised. When the fallback's telemetry is a Scheduler (throttled's
// TELEMETRY.REPORT ... RESERVE), the places are the group's instead:
// after a refusal, after a success that left fewer than n + reserve, and
// for every request arriving at an idle client, the attempt first
// reserves the group's next free slot at or after the instant its hint
// says a request is free (now for an arrival), and waits for it. The
// slots are one interval of the limit's rate apart, so the clients of a
// saturated limit come back one at a time, in the order they asked, as
// the limit gives back requests. Only a client sending its backlog while
// plenty is left goes without a slot. When the telemetry does not answer,
// the random place stands.
type Hinted struct {
	// Slack is how much slower than the limit's rate the clients pace
	// themselves together (0.05: 5% slower).
	Slack float64
	// Reserve is the share of the limit left unclaimed by the pacing
	// (0.05: 5 of 100), so that a request arriving at an idle client,
	// which goes out at once, finds a token.
	Reserve float64

	fallback Strategy
	aatb     *AATB // fallback, when it is one
	rng      *rand.Rand

	hinted bool      // the last answer had hints
	next   time.Time // no attempt before, while hinted
	tau    time.Duration
	// held: the attempt due next was already held back once because it
	// came late to a saturated group (see Wait).
	held bool
	// fails counts the refusals in a row: the spread after a refusal is
	// at least 2^fails intervals, for when n is not known yet (or wrong).
	fails int
	// primed: the first report was sent.
	primed bool
	// queued: the last answer said the limit is spent for this client (a
	// refusal, or fewer than n + reserve left), so the next attempt
	// reserves a slot; free is when that answer said a request would be
	// there for it, and got429 that it was a refusal, to report.
	queued bool
	free   time.Time
	got429 bool
	// reserved: the attempt due next holds a slot of the group's.
	reserved bool
}

// NewHinted returns Hinted falling back to fallback (an *AATB or *ATB).
func NewHinted(fallback Strategy, rng *rand.Rand) *Hinted {
	h := &Hinted{Slack: 0.05, Reserve: 0.05, fallback: fallback, rng: rng}
	h.aatb, _ = fallback.(*AATB)
	return h
}

func (h *Hinted) Wait(now time.Time) time.Duration {
	if h.aatb != nil && !h.primed {
		// Report at once rather than after omega, so the group's
		// aggregate (n, saturation) is known from the first attempt.
		h.primed = true
		h.aatb.report(now, false)
	}
	if !h.hinted {
		return h.fallback.Wait(now)
	}
	if h.aatb != nil && !h.reserved && (h.queued || !h.held && now.After(h.next)) {
		// Take the group's next slot, in place of the random one; when
		// the telemetry cannot give one, the random one stands.
		slot, ok := h.aatb.reserve(now, h.got429, max(h.free.Sub(now), 0))
		h.queued = false
		if ok {
			h.reserved, h.got429 = true, false
			h.next = now.Add(slot)
		}
	}
	if !h.reserved && now.After(h.next) && !h.held && h.saturated() {
		// An attempt that comes after its pacing ran out (a request
		// arriving at an idle client) would find a saturated limit empty:
		// it takes a random place among the group's attempts instead.
		h.held = true
		h.next = now.Add(time.Duration(uniform(h.rng, 0, float64(h.contenders())) * float64(h.tau)))
	}
	d := max(h.next.Sub(now), 0)
	if h.aatb != nil {
		// Keep reporting, so n stays known; return for the next report.
		d = min(d, h.aatb.Update(now).Sub(now))
	}
	return d
}

func (h *Hinted) Sent(now time.Time) {
	h.held, h.reserved = false, false
	h.fallback.Sent(now)
}

func (h *Hinted) Done(now time.Time, o Outcome) {
	if !o.Hint.Known() {
		h.hinted = false
		h.fallback.Done(now, o)
		return
	}
	h.hinted = true
	h.queued = false
	if !o.Limited {
		h.fails = 0
	}
	if tau, ok := o.Hint.interval(); ok {
		h.tau = tau
	}
	n := h.contenders()
	switch {
	case o.Limited && o.Hint.RetryAfter >= 0:
		tau := h.tau
		if tau == 0 {
			tau = o.Hint.RetryAfter
		}
		h.fails = min(h.fails+1, 16)
		spread := max(float64(n), math.Exp2(float64(h.fails)))
		h.next = now.Add(o.Hint.RetryAfter + time.Duration(uniform(h.rng, 0, spread)*float64(tau)))
		h.queued, h.got429, h.free = h.aatb != nil, true, now.Add(o.Hint.RetryAfter)
	case o.Limited:
		h.hinted = false // a refusal that does not say when: the fallback's
		h.fallback.Done(now, o)
	case o.Hint.Remaining >= 0 && o.Hint.Remaining < n+h.reserve(o.Hint) && h.tau > 0:
		gap := float64(n+h.reserve(o.Hint)-o.Hint.Remaining) * float64(h.tau) * (1 + h.Slack)
		h.next = now.Add(time.Duration(gap))
		// A request is there now, or (none left) within an interval.
		h.queued, h.free = h.aatb != nil, now.Add(time.Duration(max(1-o.Hint.Remaining, 0))*h.tau)
	default:
		h.next = now
	}
}

// contenders is n: how many clients of this one's load would send what the
// group sent in the last omega (its requests over this client's, rounded
// up), at most the active clients and at least 1. Counting clients by load
// lets a client that sends little stand aside for those that send much.
func (h *Hinted) contenders() int64 {
	if h.aatb == nil {
		return 1
	}
	agg, mine := h.aatb.Aggregate(), max(h.aatb.load, 1)
	return min(max((agg.Total+mine-1)/mine, 1), max(agg.Active, 1))
}

// saturated reports whether the group sent, in the last omega, at least
// what the limit passes in omega (the telemetry says both), or saw a 429.
func (h *Hinted) saturated() bool {
	if h.aatb == nil || h.tau == 0 {
		return false
	}
	agg := h.aatb.Aggregate()
	return agg.Clients429 > 0 || agg.Rate > 0 && float64(agg.Total) >= agg.Rate*h.aatb.P.Omega.Minutes()
}

// Update runs the fallback's routine update when it is an AATB (see
// AATB.Update) and returns when the next is due; the zero time when the
// fallback has none.
func (h *Hinted) Update(now time.Time) time.Time {
	if h.aatb == nil {
		return time.Time{}
	}
	return h.aatb.Update(now)
}

// reserve is how many requests of the limit the pacing leaves for clients
// that come back from idle (they send at once): Reserve of the limit.
func (h *Hinted) reserve(hint Hint) int64 { return int64(float64(hint.Limit) * h.Reserve) }
