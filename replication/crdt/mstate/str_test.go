package mstate

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/store"
)

// t0Ms is t0 in Unix ms, the unit of expiries.
const t0Ms = t0 / ms

var nodeC = Origin{Node: 3}

// Test helpers: each applies one command and fails the test on error.

func set(t *testing.T, state []byte, o Origin, now int64, v string, expireMs int64) []byte {
	t.Helper()
	next, err := StrSet(state, o, now, []byte(v), expireMs, false)
	if err != nil {
		t.Fatalf("%v SET %q at t0%+d: %v", o, v, now-t0, err)
	}
	return next
}

func incr(t *testing.T, state []byte, o Origin, now, delta, want int64) []byte {
	t.Helper()
	next, got, err := StrIncr(state, o, now, delta)
	if err != nil || got != want {
		t.Fatalf("%v INCRBY %d at t0%+d: got %d, %v; want %d", o, delta, now-t0, got, err, want)
	}
	return next
}

func del(t *testing.T, state []byte, o Origin, now int64) []byte {
	t.Helper()
	next, ok, err := StrDel(state, o, now)
	if err != nil || !ok {
		t.Fatalf("%v DEL at t0%+d: got %v, %v; want a deleted key", o, now-t0, ok, err)
	}
	return next
}

func expire(t *testing.T, state []byte, o Origin, now, expireMs int64) []byte {
	t.Helper()
	next, ok, err := StrExpire(state, o, now, expireMs)
	if err != nil || !ok {
		t.Fatalf("%v EXPIRE %d at t0%+d: got %v, %v; want applied", o, expireMs, now-t0, ok, err)
	}
	return next
}

// merge merges states in both orders and requires the same bytes.
func merge(t *testing.T, states ...[]byte) []byte {
	t.Helper()
	var fwd, back []byte
	for i := range states {
		fwd = must(Merge(fwd, states[i]))
		back = must(Merge(back, states[len(states)-1-i]))
	}
	if !bytes.Equal(fwd, back) {
		t.Fatalf("merge depends on the order:\n%x\n%x", fwd, back)
	}
	return fwd
}

// read is what a GET and a PTTL see: the value ("" for missing) and the
// expiry (-2 for missing).
type read struct {
	value    string
	expireMs int64
}

var missing = read{"", -2}

func get(t *testing.T, state []byte, now int64) read {
	t.Helper()
	v, err := StrGet(state, now)
	if err != nil {
		t.Fatalf("GET at t0%+d: %v", now-t0, err)
	}
	if !v.Exists {
		if v.Bytes != nil || v.ExpireMs != 0 || v.IsInt {
			t.Fatalf("GET of a missing key gave %+v", v)
		}
		return missing
	}
	n, isInt := store.ParseInt(v.Bytes)
	if isInt != v.IsInt || (isInt && n != v.Int) {
		t.Fatalf("GET: %+v is not consistent", v)
	}
	return read{string(v.Bytes), v.ExpireMs}
}

func wantRead(t *testing.T, state []byte, now int64, want read) {
	t.Helper()
	if got := get(t, state, now); got != want {
		t.Errorf("at t0%+d: got %+v, want %+v", now-t0, got, want)
	}
}

// Two nodes that increment a key neither has seen both count on the
// register of a fresh key: their increments add up.
func TestStr_ConcurrentIncrementsAddUp(t *testing.T) {
	a := incr(t, nil, nodeA, t0, 5, 5)
	a = incr(t, a, nodeA, t0+s, -1, 4)
	b := incr(t, nil, nodeB, t0, 3, 3)
	m := merge(t, a, b)
	wantRead(t, m, t0+2*s, read{"7", 0})
	// Duplicated and stale deliveries change nothing.
	wantRead(t, merge(t, m, a, b, incr(t, nil, nodeA, t0, 5, 5)), t0+2*s, read{"7", 0})
	// Both go on counting on it.
	wantRead(t, merge(t, incr(t, m, nodeA, t0+3*s, 10, 17), incr(t, m, nodeB, t0+3*s, 1, 8)), t0+4*s, read{"18", 0})
}

