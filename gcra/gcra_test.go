package gcra_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
)

// t0 is the fixed instant every timeline starts from (Unix ns, November 2023). Any
// value works; a realistic one exercises the 19-digit TATs redis-cell stores.
const (
	t0 = 1_700_000_000 * 1_000_000_000
	ms = 1_000_000 // ns
	s  = 1_000 * ms
)

// reply is a CL.THROTTLE reply as the client sees it: [limited, limit, remaining,
// retry_after s, reset_after s].
type reply [5]int64

// step is one call of a timeline, in the layout of the reference tables: at is ms
// since t0 (equal values are the same instant, a frozen clock), args are the
// arguments after CL.THROTTLE (key max_burst count period [quantity]).
type step struct {
	at   int64
	args string
	want reply
}

// run replays steps from an empty database. Each key's TAT is carried to the next
// step only when Decide says to store it, exactly as the command layer will.
//
// The mergeable (active-active) CL.THROTTLE replays the same steps as the one
// writer of each key and must give the same replies, storing a state exactly
// when an admission stores a TAT, and full exactly at that TAT.
func run(t *testing.T, steps []step) {
	t.Helper()
	db := map[string]int64{} // missing key reads as tat 0
	merged := map[string][]byte{}
	for i, st := range steps {
		key, burst, count, period, qty := parseArgs(t, i+1, st.args)
		p, err := gcra.NewParams(burst, count, period)
		if err != nil {
			t.Fatalf("step %d (%s): NewParams: %v", i+1, st.args, err)
		}
		now := t0 + st.at*ms
		newTAT, store, res, err := gcra.Decide(db[key], p, now, qty)
		if err != nil {
			t.Fatalf("step %d (%s at %d ms): Decide: %v", i+1, st.args, st.at, err)
		}
		ml, err := mstate.NewGCRA(p)
		if err != nil {
			t.Fatal(err)
		}
		d, err := ml.Decide(merged[key], mstate.Origin{Node: 1}, now, qty, mstate.Exact)
		mres, next, fullAt, write := d.Res, d.Next, d.FullAt, d.Write
		want := engines.Result{Limited: res.Limited, Limit: res.Limit, Remaining: res.Remaining, RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
		if err != nil || mres != want || write != (store && qty > 0) || (write && fullAt != newTAT) {
			t.Errorf("step %d (%s at %d ms): mergeable form got (%+v, write %v, fullAt %d, %v), want (%+v, write %v, fullAt %d)",
				i+1, st.args, st.at, mres, write, fullAt, err, want, store && qty > 0, newTAT)
		}
		if write {
			merged[key] = next
		}
		if store == res.Limited {
			t.Errorf("step %d (%s at %d ms): store = %v with limited = %v", i+1, st.args, st.at, store, res.Limited)
		}
		if store {
			db[key] = newTAT
		}
		got := toReply(res)
		if got != st.want {
			t.Errorf("step %d (%s at %d ms): got %v, want %v", i+1, st.args, st.at, got, st.want)
		}
	}
}

func parseArgs(t *testing.T, n int, args string) (key string, burst, count, period, qty int64) {
	t.Helper()
	f := strings.Fields(args)
	if len(f) != 4 && len(f) != 5 {
		t.Fatalf("step %d: bad args %q", n, args)
	}
	nums := []int64{0, 0, 0, 1} // quantity defaults to 1
	for i, a := range f[1:] {
		v, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			t.Fatalf("step %d: bad args %q: %v", n, args, err)
		}
		nums[i] = v
	}
	return f[0], nums[0], nums[1], nums[2], nums[3]
}

func toReply(r gcra.Result) reply {
	var limited int64
	if r.Limited {
		limited = 1
	}
	return reply{limited, r.Limit, r.Remaining, gcra.Seconds(r.RetryAfter), gcra.Seconds(r.ResetAfter)}
}

// The expected replies below are the column "redis-cell 0.4/0.5" of section 4 of
// shared/reference/redis-cell.md, row by row.

