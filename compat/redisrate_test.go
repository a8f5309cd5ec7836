package compat

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
)

// These tests drive github.com/go-redis/redis_rate v10 against a node the
// way its users do: a Limiter on a go-redis client, Allow/AllowN/AllowAtMost
// on a key, Reset. Its scripts read TIME, which inside a script is the
// command's clock, so on the debug clock every reply is exact: each scenario
// is a timeline of calls with the whole Result they must give. The scripts
// compute in floats (PerSecond(10)'s interval is 0.1 s), so some values carry
// rounding; TestRedisRate_Reference proves the table is what redis-server
// 7.0.15 answers for the same calls at the same instants.

// rrStep is one call of a redis_rate timeline.
type rrStep struct {
	advance time.Duration // the clock moves forward by this before the call
	call    string        // "allow" (AllowN), "atMost" (AllowAtMost) or "reset"
	n       int
	want    rrResult
}

// rrResult is the part of redis_rate.Result a call decides.
type rrResult struct {
	allowed, remaining     int
	retryAfter, resetAfter time.Duration
}

// rrScenario is one key's timeline and the key as the last call leaves it.
type rrScenario struct {
	name  string
	key   string // without redis_rate's "rate:" prefix
	limit redis_rate.Limit
	steps []rrStep
	// wantGet is the stored TAT (seconds since 2017-01-01 as Lua's number,
	// formatted with %.17g by redis.call) and wantPTTL its expiry.
	wantGet  string
	wantPTTL time.Duration
	// scripts is how many distinct scripts the timeline runs: each is sent
	// with EVAL once (after EVALSHA's NOSCRIPT) and then only with EVALSHA.
	scripts int
}

// denied is a Result with nothing allowed.
func rrDenied(retry, reset time.Duration) rrResult {
	return rrResult{allowed: 0, remaining: 0, retryAfter: retry, resetAfter: reset}
}

