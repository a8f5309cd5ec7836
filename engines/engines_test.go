package engines_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
)

// t0 is the instant timelines start from (Unix ns, 2023-11-14 22:00:00 UTC): a
// whole hour, so windows of seconds, minutes and hours start there.
const (
	t0 = 1_699_999_200 * s
	ms = 1_000_000 // ns
	s  = 1_000 * ms
)

// step is one call of a timeline: at is ns after t0 (equal values are one
// instant), want is the Result without Limit (run fills it in).
type step struct {
	at, qty int64
	want    engines.Result
}

func allow(remaining, resetAfter int64) engines.Result {
	return engines.Result{Remaining: remaining, RetryAfter: -1, ResetAfter: resetAfter}
}

func deny(remaining, retryAfter, resetAfter int64) engines.Result {
	return engines.Result{Limited: true, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// queued is an admitted LB request held for delay.
func queued(remaining, resetAfter, delay int64) engines.Result {
	return engines.Result{Remaining: remaining, RetryAfter: -1, ResetAfter: resetAfter, Delay: delay}
}

// run replays steps on one key from no state, as the command layer does: Check,
// then Commit when allowed and qty > 0. It checks that Check leaves the state
// alone, that Apply agrees, and that fullAt is the decision time plus
// ResetAfter. It returns the final state.
//
// The mergeable (active-active) form of the engine replays the same steps
// as the one writer of its key and must give the same replies, writes and
// fullAt.
func run(t *testing.T, l engines.Limiter, limit int64, steps []step) []byte {
	t.Helper()
	var state []byte
	newest := int64(math.MinInt64)
	merged, err := mstate.New(l, 0)
	if err != nil {
		t.Fatal(err)
	}
	var mstateState []byte
	for i, st := range steps {
		now := t0 + st.at
		before := bytes.Clone(state)
		res, err := l.Check(state, now, st.qty)
		if err != nil {
			t.Fatalf("step %d (at %d, qty %d): Check: %v", i+1, st.at, st.qty, err)
		}
		if !bytes.Equal(state, before) {
			t.Fatalf("step %d: Check modified the state", i+1)
		}
		want := st.want
		want.Limit = limit
		if res != want {
			t.Errorf("step %d (at %d, qty %d): got %+v, want %+v", i+1, st.at, st.qty, res, want)
		}
		ares, next, fullAt, write, err := engines.Apply(l, bytes.Clone(state), now, st.qty)
		if err != nil || ares != res || write != (!res.Limited && st.qty > 0) {
			t.Fatalf("step %d: Apply got (%+v, write %v, %v), want (%+v, write %v)", i+1, ares, write, err, res, !res.Limited && st.qty > 0)
		}
		d, err := merged.Decide(mstateState, mstate.Origin{Node: 1}, now, st.qty, mstate.Exact)
		mres, mnext, mfullAt, mwrite := d.Res, d.Next, d.FullAt, d.Write
		if err != nil || mres != res || mwrite != write || (write && mfullAt != fullAt) {
			t.Fatalf("step %d: mergeable form got (%+v, write %v, fullAt %d, %v), want (%+v, write %v, fullAt %d)",
				i+1, mres, mwrite, mfullAt, err, res, write, fullAt)
		}
		if !write {
			continue
		}
		mstateState = mnext
		used := max(now, newest)
		state, newest = next, used
		if fullAt != used+res.ResetAfter {
			t.Errorf("step %d: fullAt = t0%+d, want t0%+d (decision time + ResetAfter)", i+1, fullAt-t0, used+res.ResetAfter-t0)
		}
	}
	return state
}

func TestKind(t *testing.T) {
	for _, tt := range []struct {
		k    engines.Kind
		want string
	}{
		{engines.FWC, "fwc"}, {engines.SWL, "swl"}, {engines.SWC, "swc"}, {engines.TB, "tb"}, {engines.LB, "lb"},
		{0, "kind(0)"}, {6, "kind(6)"},
	} {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", tt.k, got, tt.want)
		}
	}
}

// sample is a Limiter with a state it wrote (one unit admitted at t0).
type sample struct {
	l     engines.Limiter
	state []byte
}

// limiters returns a sample of each kind.
func limiters(t *testing.T) map[engines.Kind]sample {
	t.Helper()
	out := map[engines.Kind]sample{}
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(10, s)),
		must(engines.NewSWL(10, s)),
		must(engines.NewSWC(10, s, 3)),
		must(engines.NewTB(10, 1, s)),
		must(engines.NewLB(10, 1, s)),
	} {
		state, _, err := l.Commit(nil, t0, 1)
		if err != nil {
			t.Fatalf("%v: Commit: %v", l.Kind(), err)
		}
		out[l.Kind()] = sample{l, state}
	}
	return out
}

