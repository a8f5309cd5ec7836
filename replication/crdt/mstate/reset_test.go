package mstate

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// resetSamples are a state of each kind reset, and a bare mark.
func resetSamples(tb testing.TB) [][]byte {
	out := [][]byte{must(Reset(nil, t0))}
	for _, state := range samples(tb) {
		out = append(out, must(Reset(state, t0+10*s)))
	}
	return out
}

// peekOf is a peek at now on state by nodeC.
func peekOf(t *testing.T, l Limiter, state []byte, now int64) engines.Result {
	t.Helper()
	res, _, _, _, err := decide(l, state, nodeC, now, 0, Exact)
	if err != nil {
		t.Fatalf("peek: %v", err)
	}
	return res
}

// mergeAll merges states left to right.
func mergeAll(t *testing.T, states ...[]byte) []byte {
	t.Helper()
	var m []byte
	for _, x := range states {
		var err error
		if m, err = Merge(m, x); err != nil {
			t.Fatalf("merge: %v", err)
		}
	}
	return m
}

// A key used on nodes A and B is reset on C. Whatever order the copies
// from before the reset arrive in, they bring nothing back: the key is
// fresh; an admission A makes after the reset's stamp without having
// received it stays; one stamped before it, though merged after, goes. The
// joins stay commutative, associative and idempotent with marks in them.
func TestReset_Forgives(t *testing.T) {
	for k, l := range limiters() {
		t.Run(k.String(), func(t *testing.T) {
			a := admit(t, l, nil, nodeA, t0, 2)
			a = admit(t, l, a, nodeA, t0+s, 2)
			b := admit(t, l, a, nodeB, t0+s, 2)
			r := int64(t0 + 2*s)
			reset, err := Reset(b, r)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := Mark(reset); m != r || err != nil {
				t.Fatalf("Mark = %d, %v; want %d", m, err, r)
			}
			fresh := peekOf(t, l, nil, r)
			for _, m := range [][]byte{mergeAll(t, reset, a, b), mergeAll(t, b, a, reset), mergeAll(t, a, reset, reset)} {
				if !bytes.Equal(m, reset) {
					t.Fatalf("copies from before the reset changed it: %x, want %x", m, reset)
				}
				if got := peekOf(t, l, m, r); got != fresh {
					t.Fatalf("peek after the reset %+v, want a fresh key's %+v", got, fresh)
				}
			}
			// A, which has not received the reset, admits once before its
			// stamp and once after.
			late := admit(t, l, a, nodeA, r-s/2, 1)
			after := admit(t, l, late, nodeA, r+s, 1)
			m1, m2 := mergeAll(t, reset, late, after), mergeAll(t, after, late, reset)
			if !bytes.Equal(m1, m2) {
				t.Fatalf("merge order matters: %x vs %x", m1, m2)
			}
			want := peekOf(t, l, admit(t, l, nil, nodeA, r+s, 1), r+s)
			if k == FWC || k == SWC {
				// A's count for the window travels as one number: its
				// slot took an admission after the reset, and keeps the
				// ones before in its window too.
				want = peekOf(t, l, after, r+s)
			}
			if got := peekOf(t, l, m1, r+s); got != want {
				t.Fatalf("after the reset and A's later admission: %+v, want %+v", got, want)
			}
		})
	}
}

// Two resets of one key made at once on two nodes join into the later; a
// reset of a state marked already keeps the later stamp.
func TestReset_Concurrent(t *testing.T) {
	for k, l := range limiters() {
		a := admit(t, l, nil, nodeA, t0, 2)
		r1, r2 := must(Reset(a, t0+s)), must(Reset(a, t0+2*s))
		if m1, m2 := mergeAll(t, r1, r2), mergeAll(t, r2, r1, r1); !bytes.Equal(m1, r2) || !bytes.Equal(m2, r2) {
			t.Errorf("%v: concurrent resets merge into %x and %x, want the later %x", k, m1, m2, r2)
		}
		if again := must(Reset(r2, t0+s)); !bytes.Equal(again, r2) {
			t.Errorf("%v: a reset at an earlier stamp moved the mark: %x, want %x", k, again, r2)
		}
	}
}

