package compat

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/throttled/throttled/v2/store/storetest"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// These tests drive github.com/throttled/throttled v2 through its go-redis
// v9 store (store/goredisstore.v9), the way its users do: a GCRA rate
// limiter on the store, and the HTTP middleware on top. The store reads the
// server's TIME (pipelined with GET), so on the debug clock the limiter's
// decisions, remaining counts and retry/reset durations are exact. Its
// writes are SET NX + EXPIRE and a plain EVAL of a compare-and-swap script.

// tsPrefix is the key prefix of the store, as in the store's own example.
const tsPrefix = "throttled:"

// tsProtos are the protocols go-redis is run with: its default (HELLO 3)
// and RESP2.
var tsProtos = []int{3, 2}

// tsNewStore returns a store on c with the prefix tsPrefix.
func tsNewStore(t *testing.T, c redis.UniversalClient) *goredisstore.GoRedisStore {
	t.Helper()
	st, err := goredisstore.NewCtx(c, tsPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestThrottledStore_Conformance runs the store's own conformance suite,
// storetest.TestGCRAStoreCtx, as throttled/throttled runs it against Redis.
// The suite checks that GetWithTime's time lies between the wall-clock
// instants before and after the call, so this node runs on the real clock.
// (Its TTL suite sleeps a second; TestThrottledStore_TTL covers the same on
// the debug clock.)
func TestThrottledStore_Conformance(t *testing.T) {
	for _, proto := range tsProtos {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			n := servertest.Start(t, server.Config{})
			c := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: proto, DialTimeout: e2eIOWait, ReadTimeout: e2eIOWait, MaxRetries: -1})
			t.Cleanup(func() { c.Close() })
			storetest.TestGCRAStoreCtx(t, tsNewStore(t, c))
			keys, err := c.Keys(t.Context(), tsPrefix+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			e2eEq(t, "keys left", len(keys), 2) // foo and bar; baz never existed
		})
	}
}

// TestThrottledStore_TTL is storetest.TestGCRAStoreTTLCtx on the debug clock,
// with the TTLs the store sets checked to the millisecond.
func TestThrottledStore_TTL(t *testing.T) {
	for _, proto := range tsProtos {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			e := e2eNewGoRedisEnv(t, proto, server.Config{})
			ctx, st := e.ctx, tsNewStore(t, e.c)

			get := func(key string) (int64, time.Time) {
				t.Helper()
				v, now, err := st.GetWithTime(ctx, key)
				if err != nil {
					t.Fatalf("GetWithTime %s: %v", key, err)
				}
				return v, now
			}
			pttl := func(key string) time.Duration {
				t.Helper()
				return e2eVal(t, e.c.PTTL(ctx, tsPrefix+key))
			}

			// GetWithTime's time is the server's TIME: the debug clock.
			v, now := get("ttl")
			e2eEq(t, "missing key", v, int64(-1))
			e2eEq(t, "GetWithTime's time", now.UnixNano(), e2eClockStart)

			set, err := st.SetIfNotExistsWithTTL(ctx, "ttl", 1, time.Second)
			if err != nil || !set {
				t.Fatalf("SetIfNotExistsWithTTL: %v, %v", set, err)
			}
			e2eEq(t, "PTTL after SetIfNotExistsWithTTL 1s", pttl("ttl"), time.Second)
			e.advance(t, 999*time.Millisecond)
			v, now = get("ttl")
			e2eEq(t, "value at 999 ms", v, int64(1))
			e2eEq(t, "time at 999 ms", now.UnixNano(), e2eClockStart+int64(999*time.Millisecond))
			e.advance(t, 2*time.Millisecond)
			v, _ = get("ttl")
			e2eEq(t, "value after the TTL", v, int64(-1))

			// A TTL under a second is raised to one second by both writes.
			if set, err := st.SetIfNotExistsWithTTL(ctx, "short", 5, 0); err != nil || !set {
				t.Fatalf("SetIfNotExistsWithTTL: %v, %v", set, err)
			}
			e2eEq(t, "PTTL after a 0 TTL", pttl("short"), time.Second)
			if ok, err := st.CompareAndSwapWithTTL(ctx, "short", 5, 6, 10*time.Millisecond); err != nil || !ok {
				t.Fatalf("CompareAndSwapWithTTL: %v, %v", ok, err)
			}
			e2eEq(t, "PTTL after a 10 ms CAS", pttl("short"), time.Second)
			// The CAS script's SETEX takes whole seconds, rounded down.
			if ok, err := st.CompareAndSwapWithTTL(ctx, "short", 6, 7, 2500*time.Millisecond); err != nil || !ok {
				t.Fatalf("CompareAndSwapWithTTL: %v, %v", ok, err)
			}
			e2eEq(t, "PTTL after a 2.5 s CAS", pttl("short"), 2*time.Second)
			// A CAS that does not match changes neither value nor TTL.
			e.advance(t, 500*time.Millisecond)
			if ok, err := st.CompareAndSwapWithTTL(ctx, "short", 6, 8, time.Hour); err != nil || ok {
				t.Fatalf("CompareAndSwapWithTTL with a stale old value: %v, %v", ok, err)
			}
			e2eEq(t, "PTTL after a failed CAS", pttl("short"), 1500*time.Millisecond)
			v, _ = get("short")
			e2eEq(t, "value after a failed CAS", v, int64(7))
			// On a missing key the script's error_reply becomes "not swapped".
			if ok, err := st.CompareAndSwapWithTTL(ctx, "none", 1, 2, time.Second); err != nil || ok {
				t.Fatalf("CompareAndSwapWithTTL on a missing key: %v, %v", ok, err)
			}
			e2eEq(t, "EXISTS none", e2eVal(t, e.c.Exists(ctx, tsPrefix+"none")), int64(0))
			e2eWantRedisErr(t, "the CAS script's error reply",
				e.c.Eval(ctx, "return redis.error_reply('key does not exist')", nil).Err(), "key does not exist")
		})
	}
}