func must(l engines.Limiter, err error) engines.Limiter {
	if err != nil {
		panic(err)
	}
	return l
}

func TestKindOf(t *testing.T) {
	for k, e := range limiters(t) {
		if got, err := engines.KindOf(e.state); got != k || err != nil {
			t.Errorf("KindOf(%v state) = %v, %v; want %v", k, got, err, k)
		}
		if e.l.Kind() != k {
			t.Errorf("Kind() = %v, want %v", e.l.Kind(), k)
		}
	}
	for _, b := range [][]byte{nil, {}, {1}, {0, 1}, {2, 1}, {1, 0}, {1, 6}, {1, 255}} {
		if k, err := engines.KindOf(b); k != 0 || !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("KindOf(%v) = %v, %v; want 0, ErrCorruptState", b, k, err)
		}
	}
}

// A key reused with another algorithm is ErrWrongKind for both calls.
func TestWrongKind(t *testing.T) {
	ls := limiters(t)
	for k, e := range ls {
		for k2, e2 := range ls {
			if k == k2 {
				continue
			}
			if _, err := e.l.Check(e2.state, t0, 1); !errors.Is(err, engines.ErrWrongKind) {
				t.Errorf("%v.Check(%v state): got %v, want ErrWrongKind", k, k2, err)
			}
			if _, _, err := e.l.Commit(bytes.Clone(e2.state), t0, 1); !errors.Is(err, engines.ErrWrongKind) {
				t.Errorf("%v.Commit(%v state): got %v, want ErrWrongKind", k, k2, err)
			}
		}
	}
}

// Every state is refused, never misread, when truncated, extended, or
// carrying another version.
func TestCorruptState(t *testing.T) {
	for k, e := range limiters(t) {
		bad := map[string][]byte{
			"one byte":    e.state[:1],
			"header only": e.state[:2],
			"truncated":   e.state[:len(e.state)-1],
			"extended":    append(bytes.Clone(e.state), 0),
			"version 0":   append([]byte{0}, e.state[1:]...),
			"version 2":   append([]byte{2}, e.state[1:]...),
			"kind 0":      append([]byte{1, 0}, e.state[2:]...),
		}
		for name, b := range bad {
			if _, err := e.l.Check(b, t0, 1); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("%v.Check(%s): got %v, want ErrCorruptState", k, name, err)
			}
			if _, _, err := e.l.Commit(bytes.Clone(b), t0, 1); !errors.Is(err, engines.ErrCorruptState) {
				t.Errorf("%v.Commit(%s): got %v, want ErrCorruptState", k, name, err)
			}
		}
	}
}

