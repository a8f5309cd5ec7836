package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// store starts a throttled node on the debug clock (windows never roll
// under the test) and returns a pool to it.
func store(t *testing.T) (*server.Node, *redis.Client) {
	t.Helper()
	n := servertest.Start(t, server.Config{DebugClock: true})
	return n, pool(t, n.Addr())
}

func pool(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newLimiter(t *testing.T, cfg client.Config) *client.Limiter {
	t.Helper()
	l, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// hammer runs workers goroutines that each call decide calls times and
// returns how many were admitted.
func hammer(workers, calls int, decide func(w int) bool) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range calls {
				if decide(w) {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

func ints(t *testing.T, rdb *redis.Client, args ...any) []int64 {
	t.Helper()
	v, err := rdb.Do(context.Background(), args...).Int64Slice()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// TestPerRequestExact: in PerRequest mode, what two limiters (two pools,
// as two gateways) admit under contention is exactly what the store
// counted, for one tier (its own command) and for two (THROTTLE.ALL).
func TestPerRequestExact(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		tiers []policy.Tier
		want  int64
	}{
		{"fwc", []policy.Tier{{Algorithm: policy.FWC, Limit: 100, Period: 3_600_000}}, 100},
		{"cl", []policy.Tier{{Algorithm: policy.GCRA, Burst: 59, Count: 1, Period: 3600_000}}, 60},
		{"two tiers", []policy.Tier{
			{Algorithm: policy.SWL, Limit: 70, Period: 3_600_000},
			{Algorithm: policy.TB, Burst: 40, Count: 1, Period: 3_600_000},
		}, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := []*client.Limiter{
				newLimiter(t, client.Config{Client: rdb, Tiers: tc.tiers, Fail: client.FailClosed}),
				newLimiter(t, client.Config{Client: pool(t, rdb.Options().Addr), Tiers: tc.tiers, Fail: client.FailClosed}),
			}
			key := "exact:" + tc.name
			admitted := hammer(8, 40, func(w int) bool {
				r, err := ls[w%2].Decide(ctx, key, 1)
				if err != nil {
					t.Error(err)
				}
				return r.Allowed
			})
			if admitted != tc.want {
				t.Errorf("admitted %d, want %d", admitted, tc.want)
			}
			// The store's own accounting: a peek of every tier's key.
			for i, tr := range tc.tiers {
				k := key
				if len(tc.tiers) > 1 {
					k = fmt.Sprintf("%s:%d", key, i+1)
				}
				var peek []int64
				switch tr.Algorithm {
				case policy.GCRA:
					peek = ints(t, rdb, "CL.THROTTLE", k, tr.Burst, tr.Count, tr.Period/1000, 0)
				case policy.SWL:
					peek = ints(t, rdb, "SWL.THROTTLE", k, tr.Limit, tr.Period, 0, "MS")
				case policy.FWC:
					peek = ints(t, rdb, "FWC.THROTTLE", k, tr.Limit, tr.Period, 0, "MS")
				case policy.TB:
					peek = ints(t, rdb, "TB.THROTTLE", k, tr.Burst, tr.Count, tr.Period, 0, "MS")
				}
				if used := peek[1] - peek[2]; used != admitted {
					t.Errorf("tier %d: the store counted %d, the limiters admitted %d", i+1, used, admitted)
				}
			}
		})
	}
}

// TestPerRequestResult: the Result carries the deciding tier's reply in
// Durations, and Reserve, Allow and Wait read it as x/time/rate does.
func TestPerRequestResult(t *testing.T) {
	n, rdb := store(t)
	ctx := context.Background()
	l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{
		{Algorithm: policy.FWC, Limit: 2, Period: 10_000},
		{Algorithm: policy.TB, Burst: 5, Count: 1, Period: 1000},
	}})
	r, err := l.Decide(ctx, "res", 1)
	if err != nil || !r.Allowed || r.Limit != 2 || r.Remaining != 1 || r.RetryAfter != -1 || r.Fallback {
		t.Fatalf("first: %+v, %v", r, err)
	}
	if len(r.Tiers) != 2 || r.Tiers[1].Remaining != 4 || r.Tiers[0].Window != 10*time.Second || r.Tiers[1].Window != 5*time.Second {
		t.Fatalf("tiers: %+v", r.Tiers)
	}
	if !l.Allow(ctx, "res") || l.Allow(ctx, "res") {
		t.Fatal("the second Allow should pass and the third not")
	}
	res, err := l.Reserve(ctx, "res")
	if err != nil || res.OK() || res.Delay() <= 0 || res.Delay() > 10*time.Second || res.Tiers[0].Limited != true {
		t.Fatalf("reserve over the limit: %+v, %v", res, err)
	}
	// A request larger than a limit never fits: Wait says so at once.
	if err := l.WaitN(ctx, "res", 3); !errors.Is(err, client.ErrNeverFits) {
		t.Fatalf("WaitN(3) = %v", err)
	}
	// Wait for a window that ends after the deadline returns at once.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(short, "res"); err == nil {
		t.Fatal("Wait past the deadline succeeded")
	}
	// On the debug clock the window ends when the store's clock moves:
	// Wait sleeps its RetryAfter (real time) and then passes.
	if err := rdb.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", int64(10*time.Second)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(ctx, "res"); err != nil {
		t.Fatalf("Wait after the window: %v", err)
	}
	_ = n
}

