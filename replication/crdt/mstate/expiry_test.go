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
			_, next, fullAt, write, err := decide(l, sa, a, now+int64(i)*1e6, 1, Exact)
			if err != nil || !write {
				t.Fatalf("%v: %v %v", l.Kind(), err, write)
			}
			sa = next
			if got, _ := Expiry(sa); got != fullAt {
				t.Fatalf("%v: bound %d, Decide's fullAt %d", l.Kind(), got, fullAt)
			}
		}
		_, sb, fullB, _, _ := decide(l, sb, b, now, 2, Exact)
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

// TestNewest: each origin's newest admission in a merged state of every
// kind, MinInt64 for an origin that wrote nothing, for one whose events a
// fold took into the base, and for a string.
func TestNewest(t *testing.T) {
	a, b, c := NewOrigin("a", 1), NewOrigin("b", 1), NewOrigin("c", 1)
	for k, l := range limiters() {
		var sa, sb []byte
		for i := range 3 {
			_, sa, _, _, _ = decide(l, sa, a, t0+int64(i)*ms, 1, Exact)
		}
		_, sb, _, _, _ = decide(l, sb, b, t0+ms/2, 1, Exact)
		merged, err := Merge(sa, sb)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			o    Origin
			want int64
		}{{a, t0 + 2*ms}, {b, t0 + ms/2}, {c, math.MinInt64}} {
			if got, err := Newest(merged, w.o); err != nil || got != w.want {
				t.Errorf("%v: Newest(%v) = %d, %v; want %d", k, w.o, got, err, w.want)
			}
		}
		if k == GCRA || k == TB || k == LB {
			// b writes once everything before is complete: a's events
			// go into the base.
			_, next, _, _, _ := decide(l, merged, b, t0+3*ms, 1, Bounds{Complete: t0 + 3*ms, Unfolded: Fixed})
			if got, err := Newest(next, a); err != nil || got != math.MinInt64 {
				t.Errorf("%v: after a fold, Newest(a) = %d, %v", k, got, err)
			}
		}
	}
	str, _ := StrSet(nil, a, t0, []byte("v"), 0, false)
	if got, err := Newest(str, a); err != nil || got != math.MinInt64 {
		t.Errorf("string: Newest = %d, %v", got, err)
	}
	if _, err := Newest([]byte{9, 9}, a); err == nil {
		t.Error("Newest of bad bytes: no error")
	}
}