// Header fields each engine checks, set to impossible values in an otherwise
// valid state (offsets per the layouts in doc.go).
func TestCorruptFields(t *testing.T) {
	ls := limiters(t)
	le := func(b []byte, off int, v uint64, n int) []byte {
		b = bytes.Clone(b)
		for i := range n {
			b[off+i] = byte(v >> (8 * i))
		}
		return b
	}
	neg := uint64(math.MaxUint64) // -1 as int64
	tests := []struct {
		name string
		k    engines.Kind
		b    []byte
	}{
		{"fwc count 0", engines.FWC, le(ls[engines.FWC].state, 10, 0, 8)},
		{"fwc count -1", engines.FWC, le(ls[engines.FWC].state, 10, neg, 8)},
		{"swl head = cap", engines.SWL, le(ls[engines.SWL].state, 2, 8, 4)},
		{"swl n = 0", engines.SWL, le(ls[engines.SWL].state, 6, 0, 4)},
		{"swl n > cap", engines.SWL, le(ls[engines.SWL].state, 6, 9, 4)},
		{"swl total 0", engines.SWL, le(ls[engines.SWL].state, 10, 1, 4)},
		{"swl total too large", engines.SWL, le(ls[engines.SWL].state, 10, 1<<31, 4)},
		{"swl cap too large", engines.SWL, append(bytes.Clone(ls[engines.SWL].state), make([]byte, 12*engines.MaxSWLLimit)...)},
		{"swc odd length", engines.SWC, append(bytes.Clone(ls[engines.SWC].state), 0, 0, 0, 0)},
		{"swc one counter", engines.SWC, ls[engines.SWC].state[:18]},
		{"swc 61 counters", engines.SWC, append(bytes.Clone(ls[engines.SWC].state), make([]byte, 8*58)...)},
		{"swc newest counter 0", engines.SWC, le(ls[engines.SWC].state, 10, 0, 8)},
		{"swc negative counter", engines.SWC, le(ls[engines.SWC].state, 18, neg, 8)},
		{"swc counters overflow", engines.SWC, le(le(ls[engines.SWC].state, 18, math.MaxInt64, 8), 26, math.MaxInt64, 8)},
		{"tb negative debt", engines.TB, le(ls[engines.TB].state, 10, neg, 8)},
		{"tb unit 0", engines.TB, le(ls[engines.TB].state, 18, 0, 8)},
		{"lb negative unit", engines.LB, le(ls[engines.LB].state, 18, neg, 8)},
	}
	for _, tt := range tests {
		l := ls[tt.k].l
		if _, err := l.Check(tt.b, t0, 1); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: Check got %v, want ErrCorruptState", tt.name, err)
		}
		if _, _, err := l.Commit(bytes.Clone(tt.b), t0, 1); !errors.Is(err, engines.ErrCorruptState) {
			t.Errorf("%s: Commit got %v, want ErrCorruptState", tt.name, err)
		}
	}
}

