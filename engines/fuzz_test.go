package engines_test

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// The fuzz targets replay a random timeline (ops: 3 bytes per request: a time
// step, a quantity, flags) on one key and compare every reply, exactly, with
// a model: a naive implementation of the algorithm's definition over the list
// of admissions, in big integers and rationals, sharing no code with the
// engine. They also check the invariants the command layer relies on, the
// algorithm's admission envelope over the whole run, and that replaying the
// same inputs gives byte-identical states.
//
// Run one with: go test -fuzz FuzzSWL -fuzztime 30s ./engines/
// Crashers land in testdata/fuzz/FuzzSWL and are replayed by go test.

// admission is one admitted request at the time the decision used.
type admission struct{ t, q int64 }

// model answers Check from the definition. t is the decision time (the
// driver applies the stale-now rule, which is specified, not modelled).
type model interface {
	check(t, qty int64) engines.Result
	commit(t, qty int64)
}

// fold maps v into 0..n-1.
func fold(v, n int64) int64 {
	v %= n
	if v < 0 {
		v = -v
	}
	return v
}

// seeds are timelines shared by every target: bursts, peeks, quantities above
// the limit, a clock that stands still, steps across windows, and stale
// timestamps.
var seeds = [][]byte{
	{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	{0, 250, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 64, 1, 0, 64, 1, 0, 255, 1, 0},
	{10, 1, 0, 10, 1, 0, 10, 1, 0, 10, 120, 0, 10, 1, 3, 10, 1, 0, 200, 1, 3, 5, 1, 0},
	{63, 1, 0, 1, 1, 0, 1, 101, 0, 64, 1, 0, 0, 130, 3, 128, 1, 0, 20, 1, 3, 20, 1, 0},
	{1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0},
	{7, 150, 0, 7, 150, 0, 255, 1, 3, 7, 160, 0, 33, 1, 0, 33, 1, 0, 33, 1, 0, 33, 180, 3},
}

type params struct{ a, b, c, base int64 }

var paramSeeds = []params{
	{3, 9, 1, 0},
	{9, 599, 4, 1_699_999_200_000_000_000},
	{0, 0, 0, -1},
	{19, 999, 9, -1_000_000_007},
	{1, 7, 58, 123_456_789},
	{29, 59, 3, 1},
}

func addSeeds(f *testing.F) {
	for i, ops := range seeds {
		p := paramSeeds[i%len(paramSeeds)]
		f.Add(p.a, p.b, p.c, p.base, ops)
	}
}

// base folds the fuzzer's base time into ±10^18 ns, so epochs before 1970 and
// the 64-bit products of realistic times are exercised.
func baseTime(base int64) int64 { return fold(base, 2e18) - 1e18 }

// drive replays ops on l and checks every reply against m. scale is the time
// step unit. It returns the states after each step, for the replay check.
func drive(t *testing.T, l engines.Limiter, m model, limit, scale, base int64, ops []byte) ([][]byte, []admission) {
	t.Helper()
	var state []byte
	var states [][]byte
	var adm []admission
	clock, newest, seen := base, int64(0), false
	for i := 0; i+2 < len(ops) && i < 3*300; i += 3 {
		now := clock
		if ops[i+2]&3 == 3 { // a stale timestamp; the clock stays
			now -= int64(ops[i]) * scale / 32
		} else {
			clock += int64(ops[i]) * scale / 64
			now = clock
		}
		qty := int64(1)
		if ops[i+1] >= 100 {
			qty = int64(ops[i+1]-100) % (limit + 3)
		}
		at := now // the decision time
		if seen {
			at = max(now, newest)
		}
		step := func() string { return fmt.Sprintf("step %d (now %d, decided at %d, qty %d)", i/3+1, now, at, qty) }

		before := bytes.Clone(state)
		res, err := l.Check(state, now, qty)
		if err != nil {
			t.Fatalf("%s: Check: %v", step(), err)
		}
		if !bytes.Equal(before, state) {
			t.Fatalf("%s: Check modified the state", step())
		}
		if want := m.check(at, qty); res != want {
			t.Fatalf("%s: got %+v, model says %+v", step(), res, want)
		}
		checkResult(t, step, l, state, at, qty, res)

		if res.Limited || qty == 0 {
			states = append(states, bytes.Clone(state))
			continue
		}
		next, fullAt, err := l.Commit(bytes.Clone(state), now, qty)
		if err != nil {
			t.Fatalf("%s: Commit: %v", step(), err)
		}
		if fullAt != at+res.ResetAfter {
			t.Fatalf("%s: fullAt %d, want decision time + ResetAfter = %d", step(), fullAt, at+res.ResetAfter)
		}
		checkFullAt(t, step, l, next, fullAt, limit)
		// Remaining is what it says: that many more pass now, one more does not.
		if res.Remaining > 0 {
			if r, err := l.Check(next, at, res.Remaining); err != nil || r.Limited {
				t.Fatalf("%s: Remaining %d, but taking them gives %+v, %v", step(), res.Remaining, r, err)
			}
		}
		if r, err := l.Check(next, at, res.Remaining+1); err != nil || !r.Limited {
			t.Fatalf("%s: Remaining %d, but %d more pass: %+v, %v", step(), res.Remaining, res.Remaining+1, r, err)
		}
		m.commit(at, qty)
		adm = append(adm, admission{at, qty})
		state, newest, seen = next, at, true
		states = append(states, bytes.Clone(state))
	}
	return states, adm
}

// checkResult checks the invariants of one reply that hold for every engine.
func checkResult(t *testing.T, step func() string, l engines.Limiter, state []byte, at, qty int64, res engines.Result) {
	t.Helper()
	if res.Remaining < 0 || res.Remaining > res.Limit {
		t.Fatalf("%s: Remaining %d outside 0..%d", step(), res.Remaining, res.Limit)
	}
	if neverFits := qty > res.Limit; (res.RetryAfter == -1) != (!res.Limited || neverFits) {
		t.Fatalf("%s: RetryAfter %d with Limited %v, qty %d, Limit %d", step(), res.RetryAfter, res.Limited, qty, res.Limit)
	}
	if res.ResetAfter < 0 || res.Delay < 0 || (res.Delay > 0 && (res.Limited || qty == 0 || l.Kind() != engines.LB)) {
		t.Fatalf("%s: ResetAfter %d, Delay %d", step(), res.ResetAfter, res.Delay)
	}
	if res.Delay > res.ResetAfter {
		t.Fatalf("%s: Delay %d after the reset %d", step(), res.Delay, res.ResetAfter)
	}
	// Waiting RetryAfter is exactly enough, and 1 ns less is not.
	if res.Limited && res.RetryAfter > 0 {
		if r, err := l.Check(state, at+res.RetryAfter, qty); err != nil || r.Limited {
			t.Fatalf("%s: still limited after RetryAfter %d: %+v, %v", step(), res.RetryAfter, r, err)
		}
		if r, err := l.Check(state, at+res.RetryAfter-1, qty); err != nil || !r.Limited {
			t.Fatalf("%s: allowed 1 ns before RetryAfter %d: %+v, %v", step(), res.RetryAfter, r, err)
		}
	}
}

// checkFullAt checks that from fullAt on the state answers as a missing key,
// and that 1 ns before, it has exactly 1 ns to go.
func checkFullAt(t *testing.T, step func() string, l engines.Limiter, state []byte, fullAt, limit int64) {
	t.Helper()
	if r, err := l.Check(state, fullAt-1, 0); err != nil || r.ResetAfter != 1 {
		t.Fatalf("%s: 1 ns before fullAt %d: %+v, %v; want ResetAfter 1", step(), fullAt, r, err)
	}
	for _, at := range []int64{fullAt, fullAt + 1} {
		for _, qty := range []int64{0, 1, limit} {
			got, err := l.Check(state, at, qty)
			want, _ := l.Check(nil, at, qty)
			if err != nil || got != want {
				t.Fatalf("%s: at fullAt%+d qty %d got %+v, %v; a missing key gives %+v", step(), at-fullAt, qty, got, err, want)
			}
		}
	}
}

// replay runs the timeline a second time, with Commit writing in place, and
// requires the same bytes at every step.
func replay(t *testing.T, l engines.Limiter, states [][]byte, scale, base, limit int64, ops []byte) {
	t.Helper()
	var state []byte
	clock, j := base, 0
	for i := 0; i+2 < len(ops) && i < 3*300; i += 3 {
		now := clock
		if ops[i+2]&3 == 3 {
			now -= int64(ops[i]) * scale / 32
		} else {
			clock += int64(ops[i]) * scale / 64
			now = clock
		}
		qty := int64(1)
		if ops[i+1] >= 100 {
			qty = int64(ops[i+1]-100) % (limit + 3)
		}
		res, next, _, write, err := engines.Apply(l, state, now, qty)
		if err != nil {
			t.Fatalf("replay step %d: %+v, %v", i/3+1, res, err)
		}
		if write {
			state = next
		}
		if !bytes.Equal(state, states[j]) {
			t.Fatalf("replay step %d: state\n%v, first run\n%v", i/3+1, state, states[j])
		}
		j++
	}
}

// first returns the least x in [lo, lo+horizon] with ok(x), for ok monotone
// (false then true). It fails the test if ok(lo+horizon) is false.
func first(t *testing.T, lo, horizon int64, ok func(int64) bool) int64 {
	t.Helper()
	hi := lo + horizon
	if !ok(hi) {
		t.Fatalf("model: no answer within %d ns of %d", horizon, lo)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// windowModel is the model of the window engines: used(adm, t) is the
// algorithm's count at t, non-increasing in t while nothing is admitted.
type windowModel struct {
	t       *testing.T
	limit   int64
	horizon int64
	used    func(adm []admission, t int64) int64
	adm     []admission
}

func (m *windowModel) check(t, qty int64) engines.Result {
	res := engines.Result{Limit: m.limit, RetryAfter: -1}
	used := m.used(m.adm, t)
	after := m.adm
	if used+qty > m.limit {
		res.Limited = true
		if qty <= m.limit {
			res.RetryAfter = first(m.t, t, m.horizon, func(x int64) bool { return m.used(m.adm, x)+qty <= m.limit }) - t
		}
	} else {
		used += qty
		after = append(after[:len(after):len(after)], admission{t, qty})
	}
	res.Remaining = max(0, m.limit-used)
	res.ResetAfter = first(m.t, t, m.horizon, func(x int64) bool { return m.used(after, x) == 0 }) - t
	return res
}

func (m *windowModel) commit(t, qty int64) { m.adm = append(m.adm, admission{t, qty}) }

// floorDiv is floor(a*b/c) for c > 0, in big integers (whose Div is
// Euclidean: the floor for a positive divisor).
func floorDiv(a, b, c int64) int64 {
	x := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	return x.Div(x, big.NewInt(c)).Int64()
}

func FuzzFWC(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzFWC)
}

func fuzzFWC(t *testing.T, a, b, c, base int64, ops []byte) {
	limit, window := 1+fold(a, 20), 1+fold(b, 1000)
	if c%2 == 0 {
		window *= 1_000_003
	}
	l := must(engines.NewFWC(limit, window))
	// The count is that of the aligned window holding t.
	used := func(adm []admission, t int64) int64 {
		var n int64
		for _, e := range adm {
			if floorDiv(e.t, 1, window) == floorDiv(t, 1, window) {
				n += e.q
			}
		}
		return n
	}
	m := &windowModel{t: t, limit: limit, horizon: 2 * window, used: used}
	states, adm := drive(t, l, m, limit, window, baseTime(base), ops)
	replay(t, l, states, window, baseTime(base), limit, ops)
	for _, e := range adm { // each aligned window admits at most limit
		if n := used(adm, e.t); n > limit {
			t.Fatalf("window of %d admitted %d > %d", e.t, n, limit)
		}
	}
}

func FuzzSWL(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzSWL)
}

func fuzzSWL(t *testing.T, a, b, c, base int64, ops []byte) {
	limit, window := 1+fold(a, 30), 1+fold(b, 1000)
	if c%2 == 0 {
		window *= 1_000_003
	}
	l := must(engines.NewSWL(limit, window))
	// The units admitted in (t-window, t].
	used := func(adm []admission, t int64) int64 {
		var n int64
		for _, e := range adm {
			if e.t > t-window && e.t <= t {
				n += e.q
			}
		}
		return n
	}
	m := &windowModel{t: t, limit: limit, horizon: 2 * window, used: used}
	states, adm := drive(t, l, m, limit, window, baseTime(base), ops)
	replay(t, l, states, window, baseTime(base), limit, ops)
	for _, e := range adm { // every window ending at an admission; the worst ones do
		if n := used(adm, e.t); n > limit {
			t.Fatalf("(%d, %d] admitted %d > %d", e.t-window, e.t, n, limit)
		}
	}
	for _, s := range states { // memory: one entry per unit at most, under the limit
		if len(s) > 14+12*int(limit) {
			t.Fatalf("state of %d bytes for limit %d", len(s), limit)
		}
	}
}

func FuzzSWC(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzSWC)
}

