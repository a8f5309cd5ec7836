package mstate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/store"
)

// The string layout of the package doc is part of the replicated format:
// these bytes must decode the same in every later release, or the version
// must change. Their sizes are the doc's memory table.
func TestStrEncoding(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	origin := cat(le(0x0102030405060708), le(9))
	one, zero := []byte{1, 0, 0, 0}, []byte{0, 0, 0, 0}
	o1 := Origin{Node: 1}
	v := set(t, nil, testOrigin, t0, "12", t0Ms+5_000)
	gone := int64(t0Ms+5_001) * 1e6 // the stamp of v's expiry tombstone
	tests := []struct {
		name            string
		state, want     []byte
		value, counters int
	}{
		{"SET 12 PXAT, INCRBY 4", incr(t, v, o1, t0+s, 4, 16),
			cat([]byte{1, 7}, le(t0), origin, []byte{0}, []byte{2, 0, 0, 0}, []byte("12"), le(t0), le(t0Ms+5_000),
				one, le(1), le(0), le(4), le(0)), 2, 1},
		{"DEL", del(t, v, o1, t0+s),
			cat([]byte{1, 7}, le(t0+s), le(1), le(0), []byte{1}, zero, le(t0+s), le(0), zero), 0, 0},
		{"DECRBY 3 of a fresh key", incr(t, nil, testOrigin, t0, -3, -3),
			cat([]byte{1, 7}, le(math.MinInt64), le(0), le(0), []byte{1}, zero, le(math.MinInt64), le(0),
				one, origin, le(0), le(3)), 0, 1},
		{"EXPIRE shorter", expire(t, v, o1, t0+s, t0Ms+2_000),
			cat([]byte{1, 7}, le(t0), origin, []byte{0}, []byte{2, 0, 0, 0}, []byte("12"), le(t0+s), le(t0Ms+2_000), zero), 2, 0},
		{"INCR after expiry", incr(t, v, o1, t0+6*s, 1, 1),
			cat([]byte{1, 7}, le(gone), le(0), le(0), []byte{1}, zero, le(gone), le(0), one, le(1), le(0), le(1), le(0)), 0, 1},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.state, tt.want) {
			t.Errorf("%s: got\n%x\nwant\n%x", tt.name, tt.state, tt.want)
		}
		if size := strFixed + tt.value + counterLen*tt.counters; len(tt.state) != size {
			t.Errorf("%s: %d bytes, want %d", tt.name, len(tt.state), size)
		}
	}
}

// Every string state decodes and encodes back to itself, and is refused,
// never misread, when cut short, extended, or carrying another version or
// kind; another kind's state is ErrWrongKind to the string functions, and a
// string state to the limiters.
func TestStrCorruptState(t *testing.T) {
	g, _ := NewGCRA(gcra.Params{Burst: 4, Interval: s})
	_, other, _, _, _ := decide(g, nil, testOrigin, t0, 1, Exact)
	for i, state := range strSamples(t) {
		if got, err := reencode(state, Str); err != nil || !bytes.Equal(got, state) {
			t.Errorf("sample %d: decode and encode gives %x, %v; want %x", i, got, err, state)
		}
		if k, err := KindOf(state); k != Str || err != nil {
			t.Errorf("sample %d: KindOf = %v, %v", i, k, err)
		}
		for _, m := range [][]byte{must(Merge(state, nil)), must(Merge(nil, state)), must(Merge(state, state)), must(Fold(state, t0))} {
			if !bytes.Equal(m, state) {
				t.Errorf("sample %d: merging with nothing or itself, or folding, gives %x", i, m)
			}
		}
		bad := map[string][]byte{
			"extended":  append(bytes.Clone(state), 0),
			"version 2": append([]byte{2}, state[1:]...),
			"kind 8":    append([]byte{1, 8}, state[2:]...),
		}
		for n := 1; n < len(state); n++ {
			bad[fmt.Sprintf("cut to %d bytes", n)] = state[:n]
		}
		for name, b := range bad {
			if _, err := StrGet(b, t0); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("sample %d %s: StrGet got %v, want ErrCorruptState", i, name, err)
			}
			if _, err := Merge(b, state); err == nil {
				t.Errorf("sample %d %s: Merge accepted it", i, name)
			}
		}
		if _, err := Merge(state, other); !errors.Is(err, engines.ErrWrongKind) {
			t.Errorf("Merge(string, cl): got %v, want ErrWrongKind", err)
		}
		if _, _, _, _, err := decide(g, state, testOrigin, t0, 1, Exact); !errors.Is(err, engines.ErrWrongKind) {
			t.Errorf("CL.THROTTLE of a string: got %v, want ErrWrongKind", err)
		}
	}
	_, err1 := StrGet(other, t0)
	_, err2 := StrSet(other, testOrigin, t0, nil, 0, false)
	_, _, err3 := StrIncr(other, testOrigin, t0, 1)
	for i, err := range []error{err1, err2, err3} {
		if !errors.Is(err, engines.ErrWrongKind) {
			t.Errorf("string function %d on a cl state: got %v, want ErrWrongKind", i, err)
		}
	}
}