// A SET replaces the register: the increments made on the old one, seen or
// concurrent, are lost to it when it is stamped later, and the increments
// made after it count on it.
func TestStr_LaterSetWins(t *testing.T) {
	a := incr(t, nil, nodeA, t0, 5, 5)
	b := set(t, a, nodeB, t0+s, "100", 0)
	a = incr(t, a, nodeA, t0+2*s, 1, 6) // concurrent with the SET, on the old register
	m := merge(t, a, b)
	wantRead(t, m, t0+3*s, read{"100", 0})
	m = merge(t, incr(t, m, nodeA, t0+3*s, 2, 102), incr(t, m, nodeB, t0+3*s, -10, 90))
	wantRead(t, m, t0+4*s, read{"92", 0})
	// Concurrent SETs: the later stamp wins, then the greater origin.
	x, y := set(t, nil, nodeA, t0+5*s, "x", 0), set(t, nil, nodeB, t0+4*s, "y", 0)
	wantRead(t, merge(t, x, y), t0+6*s, read{"x", 0})
	x, y = set(t, nil, nodeA, t0+5*s, "x", 0), set(t, nil, nodeB, t0+5*s, "y", 0)
	wantRead(t, merge(t, x, y), t0+6*s, read{"y", 0})
}

// A write is stamped after everything its node has seen, whatever the
// clocks: a SET made after merging a write from a node whose clock runs
// 10 s ahead still wins over it.
func TestStr_WritesThatSawAnotherComeAfter(t *testing.T) {
	ahead := set(t, nil, nodeB, t0+10*s, "ahead", 0)
	seen := set(t, ahead, nodeA, t0, "after", 0)
	wantRead(t, merge(t, ahead, seen), t0, read{"after", 0})
	// Also when the newest stamp is an expiry epoch.
	short := expire(t, set(t, nil, nodeA, t0, "v", t0Ms+100_000), nodeB, t0+10*s, t0Ms+60_000)
	later := set(t, short, nodeA, t0, "w", 0)
	wantRead(t, merge(t, short, later), t0, read{"w", 0})
}

// A DEL wins over every write it has seen, and over concurrent writes
// stamped earlier: merging them again never brings them back. An increment
// after it counts from 0 on the tombstone, on every node.
func TestStr_DeleteStays(t *testing.T) {
	old := set(t, nil, nodeA, t0, "x", 0)
	concurrent := set(t, nil, nodeC, t0+s, "y", 0)
	gone := del(t, old, nodeB, t0+2*s)
	m := merge(t, gone, old, concurrent)
	wantRead(t, m, t0+3*s, missing)
	wantRead(t, merge(t, m, old, concurrent, old), t0+3*s, missing)
	m = merge(t, incr(t, m, nodeA, t0+3*s, 1, 1), incr(t, m, nodeB, t0+3*s, 2, 2), old)
	wantRead(t, m, t0+4*s, read{"3", 0})
	// Deleting it again, and merging the increments again.
	m2 := del(t, m, nodeC, t0+5*s)
	wantRead(t, merge(t, m2, m, old), t0+6*s, missing)
	// DEL of a missing key writes nothing.
	for _, st := range [][]byte{nil, m2} {
		if next, ok, err := StrDel(st, nodeA, t0+7*s); ok || err != nil || !bytes.Equal(next, st) {
			t.Errorf("DEL of a missing key: got %x, %v, %v; want it unchanged", next, ok, err)
		}
	}
	// INCRBY 0 brings a missing key into existence, as in Redis.
	z := incr(t, m2, nodeA, t0+8*s, 0, 0)
	wantRead(t, z, t0+8*s, read{"0", 0})
	wantRead(t, incr(t, nil, nodeA, t0, 0, 0), t0, read{"0", 0})
	if next, _, _ := StrIncr(z, nodeB, t0+9*s, 0); !bytes.Equal(next, z) {
		t.Errorf("INCRBY 0 of an existing key wrote %x over %x", next, z)
	}
}

