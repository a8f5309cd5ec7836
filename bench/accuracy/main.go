// Command accuracy runs the accuracy workload of the LB-filter study in
// virtual time and prints each algorithm's throttling deviation as a Markdown
// table, beside the study's published figures.
//
//	go run ./bench/accuracy [-seed 1] [-minutes 10] [-clients 100] [-addr host:port] [-out file]
//
// The workload, as the study describes it: clients in three groups (5% at 120
// requests/min, 25% at 90/min, 70% at 30/min), a limit of 100 requests per
// minute per client, rejected requests retried, 10 minutes of traffic, for
// FWC, SWL, SWC with 2 and 5 sub-windows, TB (capacity 5, refill 1.67/s) and
// GCRA (100/min, burst 5). The choices the study leaves open:
//
//   - Traffic: each client sends first tries as a Poisson process at its
//     group's rate (exponential gaps), starting at a uniformly random offset
//     within its first mean gap. Everything comes from -seed (client i uses
//     the stream PCG(seed, i)), so a seed gives the same traffic, the same
//     replies and the same table on every run. The same first tries are
//     replayed for every algorithm; only the retries differ.
//   - Retries: a rejected request is sent again 1 s after the rejection, until
//     it is allowed or the simulated time is over. New requests keep coming
//     meanwhile (the clients do not slow down). Every attempt, first try or
//     retry, is a request in the deviation.
//   - Time: simulated time starts at Unix 1700000040 s (2023-11-14 22:14 UTC),
//     a multiple of 60 s, so fixed windows start with the run as they start on
//     the minute in practice. Times are integer nanoseconds.
//   - Parameters: FWC.THROTTLE k 100 60; SWL.THROTTLE k 100 60; SWC.THROTTLE k
//     100 60 1 SUBWINDOWS 2 and SUBWINDOWS 5; TB.THROTTLE k 5 5 3 (capacity 5,
//     5 tokens per 3 s = 1.67/s); CL.THROTTLE k 5 100 60, reading "burst 5" as
//     redis-cell's max_burst = 5 (so 6 may pass at once). Each client has its
//     own key; FLUSHALL runs before each algorithm.
//   - Deviation, as the study defines it: a request at t should get 200 when
//     fewer than 100 of the same client's requests were allowed (by the
//     server under test) in (t-60 s, t], this request excluded, else 429; the
//     deviation is mismatches / requests. Mismatches are split into
//     over-admitted (server 200, oracle 429) and under-admitted (server 429,
//     oracle 200). SWL enforces exactly this rule, so it must come out at 0.
//
// The server runs with --debug-clock: its clock stands still and the runner
// moves it. Events are replayed in global time order; for each, DEBUG CLOCK
// SET <t> then the throttle command. A reply can only cause a retry 1 s
// later, so all events less than 1 s after the earliest pending one are
// known in advance and go to the server in one pipeline (in time order, on
// one connection); that makes one round trip per simulated second instead of
// one per request, and changes no answer.
//
// Without -addr it builds ./cmd/throttled into a temp dir and starts it with
// --debug-clock --persistence off on a free loopback port, and stops it on
// exit, on error and on Ctrl-C. With -addr it uses a running server, which
// must have been started with --debug-clock; its data is flushed.
//
// The report goes to stdout (and to -out when given), progress to stderr.
// See bench/README.md, "Accuracy workload".
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
)

type config struct {
	seed    uint64
	minutes int
	clients int
	addr    string // a running server; "" to build and start one
	out     string // also write the report here
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&c.seed, "seed", 1, "seed of the traffic")
	fs.IntVar(&c.minutes, "minutes", 10, "simulated minutes of traffic")
	fs.IntVar(&c.clients, "clients", 100, "number of clients (5% at 120/min, 25% at 90/min, the rest at 30/min)")
	fs.StringVar(&c.addr, "addr", "", "use the throttled server at host:port (started with --debug-clock; it is flushed) instead of starting one")
	fs.StringVar(&c.out, "out", "", "also write the report to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.minutes < 1 || c.clients < 1:
		return c, errors.New("-minutes and -clients must be positive")
	}
	return c, nil
}

func main() { harness.Main("accuracy", parseFlags, accuracy) }

