package gcra_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/throttleddb/throttled/gcra"
)

// FuzzDecide feeds arbitrary arguments, stored TATs and clocks to NewParams and
// Decide and checks the invariants the command layer relies on. back is a
// non-negative step into the past used for the time-going-backwards property.
//
// Run it with: go test -fuzz FuzzDecide -fuzztime 30s ./gcra/
// Crashers land in testdata/fuzz/FuzzDecide and are replayed by go test.
func FuzzDecide(f *testing.F) {
	// Seeds: the reference vectors' shapes, fast rates, and the overflow edges.
	for _, sd := range []struct{ burst, count, period, tat, now, qty, back int64 }{
		{15, 30, 60, 0, t0, 1, 0},                                   // V01
		{5, 5, 3600, 0, t0, 1, s},                                   // V02
		{0, 1, 2, t0 + 2*s, t0 + 10*ms, 1, 10 * ms},                 // V03 step 2
		{4, 1, 1, 0, t0, 6, 0},                                      // V04 step 1
		{4, 1, 1, t0 + 5*s, t0, 1, 0},                               // V04 step 7
		{4, 1, 10, t0 + 50*s, t0 + 95*s, 0, 3 * s},                  // V05 peek
		{4, 500000, 1, 0, t0, 2, 1},                                 // V05 bar
		{6000, 1000, 1, t0 + 500*ms, t0, 3, ms},                     // fast rate
		{0, 2000, 1, t0 + 500_000, t0, 1, 0},                        // retry_after 0
		{9_223_372_035, 1, 1, math.MaxInt64 - 10, t0, 0, 0},         // huge tat, peek
		{9_223_372_035, 1, 1, math.MaxInt64 - 10, t0, 1, 0},         // huge tat, overflow
		{math.MaxInt64 - 1, 1_000_000_000, 1, 0, 0, 0, 0},           // largest tau
		{1, 1, 1, math.MaxInt64 - 2*s, -1, 1, math.MaxInt64},        // wait overflow
		{1, 1, 1, 0, math.MinInt64, 1, 0},                           // negative now
		{9_223_372_036, 1, 1, 0, t0, 1, 0},                          // V28 overflow
		{10, 0, 1, 0, t0, 1, 0},                                     // zero rate
		{-1, -1, -1, -1, -1, -1, -1},                                // negatives
		{1, 1, 9_223_372_036, t0, t0, math.MaxInt64, math.MaxInt64}, // T*q overflow
	} {
		f.Add(sd.burst, sd.count, sd.period, sd.tat, sd.now, sd.qty, sd.back)
	}
	f.Fuzz(func(t *testing.T, burst, count, period, tat, now, qty, back int64) {
		// Raw values reach the overflow and error paths.
		if p, ok := newParams(t, burst, count, period); ok {
			checkDecide(t, tat, p, now, qty, back)
		}
		// Most raw values are errors, so the same input folded into realistic ranges
		// (the reference model's: bursts up to 1000, rates up to 3,000,000/s,
		// quantities up to 100, TATs within 100 s of now) exercises the arithmetic.
		if p, ok := newParams(t, fold(burst, 1001), fold(count, 3_000_001), 1+fold(period, 3600)); ok {
			checkDecide(t, t0+tat%(100*s), p, t0+now%(10*s), fold(qty, 101), fold(back, 10*s))
		}
	})
}

// fold maps v into 0..n-1.
func fold(v, n int64) int64 {
	v %= n
	if v < 0 {
		v = -v
	}
	return v
}

func newParams(t *testing.T, burst, count, period int64) (gcra.Params, bool) {
	t.Helper()
	p, err := gcra.NewParams(burst, count, period)
	if err != nil {
		checkSentinel(t, "NewParams", err)
		if p != (gcra.Params{}) {
			t.Fatalf("NewParams(%d, %d, %d): got %+v with error %v, want zero Params", burst, count, period, p, err)
		}
		return p, false
	}
	return p, true
}

func checkSentinel(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, gcra.ErrZeroRate) && !errors.Is(err, gcra.ErrNegative) && !errors.Is(err, gcra.ErrOverflow) {
		t.Fatalf("%s: got error %v, want one of the sentinels", what, err)
	}
}

