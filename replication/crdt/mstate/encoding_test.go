package mstate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

var testOrigin = Origin{Node: 0x0102030405060708, Inc: 9}

// limiters returns one Limiter of each kind, with skew 1 s.
func limiters() map[Kind]Limiter {
	g, _ := NewGCRA(gcra.Params{Burst: 4, Interval: s})
	return map[Kind]Limiter{
		GCRA: g,
		TB:   mergeable(mustLimiter(engines.NewTB(10, 2, s)), s),
		LB:   mergeable(mustLimiter(engines.NewLB(10, 2, s)), s),
		FWC:  mergeable(mustLimiter(engines.NewFWC(10, 10*s)), s),
		SWC:  mergeable(mustLimiter(engines.NewSWC(10, 10*s, 3)), s),
		SWL:  mergeable(mustLimiter(engines.NewSWL(10, 10*s)), s),
	}
}

// samples returns a state of each kind written by two origins at a few
// instants, one of them twice.
func samples(t testing.TB) map[Kind][]byte {
	out := map[Kind][]byte{}
	for k, l := range limiters() {
		var state []byte
		for i, o := range []Origin{testOrigin, {Node: 1}, testOrigin} {
			_, next, _, write, err := decide(l, state, o, t0+int64(i)*s, 2, Exact)
			if err != nil || !write {
				t.Fatalf("%v: %v, write %v", k, err, write)
			}
			state = next
		}
		out[k] = state
	}
	return out
}

func le(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

// The layouts of the package doc are part of the replicated format: these
// bytes must decode the same in every later release, or the version must
// change.
func TestEncoding(t *testing.T) {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	origin := cat(le(0x0102030405060708), le(9))
	u16 := func(v int) []byte { return []byte{byte(v), byte(v >> 8)} }
	one := []byte{1, 0, 0, 0} // a uint32 count
	tests := []struct {
		kind Kind
		want []byte
	}{
		{GCRA, cat([]byte{1, 6}, le(math.MinInt64), le(0), u16(1), origin, one, le(t0), le(3*s), u16(0))},
		{TB, cat([]byte{1, 4}, le(math.MinInt64), le(0), le(0), u16(1), origin, u16(1), le(s), le(2),
			one, le(t0), le(3*s), u16(0), u16(0), u16(0))},
		{LB, cat([]byte{1, 5}, le(math.MinInt64), le(0), le(0), u16(1), origin, u16(1), le(s), le(2),
			one, le(t0), le(3*s), u16(0), u16(0), u16(0))},
		{FWC, cat([]byte{1, 1}, le(t0-11*s), one, origin, le(t0), []byte{2}, le(3), le(0))},
		{SWC, cat([]byte{1, 3}, le(t0-21*s), one, origin, le(t0), []byte{4}, le(3), le(0), le(0), le(0))},
		{SWL, cat([]byte{1, 2}, le(t0-11*s), u16(1), origin, one, le(t0), le(3), u16(0))},
	}
	ls := limiters()
	for _, tt := range tests {
		_, got, _, _, err := decide(ls[tt.kind], nil, testOrigin, t0, 3, Exact)
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("%v: got %v\n%x\nwant\n%x", tt.kind, err, got, tt.want)
		}
	}
}

// decide is Limiter.Decide with its Decision taken apart, as most tests
// use it: the reply, the next state, FullAt and Write.
func decide(l Limiter, state []byte, self Origin, now, qty int64, b Bounds) (engines.Result, []byte, int64, bool, error) {
	d, err := l.Decide(state, self, now, qty, b)
	return d.Res, d.Next, d.FullAt, d.Write, err
}

// reencode decodes state as a state of kind k and encodes it again.
func reencode(state []byte, k Kind) ([]byte, error) {
	if marked(state) {
		m, plain, err := unmark(state)
		if err != nil || plain == nil {
			return withMark(plain, m), err
		}
		if plain, err = reencode(plain, k); err != nil {
			return nil, err
		}
		return withMark(plain, m), nil
	}
	if k.debt() {
		s, err := decodeDebt(state, k, nil)
		if err != nil {
			return nil, err
		}
		return s.encode()
	}
	d, err := decode(state, k)
	if err != nil {
		return nil, err
	}
	return d.encode()
}

