package engines_test

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// commitAt commits qty at now and returns the new state (nil when limited).
func commitAt(t testing.TB, l engines.Limiter, state []byte, now, qty int64, force bool) []byte {
	t.Helper()
	if force {
		next, _, err := engines.Force(l, bytes.Clone(state), now, qty)
		if err != nil {
			t.Fatalf("Force(%d at %d): %v", qty, now, err)
		}
		return next
	}
	res, next, _, write, err := engines.Apply(l, bytes.Clone(state), now, qty)
	if err != nil {
		t.Fatalf("Apply(%d at %d): %v", qty, now, err)
	}
	if res.Limited || !write {
		return nil
	}
	return next
}

// remaining is what a peek at now says is left.
func remaining(t *testing.T, l engines.Limiter, state []byte, now int64) int64 {
	t.Helper()
	res, err := l.Check(state, now, 0)
	if err != nil {
		t.Fatalf("Check at %d: %v", now, err)
	}
	return res.Remaining
}

// leaseRun plays one seeded lease: a grant of g at t0, other admissions,
// then a return of u unused, against the state the grant would have left
// had it taken g-u. It returns both states' remaining at a few later
// instants, and whether any other admission happened.
func leaseRun(t *testing.T, l engines.Limiter, rng *rand.Rand, span int64) (got, want []int64, others bool) {
	t.Helper()
	lim := engines.ParamsOf(l).Limit
	var leased, ideal []byte
	// Some history before the grant.
	now := int64(t0)
	for range rng.Intn(4) {
		now += rng.Int63n(span / 4)
		if next := commitAt(t, l, leased, now, 1+rng.Int63n(lim/4+1), false); next != nil {
			leased, ideal = next, bytes.Clone(next)
		}
	}
	now += rng.Int63n(span / 4)
	g := 1 + rng.Int63n(remaining(t, l, leased, now)+1)
	if g > remaining(t, l, leased, now) {
		return nil, nil, false // nothing to lease
	}
	u := rng.Int63n(g + 1)
	leased = commitAt(t, l, leased, now, g, false)
	grant, err := engines.GrantOf(l, leased)
	if err != nil {
		t.Fatal(err)
	}
	if g > u {
		ideal = commitAt(t, l, ideal, now, g-u, false)
	}
	// Others admit what the leased state allows; the ideal one, holding
	// fewer units, records the same.
	for range rng.Intn(5) {
		now += rng.Int63n(span / 3)
		q := 1 + rng.Int63n(lim/3+1)
		if next := commitAt(t, l, leased, now, q, false); next != nil {
			leased, others = next, true
			// The ideal state holds fewer units, so it admits q too (SWL
			// cannot Force).
			ideal = commitAt(t, l, ideal, now, q, engines.CanForce(l))
			if ideal == nil {
				t.Fatalf("%v: the smaller grant's state refused %d at %d", l.Kind(), q, now)
			}
		}
	}
	now += rng.Int63n(span / 3)
	next, _, credited, err := engines.Credit(l, bytes.Clone(leased), now, grant, u)
	if err != nil {
		t.Fatal(err)
	}
	if credited > u {
		t.Fatalf("credited %d of %d unused", credited, u)
	}
	if credited > 0 {
		leased = next
	}
	for _, d := range []int64{0, span / 7, span / 3, span / 2, span} {
		got = append(got, remaining(t, l, leased, now+d))
		want = append(want, remaining(t, l, ideal, now+d))
	}
	return got, want, others
}

// A credit on a window engine leaves exactly the state of the smaller grant.
func TestCredit_WindowsExact(t *testing.T) {
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(20, 10*s)),
		must(engines.NewSWL(20, 10*s)),
		must(engines.NewSWC(20, 10*s, 2)),
		must(engines.NewSWC(20, 10*s, 5)),
	} {
		rng := rand.New(rand.NewSource(1))
		for i := range 2000 {
			got, want, _ := leaseRun(t, l, rng, 20*s)
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("%v run %d (seed 1): remaining at probe %d: got %d, want %d (the smaller grant's)", l.Kind(), i, j, got[j], want[j])
				}
			}
		}
	}
}

// A credit on a debt bucket never leaves more than the smaller grant would
// have, and exactly that when nothing else was admitted since the grant.
func TestCredit_BucketsNeverMint(t *testing.T) {
	for _, l := range []engines.Limiter{
		must(engines.NewTB(20, 2, 1*s)),
		must(engines.NewLB(20, 3, 1*s)),
	} {
		rng := rand.New(rand.NewSource(2))
		short := 0
		for i := range 2000 {
			got, want, others := leaseRun(t, l, rng, 20*s)
			for j := range got {
				if got[j] > want[j] || (!others && got[j] != want[j]) {
					t.Fatalf("%v run %d (seed 2): remaining at probe %d: got %d, want %d (others: %v)", l.Kind(), i, j, got[j], want[j], others)
				}
				if got[j] < want[j] {
					short++
				}
			}
		}
		t.Logf("%v: %d probes of 10000 below exact", l.Kind(), short)
	}
}

