package client_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/policy"
)

// storeUsed is what the store's fwc state of key has counted: a peek.
func storeUsed(t *testing.T, rdb *redis.Client, key string, tr policy.Tier) int64 {
	t.Helper()
	peek := ints(t, rdb, "FWC.THROTTLE", key, tr.Limit, tr.Period, 0, "MS")
	return peek[1] - peek[2]
}

// leaseCalls is how many QUOTA.LEASE the store has answered.
func leaseCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_quota.lease:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

// TestLeaseExact: three lease limiters (gateways) hammered concurrently
// never admit more than the limit, and once they have returned their
// batches, the store has counted exactly what they admitted; a fourth,
// killed mid-lease (never returning), has its whole batch counted as spent.
func TestLeaseExact(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	const limit, batch = 300, 20
	tr := policy.Tier{Algorithm: policy.FWC, Limit: limit, Period: 3_600_000}
	killed := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease, BatchSize: batch, Holder: "killed"})
	if !killed.Allow(ctx, "lease") {
		t.Fatal("the first request was refused")
	}
	var ls []*client.Limiter
	for i := range 3 {
		l, err := client.New(client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease,
			BatchSize: batch, Holder: fmt.Sprint("gw", i), Fail: client.FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	admitted := hammer(6, 100, func(w int) bool {
		r, err := ls[w%3].Decide(ctx, "lease", 1)
		if err != nil {
			t.Error(err)
		}
		return r.Allowed
	})
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	used := storeUsed(t, rdb, "lease", tr)
	// The killed holder admitted 1 and holds the rest of its batch.
	if admitted+1 > limit || used != admitted+batch {
		t.Errorf("admitted %d (+1 by the killed holder), the store counted %d, limit %d", admitted, used, limit)
	}
	if admitted < limit-batch-3*batch {
		t.Errorf("admitted only %d of %d", admitted, limit)
	}
	calls := leaseCalls(t, rdb)
	t.Logf("limit %d: admitted %d, store %d, %d QUOTA.LEASE for %d requests", limit, admitted, used, calls, 600)
	if calls > 600/5 {
		t.Errorf("%d leases for 600 requests", calls)
	}
}

// TestLeaseSteadyState: a paced request stream waits for the store only
// for its first batch; the next batches are leased before they are
// needed, one store call per batch.
func TestLeaseSteadyState(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	tr := policy.Tier{Algorithm: policy.TB, Burst: 100000, Count: 100000, Period: 1000}
	l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease, BatchSize: 50})
	for i := range 500 {
		if !l.Allow(ctx, "steady") {
			t.Fatalf("request %d refused", i)
		}
		time.Sleep(100 * time.Microsecond) // the request stream's pace
	}
	if w := client.LeaseWaits(l); w != 1 {
		t.Errorf("the request path waited %d times for a lease, want 1", w)
	}
	if calls := leaseCalls(t, rdb); calls > 500/50+1 {
		t.Errorf("%d QUOTA.LEASE for 500 requests in batches of 50", calls)
	}
}

// TestLeaseRefused: once the store grants nothing, the limiter refuses
// locally until the store's retry_after, with no store call per request.
func TestLeaseRefused(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	tr := policy.Tier{Algorithm: policy.FWC, Limit: 10, Period: 60_000}
	l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease, BatchSize: 4})
	admitted := 0
	for range 30 {
		if l.Allow(ctx, "r") {
			admitted++
		}
	}
	r, _ := l.Decide(ctx, "r", 1)
	if admitted != 10 || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Minute || r.Limit != 10 {
		t.Errorf("admitted %d; then %+v", admitted, r)
	}
	if calls := leaseCalls(t, rdb); calls > 5 {
		t.Errorf("%d QUOTA.LEASE for 31 requests", calls)
	}
}

