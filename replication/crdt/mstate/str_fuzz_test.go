package mstate

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/store"
)

// strSamples returns string states of every shape: a value, a value with a
// TTL, counts on a fresh key, on a value and on a tombstone, an extended and
// a shortened TTL, a tombstone, an expiry tombstone.
func strSamples(tb testing.TB) [][]byte {
	st := func(b []byte, err error) []byte {
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	inc := func(state []byte, o Origin, now, d int64) []byte {
		next, _, err := StrIncr(state, o, now, d)
		return st(next, err)
	}
	exp := func(state []byte, o Origin, now, at int64) []byte {
		next, _, err := StrExpire(state, o, now, at)
		return st(next, err)
	}
	value := st(StrSet(nil, testOrigin, t0, []byte("hello"), 0, false))
	ttl := st(StrSet(nil, testOrigin, t0, []byte("12"), t0Ms+5_000, false))
	fresh := st(Merge(inc(nil, testOrigin, t0, 3), inc(nil, Origin{Node: 1}, t0, -2)))
	counted := inc(inc(ttl, Origin{Node: 1}, t0+s, 4), testOrigin, t0+2*s, -9)
	dead, _, err := StrDel(value, Origin{Node: 1}, t0+s)
	st(dead, err)
	return [][]byte{
		value, ttl, fresh, counted, dead,
		inc(dead, testOrigin, t0+2*s, 0),
		exp(counted, Origin{Node: 1}, t0+3*s, t0Ms+9_000),
		exp(exp(ttl, testOrigin, t0+s, Persist), Origin{Node: 1}, t0+2*s, t0Ms+3_000),
		inc(ttl, Origin{Node: 1}, t0+6*s, 1),
	}
}

// checkStr runs every string function on state at now and checks what a
// valid state promises: a canonical encoding, an idempotent merge, writes
// that are inflations (each result absorbs state, so merging it into any
// copy that holds state keeps the write), reads consistent with the value
// written. Invalid states must be refused everywhere, without a panic.
func checkStr(t *testing.T, state []byte, now, arg int64, value []byte) {
	self := Origin{Node: 5, Inc: 1}
	if n, ok := parseInteger(value); ok != isStoreInt(value) || (ok && n != must3(store.ParseInt(value))) {
		t.Fatalf("parseInteger(%q) = %d, %v; store.ParseInt disagrees", value, n, ok)
	}
	got, err := reencode(state, Str)
	_, gerr := StrGet(state, now)
	if err != nil {
		if !errors.Is(err, engines.ErrCorruptState) && !errors.Is(err, engines.ErrWrongKind) {
			t.Fatalf("%x: decoding got %v, want ErrCorruptState or ErrWrongKind", state, err)
		}
		_, err1 := StrSet(state, self, now, value, 0, false)
		_, _, err2 := StrIncr(state, self, now, arg)
		_, _, err3 := StrDel(state, self, now)
		_, _, err4 := StrExpire(state, self, now, arg)
		_, _, err5 := StrTombstone(state, now)
		errs := []error{gerr, err1, err2, err3, err4, err5}
		if errors.Is(err, engines.ErrCorruptState) { // another kind's state may merge and fold
			_, err6 := Merge(state, nil)
			_, err7 := Fold(state, now)
			errs = append(errs, err6, err7)
		}
		for i, e := range errs {
			if !errors.Is(e, err) {
				t.Fatalf("%x does not decode (%v), but entry point %d gave %v", state, err, i, e)
			}
		}
		return
	}
	if !bytes.Equal(got, state) {
		t.Fatalf("not canonical: %x encodes back as %x", state, got)
	}
	if m, err := Merge(state, state); err != nil || !bytes.Equal(m, state) {
		t.Fatalf("Merge(s, s) = %x, %v; want s = %x", m, err, state)
	}
	if f, err := Fold(state, now); err != nil || !bytes.Equal(f, state) {
		t.Fatalf("Fold changed a string: %x, %v", f, err)
	}
	if _, _, err := StrTombstone(state, now); err != nil {
		t.Fatalf("StrTombstone: %v", err)
	}
	before := bytes.Clone(state)
	inflation := func(op string, next []byte) {
		t.Helper()
		if m, err := Merge(next, state); err != nil || !bytes.Equal(m, next) {
			t.Fatalf("%s at %d on %x gave %x, which does not absorb it: %x, %v", op, now, state, next, m, err)
		}
	}
	if next, err := StrSet(state, self, now, value, 0, arg%2 == 0); err == nil {
		inflation("SET", next)
		if v := must2(StrGet(next, now)); !v.Exists || !bytes.Equal(v.Bytes, value) {
			t.Fatalf("GET after SET %q: %+v", value, v)
		}
	}
	if next, res, err := StrIncr(state, self, now, arg); err == nil {
		inflation("INCRBY", next)
		if v := must2(StrGet(next, now)); !v.Exists || !v.IsInt || v.Int != res {
			t.Fatalf("GET after INCRBY %d = %d: %+v", arg, res, v)
		}
	} else if !errors.Is(err, ErrNotInteger) && !errors.Is(err, engines.ErrOverflow) {
		t.Fatalf("INCRBY: %v", err)
	}
	if next, ok, err := StrDel(state, self, now); err == nil {
		inflation("DEL", next)
		// A value out of range (gerr) exists too.
		existed := gerr != nil || must2(StrGet(state, now)).Exists
		if v := must2(StrGet(next, now)); v.Exists || ok != existed {
			t.Fatalf("DEL (reply %v) left %+v", ok, v)
		}
	}
	for _, at := range []int64{arg, Persist, math.MaxInt64 - 1} {
		if next, _, err := StrExpire(state, self, now, at); err == nil {
			inflation("EXPIRE", next)
		}
	}
	if !bytes.Equal(state, before) {
		t.Fatalf("a string function modified its input")
	}
}

func isStoreInt(b []byte) bool { _, ok := store.ParseInt(b); return ok }

func must3(n int64, _ bool) int64 { return n }

func must2(v StrValue, err error) StrValue {
	if err != nil {
		return StrValue{}
	}
	return v
}

// FuzzStr feeds arbitrary states and arguments to the string functions.
//
// Run it with: go test -fuzz FuzzStr -fuzztime 30s ./replication/crdt/mstate/
func FuzzStr(f *testing.F) {
	for i, a := range strSamples(f) {
		f.Add(a, int64(t0+int64(i)*s), int64(i-4), []byte("7"))
		f.Add(a, int64(t0+10*s), int64(math.MinInt64), []byte("x"))
	}
	f.Fuzz(func(t *testing.T, state []byte, now, arg int64, value []byte) {
		checkStr(t, state, now, arg, value)
	})
}