// The study's naive token credit mints capacity; Credit does not. TB of 10
// refilling 1 per second: a lease of 10 at 0, full again by 20, 5 taken at
// 20, the lease returns 10 unused at 21. Had it taken nothing, 6 tokens
// would be left; adding 10 tokens back (capped) would say 10.
func TestCredit_DrainedLeaseGivesNothing(t *testing.T) {
	l := must(engines.NewTB(10, 1, 1*s))
	st := commitAt(t, l, nil, t0, 10, false)
	g, err := engines.GrantOf(l, st)
	if err != nil {
		t.Fatal(err)
	}
	st = commitAt(t, l, st, t0+20*s, 5, false)
	next, _, credited, err := engines.Credit(l, bytes.Clone(st), t0+21*s, g, 10)
	if err != nil {
		t.Fatal(err)
	}
	if credited != 0 || next != nil {
		t.Fatalf("credited %d, want 0", credited)
	}
	if got := remaining(t, l, st, t0+21*s); got != 6 {
		t.Fatalf("remaining %d, want 6", got)
	}
	// Returned at once instead, the whole lease comes back.
	st = commitAt(t, l, nil, t0, 10, false)
	next, _, credited, err = engines.Credit(l, bytes.Clone(st), t0, g, 10)
	if err != nil || credited != 10 || next != nil {
		t.Fatalf("credit at the grant: %d, %v, %v; want 10 and a full bucket", credited, next, err)
	}
}

// Force records past the limit, and the state refuses until it has drained.
func TestForce_PastTheLimit(t *testing.T) {
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(5, 10*s)),
		must(engines.NewSWC(5, 10*s, 3)),
		must(engines.NewTB(5, 1, 1*s)),
		must(engines.NewLB(4, 1, 1*s)),
	} {
		st := commitAt(t, l, nil, t0, 4, false)
		st = commitAt(t, l, st, t0, 4, true) // 8 of 5
		if res, err := l.Check(st, t0, 1); err != nil || !res.Limited || res.Remaining != 0 {
			t.Errorf("%v after Force: %+v, %v; want limited", l.Kind(), res, err)
		}
	}
	if engines.CanForce(must(engines.NewSWL(5, 10*s))) {
		t.Error("SWL can force: its log would hold more than its limit")
	}
	if _, _, err := engines.Force(must(engines.NewSWL(5, 10*s)), nil, t0, 1); err == nil {
		t.Error("SWL Force: no error")
	}
}

// FuzzLease feeds arbitrary states and grants to Credit and Force: an error
// or an answer, never a panic; a credit never exceeds what was asked, and
// what either writes is a state Check accepts.
func FuzzLease(f *testing.F) {
	ls := []engines.Limiter{
		must(engines.NewFWC(10, s)), must(engines.NewSWL(10, s)), must(engines.NewSWC(10, s, 4)),
		must(engines.NewTB(10, 3, s)), must(engines.NewLB(10, 3, 7)),
	}
	for _, l := range ls {
		st := commitAt(f, l, nil, t0, 4, false)
		g, _ := engines.GrantOf(l, st)
		f.Add(st, int64(t0+ms), g.At, g.Debt, g.Unit, int64(3))
	}
	f.Fuzz(func(t *testing.T, state []byte, now, at, debt, unit, qty int64) {
		for _, l := range ls {
			g := engines.Grant{At: at, Debt: debt, Unit: unit}
			next, _, credited, err := engines.Credit(l, bytes.Clone(state), now, g, qty)
			if err == nil && (credited < 0 || credited > qty) {
				t.Fatalf("%v: credited %d of %d", l.Kind(), credited, qty)
			}
			if err == nil && next != nil {
				if _, err := l.Check(next, now, 0); err != nil {
					t.Fatalf("%v: Credit wrote a state Check refuses: %v", l.Kind(), err)
				}
			}
			if !engines.CanForce(l) {
				continue
			}
			if next, _, err := engines.Force(l, bytes.Clone(state), now, qty); err == nil {
				if _, err := l.Check(next, now, 0); err != nil {
					t.Fatalf("%v: Force wrote a state Check refuses: %v", l.Kind(), err)
				}
			}
		}
	})
}
