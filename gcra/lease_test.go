package gcra_test

import (
	"math/rand"
	"testing"

	"github.com/throttleddb/throttled/gcra"
)

// peek is what a quantity-0 Decide says is left at now.
func peek(t *testing.T, tat int64, p gcra.Params, now int64) int64 {
	t.Helper()
	_, _, res, err := gcra.Decide(tat, p, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

// take decides qty at now and returns the TAT and whether it was allowed.
func take(t *testing.T, tat int64, p gcra.Params, now, qty int64) (int64, bool) {
	t.Helper()
	next, _, res, err := gcra.Decide(tat, p, now, qty)
	if err != nil {
		t.Fatal(err)
	}
	return next, !res.Limited
}

// A lease of g at a grant, other admissions, a return of u unused: the
// credited TAT never leaves more than a grant of g-u would have, and
// exactly that when nothing else was admitted since the grant.
func TestCredit_NeverMints(t *testing.T) {
	p, err := gcra.NewParams(19, 2, 1) // 20 at once, 2 per second
	if err != nil {
		t.Fatal(err)
	}
	const s = int64(1e9)
	rng := rand.New(rand.NewSource(3))
	short := 0
	for run := range 3000 {
		now := int64(t0)
		tat := int64(0)
		for range rng.Intn(3) {
			now += rng.Int63n(5 * s)
			tat, _ = take(t, tat, p, now, 1+rng.Int63n(6))
		}
		now += rng.Int63n(5 * s)
		left := peek(t, tat, p, now)
		if left == 0 {
			continue
		}
		g := 1 + rng.Int63n(left)
		u := rng.Int63n(g + 1)
		ideal, _ := take(t, tat, p, now, g-u)
		tat, _ = take(t, tat, p, now, g)
		grantTAT := tat
		others := false
		for range rng.Intn(4) {
			now += rng.Int63n(6 * s)
			q := 1 + rng.Int63n(7)
			if next, ok := take(t, tat, p, now, q); ok {
				tat, others = next, true
				if ideal, err = gcra.Force(ideal, p, now, q); err != nil {
					t.Fatal(err)
				}
			}
		}
		now += rng.Int63n(6 * s)
		tat, credited, err := gcra.Credit(tat, grantTAT, p, now, u)
		if err != nil || credited > u {
			t.Fatalf("run %d: credited %d of %d, %v", run, credited, u, err)
		}
		for _, d := range []int64{0, s, 3 * s, 10 * s} {
			got, want := peek(t, tat, p, now+d), peek(t, ideal, p, now+d)
			if got > want || (!others && got != want) {
				t.Fatalf("run %d (seed 3): remaining %d s after the return: got %d, want %d (others %v)", run, d/s, got, want, others)
			}
			if got < want {
				short++
			}
		}
	}
	t.Logf("%d probes of 12000 below exact", short)
}

// The naive credit (TAT back by unused*T) mints what a later decision
// relied on: lease 10 at 0 with T = 1 s, full again by 20, 5 taken at 20,
// return 10 at 21. A grant of 0 would leave TAT 25; TAT 15 clamped to 21
// would let 4 more pass.
func TestCredit_DrainedLease(t *testing.T) {
	p, _ := gcra.NewParams(9, 1, 1)
	const s = int64(1e9)
	tat, _ := take(t, 0, p, t0, 10)
	grant := tat
	tat, ok := take(t, tat, p, t0+20*s, 5)
	if !ok {
		t.Fatal("5 at 20 s refused")
	}
	next, credited, err := gcra.Credit(tat, grant, p, t0+21*s, 10)
	if err != nil || credited != 0 || next != tat {
		t.Fatalf("Credit: %d, %d, %v; want nothing credited", next, credited, err)
	}
}

func TestForce(t *testing.T) {
	p, _ := gcra.NewParams(4, 1, 1) // 5 at once
	tat, err := gcra.Force(0, p, t0, 8)
	if err != nil || tat != t0+8e9 {
		t.Fatalf("Force: %d, %v", tat, err)
	}
	if _, ok := take(t, tat, p, t0+3e9, 1); ok {
		t.Fatal("allowed while 8 of 5 are charged")
	}
	if _, ok := take(t, tat, p, t0+4e9, 1); !ok {
		t.Fatal("refused once back within reach")
	}
}
