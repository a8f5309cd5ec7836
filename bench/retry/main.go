// Command retry emulates the client-side study's synthetic scenarios
// ("Rethinking HTTP API Rate Limiting: A Client-Side Approach", Section IV
// and Table V) in virtual time: clients with UB, WB, ATB, AATB (client/retry)
// and our Hinted strategy share a token bucket of 100 refilling 80 per
// minute, run by throttled's TB engine; AATB reports to the aggregator that
// TELEMETRY.REPORT answers from. Seeded and deterministic; nothing sleeps.
// It prints each strategy's 429s, total duration, mean service time (first
// attempt to success) and mean response time (arrival to success),
// averaged over -runs seeds, as reductions against UB beside the study's
// published figures.
//
//	go run ./bench/retry              # 30 seeds, every scenario
//	go run ./bench/retry -runs 100
//	go run ./bench/retry -rtt 40ms    # each attempt a 40 ms round trip
//	go run ./bench/retry -sweep       # five clients: round trips, demand
//	go run ./bench/retry -http        # the real-time run over HTTP
//
// With -http it runs RealTime, a scenario scaled down to 10 s, both in the
// emulator (-runs seeds) and in real time (-http-runs seeds): clients with
// the strategies as http.RoundTripper wrappers, a Go HTTP service limited
// by client/httplimit, and a throttled process built from this checkout,
// on ports from the OS.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/bench/internal/harness"
)

// published are the study's reductions against UB: 429s and the change of
// the total duration, in percent (WB, ATB, AATB), per scenario.
var published = map[string]map[string][2]float64{
	"5 clients, 500 requests":   {"WB": {-48.6, 8.6}, "ATB": {-59, 10}, "AATB": {-96.9, 13.3}},
	"5 clients, 800 requests":   {"WB": {-26.4, 7.9}, "ATB": {-70.3, 13.2}, "AATB": {-97.3, 19.8}},
	"100 clients, 500 requests": {"WB": {-99.4, 30.4}, "ATB": {-91.5, 24.3}, "AATB": {-77.8, 26.4}},
	"100 clients, 800 requests": {"WB": {-19.3, 10.3}, "ATB": {-90.5, 23.1}, "AATB": {-91.7, 11.7}},
}

func main() {
	runs := flag.Int("runs", 30, "seeds averaged per scenario and strategy")
	httpRun := flag.Bool("http", false, "run the real-time scenario over HTTP against a throttled process")
	httpRuns := flag.Int("http-runs", 3, "seeds averaged per strategy in the real-time run")
	rtt := flag.Duration("rtt", 0, "each emulated attempt's round trip (0: answered at once)")
	sweep := flag.Bool("sweep", false, "five clients' ATB and AATB against UB over round trips and demands")
	flag.Parse()
	if *runs < 1 || *httpRuns < 1 || *rtt < 0 {
		fmt.Fprintln(os.Stderr, "retry: -runs and -http-runs must be at least 1, -rtt not negative")
		os.Exit(2)
	}
	switch {
	case *sweep:
		reportSweep(os.Stdout, *runs)
		return
	case !*httpRun:
		report(os.Stdout, *runs, *rtt)
		return
	}
	if err := reportHTTP(context.Background(), os.Stdout, RealTime, *runs, *httpRuns); err != nil {
		fmt.Fprintln(os.Stderr, "retry:", err)
		os.Exit(1)
	}
}