// V01: the README example, first call on an empty key.
func TestDecide_V01_Readme(t *testing.T) {
	run(t, []step{
		{0, "user123 15 30 60", reply{0, 16, 15, -1, 2}},
	})
}

// V02: hourly quota (brandur/redis-cell issue 37).
func TestDecide_V02_HourlyQuota(t *testing.T) {
	run(t, []step{
		{0, "user123 5 5 3600", reply{0, 6, 5, -1, 720}},
	})
}

// V03: max_burst 0, one token per 2 s; waiting retry_after is enough (tests/e2e.rs).
func TestDecide_V03_RetryAfterWait(t *testing.T) {
	run(t, []step{
		{0, "user123 0 1 2 1", reply{0, 1, 0, -1, 2}},
		{10, "user123 0 1 2 1", reply{1, 1, 0, 2, 2}},
		{2010, "user123 0 1 2 1", reply{0, 1, 0, -1, 2}},
	})
}

// V04: redis-cell's own unit test it_rate_limits (limit 5, 1 per second).
func TestDecide_V04_RedisCellUnitTest(t *testing.T) {
	run(t, []step{
		{0, "foo 4 1 1 6", reply{1, 5, 5, -1, 0}}, // quantity > limit: never fits, retry -1
		{0, "foo 4 1 1", reply{0, 5, 4, -1, 1}},
		{0, "foo 4 1 1", reply{0, 5, 3, -1, 2}},
		{0, "foo 4 1 1", reply{0, 5, 2, -1, 3}},
		{0, "foo 4 1 1", reply{0, 5, 1, -1, 4}},
		{0, "foo 4 1 1", reply{0, 5, 0, -1, 5}},
		{0, "foo 4 1 1", reply{1, 5, 0, 1, 5}},
		{3000, "foo 4 1 1 1", reply{0, 5, 2, -1, 3}},
		{3100, "foo 4 1 1 1", reply{0, 5, 1, -1, 4}}, // reset 3.9 s rounds up to 4
		{4000, "foo 4 1 1 1", reply{0, 5, 1, -1, 4}},
		{8000, "foo 4 1 1 1", reply{0, 5, 4, -1, 1}},
		{9500, "foo 4 1 1 1", reply{0, 5, 4, -1, 1}},
		{9500, "foo 4 1 1 0", reply{0, 5, 4, -1, 1}}, // peek
		{9500, "foo 4 1 1 2", reply{0, 5, 2, -1, 3}},
		{9500, "foo 4 1 1 5", reply{1, 5, 2, 3, 3}},
	})
}

// V05: Dragonfly's unit test ClThrottle (1 per 10 s, burst 4), redis-cell rounding.
func TestDecide_V05_DragonflyUnitTest(t *testing.T) {
	run(t, []step{
		{0, "foo 4 1 10 6", reply{1, 5, 5, -1, 0}},
		{0, "foo 4 1 10", reply{0, 5, 4, -1, 10}},
		{0, "foo 4 1 10", reply{0, 5, 3, -1, 20}},
		{0, "foo 4 1 10", reply{0, 5, 2, -1, 30}},
		{0, "foo 4 1 10", reply{0, 5, 1, -1, 40}},
		{0, "foo 4 1 10", reply{0, 5, 0, -1, 50}},
		{0, "foo 4 1 10", reply{1, 5, 0, 10, 50}},
		{30000, "foo 4 1 10 1", reply{0, 5, 2, -1, 30}},
		{31000, "foo 4 1 10 1", reply{0, 5, 1, -1, 39}},
		{40000, "foo 4 1 10 1", reply{0, 5, 1, -1, 40}},
		{80000, "foo 4 1 10 1", reply{0, 5, 4, -1, 10}},
		{95000, "foo 4 1 10 1", reply{0, 5, 4, -1, 10}},
		{95000, "foo 4 1 10 0", reply{0, 5, 4, -1, 10}}, // peek
		{95000, "foo 4 1 10 2", reply{0, 5, 2, -1, 30}},
		{95000, "foo 4 1 10 5", reply{1, 5, 2, 30, 30}},
		{95000, "bar 4 500000 1 2", reply{0, 5, 3, -1, 0}}, // T = 2 µs: reset is 4 µs, below 1 ms
	})
}

