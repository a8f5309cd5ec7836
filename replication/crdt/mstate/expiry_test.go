package mstate

import (
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// TestExpiry: for one writer, the bound is the instant Decide said the
// state is full at; for two, it is later than either's (debts add up).
func TestExpiryBound(t *testing.T) {
	tb, _ := engines.NewTB(5, 2, 1e9)
	lb, _ := engines.NewLB(5, 2, 1e9)
	g, _ := NewGCRA(gcra.Params{Burst: 4, Interval: 1e8})
	mtb, _ := New(tb, 0)
	mlb, _ := New(lb, 0)
	a, b := NewOrigin("a", 1), NewOrigin("b", 1)
	for _, l := range []Limiter{g, mtb, mlb} {
		var sa, sb []byte
		now := int64(1e12)
		for i := range 3 {
			_, next, fullAt, write, err := l.Decide(sa, a, now+int64(i)*1e6, 1, NoBound)
			if err != nil || !write {
				t.Fatalf("%v: %v %v", l.Kind(), err, write)
			}
			sa = next
			if got, _ := Expiry(sa); got != fullAt {
				t.Fatalf("%v: bound %d, Decide's fullAt %d", l.Kind(), got, fullAt)
			}
		}
		_, sb, fullB, _, _ := l.Decide(sb, b, now, 2, NoBound)
		merged, _ := Merge(sa, sb)
		fullA, _ := Expiry(sa)
		if got, _ := Expiry(merged); got <= max(fullA, fullB) {
			t.Fatalf("%v: merged bound %d, not after %d and %d", l.Kind(), got, fullA, fullB)
		}
		if got, _ := Expiry(nil); got != math.MinInt64 {
			t.Fatalf("empty state: %d", got)
		}
	}
}