// Every state is refused, never misread, when cut short, extended, or
// carrying another version; another algorithm's state is ErrWrongKind.
func TestCorruptState(t *testing.T) {
	ls := limiters()
	for k, state := range samples(t) {
		if got, err := reencode(state, k); err != nil || !bytes.Equal(got, state) {
			t.Errorf("%v: decode and encode gives %x, %v; want %x", k, got, err, state)
		}
		bad := map[string][]byte{
			"extended":  append(bytes.Clone(state), 0),
			"version 0": append([]byte{0}, state[1:]...),
			"version 2": append([]byte{2}, state[1:]...),
			"kind 0":    append([]byte{1, 0}, state[2:]...),
			"kind 8":    append([]byte{1, 8}, state[2:]...),
		}
		for n := 1; n < len(state); n++ {
			bad[fmt.Sprintf("cut to %d bytes", n)] = state[:n]
		}
		for name, b := range bad {
			if _, err := reencode(b, k); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("%v %s: decoding got %v, want ErrCorruptState", k, name, err)
			}
			if _, _, _, _, err := decide(ls[k], b, testOrigin, t0, 1, Exact); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("%v %s: Decide got %v, want ErrCorruptState", k, name, err)
			}
			if _, err := Merge(b, b); err == nil {
				t.Errorf("%v %s: Merge accepted it", k, name)
			}
		}
		for k2, l := range ls {
			if k2 == k {
				continue
			}
			if _, _, _, _, err := decide(l, state, testOrigin, t0, 1, Exact); !errors.Is(err, engines.ErrWrongKind) {
				t.Errorf("%v.Decide(%v state, Exact): got %v, want ErrWrongKind", k2, k, err)
			}
			if _, err := Merge(state, samples(t)[k2]); !errors.Is(err, engines.ErrWrongKind) {
				t.Errorf("Merge(%v, %v): got %v, want ErrWrongKind", k, k2, err)
			}
		}
	}
}