// TestLeaseIdleKeys: keys whose batches expired are returned and
// forgotten, so a churn of keys costs bounded memory.
func TestLeaseIdleKeys(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	clock := time.Now()
	tr := policy.Tier{Algorithm: policy.FWC, Limit: 100, Period: 3_600_000}
	l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease, BatchSize: 10,
		LeaseTTL: time.Second, Now: func() time.Time { return clock }})
	for i := range 1000 {
		if !l.Allow(ctx, fmt.Sprint("churn", i)) {
			t.Fatalf("key %d refused", i)
		}
	}
	if n := client.LeaseKeys(l); n != 1000 {
		t.Fatalf("%d keys held, want 1000", n)
	}
	clock = clock.Add(time.Second) // every batch has expired
	// The 1,024th decision sweeps (sweepEvery).
	for range 24 {
		l.Allow(ctx, "hot")
	}
	if n := client.LeaseKeys(l); n != 1 {
		t.Errorf("%d keys held after their batches expired, want 1", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Every expired batch was returned with its 1 used unit.
	if used := storeUsed(t, rdb, "churn7", tr); used != 1 {
		t.Errorf("churn7: the store counted %d, want 1", used)
	}
}

// TestLeaseLazyBound: three instances take turns on one key, first
// with eager leases, then lazy ones. Eager ones never admit more than the
// limit; lazy ones do (each of the three is granted a batch before any is
// charged), but by at most instances x BatchSize. Then six goroutines
// hammer three lazy instances: still within the bound.
func TestLeaseLazyBound(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	const limit, batch, instances = 15, 10, 3
	tr := policy.Tier{Algorithm: policy.FWC, Limit: limit, Period: 3_600_000}
	gateways := func(lazy bool) []*client.Limiter {
		var ls []*client.Limiter
		for i := range instances {
			ls = append(ls, newLimiter(t, client.Config{Client: pool(t, rdb.Options().Addr), Tiers: []policy.Tier{tr},
				Mode: client.Lease, BatchSize: batch, Lazy: lazy, Holder: fmt.Sprint("gw", i), Fail: client.FailClosed}))
		}
		return ls
	}
	for _, lazy := range []bool{false, true} {
		key := fmt.Sprint("turns:", lazy)
		ls := gateways(lazy)
		admitted := 0
		for range 40 {
			for _, l := range ls {
				r, err := l.Decide(ctx, key, 1)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			}
		}
		t.Logf("lazy %v: admitted %d of %d", lazy, admitted, limit)
		switch {
		case !lazy && admitted > limit:
			t.Errorf("eager leases admitted %d, over the limit %d", admitted, limit)
		case lazy && (admitted <= limit || admitted > limit+instances*batch):
			t.Errorf("lazy leases admitted %d: want over the limit %d, by at most %d", admitted, limit, instances*batch)
		}
	}
	ls := gateways(true)
	admitted := hammer(6, 100, func(w int) bool {
		r, err := ls[w%instances].Decide(ctx, "hammer", 1)
		if err != nil {
			t.Error(err)
		}
		return r.Allowed
	})
	if admitted > limit+instances*batch || admitted < limit {
		t.Errorf("lazy leases under contention admitted %d: want %d..%d", admitted, limit, limit+instances*batch)
	}
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Every unit admitted was charged at the returns: the window is spent.
	if used := storeUsed(t, rdb, "hammer", tr); used != limit {
		t.Errorf("the store counted %d of %d after the lazy returns", used, limit)
	}
}

// TestLeaseShare: Config.Share sizes the grants as QUOTA.LEASE's SHARE
// does: a static percentage of what remains, or half of it for a holder
// without history (dynamic); out-of-range shares and lazy swl are refused.
func TestLeaseShare(t *testing.T) {
	_, rdb := store(t)
	ctx := context.Background()
	tr := policy.Tier{Algorithm: policy.FWC, Limit: 100, Period: 3_600_000}
	for _, tc := range []struct {
		share int
		want  int64 // the first grant: charged at once (eager)
	}{{0, 80}, {10, 10}, {50, 50}, {client.ShareDynamic, 50}} {
		key := fmt.Sprint("share:", tc.share)
		l := newLimiter(t, client.Config{Client: rdb, Tiers: []policy.Tier{tr}, Mode: client.Lease, BatchSize: 80, Share: tc.share})
		if !l.Allow(ctx, key) {
			t.Fatalf("share %d: the first request was refused", tc.share)
		}
		if used := storeUsed(t, rdb, key, tr); used != tc.want {
			t.Errorf("share %d: the first grant charged %d, want %d", tc.share, used, tc.want)
		}
	}
	for _, cfg := range []client.Config{
		{Share: 101}, {Share: -2},
		{Lazy: true, Tiers: []policy.Tier{{Algorithm: policy.SWL, Limit: 10, Period: 1000}}},
	} {
		cfg.Client, cfg.Mode, cfg.BatchSize = rdb, client.Lease, 10
		if cfg.Tiers == nil {
			cfg.Tiers = []policy.Tier{tr}
		}
		if _, err := client.New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
