package engines_test

import (
	"bytes"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// Cloudflare's example ("How we built rate limiting capable of scaling to
// millions of domains", 2017): 50 per minute, 42 in the previous minute, 18
// in the current one, 15 s into it: 42*(45/60) + 18 = 49.5, 49 in integers.
func TestSWC_Cloudflare(t *testing.T) {
	l := must(engines.NewSWC(50, 60*s, 2)) // t0 starts a minute
	run(t, l, 50, []step{
		// The 42 weigh 0 once 42*(120s-t) < 60s: from 118.571428572 s on.
		{30 * s, 42, allow(8, 118_571_428_572-30*s)},
		// 31 + 18 = 49. The 18 weigh 0 from 180 s - 3.333333333 s on.
		{75 * s, 18, allow(1, 176_666_666_667-75*s)},
		// 2 more need the 42 down to 30: 42*x < 31*60 s, x <= 44.285714285 s
		// before the minute's end, i.e. from 75.714285715 s.
		{75 * s, 2, deny(1, 714_285_715, 176_666_666_667-75*s)},
		{75*s + 714_285_714, 2, deny(1, 1, 176_666_666_667-75*s-714_285_714)},
		// Now 20 in the current minute: 0 once 20*(180s-t) < 60s.
		{75*s + 714_285_715, 2, allow(0, 177*s+1-75*s-714_285_715)},
		{180 * s, 0, allow(50, 0)},
	})
}

// n = 4 over 9 s: three sub-windows of 3 s; the oldest counter decays over the
// current sub-window.
func TestSWC_FourCounters(t *testing.T) {
	l := must(engines.NewSWC(10, 9*s, 4)) // t0 starts a window
	run(t, l, 10, []step{
		// The 4 count fully until 9 s, then decay over [9 s, 12 s): 0 once
		// 4*(12s-t) < 3s, from 11.25 s + 1 ns.
		{0, 4, allow(6, 11_250*ms+1)},
		{3 * s, 3, allow(3, 14*s+1-3*s)}, // 3*(15s-t) < 3s from 14 s + 1 ns
		{6 * s, 2, allow(1, 16_500*ms+1-6*s)},
		// 1 + 2 + 3 + 4*(3/3). The newest counter is what keeps the key: the
		// 1 decays over [18 s, 21 s), 0 from 18 s + 1 ns.
		{9 * s, 1, allow(0, 9*s+1)},
		// One more once the 4 weigh 3: floor(4*(3s-1)/3s) = 3 at 9 s + 1 ns.
		{9 * s, 1, deny(0, 1, 9*s+1)},
		// 1.5 s into the sub-window the 4 weigh floor(4*1.5/3) = 2.
		{10_500 * ms, 0, allow(2, 18*s+1-10_500*ms)},
		{10_500 * ms, 2, allow(0, 20*s+1-10_500*ms)}, // 3*(21s-t) < 3s
		// In [12 s, 15 s): 0 + 3 + 2, and the 3 of [3 s, 6 s) weigh 3.
		{12 * s, 0, allow(2, 20*s+1-12*s)},
		{30 * s, 0, allow(10, 0)},
	})
}

// window 10 ns with n = 4 is not a multiple of 3: sub-windows start at
// ceil(10k/3): 0, 4, 7, 10, 14, 17, 20, ... (lengths 4, 3, 3, repeating).
func TestSWC_UnevenSubwindows(t *testing.T) {
	l := must(engines.NewSWC(6, 10, 4)) // t0 is a multiple of 10 ns
	run(t, l, 6, []step{
		{0, 2, allow(4, 13)},   // oldest in [10, 14): floor(2*(14-t)/4) = 0 from 13
		{4, 2, allow(2, 16-4)}, // oldest in [14, 17): from 16
		{7, 2, allow(0, 19-7)},
		// At 11 (in [10, 14)) the 2 of [0, 4) weigh floor(2*3/4) = 1: 5 + 1 fits.
		{9, 1, deny(0, 2, 19-9)},
		{10, 1, deny(0, 1, 19-10)},
		{11, 1, allow(0, 21-11)},
		{13, 0, allow(1, 21-13)}, // floor(2*1/4) = 0
		{24, 0, allow(6, 0)},
	})
}

func TestSWC_TimeGoesBackwards(t *testing.T) {
	l := must(engines.NewSWC(2, 10*s, 2))
	run(t, l, 2, []step{
		// The 2 decay over [20 s, 30 s): 0 once 2*(30s-t) < 10s.
		{15 * s, 2, allow(0, 10*s+1)},
		// 5 s reads as 15 s: full. One fits once floor(2*(30s-t)/10s) <= 1.
		{5 * s, 1, deny(0, 5*s+1, 10*s+1)},
		{-1000 * s, 0, allow(0, 10*s+1)},
		// The 2 weigh 1 now; the new 1 decays over [30 s, 40 s), 0 from 30 s + 1 ns.
		{20*s + 1, 1, allow(0, 10*s)},
		{5 * s, 1, deny(0, 5*s, 10*s)}, // read as 20 s + 1 ns
		{25 * s, 1, deny(0, 1, 5*s+1)}, // 1 + floor(2*5/10)
		{25*s + 1, 1, allow(0, 10*s)},  // 1 + 0, then 2 decaying over [30 s, 40 s)
	})
}

// A key reused with another n keeps its newest counters.
func TestSWC_SubwindowsChanged(t *testing.T) {
	two, three := must(engines.NewSWC(10, 10*s, 2)), must(engines.NewSWC(10, 10*s, 3))
	state, _, err := two.Commit(nil, t0+12*s, 4) // sub-window [10 s, 20 s) of n = 2
	if err != nil {
		t.Fatal(err)
	}
	// Under n = 3 the counter is [10 s, 15 s)'s: it counts fully until 20 s.
	if res, err := three.Check(state, t0+19*s, 0); err != nil || res.Remaining != 6 {
		t.Errorf("n = 3 at 19 s: got %+v, %v; want Remaining 6", res, err)
	}
	next, _, err := three.Commit(bytes.Clone(state), t0+19*s, 1)
	if err != nil || len(next) != 10+3*8 {
		t.Fatalf("Commit under n = 3: got %d bytes, %v", len(next), err)
	}
	// Back under n = 2 the counters are read as the newest 10 s sub-windows:
	// the 1 as [10 s, 20 s)'s and the 4 as [0, 10 s)'s, which weigh
	// floor(4*1/10) = 0 at 19 s. Reinterpreting can under-count for one window:
	// parameters are the caller's to keep stable.
	if res, err := two.Check(next, t0+19*s, 0); err != nil || res.Remaining != 9 {
		t.Errorf("back to n = 2: got %+v, %v; want Remaining 9", res, err)
	}
}
