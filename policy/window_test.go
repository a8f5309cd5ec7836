package policy_test

import (
	"math"
	"testing"

	"github.com/throttleddb/throttled/policy"
)

// TestTierWindow: the time a tier's limit spans, a bucket's refill time
// from empty, saturating where it overflows.
func TestTierWindow(t *testing.T) {
	for _, tc := range []struct {
		tier policy.Tier
		want int64
	}{
		{policy.Tier{Algorithm: policy.FWC, Limit: 5, Period: 60_000}, 60_000},
		{policy.Tier{Algorithm: policy.SWC, Limit: 5, Period: 1000, Subwindows: 4}, 1000},
		{policy.Tier{Algorithm: policy.GCRA, Burst: 2, Count: 1, Period: 2000}, 6000},
		{policy.Tier{Algorithm: policy.GCRA, Burst: 0, Count: 3, Period: 1000}, 333},
		{policy.Tier{Algorithm: policy.TB, Burst: 10, Count: 2, Period: 1000}, 5000},
		{policy.Tier{Algorithm: policy.LB, Burst: 6, Count: 3, Period: 500}, 1000},
		{policy.Tier{Algorithm: policy.TB, Burst: math.MaxInt64, Count: 1, Period: 1000}, math.MaxInt64},
	} {
		if got := tc.tier.Window(); got != tc.want {
			t.Errorf("%+v: Window %d, want %d", tc.tier, got, tc.want)
		}
	}
}
