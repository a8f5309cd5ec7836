package engines_test

import (
	"bytes"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

func TestSWL_Timeline(t *testing.T) {
	l := must(engines.NewSWL(3, 10*s))
	run(t, l, 3, []step{
		{0, 0, allow(3, 0)},
		{0, 1, allow(2, 10*s)},
		{1 * s, 1, allow(1, 10*s)},
		{1 * s, 1, allow(0, 10*s)}, // same instant: shares the 1 s entry
		// Full: the entry at 0 leaves the window (t-10s, t] at 10 s; the
		// newest, at 1 s, at 11 s.
		{2 * s, 1, deny(0, 8*s, 9*s)},
		{2 * s, 2, deny(0, 9*s, 9*s)}, // needs the 1 s entry (2 units) gone too
		{2 * s, 4, deny(0, -1, 9*s)},  // above the limit: never
		{2 * s, 0, allow(0, 9*s)},
		{10*s - 1, 1, deny(0, 1, 1*s+1)},
		{10 * s, 1, allow(0, 10*s)}, // exactly when the entry at 0 left
		{10 * s, 2, deny(0, 1*s, 10*s)},
		{11 * s, 2, allow(0, 10*s)},
		{21 * s, 0, allow(3, 0)}, // everything has left
	})
}

// The log's newest entry is the newest time: an earlier now is read as it, so
// entries cannot be made to look expired by a stale clock.
func TestSWL_TimeGoesBackwards(t *testing.T) {
	l := must(engines.NewSWL(2, 10*s))
	run(t, l, 2, []step{
		{0, 1, allow(1, 10*s)},
		{9 * s, 1, allow(0, 10*s)},
		// At 15 s the entry at 0 is gone; a now of 5 s reads as 9 s, where
		// it is not.
		{5 * s, 1, deny(0, 1*s, 10*s)},
		{-1000 * s, 0, allow(0, 10*s)},
		{10 * s, 1, allow(0, 10*s)},
		{3 * s, 1, deny(0, 9*s, 10*s)}, // read as 10 s: the 9 s entry leaves at 19 s
	})
}

// The ring buffer grows by doubling up to the limit, wraps around, and agrees
// with a plain list at every step.
func TestSWL_RingGrowsAndWraps(t *testing.T) {
	const limit, window = 100, 1000
	l := must(engines.NewSWL(limit, window))
	var state []byte
	type entry struct{ t, q int64 }
	var log []entry
	maxLen := 0
	for i := range int64(20_000) {
		now := i * 7
		qty := int64(1)
		if i > 10_000 { // larger quantities once the ring is at its largest
			qty += i % 3
		}
		for len(log) > 0 && log[0].t <= now-window {
			log = log[1:]
		}
		var used int64
		for _, e := range log {
			used += e.q
		}
		res, err := l.Check(state, now, qty)
		if err != nil {
			t.Fatal(err)
		}
		if want := used+qty > limit; res.Limited != want {
			t.Fatalf("step %d: got limited %v, want %v (used %d)", i, res.Limited, want, used)
		}
		if res.Limited {
			continue
		}
		if state, _, err = l.Commit(state, now, qty); err != nil {
			t.Fatal(err)
		}
		log = append(log, entry{now, qty})
		maxLen = max(maxLen, len(state))
	}
	// At 7 ns apart, 143 times fit a 1000 ns window, but the limit of 100
	// units caps the log at 100 entries.
	if want := 14 + 12*limit; maxLen != want {
		t.Errorf("largest state: got %d bytes, want %d", maxLen, want)
	}
}

// Equal timestamps share one entry: a burst at one instant costs 12 bytes.
func TestSWL_SameInstant(t *testing.T) {
	l := must(engines.NewSWL(engines.MaxSWLLimit, s))
	var state []byte
	var err error
	for range engines.MaxSWLLimit {
		if state, _, err = l.Commit(state, t0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if len(state) != 14+8*12 {
		t.Errorf("got %d bytes, want %d (the initial 8 entries)", len(state), 14+8*12)
	}
	if res, _ := l.Check(state, t0, 1); !res.Limited || res.RetryAfter != s {
		t.Errorf("got %+v, want limited for 1 s", res)
	}
}

// Commit writes in place while the ring has room: the command layer's buffer
// is reused.
func TestSWL_CommitInPlace(t *testing.T) {
	l := must(engines.NewSWL(5, 10))
	state, _, err := l.Commit(nil, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := l.Commit(state, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if &next[0] != &state[0] {
		t.Errorf("Commit copied a state that had room")
	}
	// Lowering the limit to the count already in the window limits the key;
	// the log is still exact.
	low := must(engines.NewSWL(2, 10))
	if res, err := low.Check(next, 1, 0); err != nil || res.Limited || res.Remaining != 0 {
		t.Errorf("at the lowered limit: got %+v, %v", res, err)
	}
	if res, err := must(engines.NewSWL(1, 10)).Check(next, 1, 0); err != nil || !res.Limited || res.RetryAfter != 9 {
		t.Errorf("below the lowered limit: got %+v, %v; want limited until the entry at 0 leaves at 10", res, err)
	}
	if !bytes.Equal(next, state[:len(next)]) {
		t.Errorf("Check modified the state")
	}
}
