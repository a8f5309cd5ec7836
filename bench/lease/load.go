package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/policy"
)

// gateways is how many gateway instances stand in front of the store.
const gateways = 3

// A mode is one way the gateways decide: its name on the command line and
// in the report, and what it sets in the limiters' Config.
type mode struct {
	name  string
	lease bool // a Lease mode: the latency and calls bars apply
	lazy  bool
	share int // Config.Share
	two   bool
}

var modes = []mode{
	{name: "per-request"},
	{name: "two-layer", two: true},
	{name: "eager", lease: true},
	{name: "eager-50", lease: true, share: 50},
	{name: "eager-dyn", lease: true, share: client.ShareDynamic},
	{name: "lazy", lease: true, lazy: true},
	{name: "lazy-50", lease: true, lazy: true, share: 50},
	{name: "lazy-dyn", lease: true, lazy: true, share: client.ShareDynamic},
}

func modeNamed(name string) (mode, bool) {
	for _, m := range modes {
		if m.name == name {
			return m, true
		}
	}
	return mode{}, false
}

// limiterConfig is a gateway's limiter Config in mode m.
func (c config) limiterConfig(m mode, rdb *redis.Client, tier policy.Tier, gw int) client.Config {
	lc := client.Config{Client: rdb, Tiers: []policy.Tier{tier}, Fail: client.FailClosed, Holder: fmt.Sprint("gw", gw)}
	switch {
	case m.two:
		lc.Mode, lc.SyncInterval = client.TwoLayer, c.sync
	case m.lease:
		lc.Mode, lc.BatchSize, lc.Lazy, lc.Share = client.Lease, c.batch, m.lazy, m.share
	}
	return lc
}

// bound is the documented over-admission bound of mode m with delay one
// way, in units over a key's limit per window: none for per request and
// eager leases, instances x batch for lazy ones, and for two-layer
// instances x what each admits while its view of the others is stale: one
// sync interval plus the sync's round trip (2 x delay).
func (c config) bound(m mode, delay time.Duration) int64 {
	switch {
	case m.lazy:
		return gateways * c.batch
	case m.two:
		stale := c.sync + 2*delay
		return gateways * int64(math.Ceil(c.rate/gateways*stale.Seconds()))
	}
	return 0
}

// record is one request's fate.
type record struct {
	key      int
	started  time.Duration // since the case began
	passed   time.Duration // when the decision came back: the request passes or is refused then
	allowed  bool
	failed   bool // the limiter returned an error (the store gave no decision)
	latency  time.Duration
	launched bool
}

// caseResult is what one case measured.
type caseResult struct {
	store, mode string
	delay       time.Duration
	requests    int
	admitted    int
	errors      int
	calls       int64
	p50, p99    time.Duration // steady state: requests started after the warm-up
	slow        int           // of those, how many took over a millisecond (waited for the store)
	steady      int           // requests started after the warm-up
	over, under int           // the study's Algorithm 7, summed over keys
	maxOver     int64         // the most one key's admissions exceeded its limit
	bound       int64
	limit       int64 // per key
	keys        int
}

// deviation is the study's throttling deviation in percent.
func (r caseResult) deviation() float64 {
	if r.requests == 0 {
		return 0
	}
	return 100 * float64(r.over+r.under) / float64(r.requests)
}

// callsPerRequest is the store calls per request.
func (r caseResult) callsPerRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.calls) / float64(r.requests)
}

