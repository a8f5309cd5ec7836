package mstate

import (
	"bytes"
	"math"
	"testing"

	"github.com/throttleddb/throttled/gcra"
)

// The fuzz targets feed arbitrary bytes to the decoders, through every
// entry point: none may panic, and whatever decodes is canonical (encoding
// it again gives the same bytes) and behaves as a join element.
//
// Run one with: go test -fuzz FuzzDecode -fuzztime 30s ./replication/crdt/mstate/
// Crashers land in testdata/fuzz/FuzzDecode and are replayed by go test.

// addSamples seeds a fuzz target with valid states of every kind, merged
// pairs and cut-short copies.
func addSamples(f *testing.F, add func(a, b []byte)) {
	for _, a := range strSamples(f) {
		add(a, nil)
		add(a[:len(a)/2], a)
	}
	ss := samples(f)
	for k, a := range ss {
		b := ss[(k%6)+1]
		add(a, b)
		add(a[:len(a)/2], a)
		m, _ := Merge(a, a)
		add(m, nil)
	}
	for _, r := range resetSamples(f) {
		add(r, nil)
		add(r, ss[GCRA])
	}
	fine, coarse := busySamples(f)
	add(coarse, fine)
	add(fine, coarse)
}

// busySamples are a busy GCRA key's log before and after its writer
// coarsened it.
func busySamples(tb testing.TB) (fine, coarse []byte) {
	g, err := NewGCRA(gcra.Params{Burst: 1000, Interval: 50_000})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range 3 * capEvents {
		now := t0 + int64(i)*100_000
		_, next, _, _, err := decide(g, coarse, testOrigin, now, 1, Bounds{Complete: NoBound, Unfolded: NoBound})
		if err != nil {
			tb.Fatal(err)
		}
		if i == capEvents {
			fine = coarse
		}
		coarse = next
	}
	return fine, coarse
}

func FuzzDecode(f *testing.F) {
	addSamples(f, func(a, _ []byte) { f.Add(a, int64(t0), int64(1)) })
	ls := limiters()
	f.Fuzz(func(t *testing.T, state []byte, now, qty int64) {
		k, err := KindOf(state)
		if err != nil {
			if _, err := Merge(state, state); err == nil && len(state) > 0 {
				t.Fatalf("Merge accepted %x, whose header KindOf refuses", state)
			}
			return
		}
		switch k {
		case Str:
			checkStr(t, state, now, qty, nil)
			return
		case Marker:
			if m, err := Merge(state, state); err == nil && !bytes.Equal(m, state) {
				t.Fatalf("Merge(s, s) = %x; want s = %x", m, state)
			}
			return
		}
		got, err := reencode(state, k)
		if err != nil {
			// Refused states are refused everywhere, without a panic.
			if _, err := Merge(state, nil); err == nil {
				t.Fatalf("Merge accepted %x, which does not decode", state)
			}
			Fold(state, now)
			decide(ls[k], state, testOrigin, now, qty, Exact)
			ls[k].FullAt(state)
			return
		}
		if !bytes.Equal(got, state) {
			t.Fatalf("not canonical: %x encodes back as %x", state, got)
		}
		if m, err := Merge(state, state); err != nil || !bytes.Equal(m, state) {
			t.Fatalf("Merge(s, s) = %x, %v; want s = %x", m, err, state)
		}
		if folded, err := Fold(state, now); err == nil {
			if again, err := Fold(folded, now); err != nil || !bytes.Equal(again, folded) {
				t.Fatalf("a second Fold at %d changed %x into %x, %v", now, folded, again, err)
			}
		}
		d, err := ls[k].Decide(state, testOrigin, now, qty, Exact)
		res, next, fullAt, write := d.Res, d.Next, d.FullAt, d.Write
		if err == nil && write {
			// An admission only adds to the state: it absorbs the old one.
			if m, err := Merge(next, state); err != nil || !bytes.Equal(m, next) {
				t.Fatalf("Decide(%d, %d) gave %+v and %x, which does not absorb %x: %x, %v", now, qty, res, next, state, m, err)
			}
			// The expiry it gives is the one its bytes say (or none,
			// when they cannot: see Decision).
			if at, err := Expiry(next); (err == nil && at != d.Expiry) || (err != nil && d.Expiry != math.MinInt64) {
				t.Fatalf("Decide(%d, %d) gave the expiry %d; Expiry of its state: %d, %v", now, qty, d.Expiry, at, err)
			}
		}
		// With a completeness bound (now: never past the decision time),
		// Decide answers alike and writes what it would have, folded.
		fres, fnext, ffullAt, fwrite, ferr := decide(ls[k], state, testOrigin, now, qty, Bounds{Complete: now, Unfolded: Fixed})
		if want, _ := Fold(next, now); (ferr == nil) != (err == nil) || fres != res || fwrite != write ||
			(write && (ffullAt != fullAt || !bytes.Equal(fnext, want))) {
			t.Fatalf("Decide(%d, %d) with the bound %d gave %+v, %x, %v; without, %+v and folded %x, %v", now, qty, now, fres, fnext, ferr, res, want, err)
		}
		// A writer alone coarsens its events: what it writes still absorbs
		// the old state (its coarse events cover what they merged) and
		// holds every cost of it.
		if _, cnext, _, cwrite, err := decide(ls[k], state, testOrigin, now, qty, Bounds{Complete: NoBound, Unfolded: NoBound}); err == nil && cwrite {
			if m, err := Merge(cnext, state); err != nil || !bytes.Equal(m, cnext) {
				t.Fatalf("coarsening Decide(%d, %d) gave %x, which does not absorb %x: %x, %v", now, qty, cnext, state, m, err)
			}
		}
		ls[k].FullAt(state)
	})
}

func FuzzMerge(f *testing.F) {
	addSamples(f, func(a, b []byte) { f.Add(a, b) })
	f.Fuzz(func(t *testing.T, a, b []byte) {
		m, err := Merge(a, b)
		if err != nil {
			return
		}
		j, jerr := Join(a, b)
		k, _ := KindOf(m)
		exp, err := Expiry(m)
		if (jerr != nil) != (err != nil) || (err == nil && (j.Expiry != exp || j.Kind != k || !bytes.Equal(j.State, m))) {
			t.Fatalf("Join(a, b) = kind %v, expiry %d, %v; the merged state's are %v, %d, %v", j.Kind, j.Expiry, jerr, k, exp, err)
		}
		if ba, err := Merge(b, a); err != nil || !bytes.Equal(m, ba) {
			t.Fatalf("Merge(a, b) = %x, Merge(b, a) = %x, %v", m, ba, err)
		}
		// The join is an upper bound of both sides.
		for _, x := range [][]byte{a, b} {
			if mx, err := Merge(m, x); err != nil || !bytes.Equal(mx, m) {
				t.Fatalf("Merge(Merge(a, b), %x) = %x, %v; want %x", x, mx, err, m)
			}
		}
	})
}