// Rows derived from the formula (not from the reference tables): peeks, a quantity
// larger than the limit, the sub-millisecond retry_after 0 quirk, and time going
// backwards.
func TestDecide_Timeline(t *testing.T) {
	t.Run("PeekEmptyKey", func(t *testing.T) {
		run(t, []step{
			// A peek on a missing key is allowed and stores now (TTL 0): the bucket
			// stays full, and a later peek sees the same.
			{0, "p 4 1 1 0", reply{0, 5, 5, -1, 0}},
			{0, "p 4 1 1 0", reply{0, 5, 5, -1, 0}},
			{0, "p 4 1 1 5", reply{0, 5, 0, -1, 5}},
			{0, "p 4 1 1 0", reply{0, 5, 0, -1, 5}}, // allowed: new_tat == now + tau
			{500, "p 4 1 1 0", reply{0, 5, 0, -1, 5}},
			{1000, "p 4 1 1 0", reply{0, 5, 1, -1, 4}},
		})
	})
	t.Run("QuantityAboveLimit", func(t *testing.T) {
		run(t, []step{
			// inc = 4 s > tau = 2 s: limited with retry -1 even on a full bucket,
			// and nothing is written, so the next call still sees a full bucket.
			{0, "q 0 1 2 2", reply{1, 1, 1, -1, 0}},
			{0, "q 0 1 2 1", reply{0, 1, 0, -1, 2}},
			{0, "q 0 1 2 2", reply{1, 1, 0, -1, 2}},
		})
	})
	t.Run("RetryAfterZero", func(t *testing.T) {
		run(t, []step{
			// T = 0.5 ms: limited, yet retry_after rounds to 0 because less than
			// one whole millisecond is left (reference section 2.1, V18).
			{0, "f 0 2000 1", reply{0, 1, 0, -1, 0}},
			{0, "f 0 2000 1", reply{1, 1, 0, 0, 0}},
			{1, "f 0 2000 1", reply{0, 1, 0, -1, 0}},
		})
	})
	t.Run("TimeGoesBackwards", func(t *testing.T) {
		run(t, []step{
			{0, "k 4 1 1 5", reply{0, 5, 0, -1, 5}},
			{3000, "k 4 1 1", reply{0, 5, 2, -1, 3}},
			// 2 s back: the stored TAT (t0+6 s) is kept, so the bucket looks
			// fuller, never emptier, than at 3000 ms.
			{1000, "k 4 1 1", reply{1, 5, 0, 1, 5}},
			{1000, "k 4 1 1 0", reply{0, 5, 0, -1, 5}},
			// Back at 3000 ms: one fewer than step 2 said, since step 2 used it.
			{3000, "k 4 1 1", reply{0, 5, 1, -1, 4}},
		})
	})
}

// TestDecide_TimeGoesBackwards is the regression test for golang/go issue 71360
// ("x/time/rate: Rate limit can be exceeded 5000x under high lock contention due to bug
// in advance"): x/time/rate rewinds its "last" time when handed an earlier now, so
// alternating stale and fresh timestamps mints tokens. Here the state is one absolute
// TAT and Decide uses max(tat, now), so however now jumps around, the number of
// allowed units over a span of time never exceeds Limit + span/T.
func TestDecide_TimeGoesBackwards(t *testing.T) {
	p, err := gcra.NewParams(4, 10, 1) // limit 5, T = 100 ms
	if err != nil {
		t.Fatal(err)
	}
	var tat, allowed int64
	minNow, maxNow := int64(math.MaxInt64), int64(math.MinInt64)
	// The fresh clock moves 10 ms per round; every other call comes from a goroutine
	// still holding a timestamp 1 s old, as under lock contention.
	for i := int64(0); i < 2000; i++ {
		now := t0 + i*5*ms
		if i%2 == 1 {
			now -= s
		}
		minNow, maxNow = min(minNow, now), max(maxNow, now)
		newTAT, store, res, err := gcra.Decide(tat, p, now, 1)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if store {
			if newTAT < tat {
				t.Fatalf("call %d: stored TAT moved backwards: got %d, had %d", i, newTAT, tat)
			}
			tat = newTAT
			allowed++
		}
		if !res.Limited && res.RetryAfter != -1 {
			t.Fatalf("call %d: allowed with RetryAfter %d", i, res.RetryAfter)
		}
	}
	span := maxNow - minNow
	if bound := p.Limit() + span/p.Interval; allowed > bound {
		t.Errorf("allowed %d units over %d ms, want at most %d", allowed, span/ms, bound)
	}
	if allowed == 0 {
		t.Errorf("allowed nothing")
	}
}