func fuzzSWC(t *testing.T, a, b, c, base int64, ops []byte) {
	n := 2 + fold(c, 8)
	if c%5 == 0 {
		n = 2 + fold(c/5, 59)
	}
	m := n - 1
	limit, window := 1+fold(a, 30), m+fold(b, 1000)
	if c%3 == 0 {
		window *= 1_000_003
	}
	l := must(engines.NewSWC(limit, window, n))
	// Sub-window k starts at ceil(k*window/m); the estimate is the
	// counters of the m sub-windows up to t's plus the one before,
	// weighted by the part of its sub-window inside (t-window, t].
	index := func(t int64) int64 { return floorDiv(t, m, window) }
	start := func(k int64) int64 { return -floorDiv(-k, window, m) }
	used := func(adm []admission, t int64) int64 {
		k := index(t)
		var full, oldest int64
		for _, e := range adm {
			switch ke := index(e.t); {
			case ke > k-m && ke <= k:
				full += e.q
			case ke == k-m:
				oldest += e.q
			}
		}
		end := start(k + 1)
		return full + floorDiv(oldest, end-t, end-start(k))
	}
	md := &windowModel{t: t, limit: limit, horizon: 3 * window, used: used}
	states, adm := drive(t, l, md, limit, window, baseTime(base), ops)
	replay(t, l, states, window, baseTime(base), limit, ops)
	// Every m consecutive sub-windows admit at most limit: the last
	// admission among them saw them all as full counters.
	for _, e := range adm {
		k := index(e.t)
		var sum int64
		for _, e2 := range adm {
			if k2 := index(e2.t); k2 > k-m && k2 <= k {
				sum += e2.q
			}
		}
		if sum > limit {
			t.Fatalf("sub-windows %d..%d admitted %d > %d", k-m+1, k, sum, limit)
		}
	}
}