// The layouts are part of the stored format: these bytes must decode the same
// in every later release (or the version byte must change).
func TestEncoding(t *testing.T) {
	le := func(v int64) []byte {
		b := make([]byte, 8)
		for i := range b {
			b[i] = byte(uint64(v) >> (8 * i))
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		l    engines.Limiter
		qty  int64
		want []byte
	}{
		{"fwc", must(engines.NewFWC(10, s)), 3, cat([]byte{1, 1}, le(t0), le(3))},
		{"swl", must(engines.NewSWL(10, s)), 3, cat([]byte{1, 2},
			[]byte{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, // head 0, n 1, base 0
			le(t0), []byte{3, 0, 0, 0}, // entry (t0, cum 3)
			make([]byte, 7*12))}, // 7 unused entries of the initial 8
		{"swc", must(engines.NewSWC(10, s, 3)), 3, cat([]byte{1, 3}, le(t0), le(3), le(0), le(0))},
		{"tb", must(engines.NewTB(10, 2, s)), 3, cat([]byte{1, 4}, le(t0), le(3*s), le(s))},
		{"lb", must(engines.NewLB(10, 2, s)), 3, cat([]byte{1, 5}, le(t0), le(3*s), le(s))},
	}
	for _, tt := range tests {
		got, _, err := tt.l.Commit(nil, t0, tt.qty)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got state\n%v, want\n%v", tt.name, got, tt.want)
		}
		// Round trip: the stored bytes read back as the same key.
		res, err := tt.l.Check(got, t0, 0)
		if err != nil || res.Remaining != res.Limit-tt.qty {
			t.Errorf("%s: reading back: got %+v, %v; want Remaining %d", tt.name, res, err, res.Limit-tt.qty)
		}
	}
}

func TestConstructors(t *testing.T) {
	const maxInt = math.MaxInt64
	tests := []struct {
		name string
		new  func() (engines.Limiter, error)
		want error
	}{
		{"fwc", func() (engines.Limiter, error) { return engines.NewFWC(1, 1) }, nil},
		{"fwc limit 0", func() (engines.Limiter, error) { return engines.NewFWC(0, 1) }, engines.ErrNotPositive},
		{"fwc window -1", func() (engines.Limiter, error) { return engines.NewFWC(1, -1) }, engines.ErrNotPositive},
		{"fwc max", func() (engines.Limiter, error) { return engines.NewFWC(maxInt, maxInt) }, nil},

		{"swl", func() (engines.Limiter, error) { return engines.NewSWL(engines.MaxSWLLimit, maxInt) }, nil},
		{"swl limit too large", func() (engines.Limiter, error) { return engines.NewSWL(engines.MaxSWLLimit+1, 1) }, engines.ErrLimitTooLarge},
		{"swl window 0", func() (engines.Limiter, error) { return engines.NewSWL(1, 0) }, engines.ErrNotPositive},
		{"swl not positive wins", func() (engines.Limiter, error) { return engines.NewSWL(maxInt, 0) }, engines.ErrNotPositive},

		{"swc", func() (engines.Limiter, error) { return engines.NewSWC(1, 1, 2) }, nil},
		{"swc n 60", func() (engines.Limiter, error) { return engines.NewSWC(1, 59, 60) }, nil},
		{"swc n 1", func() (engines.Limiter, error) { return engines.NewSWC(1, s, 1) }, engines.ErrSubwindows},
		{"swc n 61", func() (engines.Limiter, error) { return engines.NewSWC(1, s, 61) }, engines.ErrSubwindows},
		{"swc sub-window < 1 ns", func() (engines.Limiter, error) { return engines.NewSWC(1, 58, 60) }, engines.ErrSubwindows},
		{"swc limit 0", func() (engines.Limiter, error) { return engines.NewSWC(0, s, 61) }, engines.ErrNotPositive},
		{"swc largest window", func() (engines.Limiter, error) { return engines.NewSWC(maxInt/2, maxInt/3, 60) }, nil},
		{"swc window too large", func() (engines.Limiter, error) { return engines.NewSWC(1, maxInt/3+1, 2) }, engines.ErrOverflow},
		{"swc limit too large", func() (engines.Limiter, error) { return engines.NewSWC(maxInt/2+1, s, 2) }, engines.ErrOverflow},

		{"tb", func() (engines.Limiter, error) { return engines.NewTB(1, 1, 1) }, nil},
		{"tb capacity 0", func() (engines.Limiter, error) { return engines.NewTB(0, 1, 1) }, engines.ErrNotPositive},
		{"tb count 0", func() (engines.Limiter, error) { return engines.NewTB(1, 0, 1) }, engines.ErrNotPositive},
		{"tb period 0", func() (engines.Limiter, error) { return engines.NewTB(1, 1, 0) }, engines.ErrNotPositive},
		{"tb C*P fits", func() (engines.Limiter, error) { return engines.NewTB(9, 1, maxInt/9) }, nil},
		{"tb C*P overflows", func() (engines.Limiter, error) { return engines.NewTB(10, 1, maxInt/9) }, engines.ErrOverflow},

		{"lb", func() (engines.Limiter, error) { return engines.NewLB(1, 1, 1) }, nil},
		{"lb capacity 0", func() (engines.Limiter, error) { return engines.NewLB(0, 1, 1) }, engines.ErrNotPositive},
		{"lb capacity -1", func() (engines.Limiter, error) { return engines.NewLB(-1, 1, 1) }, engines.ErrNotPositive},
		{"lb count -1", func() (engines.Limiter, error) { return engines.NewLB(1, -1, 1) }, engines.ErrNotPositive},
		{"lb (c+1)*P fits", func() (engines.Limiter, error) { return engines.NewLB(8, 1, maxInt/9) }, nil},
		{"lb (c+1)*P overflows", func() (engines.Limiter, error) { return engines.NewLB(9, 1, maxInt/9) }, engines.ErrOverflow},
		{"lb c+1 overflows", func() (engines.Limiter, error) { return engines.NewLB(maxInt, 1, 1) }, engines.ErrOverflow},
	}
	for _, tt := range tests {
		l, err := tt.new()
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got error %v, want %v", tt.name, err, tt.want)
		}
		if (err == nil) != (l != nil) {
			t.Errorf("%s: got Limiter %v with error %v", tt.name, l, err)
		}
	}
}