// A reset forgives what the state holds even when it is stamped after the
// reset's instant (a node whose clock runs ahead), and a node whose clock
// lags the reset's stamps its admissions just after it, never at or
// behind the cut, where the join would drop them.
func TestReset_Clocks(t *testing.T) {
	for k, l := range limiters() {
		ahead := admit(t, l, nil, nodeA, t0+s, 2)
		reset := must(Reset(ahead, t0))
		if m, _ := Mark(reset); m != t0+s {
			t.Errorf("%v: mark %d, want the newest stamp t0+s", k, m-t0)
		}
		lagging := admit(t, l, reset, nodeB, t0, 1)
		if at, err := Newest(lagging, nodeB); at != t0+s+1 || err != nil {
			t.Errorf("%v: a lagging node stamped t0%+d, %v; want just after the mark", k, at-t0, err)
		}
		if m := mergeAll(t, lagging, ahead, reset); !bytes.Equal(m, lagging) {
			t.Errorf("%v: the lagging node's admission was lost in the join", k)
		}
	}
}

// A bare mark (a reset on a node that held no state of the key) resets a
// state of any rate-limit kind it meets, and leaves a string alone; a
// limiter decides on it as on a fresh key.
func TestReset_Bare(t *testing.T) {
	bare := must(Reset(nil, t0+s))
	if k, err := KindOf(bare); k != Marker || err != nil {
		t.Fatalf("KindOf(bare) = %v, %v", k, err)
	}
	if exp, err := Expiry(bare); exp != t0+s || err != nil {
		t.Fatalf("Expiry(bare) = %d, %v", exp, err)
	}
	for k, l := range limiters() {
		a := admit(t, l, nil, nodeA, t0, 2)
		if m := mergeAll(t, a, bare); !bytes.Equal(m, must(Reset(a, t0+s))) {
			t.Errorf("%v: bare mark joined into %x", k, m)
		}
		if got, want := peekOf(t, l, bare, t0+s), peekOf(t, l, nil, t0+s); got != want {
			t.Errorf("%v: peek on a bare mark %+v, want %+v", k, got, want)
		}
	}
	str := must(StrSet(nil, nodeA, t0, []byte("v"), 0, false))
	if m := mergeAll(t, bare, str); !bytes.Equal(m, str) {
		t.Errorf("bare mark and string joined into %x, want the string", m)
	}
	if _, err := Reset(str, t0); !errors.Is(err, engines.ErrWrongKind) {
		t.Errorf("Reset(string) = %v, want ErrWrongKind", err)
	}
	if m, err := Mark(str); m != NoMark || err != nil {
		t.Errorf("Mark(string) = %d, %v", m, err)
	}
}

// Marked states are refused when malformed: no mark, a cut or floor before
// the mark, a string marked, cut short.
func TestReset_Corrupt(t *testing.T) {
	gcraReset := must(Reset(samples(t)[GCRA], t0+10*s))
	noMark := bytes.Clone(gcraReset)
	copy(noMark[2:], le(NoMark))
	early := bytes.Clone(gcraReset)
	copy(early[2:], le(t0+11*s)) // the mark after the cut
	str := must(StrSet(nil, nodeA, t0, []byte("v"), 0, false))
	markedStr := append(append([]byte{markedVersion, byte(Str)}, le(t0)...), str[2:]...)
	for i, b := range [][]byte{noMark, early, markedStr, gcraReset[:5], gcraReset[:len(gcraReset)-1], append(must(Reset(nil, t0)), 0)} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if _, err := Merge(b, nil); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("Merge(%x) = %v, want ErrCorruptState", b, err)
			}
			if _, err := Mark(b); err == nil && i != 4 {
				t.Errorf("Mark(%x) accepted", b)
			}
		})
	}
}