// Concurrent extensions: the longest TTL wins, and PERSIST wins over them.
func TestStr_LongestTTLWins(t *testing.T) {
	base := set(t, nil, nodeA, t0, "v", 0)
	a := expire(t, base, nodeA, t0+s, t0Ms+60_000)
	b := expire(t, base, nodeB, t0+s, t0Ms+100_000)
	wantRead(t, merge(t, a, b), t0+2*s, read{"v", t0Ms + 100_000})

	ttl := set(t, nil, nodeA, t0, "v", t0Ms+10_000)
	p := expire(t, ttl, nodeA, t0+s, Persist)
	e := expire(t, ttl, nodeB, t0+s, t0Ms+100_000)
	m := merge(t, p, e)
	wantRead(t, m, t0+200*s, read{"v", 0})
	// PERSIST of a key without TTL, or already persisted, does nothing.
	for _, st := range [][]byte{base, m} {
		if next, ok, err := StrExpire(st, nodeA, t0+s, Persist); ok || err != nil || !bytes.Equal(next, st) {
			t.Errorf("PERSIST of a key without TTL: got %v, %v", ok, err)
		}
	}
	// An increment keeps the TTL.
	n := expire(t, incr(t, nil, nodeA, t0, 1, 1), nodeA, t0, t0Ms+5_000)
	wantRead(t, incr(t, n, nodeB, t0+s, 1, 2), t0+s, read{"2", t0Ms + 5_000})
	wantRead(t, incr(t, n, nodeB, t0+s, 1, 2), t0+6*s, missing)
}

// A shortening wins over the expiries its node had seen, longer ones
// included, and over a PERSIST it had seen.
func TestStr_ShorteningSeenWins(t *testing.T) {
	long := expire(t, set(t, nil, nodeA, t0, "v", 0), nodeA, t0+s, t0Ms+100_000)
	short := expire(t, long, nodeB, t0+2*s, t0Ms+60_000)
	wantRead(t, merge(t, long, short), t0+3*s, read{"v", t0Ms + 60_000})

	persisted := expire(t, long, nodeA, t0+2*s, Persist)
	after := expire(t, persisted, nodeB, t0+3*s, t0Ms+30_000)
	wantRead(t, merge(t, persisted, after, long), t0+4*s, read{"v", t0Ms + 30_000})
	wantRead(t, merge(t, persisted, after, long), t0+31*s, missing)
	// A shortening concurrent with an extension also wins: it is in a
	// later epoch.
	ext := expire(t, long, nodeC, t0+3*s, t0Ms+200_000)
	wantRead(t, merge(t, ext, short), t0+4*s, read{"v", t0Ms + 60_000})
}

// An expiry already passed deletes the key, as in Redis.
func TestStr_PastExpiryDeletes(t *testing.T) {
	v := set(t, nil, nodeA, t0, "v", 0)
	for _, at := range []int64{t0Ms, t0Ms - 1, 0, -5} {
		next := expire(t, v, nodeB, t0, at)
		wantRead(t, merge(t, next, v), t0, missing)
		if _, ok, err := StrTombstone(next, t0); !ok || err != nil {
			t.Errorf("EXPIRE at %d: not a tombstone (%v)", at, err)
		}
	}
	wantRead(t, set(t, v, nodeB, t0, "w", t0Ms-1), t0, missing)
	wantRead(t, set(t, v, nodeB, t0, "w", t0Ms), t0+999_999, read{"w", t0Ms}) // through its millisecond
	wantRead(t, set(t, v, nodeB, t0, "w", t0Ms), t0+ms, missing)
	if next, ok, err := StrExpire(nil, nodeA, t0, t0Ms+1000); ok || err != nil || next != nil {
		t.Errorf("EXPIRE of a missing key: got %x, %v, %v", next, ok, err)
	}
}

// SET KEEPTTL keeps the TTL of a live key; a plain SET drops it.
func TestStr_KeepTTL(t *testing.T) {
	v := set(t, nil, nodeA, t0, "v", t0Ms+10_000)
	k, err := StrSet(v, nodeB, t0+s, []byte("w"), 0, true)
	if err != nil {
		t.Fatal(err)
	}
	wantRead(t, merge(t, v, k), t0+2*s, read{"w", t0Ms + 10_000})
	wantRead(t, set(t, v, nodeB, t0+s, "w", 0), t0+20*s, read{"w", 0})
	k, _ = StrSet(v, nodeB, t0+11*s, []byte("w"), 0, true) // expired: none to keep
	wantRead(t, k, t0+20*s, read{"w", 0})
}