var rrScenarios = []rrScenario{
	{
		// The README's example: 10 per second with a burst of 10. The
		// interval is 0.1 s, which floats cannot hold, so the durations
		// carry rounding (99999994 ns, not 100 ms), as on Redis.
		name:  "PerSecond",
		key:   "project:123",
		limit: redis_rate.PerSecond(10),
		steps: []rrStep{
			{0, "allow", 1, rrResult{1, 9, -1, 99999994}},
			{0, "allow", 1, rrResult{1, 8, -1, 199999988}},
			{0, "allow", 1, rrResult{1, 7, -1, 299999982}},
			{0, "allow", 1, rrResult{1, 6, -1, 399999976}},
			{0, "allow", 1, rrResult{1, 5, -1, 499999970}},
			{0, "allow", 1, rrResult{1, 4, -1, 599999964}},
			{0, "allow", 1, rrResult{1, 3, -1, 699999958}},
			{0, "allow", 1, rrResult{1, 2, -1, 799999952}},
			{0, "allow", 1, rrResult{1, 1, -1, 899999946}},
			{0, "allow", 1, rrResult{1, 0, -1, 999999940}},
			{0, "allow", 1, rrDenied(99999934, 999999940)},
			{100 * time.Millisecond, "allow", 1, rrResult{1, 0, -1, 999999940}},
			{50 * time.Millisecond, "allow", 1, rrDenied(49999922, 949999928)},
			{time.Second, "allow", 1, rrResult{1, 9, -1, 99999994}},
			{0, "allow", 3, rrResult{3, 5, -1, 400000005}},
		},
		wantGet:  "216771201.55000001",
		wantPTTL: time.Second,
		scripts:  1,
	},
	{
		// The same limit three years later (2027-01-15), as clients.md
		// section 4 saw on Redis: past 2^28 s since 2017 the floats are
		// coarser, diff/interval comes out as 8.99999976, and the reply
		// truncates it to 8 where redis_rate's own test wants 9.
		name:  "PerSecondIn2027",
		key:   "project:456",
		limit: redis_rate.PerSecond(10),
		steps: []rrStep{
			{100_000_000 * time.Second, "allow", 1, rrResult{1, 8, -1, 100000023}},
			{0, "allow", 4, rrResult{4, 5, -1, 500000000}},
			// 123.456 ms later 6.23 units are free; AllowAtMost takes them
			// all (the TAT moves by 6.23 intervals) and reports 6.
			{123456789, "atMost", 9, rrResult{6, 0, -1, time.Second}},
			{0, "allow", 1, rrDenied(100000023, time.Second)},
			{333333, "allow", 1, rrDenied(99665999, 999665975)},
		},
		wantGet:  "316771201.123456",
		wantPTTL: time.Second,
		scripts:  2,
	},
	{
		// An interval of 0.25 s keeps every value exact in binary floats.
		name:  "Exact",
		key:   "exact",
		limit: redis_rate.Limit{Rate: 4, Burst: 2, Period: time.Second},
		steps: []rrStep{
			{0, "allow", 1, rrResult{1, 1, -1, 250 * time.Millisecond}},
			// 3 more would need the TAT 0.5 s past the burst: refused,
			// and nothing taken.
			{0, "allow", 3, rrDenied(500*time.Millisecond, 250*time.Millisecond)},
			// AllowAtMost takes what is left: 1 of 3.
			{0, "atMost", 3, rrResult{1, 0, -1, 500 * time.Millisecond}},
			{0, "allow", 1, rrDenied(250*time.Millisecond, 500*time.Millisecond)},
			{0, "atMost", 1, rrDenied(250*time.Millisecond, 500*time.Millisecond)},
			{250 * time.Millisecond, "allow", 1, rrResult{1, 0, -1, 500 * time.Millisecond}},
			// Cost 0 answers "allowed 0" and rewrites the same TAT.
			{0, "allow", 0, rrResult{0, 0, -1, 500 * time.Millisecond}},
			{2 * time.Second, "allow", 2, rrResult{2, 0, -1, 500 * time.Millisecond}},
			// Reset deletes the key: the burst is whole again.
			{0, "reset", 0, rrResult{}},
			{0, "allow", 1, rrResult{1, 1, -1, 250 * time.Millisecond}},
			{125 * time.Millisecond, "atMost", 5, rrResult{1, 0, -1, 500 * time.Millisecond}},
		},
		wantGet:  "216771202.875",
		wantPTTL: time.Second,
		scripts:  2,
	},
	{
		// 3 per minute: whole seconds, exact, and a TTL of a minute.
		name:  "PerMinute",
		key:   "user:7",
		limit: redis_rate.PerMinute(3),
		steps: []rrStep{
			{0, "allow", 1, rrResult{1, 2, -1, 20 * time.Second}},
			{0, "allow", 1, rrResult{1, 1, -1, 40 * time.Second}},
			{0, "allow", 1, rrResult{1, 0, -1, 60 * time.Second}},
			{0, "allow", 1, rrDenied(20*time.Second, 60*time.Second)},
			{19 * time.Second, "allow", 1, rrDenied(time.Second, 41*time.Second)},
			{time.Second, "allow", 1, rrResult{1, 0, -1, 60 * time.Second}},
			{time.Minute, "atMost", 5, rrResult{3, 0, -1, 60 * time.Second}},
			{30 * time.Second, "allow", 2, rrDenied(10*time.Second, 30*time.Second)},
			{0, "atMost", 2, rrResult{1, 0, -1, 60 * time.Second}},
		},
		wantGet:  "216771370",
		wantPTTL: 60 * time.Second,
		scripts:  2,
	},
}

// rrRun runs steps on limiter; advance moves the clock the scripts read.
func rrRun(ctx context.Context, t *testing.T, limiter *redis_rate.Limiter, advance func(time.Duration), sc rrScenario) {
	t.Helper()
	for i, st := range sc.steps {
		if st.advance > 0 {
			advance(st.advance)
		}
		var (
			res *redis_rate.Result
			err error
		)
		switch st.call {
		case "allow":
			res, err = limiter.AllowN(ctx, sc.key, sc.limit, st.n)
		case "atMost":
			res, err = limiter.AllowAtMost(ctx, sc.key, sc.limit, st.n)
		case "reset":
			if err := limiter.Reset(ctx, sc.key); err != nil {
				t.Fatalf("step %d: Reset: %v", i, err)
			}
			continue
		default:
			t.Fatalf("step %d: unknown call %q", i, st.call)
		}
		if err != nil {
			t.Fatalf("step %d: %s %d: %v", i, st.call, st.n, err)
		}
		if res.Limit != sc.limit {
			t.Fatalf("step %d: Limit = %v, want %v", i, res.Limit, sc.limit)
		}
		got := rrResult{res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter}
		if got != st.want {
			t.Fatalf("step %d: %s %d: got %+v, want %+v", i, st.call, st.n, got, st.want)
		}
	}
}