// Quantity errors, the same for every engine.
func TestQuantityErrors(t *testing.T) {
	for k, e := range limiters(t) {
		for _, state := range [][]byte{nil, e.state} {
			if _, err := e.l.Check(state, t0, -1); !errors.Is(err, engines.ErrNegative) {
				t.Errorf("%v: Check(qty -1): got %v, want ErrNegative", k, err)
			}
			if _, _, err := e.l.Commit(bytes.Clone(state), t0, -1); !errors.Is(err, engines.ErrNegative) {
				t.Errorf("%v: Commit(qty -1): got %v, want ErrNegative", k, err)
			}
			if _, _, err := e.l.Commit(bytes.Clone(state), t0, 0); !errors.Is(err, engines.ErrNotPositive) {
				t.Errorf("%v: Commit(qty 0): got %v, want ErrNotPositive", k, err)
			}
			res, _ := e.l.Check(nil, t0, 0)
			if _, _, err := e.l.Commit(bytes.Clone(state), t0, res.Limit+1); !errors.Is(err, engines.ErrLimited) {
				t.Errorf("%v: Commit(qty > limit): got %v, want ErrLimited", k, err)
			}
		}
	}
}

// Commit refuses what Check limits, and a refused Commit writes nothing.
func TestCommitLimited(t *testing.T) {
	for k, e := range limiters(t) {
		state := bytes.Clone(e.state)
		for {
			res, err := e.l.Check(state, t0, 1)
			if err != nil {
				t.Fatalf("%v: %v", k, err)
			}
			if res.Limited {
				break
			}
			if state, _, err = e.l.Commit(state, t0, 1); err != nil {
				t.Fatalf("%v: %v", k, err)
			}
		}
		before := bytes.Clone(state)
		if _, _, err := e.l.Commit(state, t0, 1); !errors.Is(err, engines.ErrLimited) {
			t.Errorf("%v: Commit of a limited request: got %v, want ErrLimited", k, err)
		}
		if !bytes.Equal(state, before) {
			t.Errorf("%v: a refused Commit changed the state", k)
		}
	}
}

// Instants that do not fit in int64 are ErrOverflow, not wrapped, and a
// failed Commit leaves the caller's state as it was.
func TestOverflow(t *testing.T) {
	const maxInt = math.MaxInt64
	if _, _, err := must(engines.NewFWC(1, 3)).Commit(nil, math.MinInt64, 1); !errors.Is(err, engines.ErrOverflow) {
		t.Errorf("fwc window start before MinInt64: got %v, want ErrOverflow", err)
	}
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(10, s)),
		must(engines.NewSWL(10, s)),
		must(engines.NewSWC(10, s, 2)),
		must(engines.NewSWC(10, 3*s, 4)),
		must(engines.NewTB(10, 1, s)),
		must(engines.NewLB(10, 1, s)),
	} {
		state, _, err := l.Commit(nil, maxInt-5*s, 1)
		if err != nil {
			t.Fatalf("%v: %v", l.Kind(), err)
		}
		before := bytes.Clone(state)
		if _, _, err := l.Commit(state, maxInt-1, 1); !errors.Is(err, engines.ErrOverflow) {
			t.Errorf("%v: got %v, want ErrOverflow", l.Kind(), err)
		}
		if !bytes.Equal(state, before) {
			t.Errorf("%v: a failed Commit changed the state", l.Kind())
		}
	}
}

// Check and Commit on an existing key must not allocate: they run once per
// command on the hot path.
func TestNoAllocs(t *testing.T) {
	for k, e := range limiters(t) {
		state := bytes.Clone(e.state)
		now := int64(t0)
		allocs := testing.AllocsPerRun(1000, func() {
			now += 10 * ms
			res, err := e.l.Check(state, now, 1)
			if err == nil && !res.Limited {
				state, _, _ = e.l.Commit(state, now, 1)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: got %v allocs per Check+Commit, want 0", k, allocs)
		}
	}
}
