// Command accuracy runs the accuracy workload of the LB-filter study in
// virtual time and prints each algorithm's throttling deviation as a Markdown
// table, beside the study's published figures.
//
//	go run ./bench/accuracy [-seed 1] [-minutes 10] [-clients 100] [-addr host:port[,host:port...]] [-lag 5ms] [-out file]
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
// With several addresses in -addr, they must be the nodes of one mesh
// (--replication crdt --debug-clock): the requests go to them in turn, in
// time order, as a round-robin load balancer sends them. The replay then
// models a replication lag of -lag in simulated time: a batch spans at most
// -lag, the nodes' pipelines go at once, and before the next batch every
// node must have merged a fresh write of every other node made after its
// batch. Nothing is flushed (a mesh refuses FLUSHALL): each algorithm has
// keys of its own and starts where the previous one ended, from a minute
// after the present, since a mesh node's clock never goes back.
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
	"io"
	"os"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/accuracy"
	"github.com/throttleddb/throttled/bench/internal/harness"
)

type config struct {
	acc  accuracy.Config
	addr string // a running server, or a mesh's nodes, comma-separated; "" to build and start one
	out  string // also write the report here
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&c.acc.Seed, "seed", 1, "seed of the traffic")
	fs.IntVar(&c.acc.Minutes, "minutes", 10, "simulated minutes of traffic")
	fs.IntVar(&c.acc.Clients, "clients", 100, "number of clients (5% at 120/min, 25% at 90/min, the rest at 30/min)")
	fs.StringVar(&c.addr, "addr", "", "use the throttled server at host:port (started with --debug-clock; it is flushed) instead of starting one; "+
		"several, comma-separated: the nodes of one mesh (--replication crdt --debug-clock), sent the requests round-robin")
	fs.DurationVar(&c.acc.Lag, "lag", accuracy.DefaultLag, "with several -addr: the replication lag modelled, in simulated time")
	fs.StringVar(&c.out, "out", "", "also write the report to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.acc.Minutes < 1 || c.acc.Clients < 1:
		return c, errors.New("-minutes and -clients must be positive")
	case c.acc.Lag <= 0:
		return c, errors.New("-lag must be positive")
	}
	if c.addr != "" {
		c.acc.Addrs = strings.Split(c.addr, ",")
	}
	if len(c.acc.Addrs) > 1 {
		// A mesh node's clock never goes back: start after the present.
		c.acc.Start = accuracy.StartAfter(time.Now())
	}
	return c, nil
}

func main() { harness.Main("accuracy", parseFlags, run) }

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	if len(cfg.acc.Addrs) == 0 {
		tmp, err := os.MkdirTemp("", "throttled-accuracy-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		p, err := harness.StartThrottled(ctx, tmp, logf, "--debug-clock", "--persistence", "off")
		if err != nil {
			return err
		}
		defer func() {
			if err := p.Stop(); err != nil {
				logf("stop throttled: %v", err)
			}
		}()
		cfg.acc.Addrs = []string{p.Addr}
	}
	cfg.acc.Logf = logf
	began := time.Now()
	results, err := accuracy.Measure(ctx, cfg.acc)
	if err != nil {
		return err
	}
	logf("done in %v", time.Since(began).Round(time.Millisecond))
	var b bytes.Buffer
	fmt.Fprintf(&b, "`go run ./bench/accuracy -seed %d -minutes %d -clients %d`\n\n", cfg.acc.Seed, cfg.acc.Minutes, cfg.acc.Clients)
	accuracy.Describe(&b, cfg.acc)
	if n := len(cfg.acc.Addrs); n > 1 {
		fmt.Fprintf(&b, "- Mesh: %d nodes, requests round-robin, replication lag modelled: %v of simulated time\n", n, cfg.acc.Lag)
	}
	fmt.Fprintln(&b)
	accuracy.WriteTable(&b, results)
	if _, err := stdout.Write(b.Bytes()); err != nil {
		return err
	}
	if cfg.out != "" {
		return os.WriteFile(cfg.out, b.Bytes(), 0o644)
	}
	return nil
}