// TestRedisRate runs the timelines through a go-redis Client over RESP3 and
// RESP2 and through a one-shard Ring (as redis_rate's own tests connect),
// each on a fresh node, and checks the key the scripts leave and that each
// script went out once with EVAL and then with EVALSHA only.
func TestRedisRate(t *testing.T) {
	clients := []struct {
		name  string
		proto int
		ring  bool
	}{{"RESP3", 3, false}, {"RESP2", 2, false}, {"Ring", 3, true}}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range rrScenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					e := e2eNewGoRedisEnv(t, cl.proto, server.Config{})
					var c redis.UniversalClient = e.c
					if cl.ring {
						r := redis.NewRing(&redis.RingOptions{
							Addrs:       map[string]string{"server0": e.node.Addr()},
							DialTimeout: e2eIOWait,
							ReadTimeout: e2eIOWait,
							MaxRetries:  -1,
						})
						t.Cleanup(func() { r.Close() })
						c = r
					}
					if err := c.FlushDB(e.ctx).Err(); err != nil {
						t.Fatalf("FLUSHDB: %v", err)
					}
					rrRun(e.ctx, t, redis_rate.NewLimiter(c), func(d time.Duration) { e.advance(t, d) }, sc)

					key := "rate:" + sc.key
					e2eEq(t, "GET "+key, e2eVal(t, e.c.Get(e.ctx, key)), sc.wantGet)
					e2eEq(t, "PTTL "+key, e2eVal(t, e.c.PTTL(e.ctx, key)), sc.wantPTTL)
					stats := e2eVal(t, e.c.Info(e.ctx, "commandstats"))
					calls := func(cmd string) int {
						m := regexp.MustCompile(`(?m)^cmdstat_` + cmd + `:calls=(\d+),`).FindStringSubmatch(stats)
						if m == nil {
							return 0
						}
						n, _ := strconv.Atoi(m[1])
						return n
					}
					var scripted int
					for _, st := range sc.steps {
						if st.call != "reset" {
							scripted++
						}
					}
					e2eEq(t, "EVAL calls", calls("eval"), sc.scripts)
					e2eEq(t, "EVALSHA calls", calls("evalsha"), scripted)
				})
			}
		})
	}
}

// TestRedisRate_Concurrent has 20 goroutines share one limiter of 10 per
// minute (burst 10) at one frozen instant: exactly 10 calls are allowed,
// whatever the interleaving, because each script runs atomically.
func TestRedisRate_Concurrent(t *testing.T) {
	e := e2eNewGoRedisEnv(t, 3, server.Config{})
	limiter := redis_rate.NewLimiter(e.c)
	limit := redis_rate.PerMinute(10)
	const callers = 20
	allowed := make(chan int, callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			res, err := limiter.Allow(e.ctx, "shared", limit)
			if err != nil {
				errs <- err
				return
			}
			allowed <- res.Allowed
		}()
	}
	total := 0
	for range callers {
		select {
		case err := <-errs:
			t.Fatalf("Allow: %v", err)
		case n := <-allowed:
			total += n
		}
	}
	e2eEq(t, "allowed calls", total, 10)
	res, err := limiter.Allow(e.ctx, "shared", limit)
	if err != nil {
		t.Fatal(err)
	}
	e2eEq(t, "after the burst", rrResult{res.Allowed, res.Remaining, res.RetryAfter, res.ResetAfter},
		rrDenied(6*time.Second, time.Minute))
}

// rrAllowNSHA is the SHA1 of redis_rate's allowN script, which Redis names
// in the errors the script raises.
const rrAllowNSHA = "f52a5b566060d79fd321d695df55bc918339c4aa"