// Increments made after a key expired count from 0 on its expiry tombstone,
// on every node, so they add up; the expired value never comes back.
func TestStr_IncrementsAfterExpiryAddUp(t *testing.T) {
	w := expire(t, incr(t, nil, nodeA, t0, 7, 7), nodeA, t0, t0Ms+1_000)
	a := incr(t, w, nodeA, t0+2*s, 1, 1)
	b := incr(t, w, nodeB, t0+3*s, 2, 2)
	m := merge(t, a, b, w)
	wantRead(t, m, t0+3*s, read{"3", 0})
	// The next window: its own TTL, then a fresh start again.
	m = expire(t, m, nodeB, t0+3*s, t0Ms+4_000)
	m = merge(t, incr(t, m, nodeA, t0+5*s, 1, 1), incr(t, m, nodeC, t0+5*s, 1, 1), a)
	wantRead(t, m, t0+5*s, read{"2", 0})
	// A node whose copy had not expired (its clock lags) counted on the old
	// register: that increment is lost to the ones after the expiry.
	lag := incr(t, w, nodeC, t0, 1, 8)
	wantRead(t, merge(t, a, lag), t0+3*s, read{"1", 0})
}

// A DEL of the live key that reaches a node only after it counted on the
// expired key does not wipe those counts: on a single node they would
// count from 0 after the DEL as well. (The conformance suite's stream found
// this: SET PX, DEL on one node, INCR after the expiry on another.)
func TestStr_IncrementsAfterExpiryOutliveADelete(t *testing.T) {
	w := set(t, nil, nodeA, t0, "41", t0Ms+1_000)
	d := del(t, w, nodeB, t0+s/2)
	a := incr(t, w, nodeC, t0+2*s, 1, 1) // has not seen the DEL
	for _, m := range [][]byte{merge(t, d, a), merge(t, a, d)} {
		wantRead(t, m, t0+2*s, read{"1", 0})
	}
}

func TestStr_NotInteger(t *testing.T) {
	for _, v := range []string{"abc", "", "010", " 1", "1 ", "+1", "-0", "1.5", "9223372036854775808", "0x10"} {
		st := set(t, nil, nodeA, t0, v, 0)
		if _, _, err := StrIncr(st, nodeB, t0+s, 1); !errors.Is(err, ErrNotInteger) {
			t.Errorf("INCR of %q: got %v, want ErrNotInteger", v, err)
		}
		if _, _, err := StrIncr(st, nodeB, t0+s, 0); !errors.Is(err, ErrNotInteger) {
			t.Errorf("INCRBY 0 of %q: got %v, want ErrNotInteger", v, err)
		}
		wantRead(t, st, t0, read{v, 0})
	}
	for _, v := range []string{"0", "-1", "42", "9223372036854775807", "-9223372036854775808"} {
		n, _ := strconv.ParseInt(v, 10, 64)
		if n != math.MinInt64 {
			incr(t, set(t, nil, nodeA, t0, v, 0), nodeB, t0+s, -1, n-1)
		}
	}
}