// tsStep is one call of a rate-limiter timeline.
type tsStep struct {
	advance  time.Duration // the clock moves forward by this before the call
	quantity int
	limited  bool
	res      throttled.RateLimitResult
	// tat is the stored TAT minus the clock after the call, pttl its TTL.
	tat, pttl time.Duration
}

// tsQuota is the quota of the store's own example: 20 per minute (one per
// 3 s) with a burst of 5, so 6 at once.
var tsQuota = throttled.RateQuota{MaxRate: throttled.PerMin(20), MaxBurst: 5}

func tsRes(remaining int, retry, reset time.Duration) throttled.RateLimitResult {
	return throttled.RateLimitResult{Limit: 6, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

var tsTimeline = []tsStep{
	// The burst: 6 at one instant, each one 3 s further.
	{0, 1, false, tsRes(5, -1, 3*time.Second), 3 * time.Second, 3 * time.Second},
	{0, 1, false, tsRes(4, -1, 6*time.Second), 6 * time.Second, 6 * time.Second},
	{0, 1, false, tsRes(3, -1, 9*time.Second), 9 * time.Second, 9 * time.Second},
	{0, 1, false, tsRes(2, -1, 12*time.Second), 12 * time.Second, 12 * time.Second},
	{0, 1, false, tsRes(1, -1, 15*time.Second), 15 * time.Second, 15 * time.Second},
	{0, 1, false, tsRes(0, -1, 18*time.Second), 18 * time.Second, 18 * time.Second},
	// Limited: nothing is written.
	{0, 1, true, tsRes(0, 3*time.Second, 18*time.Second), 18 * time.Second, 18 * time.Second},
	{2999 * time.Millisecond, 1, true, tsRes(0, time.Millisecond, 15001*time.Millisecond), 15001 * time.Millisecond, 15001 * time.Millisecond},
	{time.Millisecond, 1, false, tsRes(0, -1, 18*time.Second), 18 * time.Second, 18 * time.Second},
	// A peek (quantity 0) is not limited, reports when one would pass,
	// and rewrites the same TAT through the CAS script.
	{0, 0, false, tsRes(0, 3*time.Second, 18*time.Second), 18 * time.Second, 18 * time.Second},
	// 10 s later 3.33 units are free: 2 pass, 1 more is left.
	{10 * time.Second, 2, false, tsRes(1, -1, 14*time.Second), 14 * time.Second, 14 * time.Second},
	// A quantity larger than the burst can never pass; the library then
	// reports no retry time and no reset (its own answer, whatever the
	// store), and nothing is written.
	{0, 7, true, tsRes(6, -1, 0), 14 * time.Second, 14 * time.Second},
	// A minute later the key has expired: SET NX + EXPIRE start over.
	{time.Minute, 1, false, tsRes(5, -1, 3*time.Second), 3 * time.Second, 3 * time.Second},
}

// TestThrottledStore_RateLimiter replays a timeline of the GCRA rate limiter
// on the store and checks every result and the stored TAT and TTL.
func TestThrottledStore_RateLimiter(t *testing.T) {
	for _, proto := range tsProtos {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			e := e2eNewGoRedisEnv(t, proto, server.Config{})
			rl, err := throttled.NewGCRARateLimiterCtx(tsNewStore(t, e.c), tsQuota)
			if err != nil {
				t.Fatal(err)
			}
			now := e2eClockStart
			for i, st := range tsTimeline {
				if st.advance > 0 {
					e.advance(t, st.advance)
					now += int64(st.advance)
				}
				limited, res, err := rl.RateLimitCtx(e.ctx, "user:1", st.quantity)
				if err != nil {
					t.Fatalf("step %d: RateLimitCtx: %v", i, err)
				}
				if limited != st.limited || res != st.res {
					t.Fatalf("step %d: quantity %d: got %v %+v, want %v %+v", i, st.quantity, limited, res, st.limited, st.res)
				}
				tat := e2eVal(t, e.c.Get(e.ctx, tsPrefix+"user:1"))
				e2eEq(t, "step "+strconv.Itoa(i)+": stored TAT", tat, strconv.FormatInt(now+int64(st.tat), 10))
				e2eEq(t, "step "+strconv.Itoa(i)+": PTTL", e2eVal(t, e.c.PTTL(e.ctx, tsPrefix+"user:1")), st.pttl)
			}
		})
	}
}