// TestRedisRate_Errors checks what a redis_rate user sees when things go
// wrong, with the texts redis-server 7.0.15 gives for the same calls (none
// of these depend on the time, so they were compared with the unchanged
// scripts on redis-server).
func TestRedisRate_Errors(t *testing.T) {
	e := e2eNewGoRedisEnv(t, 3, server.Config{})
	limiter := redis_rate.NewLimiter(e.c)

	// A key of another type: redis.call("GET") raises WRONGTYPE.
	if err := e.c.Do(e.ctx, "TB.THROTTLE", "rate:tb", 5, 1, 1).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := limiter.Allow(e.ctx, "tb", redis_rate.PerSecond(10))
	e2eWantRedisErr(t, "Allow on a TB key", err,
		"WRONGTYPE Operation against a key holding the wrong kind of value script: "+rrAllowNSHA+", on @user_script:26.")
	e2eEq(t, "TYPE rate:tb", e2eVal(t, e.c.Type(e.ctx, "rate:tb")), "tb")

	// A rate of 0 with a burst: the interval is inf, the script's
	// SET ... EX math.ceil(inf) is refused.
	_, err = limiter.Allow(e.ctx, "zero", redis_rate.Limit{Burst: 5, Period: time.Second})
	e2eWantRedisErr(t, "Allow with rate 0", err,
		"ERR value is not an integer or out of range script: "+rrAllowNSHA+", on @user_script:55.")
	e2eEq(t, "EXISTS rate:zero", e2eVal(t, e.c.Exists(e.ctx, "rate:zero")), int64(0))

	// The zero Limit: every value is nan, which tostring prints as Redis'
	// C library does, "-nan", and redis_rate cannot parse.
	for _, call := range []func() error{
		func() error { _, err := limiter.Allow(e.ctx, "nan", redis_rate.Limit{}); return err },
		func() error { _, err := limiter.AllowAtMost(e.ctx, "nan", redis_rate.Limit{}, 1); return err },
	} {
		err := call()
		if err == nil || err.Error() != `strconv.ParseFloat: parsing "-nan": invalid syntax` {
			t.Fatalf("zero Limit: got %v, want redis_rate's parse error of \"-nan\"", err)
		}
	}

	// A string that is not a number: tonumber gives nil and math.max
	// raises. The message inside Redis' frame is gopher-lua's ("to max";
	// Lua 5.1 says "to 'max'"), a difference scripting/doc.go lists.
	if err := e.c.Set(e.ctx, "rate:text", "abc", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = limiter.Allow(e.ctx, "text", redis_rate.PerSecond(1))
	var rerr redis.Error
	if !errors.As(err, &rerr) ||
		!strings.HasPrefix(err.Error(), "ERR user_script:34: bad argument #1 to ") ||
		!strings.HasSuffix(err.Error(), "(number expected, got nil) script: "+rrAllowNSHA+", on @user_script:34.") {
		t.Fatalf("Allow on a text key: got %v", err)
	}
	e2eEq(t, "GET rate:text", e2eVal(t, e.c.Get(e.ctx, "rate:text")), "abc")
}

// rrTimeCall is how redis_rate's scripts read the clock.
const rrTimeCall = `redis.call("TIME")`

// rrReference is a redis_rate backend on a real redis-server whose scripts
// see a simulated clock: Eval replaces the scripts' TIME call with the
// simulated time. EVALSHA of the unchanged script always answers NOSCRIPT
// there, so every call goes through Script.Run's EVAL fallback.
type rrReference struct {
	*redis.Client
	now int64 // Unix ns
}

func (r *rrReference) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if !strings.Contains(script, rrTimeCall) {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("reference: the script does not read %s", rrTimeCall))
		return cmd
	}
	now := fmt.Sprintf(`{"%d","%d"}`, r.now/1e9, r.now%1e9/1e3)
	return r.Client.Eval(ctx, strings.ReplaceAll(script, rrTimeCall, now), keys, args...)
}

// TestRedisRate_Reference replays the timelines on a real redis-server with
// the scripts' TIME replaced by the same simulated clock, and checks that it
// gives the very Results (and stored TATs) the table holds. Skipped when
// redis-server is not installed.
func TestRedisRate_Reference(t *testing.T) {
	addr := startRedis(t, "")
	for _, sc := range rrScenarios {
		t.Run(sc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
			defer cancel()
			c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: e2eIOWait, ReadTimeout: e2eIOWait, MaxRetries: -1})
			defer c.Close()
			ref := &rrReference{Client: c, now: e2eClockStart}
			if err := c.Del(ctx, "rate:"+sc.key).Err(); err != nil {
				t.Fatal(err)
			}
			rrRun(ctx, t, redis_rate.NewLimiter(ref), func(d time.Duration) { ref.now += int64(d) }, sc)
			e2eEq(t, "GET", e2eVal(t, c.Get(ctx, "rate:"+sc.key)), sc.wantGet)
		})
	}
}