// checkDecide checks one Decide call and the properties that relate it to
// neighbouring calls (same state, a later or earlier now, other quantities).
func checkDecide(t *testing.T, tat int64, p gcra.Params, now, qty, back int64) {
	t.Helper()
	newTAT, store, res, err := gcra.Decide(tat, p, now, qty)

	// Same inputs, same outputs: replicas recompute every command.
	newTAT2, store2, res2, err2 := gcra.Decide(tat, p, now, qty)
	if newTAT2 != newTAT || store2 != store || res2 != res || err2 != err {
		t.Fatalf("Decide(%d, %+v, %d, %d) not deterministic: (%d, %v, %+v, %v) then (%d, %v, %+v, %v)",
			tat, p, now, qty, newTAT, store, res, err, newTAT2, store2, res2, err2)
	}
	if err != nil {
		checkSentinel(t, "Decide", err)
		if store || newTAT != tat || res != (gcra.Result{}) {
			t.Fatalf("Decide(%d, %+v, %d, %d): got (%d, %v, %+v) with error %v, want nothing to store",
				tat, p, now, qty, newTAT, store, res, err)
		}
		return
	}

	call := func() string {
		return fmt.Sprintf("Decide(%d, %+v, %d, %d)", tat, p, now, qty)
	}
	if res.Limit != p.Limit() {
		t.Fatalf("%s: got Limit %d, want %d", call(), res.Limit, p.Limit())
	}
	if res.Remaining < 0 || res.Remaining > res.Limit {
		t.Fatalf("%s: got Remaining %d, want 0..%d", call(), res.Remaining, res.Limit)
	}
	if !res.Limited && res.RetryAfter != -1 {
		t.Fatalf("%s: allowed with RetryAfter %d, want -1", call(), res.RetryAfter)
	}
	if res.Limited && res.RetryAfter != -1 && res.RetryAfter <= 0 {
		t.Fatalf("%s: limited with RetryAfter %d, want -1 or > 0", call(), res.RetryAfter)
	}
	if res.ResetAfter < 0 {
		t.Fatalf("%s: got ResetAfter %d, want >= 0", call(), res.ResetAfter)
	}
	if store != !res.Limited {
		t.Fatalf("%s: got store %v with Limited %v", call(), store, res.Limited)
	}
	if res.Limited && newTAT != tat {
		t.Fatalf("%s: limited but newTAT %d != tat %d", call(), newTAT, tat)
	}
	if store {
		// The stored TAT never moves backwards, and the key lives until it.
		if newTAT < tat || newTAT < now {
			t.Fatalf("%s: stored TAT %d is before tat %d or now %d", call(), newTAT, tat, now)
		}
		if newTAT-now != res.ResetAfter {
			t.Fatalf("%s: newTAT-now = %d, ResetAfter %d", call(), newTAT-now, res.ResetAfter)
		}
		if got, want := gcra.TTL(newTAT, now), res.ResetAfter/1_000_000; got != want {
			t.Fatalf("%s: got TTL %d ms, want %d", call(), got, want)
		}
	}

	// Seconds is monotone and a ceiling at ms resolution.
	checkSeconds(t, res.RetryAfter, res.ResetAfter)
	checkSeconds(t, back, now)
	checkSeconds(t, tat, qty)

	state := tat
	if store {
		state = newTAT
	}

	// Remaining means what it says: that many 1-unit requests pass right now, and
	// one more does not. (With Remaining 0 even a peek may be limited: the TAT can be
	// more than tau ahead after the caller shrank the limit, V19.)
	if _, _, r, err := gcra.Decide(state, p, now, res.Remaining); err == nil && r.Limited && res.Remaining > 0 {
		t.Fatalf("%s: Remaining %d, but taking them is limited", call(), res.Remaining)
	}
	if res.Remaining < math.MaxInt64 {
		if _, _, r, err := gcra.Decide(state, p, now, res.Remaining+1); err == nil && !r.Limited {
			t.Fatalf("%s: Remaining %d, but %d more are allowed", call(), res.Remaining, res.Remaining+1)
		}
	}

	// Waiting RetryAfter is exactly enough for the same request, and 1 ns less is not.
	if res.Limited && res.RetryAfter > 0 && now <= math.MaxInt64-res.RetryAfter {
		later := now + res.RetryAfter
		if _, _, r, err := gcra.Decide(tat, p, later, qty); err == nil && r.Limited {
			t.Fatalf("%s: still limited after waiting RetryAfter %d", call(), res.RetryAfter)
		}
		if _, _, r, err := gcra.Decide(tat, p, later-1, qty); err == nil && !r.Limited {
			t.Fatalf("%s: allowed 1 ns before RetryAfter %d", call(), res.RetryAfter)
		}
	}

	// Time going backwards never mints capacity (golang/go issue 71360): seen from an
	// earlier now, the same state has no more room and is no sooner full.
	if back < 0 {
		back = -(back + 1) // fold into 0..MaxInt64
	}
	if now >= math.MinInt64+back {
		earlier := now - back
		if _, _, r, err := gcra.Decide(state, p, earlier, 0); err == nil {
			_, _, cur, _ := gcra.Decide(state, p, now, 0)
			if r.Remaining > cur.Remaining || r.ResetAfter < cur.ResetAfter {
				t.Fatalf("%s: at now-%d Remaining %d ResetAfter %d, at now Remaining %d ResetAfter %d",
					call(), back, r.Remaining, r.ResetAfter, cur.Remaining, cur.ResetAfter)
			}
		}
	}
}

func checkSeconds(t *testing.T, a, b int64) {
	t.Helper()
	if a > b {
		a, b = b, a
	}
	sa, sb := gcra.Seconds(a), gcra.Seconds(b)
	if sa > sb {
		t.Fatalf("Seconds not monotone: Seconds(%d) = %d > Seconds(%d) = %d", a, sa, b, sb)
	}
	for _, d := range [2]int64{a, b} {
		sd := gcra.Seconds(d)
		if d < 0 {
			if sd != -1 {
				t.Fatalf("Seconds(%d) = %d, want -1", d, sd)
			}
			continue
		}
		// floor(d) <= Seconds(d) <= floor(d)+1, and exact when d has no whole ms
		// beyond the whole seconds.
		whole := d / 1_000_000_000
		frac := d % 1_000_000_000
		want := whole
		if frac >= 1_000_000 {
			want++
		}
		if sd != want {
			t.Fatalf("Seconds(%d) = %d, want %d", d, sd, want)
		}
	}
}