// bucketModel is a token bucket in rationals: tokens refill continuously at
// count/period per ns up to capacity, starting full. For LB (queue set) it is
// instead a queue of leak slots, one every period/count ns, holding at most
// capacity requests that wait (slot > now).
type bucketModel struct {
	t                       *testing.T
	capacity, count, period int64
	queue                   bool

	last   int64    // TB: time of the last admission; tokens then
	tokens *big.Rat // nil: full
	slots  []*big.Rat
}

func (m *bucketModel) interval() *big.Rat { return big.NewRat(m.period, m.count) }

// level returns TB's tokens at t (t >= last).
func (m *bucketModel) level(t int64) *big.Rat {
	c := new(big.Rat).SetInt64(m.capacity)
	if m.tokens == nil {
		return c
	}
	x := new(big.Rat).Mul(big.NewRat(t-m.last, 1), big.NewRat(m.count, m.period))
	x.Add(x, m.tokens)
	if x.Cmp(c) > 0 {
		return c
	}
	return x
}

// firstSlot returns the slot a request arriving at t gets in the queue.
func (m *bucketModel) firstSlot(slots []*big.Rat, t int64) *big.Rat {
	at := big.NewRat(t, 1)
	if len(slots) == 0 {
		return at
	}
	next := new(big.Rat).Add(slots[len(slots)-1], m.interval())
	if next.Cmp(at) < 0 {
		return at
	}
	return next
}

