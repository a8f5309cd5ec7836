// Command policy measures THROTTLE.POLICY: the latency of each stage of a
// decision (normalizing the path, resolving the policy, in process, with
// percentiles) and the command's throughput with redis-benchmark beside
// THROTTLE.ALL with the same tiers, in the same run on the same server,
// with -templates templates loaded.
//
//	go run ./bench/policy                  # 1,000 templates, -P 1 and 16
//	go run ./bench/policy -templates 100 -runs 5
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
	"github.com/throttleddb/throttled/policy"
)

type config struct {
	templates int
	requests  int
	runs      int
	pipelines []int
	samples   int
	threads   string
}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.IntVar(&c.templates, "templates", 1000, "path templates (one policy each) loaded")
	fs.IntVar(&c.requests, "n", 200000, "requests per redis-benchmark run")
	fs.IntVar(&c.runs, "runs", 3, "runs per figure; the ratio is the median of the runs' ratios")
	fs.IntVar(&c.samples, "samples", 200000, "timed calls per in-process stage")
	fs.StringVar(&c.threads, "threads", "1", "the server's --threads")
	pipes := fs.String("P", "1,16", "pipeline depths")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	c.pipelines, err = harness.ParsePipelines(*pipes)
	return c, err
}

func main() { harness.Main("policy", parse, run) }

// policies are the benchmark's: one per template, each with the two tiers
// THROTTLE.ALL is given, and a fallback for UNKNOWN.
func policies(n int) []policy.Policy {
	ps := make([]policy.Policy, 0, n+1)
	tiers := []policy.Tier{{Algorithm: policy.GCRA, Burst: 1000, Count: 1000000, Period: 1000}, {Algorithm: policy.FWC, Limit: 1000000000, Period: 60000}}
	for i := range n {
		ps = append(ps, policy.Policy{ID: fmt.Sprint("t", i), Path: fmt.Sprintf("/v1/t%d/orgs/{org}/items/*", i), Methods: []string{"GET"}, Tiers: tiers})
	}
	return append(ps, policy.Policy{ID: "unknown", Fallback: policy.Unknown, Tiers: tiers})
}

// The commands redis-benchmark sends: the policy decision on the last
// template (the most work to find) and THROTTLE.ALL with the same tiers on
// keys of the same shape.
func commands(n int) map[string][]string {
	return map[string][]string{
		"THROTTLE.POLICY": {"THROTTLE.POLICY", "GET", fmt.Sprintf("/v1/t%d/orgs/o1/items/__rand_int__", n-1), "user:__rand_int__"},
		"THROTTLE.ALL": {"THROTTLE.ALL", "LIMIT", "CL", "policy:t:1::user:__rand_int__", "1000", "1000000", "1",
			"LIMIT", "FWC", "policy:t:2::user:__rand_int__", "1000000000", "60"},
	}
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logf := func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }
	fmt.Fprintf(stdout, "# THROTTLE.POLICY, %d templates\n\n%s; load average %s; %s\n\n", cfg.templates, time.Now().UTC().Format(time.RFC3339), harness.LoadAvg(), harness.Machine())
	if err := stages(stdout, cfg); err != nil {
		return err
	}

	tmp, err := os.MkdirTemp("", "bench-policy")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := harness.StartThrottled(ctx, tmp, logf, "--dir", filepath.Join(tmp, "data"), "--threads", cfg.threads)
	if err != nil {
		return err
	}
	defer p.Stop()
	addr := p.Addr
	cl := redis.NewClient(&redis.Options{Addr: addr})
	defer cl.Close()
	var file strings.Builder
	file.WriteString("policies:\n")
	for _, pol := range policies(cfg.templates) {
		fmt.Fprintf(&file, "  - %s\n", policy.Marshal(&pol))
	}
	if err := cl.Do(ctx, "POLICY", "LOAD", file.String()).Err(); err != nil {
		return fmt.Errorf("POLICY LOAD: %w", err)
	}

	cmds := commands(cfg.templates)
	fmt.Fprintf(stdout, "## Throughput (redis-benchmark -c 50 -n %d -r 100000, --threads %s)\n\n", cfg.requests, cfg.threads)
	fmt.Fprintln(stdout, "The ratio is THROTTLE.POLICY's rps over THROTTLE.ALL's; the CPU columns are the server's user+system time per call")
	fmt.Fprintln(stdout, "(median, µs), and the CPU ratio THROTTLE.ALL's over THROTTLE.POLICY's: the throughput ratio the one command")
	fmt.Fprintln(stdout, "thread allows, which the other processes of a shared machine move less than rps.")
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "| -P | THROTTLE.POLICY rps | THROTTLE.ALL rps | ratio (runs) | CPU/call POLICY, ALL | CPU ratio (runs) | bar 0.8 |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|")
	pid := p.Pid()
	for _, pipe := range cfg.pipelines {
		rps, cpu := map[string][]float64{}, map[string][]float64{}
		for r := range cfg.runs {
			order := []string{"THROTTLE.POLICY", "THROTTLE.ALL"}
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, name := range order {
				before, err := harness.CPUTime(pid)
				if err != nil {
					return err
				}
				res, err := redisbench.Run(ctx, redisbench.Options{Addr: addr, Clients: 50, Requests: cfg.requests, KeySpace: 100000, Pipeline: pipe, Command: cmds[name]})
				if err != nil {
					return err
				}
				after, err := harness.CPUTime(pid)
				if err != nil {
					return err
				}
				perCall := float64((after - before).Nanoseconds()) / 1e3 / float64(cfg.requests)
				logf("-P %d run %d %s: %.0f rps, %.2f µs CPU a call", pipe, r+1, name, res.RPS, perCall)
				rps[name] = append(rps[name], res.RPS)
				cpu[name] = append(cpu[name], perCall)
			}
		}
		ratio, each := medianRatio(rps["THROTTLE.POLICY"], rps["THROTTLE.ALL"])
		cpuRatio, cpuEach := medianRatio(cpu["THROTTLE.ALL"], cpu["THROTTLE.POLICY"])
		fmt.Fprintf(stdout, "| %d | %s | %s | **%.2f** (%s) | %.2f, %.2f | **%.2f** (%s) | %s |\n", pipe, harness.RPSCell(rps["THROTTLE.POLICY"]), harness.RPSCell(rps["THROTTLE.ALL"]),
			ratio, each, harness.Median(cpu["THROTTLE.POLICY"]), harness.Median(cpu["THROTTLE.ALL"]), cpuRatio, cpuEach, harness.BarCell(ratio, true, ratio >= 0.8))
	}
	return nil
}