func TestNewParams(t *testing.T) {
	const maxInt = math.MaxInt64
	tests := []struct {
		name                  string
		burst, count, period  int64
		wantBurst, wantInterv int64
		wantErr               error
	}{
		{"readme", 15, 30, 60, 15, 2 * s, nil},
		{"burst 0", 0, 1, 2, 0, 2 * s, nil},
		{"T floors", 0, 3, 2, 0, 666_666_666, nil},
		// redis-cell's f64 gives 33333333333333332 here (reference section 3).
		{"T exact for long periods", 0, 3, 100_000_000, 0, 33_333_333_333_333_333, nil},
		{"T = 1 ns", 1, 1_000_000_000, 1, 1, 1, nil},
		{"largest period", 0, 1, 9_223_372_036, 0, 9_223_372_036 * s, nil},
		{"largest burst at 1 s", 9_223_372_035, 1, 1, 9_223_372_035, s, nil},
		{"largest tau", maxInt - 1, 1_000_000_000, 1, maxInt - 1, 1, nil},

		// Zero rates: T = period*1e9/count truncates to 0.
		{"count 0", 10, 0, 1, 0, 0, gcra.ErrZeroRate},
		{"period 0", 10, 1, 0, 0, 0, gcra.ErrZeroRate},
		{"count and period 0", 0, 0, 0, 0, 0, gcra.ErrZeroRate},
		{"count > period*1e9", 1, 2_000_000_000, 1, 0, 0, gcra.ErrZeroRate},
		{"count = period*1e9 + 1", 1, 1_000_000_001, 1, 0, 0, gcra.ErrZeroRate},
		{"count max", 1, maxInt, 9_223_372_036, 0, 0, gcra.ErrZeroRate},

		// Negatives are checked first.
		{"negative burst", -1, 1, 1, 0, 0, gcra.ErrNegative},
		{"negative count", 1, -1, 1, 0, 0, gcra.ErrNegative},
		{"negative period", 1, 1, -1, 0, 0, gcra.ErrNegative},
		{"negative wins over zero rate", -1, 0, 0, 0, 0, gcra.ErrNegative},
		{"negative wins over overflow", math.MinInt64, 1, maxInt, 0, 0, gcra.ErrNegative},

		// Overflow of period*1e9, checked before the zero rate.
		{"period*1e9 overflows", 0, 1, 9_223_372_037, 0, 0, gcra.ErrOverflow},
		{"period*1e9 overflow wins over zero rate", 0, 0, maxInt, 0, 0, gcra.ErrOverflow},

		// Overflow of Burst+1 and of tau = T*(Burst+1), checked after the zero rate.
		{"V28 tau overflows", 9_223_372_036, 1, 1, 0, 0, gcra.ErrOverflow},
		{"tau overflows at the largest period", 1, 1, 9_223_372_036, 0, 0, gcra.ErrOverflow},
		{"burst+1 overflows", maxInt, 1_000_000_000, 1, 0, 0, gcra.ErrOverflow},
		{"zero rate wins over burst+1", maxInt, 0, 1, 0, 0, gcra.ErrZeroRate},
		{"zero rate wins over tau", 9_223_372_036, 2_000_000_000, 1, 0, 0, gcra.ErrZeroRate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := gcra.NewParams(tt.burst, tt.count, tt.period)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewParams(%d, %d, %d): got error %v, want %v", tt.burst, tt.count, tt.period, err, tt.wantErr)
			}
			if err != nil {
				if p != (gcra.Params{}) {
					t.Errorf("got %+v with error, want zero Params", p)
				}
				return
			}
			want := gcra.Params{Burst: tt.wantBurst, Interval: tt.wantInterv}
			if p != want {
				t.Errorf("NewParams(%d, %d, %d): got %+v, want %+v", tt.burst, tt.count, tt.period, p, want)
			}
			if p.Limit() != tt.wantBurst+1 {
				t.Errorf("Limit: got %d, want %d", p.Limit(), tt.wantBurst+1)
			}
		})
	}
}

