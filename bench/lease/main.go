// Command lease measures the gateway side of issue 24: three gateway
// instances (client.Limiter, each with its own go-redis pool, in this
// process) in front of one throttled and of a 3-node Raft cluster (real
// processes), with a delaying TCP proxy between the gateways and the
// store (this machine has no netem), in per-request, two-layer and lease
// modes (eager and lazy, at several batch shares). For each case it
// reports the limiter's added latency (p50/p99 of Decide), the store calls
// per request (INFO commandstats), and the load-balancer-filter study's
// throttling deviation (its Algorithm 7) beside the mode's documented
// over-admission bound.
//
//	go run ./bench/lease                               # every case: about two minutes
//	go run ./bench/lease -stores single -delays 25ms -modes per-request,eager,lazy
//
// The workload: -keys clients (store keys), each sending -rate requests
// per second in an open loop (evenly spaced, the keys interleaved), sent to
// the three gateways in turn as a round-robin load balancer would. Each
// key has an fwc limit of -admit of its traffic per -window, and every
// case runs inside one window (it waits for the next one when too little
// is left), so each key's admissions can be set against its limit. A case
// lasts -seconds; latencies are of the requests started after its first
// quarter (the steady state: every gateway holds a batch by then). Each
// case has keys of its own. See bench/README.md ("Gateways: leases").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
)

type config struct {
	stores   []string
	delays   []time.Duration
	modes    []mode
	duration time.Duration
	keys     int
	rate     float64 // requests per second per key
	admit    float64 // the limit, as a share of a key's requests in a case
	batch    int64
	sync     time.Duration
	window   time.Duration
	pool     int
}

// warmup is how long into a case the latencies start counting.
func (c config) warmup() time.Duration { return c.duration / 4 }

// slack is the time a case needs past its duration: the returns, the
// syncs and the counters' reading.
func (c config) slack() time.Duration { return time.Second }

var storeNames = []string{"single", "raft"}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("lease", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	stores := fs.String("stores", "single,raft", "stores: single (one throttled), raft (3-node cluster)")
	delays := fs.String("delays", "0,5ms,25ms", "one-way delays of the proxy between gateways and store")
	modeList := fs.String("modes", "per-request,two-layer,eager,eager-50,lazy,lazy-50,lazy-dyn",
		"modes: per-request, two-layer, eager, eager-50, eager-dyn, lazy, lazy-50, lazy-dyn (-50: SHARE 50; -dyn: SHARE DYNAMIC)")
	fs.DurationVar(&c.duration, "seconds", 2*time.Second, "length of a case")
	fs.IntVar(&c.keys, "keys", 5, "clients (store keys)")
	fs.Float64Var(&c.rate, "rate", 300, "requests per second per key, over the three gateways")
	fs.Float64Var(&c.admit, "admit", 0.6, "each key's limit per window, as a share of its requests in a case")
	fs.Int64Var(&c.batch, "batch", 50, "BatchSize of the lease modes: the units a lease asks for")
	fs.DurationVar(&c.sync, "sync", 100*time.Millisecond, "SyncInterval of two-layer mode")
	fs.DurationVar(&c.window, "window", time.Minute, "the fwc window of the limit")
	fs.IntVar(&c.pool, "pool", 64, "connections per gateway pool")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for s := range strings.SplitSeq(*stores, ",") {
		if s = strings.TrimSpace(s); s != "single" && s != "raft" {
			return c, fmt.Errorf("-stores: unknown store %q (have %s)", s, strings.Join(storeNames, ", "))
		}
		c.stores = append(c.stores, strings.TrimSpace(s))
	}
	for d := range strings.SplitSeq(*delays, ",") {
		d = strings.TrimSpace(d)
		if d == "0" {
			d = "0s"
		}
		v, err := time.ParseDuration(d)
		if err != nil || v < 0 {
			return c, fmt.Errorf("-delays: bad delay %q", d)
		}
		c.delays = append(c.delays, v)
	}
	for name := range strings.SplitSeq(*modeList, ",") {
		m, ok := modeNamed(strings.TrimSpace(name))
		if !ok {
			return c, fmt.Errorf("-modes: unknown mode %q", name)
		}
		c.modes = append(c.modes, m)
	}
	switch {
	case c.duration < 100*time.Millisecond:
		return c, errors.New("-seconds: at least 100ms")
	case c.keys < 1 || c.rate <= 0 || c.batch < 1 || c.pool < 1 || c.sync <= 0:
		return c, errors.New("-keys, -rate, -batch, -pool and -sync must be positive")
	case c.admit <= 0 || c.admit > 1:
		return c, errors.New("-admit: a share in (0, 1]")
	case c.window < c.duration+c.slack()+time.Second:
		return c, fmt.Errorf("-window: at least -seconds + %v, so that a case fits in one", c.slack()+time.Second)
	}
	return c, nil
}

func main() { harness.Main("lease", parse, run) }

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	tmp, err := os.MkdirTemp("", "bench-lease")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := harness.BuildThrottled(ctx, tmp, logf)
	if err != nil {
		return err
	}
	load := harness.LoadAvg()
	var results []caseResult
	caseNo := 0
	for _, name := range cfg.stores {
		start := startSingle
		if name == "raft" {
			start = startRaft
		}
		s, err := start(ctx, bin, tmp, logf)
		if err != nil {
			return err
		}
		for _, d := range cfg.delays {
			p, err := newDelayProxy(s.addr, d)
			if err != nil {
				s.stop(logf)
				return err
			}
			for _, m := range cfg.modes {
				caseNo++
				r, err := runCase(ctx, cfg, m, d, p.Addr(), s.addr, caseNo)
				if err != nil {
					p.Close()
					s.stop(logf)
					return fmt.Errorf("%s, %v, %s: %w", s.name, d, m.name, err)
				}
				r.store = s.name
				logf("%s, %v one way, %s: %d requests, %d admitted, %.4f calls/request, p50 %v p99 %v, deviation %.2f%%, max over %d (bound %d)",
					r.store, d, m.name, r.requests, r.admitted, r.callsPerRequest(), r.p50, r.p99, r.deviation(), r.maxOver, r.bound)
				results = append(results, r)
			}
			p.Close()
		}
		s.stop(logf)
	}
	fmt.Fprintf(stdout, "# Gateways: per request, two-layer and lease modes through a delaying proxy\n\n")
	fmt.Fprintf(stdout, "%s; load average %s before, %s after; %s\n\n", time.Now().UTC().Format(time.RFC3339), load, harness.LoadAvg(), harness.Machine())
	fmt.Fprintf(stdout, "%d gateways, %d keys at %.0f requests/s each, fwc limit %.0f%% of a key's requests in one %v window, %v a case, batch %d, sync %v.\n\n",
		gateways, cfg.keys, cfg.rate, 100*cfg.admit, cfg.window, cfg.duration, cfg.batch, cfg.sync)
	report(stdout, results)
	return nil
}