func TestStr_Overflow(t *testing.T) {
	max := set(t, nil, nodeA, t0, "9223372036854775807", 0)
	if _, _, err := StrIncr(max, nodeA, t0+s, 1); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("INCR of MaxInt64: got %v, want ErrOverflow", err)
	}
	low := incr(t, nil, nodeA, t0, math.MinInt64, math.MinInt64) // INCRBY MinInt64 of 0, as Redis allows
	if _, _, err := StrIncr(low, nodeA, t0+s, -1); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("DECR of MinInt64: got %v, want ErrOverflow", err)
	}
	incr(t, low, nodeA, t0+s, math.MaxInt64, -1)
	// A counter past 2^64-1 is refused, though the value would fit.
	c := incr(t, incr(t, nil, nodeA, t0, math.MaxInt64, math.MaxInt64), nodeA, t0, math.MinInt64, -1)
	c = incr(t, c, nodeA, t0, math.MaxInt64, math.MaxInt64-1) // P = 2^64-2, N = 2^63
	if _, _, err := StrIncr(c, nodeA, t0, math.MinInt64); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("decrements past 2^64-1 in total: got %v, want ErrOverflow", err)
	}
	if _, _, err := StrIncr(c, nodeA, t0, 2); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("increments past 2^64-1 in total: got %v, want ErrOverflow", err)
	}
	incr(t, c, nodeA, t0, 1, math.MaxInt64)
	// Concurrent increments can add up past the range: the value is an
	// overflow until a SET or DEL replaces it.
	m := merge(t, incr(t, nil, nodeA, t0, math.MaxInt64, math.MaxInt64), incr(t, nil, nodeB, t0, 1, 1))
	if _, err := StrGet(m, t0); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("GET of MaxInt64+1: got %v, want ErrOverflow", err)
	}
	if _, _, err := StrIncr(m, nodeA, t0, 1); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("INCR of MaxInt64+1: got %v, want ErrOverflow", err)
	}
	wantRead(t, incr(t, m, nodeA, t0, -5, math.MaxInt64-4), t0, read{"9223372036854775803", 0})
	wantRead(t, set(t, m, nodeA, t0, "1", 0), t0, read{"1", 0})
	wantRead(t, merge(t, m, incr(t, m, nodeC, t0, -1, math.MaxInt64)), t0, read{"9223372036854775807", 0})
}

func TestStr_BadArguments(t *testing.T) {
	if _, err := StrSet(nil, nodeA, t0, []byte("v"), -1, false); !errors.Is(err, ErrBadExpiry) {
		t.Errorf("negative expiry: got %v", err)
	}
	if _, err := StrSet(nil, nodeA, t0, []byte("v"), t0Ms+1, true); !errors.Is(err, ErrBadExpiry) {
		t.Errorf("an expiry with KEEPTTL: got %v", err)
	}
	v := set(t, nil, nodeA, t0, "1", 0)
	_, err1 := StrSet(v, Origin{}, t0, []byte("v"), 0, false)
	_, _, err2 := StrIncr(v, Origin{}, t0, 1)
	_, _, err3 := StrDel(v, Origin{}, t0)
	_, _, err4 := StrExpire(v, Origin{}, t0, t0Ms+1)
	for i, err := range []error{err1, err2, err3, err4} {
		if !errors.Is(err, ErrReservedOrigin) {
			t.Errorf("write %d by the zero origin: got %v, want ErrReservedOrigin", i, err)
		}
	}
	// A register stamped MaxInt64 leaves no later stamp.
	end := set(t, nil, nodeA, math.MaxInt64, "v", 0)
	if _, err := StrSet(end, nodeB, t0, []byte("w"), 0, false); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("SET after a stamp of MaxInt64: got %v", err)
	}
}

func TestStr_Tombstone(t *testing.T) {
	v := set(t, nil, nodeA, t0, "v", t0Ms+1_000)
	d := del(t, v, nodeB, t0+s)
	for _, tc := range []struct {
		name  string
		state []byte
		now   int64
		stamp int64
		ok    bool
	}{
		{"no state", nil, t0, 0, false},
		{"a value", v, t0, 0, false},
		{"a tombstone", d, t0, t0 + s, true},
		{"a tombstone with counts", incr(t, d, nodeA, t0+2*s, 1, 1), t0 + 2*s, 0, false},
		{"an expired value", v, t0 + 2*s, (t0Ms + 1_001) * 1e6, true},
		{"an expired count", expire(t, incr(t, nil, nodeA, t0, 1, 1), nodeA, t0, t0Ms+1), t0 + s, (t0Ms + 2) * 1e6, true},
	} {
		stamp, ok, err := StrTombstone(tc.state, tc.now)
		if stamp != tc.stamp || ok != tc.ok || err != nil {
			t.Errorf("%s: got %d, %v, %v; want %d, %v", tc.name, stamp, ok, err, tc.stamp, tc.ok)
		}
	}
	if _, _, err := StrTombstone([]byte{1, byte(Str), 0}, t0); !errors.Is(err, engines.ErrCorruptState) {
		t.Errorf("a corrupt state: got %v", err)
	}
}
