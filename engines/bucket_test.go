package engines_test

import (
	"bytes"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// Capacity 3, 2 tokens every 3 s: one token per 1.5 s.
func TestTB_Timeline(t *testing.T) {
	l := must(engines.NewTB(3, 2, 3*s))
	run(t, l, 3, []step{
		{0, 0, allow(3, 0)}, // starts full
		{0, 1, allow(2, 1500*ms)},
		{0, 2, allow(0, 4500*ms)},
		{0, 1, deny(0, 1500*ms, 4500*ms)},
		{0, 0, allow(0, 4500*ms)},
		{0, 4, deny(0, -1, 4500*ms)}, // above capacity: never
		{1 * s, 1, deny(0, 500*ms, 3500*ms)},
		{1500 * ms, 1, allow(0, 4500*ms)},
		{2500 * ms, 0, allow(0, 3500*ms)}, // 2/3 of a token is not one
		{3000 * ms, 0, allow(1, 3000*ms)},
		{10 * s, 3, allow(0, 4500*ms)}, // refilled to capacity, not beyond
	})
}

// 3 tokens per second: the interval 333,333,333.3 ns is exact in units of
// token*period.
func TestTB_NonIntegerInterval(t *testing.T) {
	l := must(engines.NewTB(1, 3, s))
	run(t, l, 1, []step{
		{0, 1, allow(0, 333_333_334)},
		{333_333_333, 1, deny(0, 1, 1)}, // 1 unit of 10^9 short
		{333_333_334, 1, allow(0, 333_333_334)},
		// Three in a row 1/3 s apart: no rounding drift accumulates.
		{1 * s, 1, allow(0, 333_333_334)},
		{1*s + 333_333_334, 1, allow(0, 333_333_334)},
	})
	// Sustained demand (a request every ms) for 1000 s at 3 tokens per second
	// from a full bucket of 3: exactly 3 + 3000 pass, as the bucket is never
	// full again and no refill is lost to rounding.
	l = must(engines.NewTB(3, 3, s))
	var state []byte
	admitted := 0
	for now := int64(0); now <= 1000*s; now += ms {
		res, err := l.Check(state, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Limited {
			if state, _, err = l.Commit(state, now, 1); err != nil {
				t.Fatal(err)
			}
			admitted++
		}
	}
	if admitted != 3003 {
		t.Errorf("admitted %d over 1000 s at 3/s from 3 tokens, want 3003", admitted)
	}
}

func TestTB_TimeGoesBackwards(t *testing.T) {
	l := must(engines.NewTB(2, 1, s))
	run(t, l, 2, []step{
		{10 * s, 2, allow(0, 2*s)},
		{11 * s, 1, allow(0, 2*s)},
		{5 * s, 1, deny(0, 1*s, 2*s)}, // read as 11 s
		{-1000 * s, 0, allow(0, 2*s)},
		{12 * s, 1, allow(0, 2*s)},
	})
}

// A key reused with another period keeps its debt in tokens, rounded up, and
// drains it at the new rate from its cut on.
func TestTB_PeriodChanged(t *testing.T) {
	sec, third := must(engines.NewTB(10, 1, s)), must(engines.NewTB(10, 1, 3*s))
	state, _, err := sec.Commit(nil, t0, 4) // 4 tokens owed, 1 s each
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 s later under 1 per 3 s: 4 tokens (12 s) less 0.5 s.
	res, err := third.Check(state, t0+500*ms, 0)
	if want := (engines.Result{Limit: 10, Remaining: 6, RetryAfter: -1, ResetAfter: 11_500 * ms}); err != nil || res != want {
		t.Errorf("1 s to 3 s: got %+v, %v; want %+v", res, err, want)
	}
	// 2 tokens of 3 s less 1 ns is 1.99999999967 tokens: 2 under 1 per s.
	state, _, err = third.Commit(nil, t0, 1)
	if err == nil {
		state, _, err = third.Commit(state, t0+1, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err = sec.Check(state, t0+1, 0)
	if want := (engines.Result{Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 2 * s}); err != nil || res != want {
		t.Errorf("3 s to 1 s: got %+v, %v; want %+v", res, err, want)
	}
}

// Capacity 2 waiting, one leaves per second: 3 pass at once from empty.
func TestLB_Timeline(t *testing.T) {
	l := must(engines.NewLB(2, 1, s))
	run(t, l, 3, []step{
		{0, 0, allow(3, 0)},
		{0, 1, queued(2, 1*s, 0)}, // empty queue: forward at once
		{0, 1, queued(1, 2*s, 1*s)},
		{0, 1, queued(0, 3*s, 2*s)}, // 2 waiting
		{0, 1, deny(0, 1*s, 3*s)},
		{0, 0, allow(0, 3*s)}, // a peek is not held
		{0, 4, deny(0, -1, 3*s)},
		{500 * ms, 1, deny(0, 500*ms, 2500*ms)},
		{1 * s, 1, queued(0, 3*s, 2*s)}, // the slot at 3 s
		{1 * s, 2, deny(0, 2*s, 3*s)},
		{10 * s, 3, queued(0, 3*s, 0)}, // a batch is held until its first slot
		{10 * s, 0, allow(0, 3*s)},
		{11 * s, 1, queued(0, 3*s, 2*s)},
	})
}

// 3 per second: leak slots at exact thirds of a second, delays rounded up to
// the next whole ns.
func TestLB_NonIntegerInterval(t *testing.T) {
	l := must(engines.NewLB(5, 3, s))
	run(t, l, 6, []step{
		{0, 1, queued(5, 333_333_334, 0)},
		{0, 1, queued(4, 666_666_667, 333_333_334)},
		{0, 1, queued(3, 1*s, 666_666_667)},
		{333_333_333, 1, queued(2, 1*s+1, 666_666_667)}, // its slot is at 1 s
		// The slot at 1 s leaves now; this one gets 4/3 s.
		{1 * s, 1, queued(4, 666_666_667, 333_333_334)},
	})
}

func TestLB_TimeGoesBackwards(t *testing.T) {
	l := must(engines.NewLB(1, 1, s))
	run(t, l, 2, []step{
		{10 * s, 2, queued(0, 2*s, 0)},
		{11 * s, 1, queued(0, 2*s, 1*s)},
		{5 * s, 1, deny(0, 1*s, 2*s)}, // read as 11 s
		{-1000 * s, 0, allow(0, 2*s)},
		{12 * s, 1, queued(0, 2*s, 1*s)},
	})
}

// Commit reuses the caller's buffer for fixed-size states.
func TestBucket_CommitInPlace(t *testing.T) {
	for _, l := range []engines.Limiter{must(engines.NewTB(5, 1, s)), must(engines.NewLB(5, 1, s))} {
		state, _, err := l.Commit(nil, t0, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(state)
		next, _, err := l.Commit(state, t0, 1)
		if err != nil || &next[0] != &state[0] {
			t.Errorf("%v: Commit did not write in place (%v)", l.Kind(), err)
		}
		again, _, _ := l.Commit(want, t0, 1)
		if !bytes.Equal(again, next) {
			t.Errorf("%v: same inputs, different bytes", l.Kind())
		}
	}
}