// waiting counts the slots after t.
func waiting(slots []*big.Rat, t int64) int64 {
	at := big.NewRat(t, 1)
	var n int64
	for i := len(slots) - 1; i >= 0 && slots[i].Cmp(at) > 0; i-- {
		n++
	}
	return n
}

func (m *bucketModel) enqueue(slots []*big.Rat, t, qty int64) []*big.Rat {
	s := m.firstSlot(slots, t)
	out := slots[:len(slots):len(slots)]
	for range qty {
		out = append(out, s)
		s = new(big.Rat).Add(s, m.interval())
	}
	return out
}

// fits reports whether qty is admitted at t: TB, the tokens are there; LB,
// at most capacity wait afterwards.
func (m *bucketModel) fits(slots []*big.Rat, t, qty int64) bool {
	if m.queue {
		return qty <= m.capacity+1 && waiting(m.enqueue(slots, t, qty), t) <= m.capacity
	}
	return qty <= m.capacity && m.level(t).Cmp(new(big.Rat).SetInt64(qty)) >= 0
}

func ceilRat(x *big.Rat) int64 {
	q, r := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64()
}

func (m *bucketModel) check(t, qty int64) engines.Result {
	limit := m.capacity
	if m.queue {
		limit++
	}
	horizon := ((limit+1)*m.period+m.count-1)/m.count + 1 // longer than a refill from empty
	res := engines.Result{Limit: limit, RetryAfter: -1}
	if !m.fits(m.slots, t, qty) {
		res.Limited = true
		if qty <= limit {
			res.RetryAfter = first(m.t, t, horizon, func(x int64) bool { return m.fits(m.slots, x, qty) }) - t
		}
		qty = 0 // the rest describes the state as it is
	}
	if m.queue {
		slots := m.slots
		if qty > 0 {
			res.Delay = ceilRat(new(big.Rat).Sub(m.firstSlot(slots, t), big.NewRat(t, 1)))
			slots = m.enqueue(slots, t, qty)
		}
		for res.Remaining = limit; !m.fits(slots, t, res.Remaining); res.Remaining-- {
		}
		if len(slots) > 0 {
			end := new(big.Rat).Add(slots[len(slots)-1], m.interval())
			res.ResetAfter = max(0, ceilRat(end.Sub(end, big.NewRat(t, 1))))
		}
		return res
	}
	left := new(big.Rat).Sub(m.level(t), new(big.Rat).SetInt64(qty))
	res.Remaining = new(big.Int).Quo(left.Num(), left.Denom()).Int64()
	gap := new(big.Rat).Sub(new(big.Rat).SetInt64(m.capacity), left) // tokens to refill
	res.ResetAfter = ceilRat(gap.Mul(gap, m.interval()))
	return res
}