// medianRatio is the median of the runs' ratios num[i]/den[i], and the
// ratios themselves as text.
func medianRatio(num, den []float64) (float64, string) {
	ratios := harness.Ratios(num, den)
	var each []string
	for _, r := range ratios {
		each = append(each, fmt.Sprintf("%.2f", r))
	}
	return harness.Median(ratios), strings.Join(each, " ")
}

// stages times the in-process stages of a decision, one call at a time,
// and prints their percentiles.
func stages(w io.Writer, cfg config) error {
	t, err := policy.New(policies(cfg.templates))
	if err != nil {
		return err
	}
	last := fmt.Sprintf("/v1/t%d/orgs/o1/items/42", cfg.templates-1)
	cases := []struct {
		name string
		fn   func()
	}{
		{"normalize (a clean path)", func() { policy.Normalize(last) }},
		{"normalize (dot segments, escapes, //)", func() { policy.Normalize("/v1//t1/./orgs/%6F1/x/../items/42/") }},
		{fmt.Sprintf("resolve: match (last of %d templates)", cfg.templates), func() { t.Decide(policy.Request{Method: "GET", Target: last}) }},
		{fmt.Sprintf("resolve: no match (%d templates)", cfg.templates), func() { t.Decide(policy.Request{Method: "GET", Target: "/v1/t1/orgs/o1/nothing/42"}) }},
		{"resolve: tenant, falling to UNKNOWN", func() { t.Decide(policy.Request{Method: "POST", Target: last, Tenant: "acme"}) }},
	}
	fmt.Fprintf(w, "## Stages in process (%d calls each, ns)\n\n| stage | p50 | p95 | p99 |\n|---|---|---|---|\n", cfg.samples)
	for _, c := range cases {
		d := make([]time.Duration, cfg.samples)
		for i := range d {
			start := time.Now()
			c.fn()
			d[i] = time.Since(start)
		}
		slices.Sort(d)
		pct := func(p float64) int64 { return d[int(p*float64(len(d)-1))].Nanoseconds() }
		fmt.Fprintf(w, "| %s | %d | %d | %d |\n", c.name, pct(0.50), pct(0.95), pct(0.99))
	}
	fmt.Fprintln(w, "\nconsume: the THROTTLE.ALL column below (the same tiers, applied the same way).")
	fmt.Fprintln(w)
	return nil
}