// runCase runs mode m for cfg.duration against the store at addr (through
// the proxy; statsAddr is the node whose command counters count the
// calls): three limiters, each with its own pool, an open-loop stream of
// cfg.rate requests per second per key, spread round-robin over the
// gateways as a load balancer would. The limit is fwc, cfg.admit of each
// key's traffic per window, and the case runs inside one window, so that
// every key's admissions can be set against its limit.
func runCase(ctx context.Context, cfg config, m mode, delay time.Duration, addr, statsAddr string, caseNo int) (caseResult, error) {
	if err := alignToWindow(ctx, cfg.window, cfg.duration+cfg.slack()); err != nil {
		return caseResult{}, err
	}
	perKey := int(cfg.rate * cfg.duration.Seconds())
	limit := max(int64(math.Round(cfg.admit*float64(perKey))), 1)
	tier := policy.Tier{Algorithm: policy.FWC, Limit: limit, Period: cfg.window.Milliseconds()}
	var lims []*client.Limiter
	var pools []*redis.Client
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for gw := range gateways {
		rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: cfg.pool, MaxRetries: -1})
		pools = append(pools, rdb)
		l, err := client.New(cfg.limiterConfig(m, rdb, tier, gw))
		if err != nil {
			return caseResult{}, err
		}
		lims = append(lims, l)
	}
	if err := warmPools(ctx, pools, cfg.pool); err != nil {
		return caseResult{}, err
	}
	if err := resetStats(ctx, statsAddr); err != nil {
		return caseResult{}, err
	}

	recs := make([]record, perKey*cfg.keys)
	keyName := func(k int) string { return fmt.Sprintf("bench:%d:%s:%d", caseNo, m.name, k) }
	var wg sync.WaitGroup
	start := time.Now()
	gap := time.Duration(float64(time.Second) / cfg.rate / float64(cfg.keys)) // between any two requests
	for i := range recs {
		due := time.Duration(i) * gap
		if d := due - time.Since(start); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return caseResult{}, ctx.Err()
			case <-time.After(d):
			}
		}
		r := &recs[i]
		r.key, r.launched = i%cfg.keys, true
		l := lims[(i/cfg.keys)%gateways]
		wg.Go(func() {
			t0 := time.Now()
			res, err := l.Decide(ctx, keyName(r.key), 1)
			t1 := time.Now()
			r.started, r.passed, r.latency = t0.Sub(start), t1.Sub(start), t1.Sub(t0)
			r.allowed, r.failed = res.Allowed, err != nil
		})
	}
	wg.Wait()
	for _, l := range lims {
		l.Close() // returns the batches, syncs the counts: their calls count
	}
	n, err := calls(ctx, statsAddr)
	if err != nil {
		return caseResult{}, err
	}
	res := measure(recs, cfg.keys, limit, cfg.warmup())
	res.mode, res.delay, res.calls, res.bound = m.name, delay, n, cfg.bound(m, delay)
	return res, nil
}

// warmPools opens n connections of every pool (n PINGs at once each), so
// that no case's latencies include dialing through the proxy.
func warmPools(ctx context.Context, pools []*redis.Client, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n*len(pools))
	for _, p := range pools {
		for range n {
			wg.Go(func() { errs <- p.Ping(ctx).Err() })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("warming the pools: %w", err)
		}
	}
	return nil
}

// alignToWindow waits, when less than need is left of the current fixed
// window (aligned to the Unix epoch, as the store's fwc windows are), until
// the next one has begun.
func alignToWindow(ctx context.Context, window, need time.Duration) error {
	now := time.Now()
	end := now.Truncate(window).Add(window)
	if end.Sub(now) >= need {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(end.Sub(now) + 50*time.Millisecond):
		return nil
	}
}

// measure tallies the records of one case: latencies of the requests
// started after warmup, and the study's throttling deviation (Algorithm 7):
// per key, in the order the decisions came back, a request should have
// been admitted when fewer than limit of that key's requests had been
// admitted before it (the case lies in one window); a request admitted
// when the limit was reached is over-admitted, one refused while it was
// not is under-admitted.
func measure(recs []record, keys int, limit int64, warmup time.Duration) caseResult {
	var res caseResult
	res.limit, res.keys = limit, keys
	var lat []time.Duration
	byKey := make([][]record, keys)
	for _, r := range recs {
		if !r.launched {
			continue
		}
		res.requests++
		if r.allowed {
			res.admitted++
		}
		if r.failed {
			res.errors++
		}
		if r.started >= warmup {
			lat = append(lat, r.latency)
			if r.latency > time.Millisecond {
				res.slow++
			}
		}
		byKey[r.key] = append(byKey[r.key], r)
	}
	for _, rs := range byKey {
		slices.SortStableFunc(rs, func(a, b record) int { return int(a.passed - b.passed) })
		var admitted int64
		for _, r := range rs {
			switch {
			case r.allowed && admitted >= limit:
				res.over++
			case !r.allowed && admitted < limit:
				res.under++
			}
			if r.allowed {
				admitted++
			}
		}
		res.maxOver = max(res.maxOver, admitted-limit)
	}
	res.steady = len(lat)
	res.p50, res.p99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return res
}

// percentile is the q-quantile of xs (nearest rank); 0 when empty.
func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}