// TestThrottledStore_Concurrent has 12 goroutines, each with its own
// limiter on a shared store, ask at one frozen instant: the CAS loop lets
// exactly the burst of 6 through and nobody runs out of CAS attempts.
func TestThrottledStore_Concurrent(t *testing.T) {
	e := e2eNewGoRedisEnv(t, 3, server.Config{})
	st := tsNewStore(t, e.c)
	const callers = 12
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
		errs    []error
	)
	for range callers {
		wg.Go(func() {
			rl, err := throttled.NewGCRARateLimiterCtx(st, tsQuota)
			if err == nil {
				var limited bool
				limited, _, err = rl.RateLimitCtx(e.ctx, "shared", 1)
				mu.Lock()
				defer mu.Unlock()
				if err == nil && !limited {
					allowed++
				}
			}
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("RateLimitCtx: %v", errs)
	}
	e2eEq(t, "allowed", allowed, 6)
	e2eEq(t, "stored TAT", e2eVal(t, e.c.Get(e.ctx, tsPrefix+"shared")), strconv.FormatInt(e2eClockStart+int64(18*time.Second), 10))
}

// TestThrottledStore_HTTP puts the HTTP middleware in front of a handler,
// varying by path, and checks statuses and rate-limit headers over a
// timeline: 2 per second with a burst of 1, so 2 at once. The requests go
// through a real HTTP server, one key per path.
func TestThrottledStore_HTTP(t *testing.T) {
	e := e2eNewGoRedisEnv(t, 3, server.Config{})
	rl, err := throttled.NewGCRARateLimiterCtx(tsNewStore(t, e.c),
		throttled.RateQuota{MaxRate: throttled.PerSec(2), MaxBurst: 1})
	if err != nil {
		t.Fatal(err)
	}
	mw := throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{Path: true}}
	h := mw.RateLimit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("hello"))
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	type want struct {
		status                  int
		limit, remaining, reset string
		retryAfter              string // "" when absent
	}
	steps := []struct {
		advance time.Duration
		path    string
		want    want
	}{
		{0, "/a", want{200, "2", "1", "1", ""}},
		{0, "/a", want{200, "2", "0", "1", ""}},
		{0, "/a", want{429, "2", "0", "1", "1"}},
		{0, "/b", want{200, "2", "1", "1", ""}},
		{250 * time.Millisecond, "/a", want{429, "2", "0", "1", "1"}},
		{250 * time.Millisecond, "/a", want{200, "2", "0", "1", ""}},
		{2 * time.Second, "/a", want{200, "2", "1", "1", ""}},
	}
	for i, st := range steps {
		if st.advance > 0 {
			e.advance(t, st.advance)
		}
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, srv.URL+st.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("step %d: GET %s: %v", i, st.path, err)
		}
		resp.Body.Close()
		got := want{
			status:     resp.StatusCode,
			limit:      resp.Header.Get("X-RateLimit-Limit"),
			remaining:  resp.Header.Get("X-RateLimit-Remaining"),
			reset:      resp.Header.Get("X-RateLimit-Reset"),
			retryAfter: resp.Header.Get("Retry-After"),
		}
		if got != st.want {
			t.Fatalf("step %d: GET %s: got %+v, want %+v", i, st.path, got, st.want)
		}
	}
}