func TestDecide_Errors(t *testing.T) {
	const maxInt = math.MaxInt64
	readme := gcra.Params{Burst: 15, Interval: 2 * s}
	tests := []struct {
		name    string
		tat     int64
		p       gcra.Params
		now     int64
		qty     int64
		wantErr error
	}{
		{"negative quantity", 0, readme, t0, -1, gcra.ErrNegative},
		{"min quantity", 0, readme, t0, math.MinInt64, gcra.ErrNegative},
		{"T*quantity overflows", 0, readme, t0, maxInt/(2*s) + 1, gcra.ErrOverflow},
		{"huge stored tat", maxInt - 10, readme, t0, 1, gcra.ErrOverflow},
		{"huge now", 0, readme, maxInt - s, 1, gcra.ErrOverflow},
		{"new_tat - now overflows", 0, readme, math.MinInt64, 1, gcra.ErrOverflow},
		{"wait overflows with a huge stored tat", maxInt - 2*s, readme, -1, 1, gcra.ErrOverflow},

		// Hand-built Params are checked too: Decide must never divide by zero.
		{"zero Params", 0, gcra.Params{}, t0, 1, gcra.ErrZeroRate},
		{"negative interval", 0, gcra.Params{Burst: 1, Interval: -1}, t0, 1, gcra.ErrNegative},
		{"negative burst", 0, gcra.Params{Burst: -1, Interval: 1}, t0, 1, gcra.ErrNegative},
		{"burst+1 overflows", 0, gcra.Params{Burst: maxInt, Interval: 1}, t0, 1, gcra.ErrOverflow},
		{"tau overflows", 0, gcra.Params{Burst: 9_223_372_036, Interval: s}, t0, 1, gcra.ErrOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newTAT, store, res, err := gcra.Decide(tt.tat, tt.p, tt.now, tt.qty)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v, want %v", err, tt.wantErr)
			}
			if store || newTAT != tt.tat || res != (gcra.Result{}) {
				t.Errorf("got (%d, %v, %+v) with error, want (%d, false, zero Result)", newTAT, store, res, tt.tat)
			}
		})
	}
}