// Field values the decoders refuse in otherwise well-formed states: each
// would give a second encoding of one state, or one no node writes.
func TestCorruptFields(t *testing.T) {
	o2 := Origin{Node: 1}
	ev := func(t, cost int64, o Origin) event { return event{t: t, o: o, d: drain{unit: s, rate: 2}, cost: cost} }
	debt := map[string]debtLog{
		"event at the cut":    {kind: TB, cut: t0, events: []event{ev(t0, s, o2)}},
		"cost 0":              {kind: TB, cut: math.MinInt64, events: []event{ev(t0, 0, o2)}},
		"events out of order": {kind: TB, cut: math.MinInt64, events: []event{ev(t0+1, s, o2), ev(t0, s, o2)}},
		"one key twice":       {kind: TB, cut: math.MinInt64, events: []event{ev(t0, s, o2), ev(t0, 2*s, o2)}},
		"base without unit":   {kind: TB, cut: t0, base: 5},
		"unit without base":   {kind: TB, cut: t0, unit: 5},
		"negative base":       {kind: GCRA, cut: t0, base: -1},
		"drain rate 0":        {kind: TB, cut: math.MinInt64, events: []event{{t: t0, o: o2, d: drain{unit: s}, cost: 1}}},
	}
	for name, st := range debt {
		b, _ := st.encode()
		if _, err := decodeDebt(b, st.kind, nil); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
	slotStates := map[string]slots{
		"fwc width 3":          {kind: FWC, s: []slot{{o: o2, newest: t0, counts: []int64{1, 0, 0}}}},
		"swc width 62":         {kind: SWC, s: []slot{{o: o2, newest: t0, counts: make([]int64, 62)}}},
		"newest count 0":       {kind: FWC, s: []slot{{o: o2, newest: t0, counts: []int64{0, 1}}}},
		"negative count":       {kind: SWC, s: []slot{{o: o2, newest: t0, counts: []int64{1, -1, 0}}}},
		"counts overflow":      {kind: FWC, s: []slot{{o: o2, newest: t0, counts: []int64{math.MaxInt64, 1}}}},
		"slot at the floor":    {kind: FWC, floor: t0, s: []slot{{o: o2, newest: t0, counts: []int64{1, 0}}}},
		"origins out of order": {kind: FWC, s: []slot{{o: testOrigin, newest: t0, counts: []int64{1, 0}}, {o: o2, newest: t0, counts: []int64{1, 0}}}},
	}
	for name, st := range slotStates {
		b, _ := st.encode()
		if _, err := decodeSlots(b, st.kind); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
	swl := map[string]swlLog{
		"entry at the floor":   {floor: t0, entries: []entry{{t0, o2, 1}}},
		"units 0":              {floor: math.MinInt64, entries: []entry{{t0, o2, 0}}},
		"entries out of order": {floor: math.MinInt64, entries: []entry{{t0 + 1, o2, 1}, {t0, o2, 1}}},
	}
	for name, st := range swl {
		b, _ := st.encode()
		if _, err := decodeSWL(b); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
	// Tables: an origin no event uses, origins out of order, an index out
	// of range, in a GCRA log written out by hand.
	gcraLog := func(origins []Origin, refs ...int) []byte {
		b := append([]byte{1, byte(GCRA)}, append(le(math.MinInt64), le(0)...)...)
		b = appendU32(appendTable(b, origins, appendOrigin), len(refs))
		for i, ref := range refs {
			b = appendU16(appendI64(appendI64(b, t0+int64(i)), s), ref)
		}
		return b
	}
	if _, err := decodeDebt(gcraLog([]Origin{o2, testOrigin}, 0, 1), GCRA, nil); err != nil {
		t.Fatalf("the well-formed log: %v", err)
	}
	for name, b := range map[string][]byte{
		"unused origin":        gcraLog([]Origin{o2, testOrigin}, 0, 0),
		"origins out of order": gcraLog([]Origin{testOrigin, o2}, 0, 1),
		"origin twice":         gcraLog([]Origin{o2, o2}, 0, 1),
		"index out of range":   gcraLog([]Origin{o2, testOrigin}, 0, 2),
	} {
		if _, err := decodeDebt(b, GCRA, nil); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: got %v, want ErrCorruptState", name, err)
		}
	}
}

func TestKindOf(t *testing.T) {
	for k, state := range samples(t) {
		if got, err := KindOf(state); got != k || err != nil {
			t.Errorf("KindOf(%v state) = %v, %v", k, got, err)
		}
		if l := limiters()[k]; l.Kind() != k {
			t.Errorf("Kind() = %v, want %v", l.Kind(), k)
		}
	}
	for _, b := range [][]byte{nil, {1}, {0, 1}, {2, 1}, {1, 0}, {1, 8}} {
		if _, err := KindOf(b); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("KindOf(%v): got %v, want ErrCorruptState", b, err)
		}
	}
	names := map[Kind]string{GCRA: "cl", FWC: "fwc", SWL: "swl", SWC: "swc", TB: "tb", LB: "lb", Str: "string", 0: "kind(0)"}
	for k, want := range names {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
}

// Merging with nothing, and folding or merging nothing, keep the state.
func TestEmpty(t *testing.T) {
	for k, state := range samples(t) {
		for _, m := range [][]byte{must(Merge(state, nil)), must(Merge(nil, state)), must(Fold(state, math.MinInt64))} {
			if !bytes.Equal(m, state) {
				t.Errorf("%v: got %x, want %x", k, m, state)
			}
		}
		if full, err := limiters()[k].FullAt(nil); full != math.MinInt64 || err != nil {
			t.Errorf("%v: FullAt(nil) = %d, %v", k, full, err)
		}
	}
	if m, err := Merge(nil, nil); m != nil || err != nil {
		t.Errorf("Merge(nil, nil) = %x, %v", m, err)
	}
	if m, err := Fold(nil, t0); m != nil || err != nil {
		t.Errorf("Fold(nil) = %x, %v", m, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestConstructors(t *testing.T) {
	if _, err := New(mustLimiter(engines.NewFWC(1, s)), -1); !errors.Is(err, ErrSkew) {
		t.Errorf("negative skew: got %v, want ErrSkew", err)
	}
	if _, err := NewGCRA(gcra.Params{}); !errors.Is(err, gcra.ErrZeroRate) {
		t.Errorf("zero GCRA params: got %v, want gcra.ErrZeroRate", err)
	}
}

func TestOrigin(t *testing.T) {
	// FNV-1a 64 of "a": every node derives the same Origin from an id.
	if o := NewOrigin("a", 3); o != (Origin{Node: 0xaf63dc4c8601ec8c, Inc: 3}) {
		t.Errorf("NewOrigin(a, 3) = %#x", o)
	}
	for _, tt := range []struct {
		a, b Origin
		want int
	}{
		{Origin{1, 9}, Origin{2, 0}, -1},
		{Origin{2, 0}, Origin{1, 9}, 1},
		{Origin{1, 1}, Origin{1, 2}, -1},
		{Origin{1, 2}, Origin{1, 2}, 0},
	} {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
