package engines_test

import (
	"testing"

	"github.com/throttleddb/throttled/engines"
)

func TestFWC_Timeline(t *testing.T) {
	l := must(engines.NewFWC(3, 10*s)) // t0 starts a window
	run(t, l, 3, []step{
		{0, 0, allow(3, 0)}, // peek on a missing key
		{0, 1, allow(2, 10*s)},
		{1 * s, 2, allow(0, 9*s)},
		{2 * s, 1, deny(0, 8*s, 8*s)}, // the next window starts in 8 s
		{2 * s, 0, allow(0, 8*s)},     // peek: allowed, nothing recorded
		{2 * s, 4, deny(0, -1, 8*s)},  // 4 > limit: can never fit
		{10*s - 1, 1, deny(0, 1, 1)},  // 1 ns before the boundary
		{10 * s, 3, allow(0, 10*s)},   // a new window: the count restarts
		{15 * s, 1, deny(0, 5*s, 5*s)},
		{25 * s, 0, allow(3, 0)}, // two windows later: full again
		{25 * s, 4, deny(3, -1, 0)},
		{25 * s, 2, allow(1, 5*s)},
	})
}

// The count belongs to the window of the newest Commit; an earlier now is
// read as that newest time, so a stale clock cannot reach back into a
// window with a lower count (golang/go issue 71360).
func TestFWC_TimeGoesBackwards(t *testing.T) {
	l := must(engines.NewFWC(2, 10*s))
	run(t, l, 2, []step{
		{9 * s, 2, allow(0, 1*s)},
		{10 * s, 1, allow(1, 10*s)}, // newest is now 10 s, in the next window
		// 9 s is treated as 10 s: the same window, one unit left; replies
		// are measured from 10 s.
		{9 * s, 0, allow(1, 10*s)},
		{9 * s, 1, allow(0, 10*s)},
		{-100 * s, 1, deny(0, 10*s, 10*s)},
		{20 * s, 2, allow(0, 10*s)},
	})
}

// Windows are aligned to the epoch with floor division, also before 1970.
func TestFWC_NegativeTime(t *testing.T) {
	l := must(engines.NewFWC(1, 10))
	for _, tt := range []struct{ now, fullAt int64 }{
		{-1, 0}, {-10, 0}, {-11, -10}, {0, 10}, {9, 10}, {10, 20},
	} {
		_, fullAt, err := l.Commit(nil, tt.now, 1)
		if err != nil || fullAt != tt.fullAt {
			t.Errorf("Commit at %d: got fullAt %d, %v; want %d", tt.now, fullAt, err, tt.fullAt)
		}
	}
}

// A key reused with a shorter window: the count moves to the new window that
// holds the newest admission, and leaves with it.
func TestFWC_WindowChanged(t *testing.T) {
	long, short := must(engines.NewFWC(5, 60*s)), must(engines.NewFWC(5, 10*s))
	state, _, err := long.Commit(nil, t0+15*s, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		at   int64
		want engines.Result
	}{
		{15 * s, engines.Result{Limit: 5, Remaining: 1, RetryAfter: -1, ResetAfter: 5 * s}},
		{19 * s, engines.Result{Limit: 5, Remaining: 1, RetryAfter: -1, ResetAfter: 1 * s}},
		{20 * s, engines.Result{Limit: 5, Remaining: 5, RetryAfter: -1}},
	} {
		if got, err := short.Check(state, t0+tt.at, 0); err != nil || got != tt.want {
			t.Errorf("at %d s: got %+v, %v; want %+v", tt.at/s, got, err, tt.want)
		}
	}
}