// A huge stored TAT is fine as long as nothing overflows: a peek just reports the
// key as limited (only a reconfiguration or a bogus SET can cause this, V19).
func TestDecide_HugeTATPeek(t *testing.T) {
	p := gcra.Params{Burst: 15, Interval: 2 * s}
	tat := int64(math.MaxInt64 - 10)
	newTAT, store, res, err := gcra.Decide(tat, p, t0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := gcra.Result{Limited: true, Limit: 16, Remaining: 0, RetryAfter: tat - t0 - 32*s, ResetAfter: tat - t0}
	if store || newTAT != tat || res != want {
		t.Errorf("got (%d, %v, %+v), want (%d, false, %+v)", newTAT, store, res, tat, want)
	}
}

// The largest valid tau: remaining is computed without overflow and equals the limit.
func TestDecide_LargestTau(t *testing.T) {
	p, err := gcra.NewParams(math.MaxInt64-1, 1_000_000_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, store, res, err := gcra.Decide(0, p, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := gcra.Result{Limit: math.MaxInt64, Remaining: math.MaxInt64, RetryAfter: -1}
	if !store || res != want {
		t.Errorf("got (%v, %+v), want (true, %+v)", store, res, want)
	}
}

func TestSeconds(t *testing.T) {
	// Reference section 2.1, row "redis-cell 0.4.0, 0.5.0, master", plus edges.
	tests := []struct{ d, want int64 }{
		{-1, -1},
		{math.MinInt64, -1},
		{0, 0},
		{400 * 1000, 0},        // 0.0004 s
		{ms - 1, 0},            // 0.000999999 s
		{ms, 1},                // 0.001 s
		{500 * ms, 1},          // 0.5 s
		{s, 1},                 // 1.000 s
		{s + 400*1000, 1},      // 1.0004 s
		{s + ms - 1, 1},        // 1.000999999 s
		{s + ms, 2},            // 1.001 s
		{2*s + 999_900_000, 3}, // 2.9999 s
		{2 * s, 2},
		{720 * s, 720},
		{math.MaxInt64, 9_223_372_037},
	}
	for _, tt := range tests {
		if got := gcra.Seconds(tt.d); got != tt.want {
			t.Errorf("Seconds(%d): got %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestTTL(t *testing.T) {
	tests := []struct {
		name        string
		newTAT, now int64
		want        int64
	}{
		{"V01 PTTL", t0 + 2*s, t0, 2000},
		{"V02 PTTL", t0 + 720*s, t0, 720_000},
		{"floor to ms", t0 + 3*ms + 999_999, t0, 3},
		{"peek on missing key", t0, t0, 0},
		{"sub-ms (V05 bar)", t0 + 4000, t0, 0},
		{"past", t0 - s, t0, 0},
		{"full int64 span", math.MaxInt64, math.MinInt64, 18_446_744_073_709},
	}
	for _, tt := range tests {
		if got := gcra.TTL(tt.newTAT, tt.now); got != tt.want {
			t.Errorf("%s: TTL(%d, %d): got %d, want %d", tt.name, tt.newTAT, tt.now, got, tt.want)
		}
	}
	// The README call: the key's lifetime is the reset_after duration, truncated.
	p, _ := gcra.NewParams(15, 30, 60)
	newTAT, _, res, _ := gcra.Decide(0, p, t0, 1)
	if got, want := gcra.TTL(newTAT, t0), res.ResetAfter/ms; got != want {
		t.Errorf("README call: got TTL %d ms, want %d", got, want)
	}
}

// Decide is on the hot path of every command: it must not allocate.
func TestDecide_NoAllocs(t *testing.T) {
	p, _ := gcra.NewParams(15, 30, 60)
	var tat int64
	now := int64(t0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += ms
		newTAT, store, _, _ := gcra.Decide(tat, p, now, 1)
		if store {
			tat = newTAT
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocs per Decide, want 0", allocs)
	}
}

func BenchmarkDecide(b *testing.B) {
	p, err := gcra.NewParams(15, 30, 60)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var tat int64
	now := int64(t0)
	for b.Loop() {
		now += 100 * ms // mixes allowed and limited calls
		newTAT, store, _, err := gcra.Decide(tat, p, now, 1)
		if err != nil {
			b.Fatal(err)
		}
		if store {
			tat = newTAT
		}
	}
}

// Validate refuses exactly what Decide refuses for the parameters.
func TestParams_Validate(t *testing.T) {
	for _, p := range []gcra.Params{
		{Burst: 15, Interval: 2 * s},
		{},
		{Burst: -1, Interval: 1},
		{Burst: 1, Interval: -1},
		{Burst: math.MaxInt64, Interval: 1},
		{Burst: 9_223_372_036, Interval: s},
	} {
		_, _, _, want := gcra.Decide(0, p, t0, 0)
		if got := p.Validate(); !errors.Is(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%+v: Validate() = %v, Decide says %v", p, got, want)
		}
	}
}