// reportHTTP starts a throttled process, runs sc over HTTP httpRuns times
// per strategy and prints the figures beside the emulator's for runs seeds.
func reportHTTP(ctx context.Context, w io.Writer, sc Scenario, runs, httpRuns int) error {
	dir, err := os.MkdirTemp("", "retry-rt-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	p, err := harness.StartThrottled(ctx, dir, logf)
	if err != nil {
		return err
	}
	defer p.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
	defer rdb.Close()
	fmt.Fprintf(w, "\n%s (emulator: %d seeds; HTTP: %d seeds)\n\n", sc.Name, runs, httpRuns)
	fmt.Fprintln(w, "| strategy | emulator 429s | vs UB | duration | HTTP 429s | vs UB | duration | HTTP mean response |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	var ubEm, ubHTTP Result
	for _, name := range RealTimeStrategies {
		em := Average(sc, name, runs)
		var sum Result
		for seed := 1; seed <= httpRuns; seed++ {
			r, err := RunHTTP(ctx, rdb, sc, name, uint64(seed))
			if err != nil {
				return fmt.Errorf("%s, seed %d: %w", name, seed, err)
			}
			sum.Got429 += r.Got429
			sum.Duration += r.Duration
			sum.Response += r.Response
		}
		n := time.Duration(httpRuns)
		h := Result{Got429: sum.Got429 / float64(httpRuns), Duration: sum.Duration / n, Response: sum.Response / n}
		if name == "UB" {
			ubEm, ubHTTP = em, h
		}
		fmt.Fprintf(w, "| %s | %.1f | %+.1f%% | %s | %.1f | %+.1f%% | %s | %s |\n", name,
			em.Got429, pct(em.Got429, ubEm.Got429), em.Duration.Round(10*time.Millisecond),
			h.Got429, pct(h.Got429, ubHTTP.Got429), h.Duration.Round(10*time.Millisecond), h.Response.Round(10*time.Millisecond))
	}
	return nil
}

// report prints one table per scenario, each attempt a round trip of rtt.
func report(w io.Writer, runs int, rtt time.Duration) {
	for _, sc := range Scenarios {
		sc.RTT = rtt
		fmt.Fprintf(w, "\n%s (%d seeds)\n\n", sc.Name, runs)
		fmt.Fprintln(w, "| strategy | 429s | vs UB | study | duration | vs UB | study | mean service | mean response |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		var ub Result
		for _, name := range Strategies {
			r := Average(sc, name, runs)
			if name == "UB" {
				ub = r
			}
			p, ok := published[sc.Name][name]
			study429, studyDur := "", ""
			if ok {
				study429, studyDur = fmt.Sprintf("%+.1f%%", p[0]), fmt.Sprintf("%+.1f%%", p[1])
			}
			fmt.Fprintf(w, "| %s | %.1f | %+.1f%% | %s | %s | %+.1f%% | %s | %s | %s |\n", name, r.Got429,
				pct(r.Got429, ub.Got429), study429, r.Duration.Round(100*time.Millisecond),
				pct(r.Duration.Seconds(), ub.Duration.Seconds()), studyDur, r.Service.Round(10*time.Millisecond),
				r.Response.Round(10*time.Millisecond))
		}
	}
}

// sweepRTTs and sweepTotals are the round trips and the demands -sweep
// varies in the five-client scenarios.
var (
	sweepRTTs   = []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	sweepTotals = []int{450, 475, 500, 525, 550, 575, 600, 700, 800}
)

// reportSweep prints, for five clients, the 429s of UB, ATB and AATB and
// the reductions beside the study's: at 500 and 800 requests over the
// round trips, then over the demands with no round trip and with 50 ms.
func reportSweep(w io.Writer, runs int) {
	header := func(title string) {
		fmt.Fprintf(w, "\n%s (%d seeds)\n\n", title, runs)
		fmt.Fprintln(w, "| requests | RTT | UB 429s | ATB 429s | vs UB | study | AATB 429s | vs UB | study |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	}
	row := func(sc Scenario) {
		ub, atb, aatb := Average(sc, "UB", runs), Average(sc, "ATB", runs), Average(sc, "AATB", runs)
		study := func(name string) string {
			if p, ok := published[sc.Name][name]; ok {
				return fmt.Sprintf("%+.1f%%", p[0])
			}
			return ""
		}
		fmt.Fprintf(w, "| %d | %v | %.1f | %.1f | %+.1f%% | %s | %.1f | %+.1f%% | %s |\n", sc.Total, sc.RTT,
			ub.Got429, atb.Got429, pct(atb.Got429, ub.Got429), study("ATB"),
			aatb.Got429, pct(aatb.Got429, ub.Got429), study("AATB"))
	}
	header("Five clients, round trips")
	for _, base := range Scenarios[:2] {
		for _, rtt := range sweepRTTs {
			sc := base
			sc.RTT = rtt
			row(sc)
		}
	}
	for _, rtt := range []time.Duration{0, 50 * time.Millisecond} {
		header(fmt.Sprintf("Five clients, demand, RTT %v", rtt))
		for _, total := range sweepTotals {
			sc := Scenarios[0]
			sc.Name, sc.Total, sc.RTT = fmt.Sprintf("5 clients, %d requests", total), total, rtt
			row(sc)
		}
	}
}

// pct is the change from base to x, in percent.
func pct(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return (x - base) / base * 100
}