// Field values the decoder refuses in otherwise well-formed states: each
// would give a second encoding of one state, or one no node writes.
func TestStrCorruptFields(t *testing.T) {
	o2 := Origin{Node: 2}
	live := func(v string) reg { return reg{stamp: t0, o: o2, value: []byte(v)} }
	dead := reg{stamp: t0, o: o2, deleted: true}
	states := map[string]strState{
		"deleted with a value":           {r: reg{stamp: t0, o: o2, deleted: true, value: []byte("x")}, e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"fresh register with an origin":  {r: reg{stamp: math.MinInt64, o: o2, deleted: true}, e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"fresh register with a value":    {r: reg{stamp: math.MinInt64, value: []byte("1")}, e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"epoch before the stamp":         {r: live("x"), e: expiry{epoch: t0 - 1}},
		"negative expiry":                {r: live("x"), e: expiry{epoch: t0, ms: -1}},
		"a missing key with a TTL":       {r: dead, e: expiry{epoch: t0, ms: t0Ms}},
		"a missing key with an epoch":    {r: dead, e: expiry{epoch: t0 + 1}},
		"counters out of order":          {r: dead, e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}, {o: nodeA, p: 1}}},
		"one origin twice":               {r: dead, e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}, {o: o2, n: 1}}},
		"an INCRBY 0 entry on a value":   {r: live("1"), e: expiry{epoch: t0}, c: []counter{{o: o2}}},
		"counters on a non-integer":      {r: live("01"), e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"counters on an empty value":     {r: live(""), e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"counters on a padded integer":   {r: live(" 1"), e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
		"counters on an integer too big": {r: live("9223372036854775808"), e: expiry{epoch: t0}, c: []counter{{o: o2, p: 1}}},
	}
	for name, st := range states {
		b, err := st.encode()
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: encoding gave %x, %v", name, b, err)
		}
		if _, err := decodeStr(b); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
	// Written out by hand: a deleted flag of 2, a value longer than the
	// state (which must not be allocated).
	good := mustEncode((&strState{r: live("ab"), e: expiry{epoch: t0}}).encode())
	if _, err := decodeStr(good); err != nil {
		t.Fatalf("the well-formed state: %v", err)
	}
	flag2 := bytes.Clone(good)
	flag2[26] = 2
	long := bytes.Clone(good)
	copy(long[27:], []byte{0xff, 0xff, 0xff, 0xff})
	many := append(bytes.Clone(good[:len(good)-4]), 0xff, 0xff, 0xff, 0xff)
	// The empty state has one encoding: none.
	empty := bytes.Join([][]byte{{1, 7}, le(math.MinInt64), le(0), le(0), {1, 0, 0, 0, 0}, le(math.MinInt64), le(0), {0, 0, 0, 0}}, nil)
	for name, b := range map[string][]byte{"deleted flag 2": flag2, "value past the end": long, "counters past the end": many,
		"the empty state written out": empty} {
		if _, err := decodeStr(b); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
}

// parseInteger is store.ParseInt: INCR accepts exactly the values the
// single-node store holds as integers.
func TestStrParseInteger(t *testing.T) {
	for _, v := range []string{"0", "-0", "1", "-1", "01", "+1", " 1", "1 ", "", "-", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "00", "1e3", "0x1", "١"} {
		n, ok := parseInteger([]byte(v))
		wn, wok := store.ParseInt([]byte(v))
		if n != wn || ok != wok {
			t.Errorf("%q: got %d, %v; store.ParseInt says %d, %v", v, n, ok, wn, wok)
		}
	}
}
