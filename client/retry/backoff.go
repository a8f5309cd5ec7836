package retry

import (
	"math"
	"math/rand/v2"
	"time"
)

// DefaultWindow is WB's window (the study's: W attempts per 60 s).
const DefaultWindow = 60 * time.Second

// UB is unlimited backoff: an attempt goes out at once; after its request's
// n-th failure the client waits U(0.1, min(2^n - 1, MaxSleep)) seconds, and
// retries until the request is served. The study draws each client's
// MaxSleep from U[30, 34] s (Table V), so clients do not cap in step.
type UB struct {
	// MaxSleep caps the backoff's upper bound, in seconds.
	MaxSleep float64

	rng      *rand.Rand
	failures int       // of the request being tried
	next     time.Time // no attempt before
}

// NewUB returns UB with MaxSleep drawn from U[30, 34] s, as the study's.
func NewUB(rng *rand.Rand) *UB {
	return &UB{MaxSleep: uniform(rng, 30, 34), rng: rng}
}

func (u *UB) Wait(now time.Time) time.Duration { return max(u.next.Sub(now), 0) }

func (u *UB) Sent(time.Time) {}

// Done starts the next request afresh after a success; after a failure it
// draws the backoff.
func (u *UB) Done(now time.Time, o Outcome) {
	if !o.Limited {
		u.failures = 0
		return
	}
	u.failures++
	bound := math.Min(math.Exp2(float64(u.failures))-1, u.MaxSleep)
	u.next = now.Add(seconds(uniform(u.rng, 0.1, max(bound, 0.1))))
}

// WB is UB plus a window: at most W attempts in any Window (60 s in the
// study; W is 40 with five clients, 4 with a hundred, Table V). The study's
// code counts the successes in the window; its text and this type count
// attempts, which is what a client can keep under whatever the server says.
type WB struct {
	UB
	W      int
	Window time.Duration

	sent []time.Time // the last W attempts, oldest first
}

// NewWB returns WB with w attempts per DefaultWindow.
func NewWB(rng *rand.Rand, w int) *WB {
	return &WB{UB: *NewUB(rng), W: w, Window: DefaultWindow}
}

// Wait is UB's, and until the oldest of the last W attempts leaves the
// window when there are W.
func (b *WB) Wait(now time.Time) time.Duration {
	d := b.UB.Wait(now)
	if len(b.sent) >= b.W {
		d = max(d, b.sent[0].Add(b.Window).Sub(now))
	}
	return d
}

func (b *WB) Sent(now time.Time) {
	if len(b.sent) >= b.W {
		b.sent = append(b.sent[:0], b.sent[1:]...)
	}
	b.sent = append(b.sent, now)
}