func (m *bucketModel) commit(t, qty int64) {
	if m.queue {
		m.slots = m.enqueue(m.slots, t, qty)
		if n := len(m.slots); n > int(m.capacity)+2 {
			m.slots = m.slots[n-int(m.capacity)-2:] // older slots are all past
		}
		return
	}
	m.tokens = new(big.Rat).Sub(m.level(t), new(big.Rat).SetInt64(qty))
	m.last = t
}

// checkEnvelope checks that any interval [t_i, t_j] admits at most burst +
// count*(t_j-t_i)/period units.
func checkEnvelope(t *testing.T, adm []admission, burst, count, period int64) {
	t.Helper()
	for i := range adm {
		var sum int64
		for j := i; j < len(adm); j++ {
			sum += adm[j].q
			if bound := burst + floorDiv(count, adm[j].t-adm[i].t, period); sum > bound {
				t.Fatalf("[%d, %d] admitted %d > %d", adm[i].t, adm[j].t, sum, bound)
			}
		}
	}
}

func FuzzTB(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzTB)
}

func fuzzTB(t *testing.T, a, b, c, base int64, ops []byte) {
	capacity, count, period := 1+fold(a, 20), 1+fold(c, 10), 1+fold(b, 1000)
	if c%2 == 0 {
		period *= 1_000_003
	}
	l := must(engines.NewTB(capacity, count, period))
	m := &bucketModel{t: t, capacity: capacity, count: count, period: period}
	states, adm := drive(t, l, m, capacity, period, baseTime(base), ops)
	replay(t, l, states, period, baseTime(base), capacity, ops)
	checkEnvelope(t, adm, capacity, count, period)
}

func FuzzLB(f *testing.F) {
	addSeeds(f)
	f.Fuzz(fuzzLB)
}

func fuzzLB(t *testing.T, a, b, c, base int64, ops []byte) {
	capacity, count, period := 1+fold(a, 20), 1+fold(c, 10), 1+fold(b, 1000)
	if c%2 == 0 {
		period *= 1_000_003
	}
	l := must(engines.NewLB(capacity, count, period))
	m := &bucketModel{t: t, capacity: capacity, count: count, period: period, queue: true}
	states, adm := drive(t, l, m, capacity+1, period, baseTime(base), ops)
	replay(t, l, states, period, baseTime(base), capacity+1, ops)
	checkEnvelope(t, adm, capacity+1, count, period)
}

// FuzzState feeds arbitrary bytes as a state to every engine: Check and Commit
// return an error or an answer, and never panic.
func FuzzState(f *testing.F) {
	for _, l := range []engines.Limiter{
		must(engines.NewFWC(10, s)), must(engines.NewSWL(10, s)), must(engines.NewSWC(10, s, 4)),
		must(engines.NewTB(10, 1, s)), must(engines.NewLB(10, 1, s)),
	} {
		var state []byte
		for i := range int64(12) { // some are limited: the state stays
			if next, _, err := l.Commit(state, t0+i*100*ms, 1); err == nil {
				state = next
			}
		}
		f.Add(state, int64(t0), int64(1))
		f.Add(state[:len(state)-1], int64(t0), int64(0))
	}
	f.Add([]byte{1, 2, 0, 0, 0, 0, 1, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, int64(math.MinInt64), int64(3))
	f.Fuzz(func(t *testing.T, state []byte, now, qty int64) {
		for _, l := range []engines.Limiter{
			must(engines.NewFWC(10, s)), must(engines.NewSWL(10, s)), must(engines.NewSWC(10, s, 4)),
			must(engines.NewSWC(3, 7, 2)), must(engines.NewTB(10, 3, s)), must(engines.NewLB(10, 3, 7)),
		} {
			l.Check(state, now, qty)
			l.Commit(bytes.Clone(state), now, qty)
		}
	})
}
