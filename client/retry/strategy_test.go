package retry

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(s float64) time.Time { return t0.Add(seconds(s)) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var (
	ok      = Outcome{Hint: NoHint}
	limited = Outcome{Limited: true, Hint: NoHint}
)

// UB: after a request's n-th failure, U(0.1, min(2^n - 1, MaxSleep)); a
// success starts the next request afresh.
func TestUB_Backoff(t *testing.T) {
	u := NewUB(rand.New(rand.NewPCG(1, 1)))
	if u.MaxSleep < 30 || u.MaxSleep >= 34 {
		t.Fatalf("MaxSleep %v outside [30, 34)", u.MaxSleep)
	}
	now := t0
	for n := 1; n <= 8; n++ {
		u.Done(now, limited)
		bound := math.Min(math.Exp2(float64(n))-1, u.MaxSleep)
		d := u.Wait(now).Seconds()
		if d < 0.1 || d > bound {
			t.Fatalf("failure %d: waits %.3f s, want within [0.1, %.1f]", n, d, bound)
		}
	}
	u.Done(now, ok)
	u.Done(now, limited) // the next request's first failure: U(0.1, 1)
	if d := u.Wait(now).Seconds(); d > 1 {
		t.Fatalf("first failure after a success waits %.3f s, want at most 1", d)
	}
}

// WB: at most W attempts in any 60 s.
func TestWB_Window(t *testing.T) {
	b := NewWB(rand.New(rand.NewPCG(1, 1)), 3)
	for i := range 3 {
		now := at(float64(i))
		if d := b.Wait(now); d != 0 {
			t.Fatalf("attempt %d waits %v", i, d)
		}
		b.Sent(now)
		b.Done(now, ok)
	}
	if d := b.Wait(at(10)); d != 50*time.Second {
		t.Fatalf("fourth attempt at 10 s waits %v, want 50s (the first leaves at 60 s)", d)
	}
	b.Sent(at(60))
	if d := b.Wait(at(60)); d != time.Second {
		t.Fatalf("fifth attempt at 60 s waits %v, want 1s", d)
	}
}

// ATB, Table III line by line.
func TestATB_TableIII(t *testing.T) {
	p := ATBParams{BucketSize: 4, InitialTokens: 1, InitialRate: 60, InitialCongestionRate: 100,
		Sigma: 0.6, Delta: 0.6, Alpha: 1.5, Beta: 1.1}
	a := NewATB(p, rand.New(rand.NewPCG(1, 1)), t0)
	// Acquire: a token is there; after it, wait (1 - tokens) / rate.
	if d := a.Wait(t0); d != 0 {
		t.Fatalf("first acquire waits %v", d)
	}
	a.Sent(t0)
	if d := a.Wait(t0); d != time.Second {
		t.Fatalf("second acquire waits %v, want 1s at 60/min", d)
	}
	// Increase_rate below last_congestion_rate: max(rate + delta, rate * alpha).
	a.Done(t0, ok)
	if !near(a.Rate(), 90) {
		t.Fatalf("after a success below the congestion rate: %v, want 90", a.Rate())
	}
	a.Done(t0, ok) // 135: now above 100
	a.Done(t0, ok) // above: rate * beta
	if !near(a.Rate(), 135*1.1) {
		t.Fatalf("after a success above the congestion rate: %v, want %v", a.Rate(), 135*1.1)
	}
	// Decrease_rate: last_congestion_rate = rate, tokens = 0, rate = max(sigma ± 0.5, rate / 2).
	before := a.Rate()
	a.b.tokens = 3
	a.Done(t0, limited)
	if !near(a.Rate(), before/2) || a.b.tokens != 0 || !near(a.lastCongestion, before) {
		t.Fatalf("after a 429: rate %v tokens %v congestion %v; want %v, 0, %v", a.Rate(), a.b.tokens, a.lastCongestion, before/2, before)
	}
	// Delta when it is the larger raise; the sigma floor at low rates.
	a.b.rate, a.lastCongestion = 1, 100
	a.Done(t0, ok)
	if !near(a.Rate(), 1.6) {
		t.Fatalf("a raise from 1/min: %v, want 1 + delta = 1.6", a.Rate())
	}
	a.b.rate = 0.2
	a.Done(t0, limited)
	if a.Rate() < 0.1 || a.Rate() > 1.1 {
		t.Fatalf("a 429 at 0.2/min: %v, want sigma + U(-0.5, 0.5) in [0.1, 1.1]", a.Rate())
	}
	// The bucket holds at most BucketSize.
	a.b.rate = 60
	a.Wait(at(3600))
	if a.b.tokens != 4 {
		t.Fatalf("tokens after an hour: %v, want the bucket's 4", a.b.tokens)
	}
}

// fakeTelemetry answers a fixed aggregate and records the reports.
type fakeTelemetry struct {
	agg     Aggregate
	reports []report
}

type report struct {
	at     time.Time
	sent   int64
	got429 bool
}

func (f *fakeTelemetry) Report(now time.Time, sent int64, got429 bool) (Aggregate, error) {
	f.reports = append(f.reports, report{now, sent, got429})
	return f.agg, nil
}

// AATB, Table IV line by line.
func TestAATB_TableIV(t *testing.T) {
	p := DefaultAATB()
	p.InitialRate = 60
	tel := &fakeTelemetry{agg: Aggregate{Active: 2, Total: 20, Rate: 80}}
	a := NewAATB(p, tel, rand.New(rand.NewPCG(1, 1)), t0)

	// routine_update at omega: a load (5) below 0.75 x the average (10):
	// rate = max(rate * alpha, rate + delta).
	for range 5 {
		a.Sent(t0)
	}
	if d := a.Wait(at(30)); d != 0 {
		t.Fatalf("wait at the first update: %v", d)
	}
	if len(tel.reports) != 1 || tel.reports[0].sent != 5 || tel.reports[0].got429 {
		t.Fatalf("reports: %+v, want one of 5 sent, no 429", tel.reports)
	}
	if !near(a.Rate(), 60*1.4) {
		t.Fatalf("rate after a light client's update: %v, want %v", a.Rate(), 60*1.4)
	}
	// The next update at 60 s: a load at the average: beta.
	for range 10 {
		a.Sent(at(31))
	}
	a.Update(at(60))
	if !near(a.Rate(), 60*1.4*1.2) {
		t.Fatalf("rate after an average client's update: %v, want %v", a.Rate(), 60*1.4*1.2)
	}

	// congestion_notification: report at once with got429; load (0) below
	// half the average: rate = max(sigma, rate / 2); tokens = 1.1;
	// next_acquire = now + reported_429 / token_rate + U(0, 1).
	tel.agg = Aggregate{Active: 2, Total: 20, Clients429: 2, Rate: 80}
	before := a.Rate()
	a.Done(at(70), limited)
	if last := tel.reports[len(tel.reports)-1]; !last.got429 || !last.at.Equal(at(70)) {
		t.Fatalf("no congestion report at 70 s: %+v", last)
	}
	if !near(a.Rate(), before/2) || a.b.tokens != 1.1 {
		t.Fatalf("after a 429: rate %v tokens %v; want %v, 1.1", a.Rate(), a.b.tokens, before/2)
	}
	wait := a.nextAcquire.Sub(at(70)).Seconds()
	if wait < 1.5 || wait >= 2.5 {
		t.Fatalf("next_acquire %.3f s after the 429, want 2/80 min + U(0, 1) = [1.5, 2.5)", wait)
	}
	// acquire waits for next_acquire although a token is there.
	if d := a.Wait(at(70)); d != a.nextAcquire.Sub(at(70)) {
		t.Fatalf("acquire waits %v, want next_acquire's %v", d, a.nextAcquire.Sub(at(70)))
	}
	// A heavy client's 429: rate / 3, never below sigma.
	for range 30 {
		a.Sent(at(71))
	}
	before = a.Rate()
	a.Done(at(72), limited)
	if !near(a.Rate(), math.Max(p.Sigma, before/3)) {
		t.Fatalf("a heavy client's 429: %v, want %v", a.Rate(), before/3)
	}

	// routine_update is skipped within omega of a congestion report.
	n := len(tel.reports)
	a.Update(at(90))
	if len(tel.reports) != n {
		t.Fatal("a routine update ran 18 s after a congestion report")
	}
	// Once past omega, a group that saw 429s holds the client back:
	// next_acquire = now + omega + U(-2, 2).
	a.Update(at(120))
	if len(tel.reports) != n+1 {
		t.Fatal("no routine update at 120 s")
	}
	if hold := a.nextAcquire.Sub(at(120)).Seconds(); hold < 28 || hold >= 32 {
		t.Fatalf("held %.3f s after an update that saw 429s, want omega ± 2", hold)
	}
	// Wait never runs past the next update.
	if d := a.Wait(at(121)); d > 29*time.Second {
		t.Fatalf("wait %v runs past the next update at 150 s", d)
	}
}

// Hinted: a refusal's retry_after plus a spread; a success paces by what
// remains; no hints hand over to the fallback.
func TestHinted(t *testing.T) {
	tel := &fakeTelemetry{agg: Aggregate{Active: 4, Total: 40, Rate: 80}}
	fb := NewAATB(DefaultAATB(), tel, rand.New(rand.NewPCG(1, 1)), t0)
	h := NewHinted(fb, rand.New(rand.NewPCG(2, 2)))
	// The first Wait reports at once (n is known from the first attempt).
	h.Wait(t0)
	if len(tel.reports) != 1 {
		t.Fatalf("reports after the first Wait: %d, want 1", len(tel.reports))
	}
	fb.load = 10 // this client sent a quarter of the group's 40: n = 4
	tau := 750 * time.Millisecond
	hint := Hint{RetryAfter: -1, Remaining: 1, Reset: 99 * tau, Limit: 100}
	// A success with 1 left among 4 and a reserve of 5 (of 100): wait
	// (4 + 5 - 1) intervals, plus slack.
	h.Sent(t0)
	h.Done(t0, Outcome{Hint: hint})
	want := time.Duration(8 * float64(tau) * 1.05)
	if d := h.Wait(t0); d != want {
		t.Fatalf("after a success with 1 left: waits %v, want %v", d, want)
	}
	// Enough left for everyone: no wait.
	h.Done(t0, Outcome{Hint: Hint{RetryAfter: -1, Remaining: 50, Reset: 50 * tau, Limit: 100}})
	if d := h.Wait(t0); d != 0 {
		t.Fatalf("after a success with 50 left: waits %v", d)
	}
	// A refusal: retry_after plus U(0, max(n, 2)) intervals.
	h.Done(t0, Outcome{Limited: true, Hint: Hint{RetryAfter: 500 * time.Millisecond, Remaining: 0, Reset: 100 * tau, Limit: 100}})
	d := h.Wait(t0)
	if d < 500*time.Millisecond || d > 500*time.Millisecond+4*tau {
		t.Fatalf("after a refusal: waits %v, want retry_after + [0, 4 intervals)", d)
	}
	// No hints: the fallback decides (AATB's congestion_notification).
	rate := fb.Rate()
	h.Done(t0, limited)
	if fb.Rate() >= rate {
		t.Fatalf("a refusal without hints did not reach the fallback: rate %v", fb.Rate())
	}
	if h.Wait(t0) != fb.Wait(t0) {
		t.Fatal("without hints, Wait is not the fallback's")
	}
}

// fakeScheduler is a fakeTelemetry that also reserves: it records each
// reservation's after and answers slot (fail: an error).
type fakeScheduler struct {
	fakeTelemetry
	afters []time.Duration
	slot   time.Duration
	fail   bool
}

func (f *fakeScheduler) Reserve(now time.Time, sent int64, got429 bool, after time.Duration) (Aggregate, error) {
	if f.fail {
		return Aggregate{}, errors.New("no answer")
	}
	f.reports = append(f.reports, report{now, sent, got429})
	f.afters = append(f.afters, after)
	agg := f.agg
	agg.Slot = f.slot
	return agg, nil
}

// Hinted with a Scheduler: a refusal, a success that leaves too little and
// a request arriving at an idle client each take the group's next slot at
// or after the instant the hint says a request is free, once per attempt;
// a backlog sent while plenty is left takes none; when the telemetry does
// not answer, the random place stands.
func TestHinted_Slots(t *testing.T) {
	tel := &fakeScheduler{fakeTelemetry: fakeTelemetry{agg: Aggregate{Active: 4, Total: 40, Rate: 80}}}
	fb := NewAATB(DefaultAATB(), tel, rand.New(rand.NewPCG(1, 1)), t0)
	h := NewHinted(fb, rand.New(rand.NewPCG(2, 2)))
	tau := 750 * time.Millisecond
	h.Wait(t0) // the first report
	reserves := func() int { return len(tel.afters) }

	// A refusal that says retry_after 500 ms: the next attempt reserves at
	// or after 500 ms, reporting the 429, and waits for the slot (3 s).
	h.Sent(t0)
	h.Done(t0, Outcome{Limited: true, Hint: Hint{RetryAfter: 500 * time.Millisecond, Remaining: 0, Reset: 100 * tau, Limit: 100}})
	tel.slot = 3 * time.Second
	if d := h.Wait(at(0.1)); d != 3*time.Second {
		t.Fatalf("after a refusal: waits %v, want the slot's 3s", d)
	}
	if reserves() != 1 || tel.afters[0] != 400*time.Millisecond || !tel.reports[len(tel.reports)-1].got429 {
		t.Fatalf("after a refusal: reservations %v (want one at 400ms), reports %+v", tel.afters, tel.reports)
	}
	// Asked again before the slot: the same slot, no new reservation.
	if d := h.Wait(at(1.1)); d != 2*time.Second || reserves() != 1 {
		t.Fatalf("waiting for the slot: %v and %d reservations, want 2s and 1", d, reserves())
	}
	if d := h.Wait(at(3.1)); d != 0 {
		t.Fatalf("at the slot: waits %v", d)
	}

	// A success that leaves none (n = 4, reserve 5): a request is free an
	// interval later.
	h.Sent(at(3.1))
	h.Done(at(3.1), Outcome{Hint: Hint{RetryAfter: -1, Remaining: 0, Reset: 100 * tau, Limit: 100}})
	tel.slot = time.Second
	if d := h.Wait(at(3.1)); d != time.Second || reserves() != 2 || tel.afters[1] != tau {
		t.Fatalf("after a success with none left: waits %v, reservations %v; want 1s and one at %v", d, tel.afters, tau)
	}
	if tel.reports[len(tel.reports)-1].got429 {
		t.Fatal("a success's reservation reported a 429")
	}

	// A success with plenty left: the backlog goes at once, no slot.
	h.Sent(at(4.1))
	h.Done(at(4.1), Outcome{Hint: Hint{RetryAfter: -1, Remaining: 50, Reset: 50 * tau, Limit: 100}})
	if d := h.Wait(at(4.1)); d != 0 || reserves() != 2 {
		t.Fatalf("a backlog with plenty left: waits %v after %d reservations, want 0 after 2", d, reserves())
	}

	// A request arriving later at the idle client reserves now.
	tel.slot = 1500 * time.Millisecond
	if d := h.Wait(at(10)); d != 1500*time.Millisecond || reserves() != 3 || tel.afters[2] != 0 {
		t.Fatalf("an arrival at an idle client: waits %v, reservations %v; want 1.5s and one at 0", d, tel.afters)
	}
	h.Sent(at(11.5))

	// The telemetry does not answer: the refusal's random place stands,
	// and the next Wait does not ask again.
	tel.fail = true
	h.Done(at(11.5), Outcome{Limited: true, Hint: Hint{RetryAfter: 500 * time.Millisecond, Remaining: 0, Reset: 100 * tau, Limit: 100}})
	d := h.Wait(at(11.5))
	if d < 500*time.Millisecond || d > 500*time.Millisecond+4*tau {
		t.Fatalf("a refusal without a slot: waits %v, want retry_after + [0, 4 intervals)", d)
	}
	tel.fail = false
	if h.Wait(at(11.5)); reserves() != 3 {
		t.Fatalf("asked for a slot again after the telemetry failed: %v", tel.afters)
	}
}