// TestTwoLayerBound: three TwoLayer limiters (three instances) over one
// store, each admitting up to perRound requests between syncs: the
// store's total is exactly what they admitted together, and it exceeds the
// limit by at most instances x what each admits in one interval.
func TestTwoLayerBound(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	const (
		limit     = 50
		instances = 3
		perRound  = 7
	)
	// The instances' clock: the store's (debug) clock started at the real
	// time, and expires the window's counter 2 s after the window.
	clock := time.Now()
	tiers := []policy.Tier{{Algorithm: policy.FWC, Limit: limit, Period: 60_000}}
	var ls []*client.Limiter
	for range instances {
		ls = append(ls, newLimiter(t, client.Config{Client: pool(t, rdb.Options().Addr), Tiers: tiers,
			Mode: client.TwoLayer, Now: func() time.Time { return clock }}))
	}
	var admitted int64
	for round := 0; round < 20; round++ {
		for _, l := range ls {
			for range perRound {
				if r, err := l.Decide(ctx, "t42:/product/*:GET", 1); err != nil {
					t.Fatal(err)
				} else if r.Allowed {
					admitted++
				}
			}
		}
		for _, l := range ls {
			if err := l.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := clock.Truncate(time.Minute).UnixMilli()
	key := fmt.Sprintf("t42:/product/*:GET:%d", start)
	total, err := rdb.Get(ctx, key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if total != admitted {
		t.Errorf("the store counted %d, the instances admitted %d", total, admitted)
	}
	if admitted < limit || admitted > limit+instances*perRound {
		t.Errorf("admitted %d, want %d to %d", admitted, limit, limit+instances*perRound)
	}
	t.Logf("limit %d, admitted %d (bound %d)", limit, admitted, limit+instances*perRound)
	// The counter expires 2 s after its window.
	storeNow, err := rdb.Do(ctx, "DEBUG", "CLOCK").Int64()
	if err != nil {
		t.Fatal(err)
	}
	want := (start+62_000)*1_000_000 - storeNow
	if pttl := rdb.PTTL(ctx, key).Val(); (want-int64(pttl))/1_000_000 > 1 || (int64(pttl)-want)/1_000_000 > 1 {
		t.Errorf("PTTL %v, want %v", pttl, time.Duration(want))
	}
	// A new window starts from 0.
	clock = clock.Add(time.Minute)
	if r, _ := ls[0].Decide(ctx, "t42:/product/*:GET", 1); !r.Allowed || r.Remaining != limit-1 {
		t.Errorf("new window: %+v", r)
	}
}

// TestTwoLayerConcurrent: instances hammered concurrently while their
// sync goroutines run: the goroutines alone bring the store's total to
// exactly what the instances admitted, which is at most instances x limit.
func TestTwoLayerConcurrent(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	const limit, instances = 200, 3
	tiers := []policy.Tier{{Algorithm: policy.FWC, Limit: limit, Period: 3_600_000}}
	var ls []*client.Limiter
	for range instances {
		ls = append(ls, newLimiter(t, client.Config{Client: rdb, Tiers: tiers, Mode: client.TwoLayer, SyncInterval: 2 * time.Millisecond}))
	}
	hour := time.Now().UnixMilli() / 3_600_000 * 3_600_000
	admitted := hammer(6, 400, func(w int) bool {
		r, err := ls[w%instances].Decide(ctx, "conc", 1)
		if err != nil {
			t.Error(err)
		}
		return r.Allowed
	})
	testwait.For(t, 10*time.Second, "the syncs to send every admission", func() bool {
		total, _ := rdb.Get(ctx, fmt.Sprintf("conc:%d", hour)).Int64()
		return total == admitted
	})
	if admitted < limit || admitted > instances*limit {
		t.Errorf("admitted %d, limit %d", admitted, limit)
	}
	t.Logf("limit %d: admitted %d", limit, admitted)
}

// TestFailModes: with the store stopped (a real stop: its listener is
// closed), FailClosed refuses with the error, FailOpen admits through the
// fallback limiter, which admits no more than its tier per key and holds
// no more than FallbackKeys keys.
func TestFailModes(t *testing.T) {
	n, err := servertest.Open(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rdb := pool(t, n.Addr())
	ctx := context.Background()
	tiers := []policy.Tier{{Algorithm: policy.GCRA, Burst: 4, Count: 1, Period: 3600_000}}
	closed := newLimiter(t, client.Config{Client: rdb, Tiers: tiers, Fail: client.FailClosed})
	open := newLimiter(t, client.Config{Client: rdb, Tiers: tiers, FallbackKeys: 3})
	two := newLimiter(t, client.Config{Client: rdb, Mode: client.TwoLayer, Fail: client.FailClosed,
		Tiers: []policy.Tier{{Algorithm: policy.FWC, Limit: 5, Period: 60_000}}})
	if r, err := closed.Decide(ctx, "k", 1); err != nil || !r.Allowed || r.Fallback {
		t.Fatalf("store up: %+v %v", r, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := closed.Decide(ctx, "k", 1); err == nil || r.Allowed || !r.Fallback {
		t.Fatalf("fail closed: %+v %v", r, err)
	}
	// Fail open: the fallback's tier is cl 4 1 3600 as a token bucket of 5.
	for key := range 3 {
		admitted := 0
		for range 8 {
			r, err := open.Decide(ctx, fmt.Sprint("k", key), 1)
			if err == nil || !r.Fallback {
				t.Fatalf("fail open: %+v %v", r, err)
			}
			if r.Allowed {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("key %d: the fallback admitted %d, want 5", key, admitted)
		}
	}
	// A fourth key finds the fallback full (3 keys, none full again).
	if r, _ := open.Decide(ctx, "k3", 1); r.Allowed {
		t.Error("the fallback took a fourth key")
	}
	// Two-layer failing closed: refuses once a sync failed.
	if r, err := two.Decide(ctx, "k", 1); err != nil || !r.Allowed {
		t.Fatalf("two-layer before a sync: %+v %v", r, err)
	}
	if err := two.Sync(ctx); err == nil {
		t.Fatal("sync with the store stopped succeeded")
	}
	if r, err := two.Decide(ctx, "k", 1); err == nil || r.Allowed {
		t.Fatalf("two-layer fail closed: %+v %v", r, err)
	}
}

// TestWindowAgrees: a tier's Window (the RateLimit-Policy w) is the same
// whether the store's THROTTLE.POLICY reports it or a limiter decides
// locally, for every algorithm: the time the limit spans, a bucket's
// refill time from empty (cl: (burst+1) x period / count). The store used
// to report a cl or tb tier's period (w=2 for q=3 refilling one unit
// every 2 s, three times the rate).
func TestWindowAgrees(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	tiers := []policy.Tier{
		{Algorithm: policy.GCRA, Burst: 2, Count: 1, Period: 2000},
		{Algorithm: policy.TB, Burst: 10, Count: 2, Period: 1000},
		{Algorithm: policy.LB, Burst: 6, Count: 3, Period: 500},
		{Algorithm: policy.FWC, Limit: 5, Period: 60_000},
	}
	want := []time.Duration{6 * time.Second, 5 * time.Second, time.Second, time.Minute}
	if err := rdb.Do(ctx, "POLICY", "SET", "{id: w, path: /w, tiers: [{algorithm: cl, burst: 2, count: 1, period: 2s}, "+
		"{algorithm: tb, capacity: 10, refill: 2, period: 1s}, {algorithm: lb, capacity: 6, leak: 3, period: 500ms}, "+
		"{algorithm: fwc, limit: 5, window: 1m}]}").Err(); err != nil {
		t.Fatal(err)
	}
	ps, err := client.NewPolicies(client.PoliciesConfig{Client: rdb, Fail: client.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := ps.Decide(ctx, client.PolicyRequest{Method: "GET", Target: "/w", Principal: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range tiers {
		mode := client.PerRequest
		if tr.Algorithm == policy.FWC { // a local decision: two-layer mode is fwc's alone
			mode = client.TwoLayer
		}
		l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: mode})
		local, err := l.Decide(ctx, fmt.Sprint("w", i), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(remote.Tiers) != len(tiers) || remote.Tiers[i].Window != want[i] || local.Tiers[0].Window != want[i] {
			t.Errorf("%s: THROTTLE.POLICY's window %v, the limiter's %v, want %v", tr.Algorithm, remote.Tiers[i].Window, local.Tiers[0].Window, want[i])
		}
	}
}