func accuracy(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	addr := cfg.addr
	if addr == "" {
		tmp, err := os.MkdirTemp("", "throttled-accuracy-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		bin, err := harness.BuildThrottled(ctx, tmp, logf)
		if err != nil {
			return err
		}
		port, err := proc.FreePort()
		if err != nil {
			return err
		}
		addr = proc.Addr(port)
		args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--debug-clock", "--persistence", "off"}
		logf("starting %s %s", bin, strings.Join(args, " "))
		p, err := proc.Start(ctx, proc.Config{Name: "throttled", Path: bin, Args: args, Addr: addr, Dir: tmp, Timeout: 15 * time.Second})
		if err != nil {
			return err
		}
		defer func() {
			if err := p.Stop(); err != nil {
				logf("stop throttled: %v", err)
			}
		}()
	}
	began := time.Now()
	results, err := measure(ctx, addr, cfg, logf)
	if err != nil {
		return err
	}
	logf("done in %v", time.Since(began).Round(time.Millisecond))
	var b bytes.Buffer
	writeReport(&b, cfg, results)
	if _, err := stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if cfg.out != "" {
		return os.WriteFile(cfg.out, b.Bytes(), 0o644)
	}
	return nil
}

// measure runs the workload for every algorithm against the server at addr,
// which must have the debug clock.
func measure(ctx context.Context, addr string, cfg config, logf func(string, ...any)) ([]result, error) {
	rdb := redis.NewClient(&redis.Options{
		Addr:     addr,
		Protocol: 2,
		PoolSize: 1, // one connection: the server runs the commands in the order sent
		// A replayed pipeline would apply its throttle calls twice.
		MaxRetries:  -1,
		ReadTimeout: time.Minute,
	})
	defer rdb.Close()
	if err := rdb.Do(ctx, "DEBUG", "CLOCK", "SET", start).Err(); err != nil {
		return nil, fmt.Errorf("%s: DEBUG CLOCK SET: %w", addr, err)
	}
	duration := int64(cfg.minutes) * int64(time.Minute)
	first := arrivals(cfg.seed, clientRates(cfg.clients), duration)
	var results []result
	for _, alg := range algorithms {
		began := time.Now()
		r, err := replay(ctx, rdb, alg, first, start+duration)
		if err != nil {
			return nil, err
		}
		logf("%-20s %8d requests, deviation %.2f%% (%v)", alg.Name, r.Requests, r.deviation(), time.Since(began).Round(time.Millisecond))
		results = append(results, r)
	}
	return results, nil
}

// writeReport prints the run's parameters and the table.
func writeReport(w io.Writer, cfg config, results []result) {
	rates := clientRates(cfg.clients)
	var groupsText []string
	for _, g := range groups {
		n := 0
		for _, r := range rates {
			if r == g.perMinute {
				n++
			}
		}
		groupsText = append(groupsText, fmt.Sprintf("%d at %d/min", n, g.perMinute))
	}
	firstTries := 0
	for _, ts := range arrivals(cfg.seed, rates, int64(cfg.minutes)*int64(time.Minute)) {
		firstTries += len(ts)
	}
	fmt.Fprintf(w, "`go run ./bench/accuracy -seed %d -minutes %d -clients %d`\n\n", cfg.seed, cfg.minutes, cfg.clients)
	fmt.Fprintf(w, "- Clients: %d (%s), Poisson arrivals, seed %d: %d first tries\n", cfg.clients, strings.Join(groupsText, ", "), cfg.seed, firstTries)
	fmt.Fprintf(w, "- Limit: %d per %d s per client; a rejected request is retried %v later until allowed or the run ends\n",
		limit, window/int64(time.Second), time.Duration(retryDelay))
	fmt.Fprintf(w, "- Simulated time: %d min from %s (Unix %d s), server on --debug-clock\n",
		cfg.minutes, time.Unix(0, start).UTC().Format("2006-01-02 15:04 MST"), start/int64(time.Second))
	fmt.Fprintf(w, "- Deviation: requests whose answer differs from \"200 if fewer than %d of the client's requests were allowed in the preceding %d s\"\n\n",
		limit, window/int64(time.Second))
	fmt.Fprintf(w, "| algorithm | command | requests | allowed | over-admitted | under-admitted | deviation | study |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		study := r.Alg.Study
		if study == "" {
			study = "—"
		}
		fmt.Fprintf(w, "| %s | `%s <key> %s` | %d | %d | %d | %d | %.2f%% | %s |\n",
			r.Alg.Name, r.Alg.Cmd, r.Alg.Args, r.Requests, r.Allowed, r.Over, r.Under, r.deviation(), study)
	}
}
