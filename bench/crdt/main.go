// Command crdt benchmarks throttled's active-active mode (--replication
// crdt) on one machine, in one run, and prints Markdown tables.
//
//	go run ./bench/crdt [-runs 3] [-seconds 5] [-P 1,16] [-skip accuracy]
//
// It has three parts:
//
//  1. throughput: redis-benchmark with CL.THROTTLE (bench/compare's case)
//     at each -P, 50 clients, against a single node and a 3-node mesh
//     (same --threads, --dir and appendfsync), with every client on one
//     node and with the clients spread over the three (one
//     redis-benchmark per node at once, rps summed);
//  2. lag: while redis-benchmark loads node a (at each -P), a prober
//     writes a fresh key on a and peeks it on b until the write shows,
//     -probes times, at --crdt-sync-interval 5 ms (the default), 1 ms and
//     20 ms, and at rest; beside it, the lag_ms that INFO replication
//     reports on b;
//  3. accuracy: bench/accuracy's workload (package bench/internal/accuracy)
//     against a single node and against 2- and 3-node meshes whose nodes
//     take the requests in turn, as a round-robin balancer sends them.
//
// Every node has its own data folder in a temp dir, every process runs on a
// free loopback port in its own process group, and all are stopped on exit,
// on error and on Ctrl-C. Progress goes to stderr, the report to stdout.
// See bench/README.md ("Active-active (CRDT) mesh").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/accuracy"
	"github.com/throttleddb/throttled/bench/internal/harness"
)

var parts = []string{"throughput", "lag", "accuracy"}

type config struct {
	harness.PartFlags         // -P, -runs, -skip
	requests          int     // -n: requests of the run that sizes the measured ones
	seconds           float64 // -seconds
	clients           int     // -c
	threads           int
	probes            int             // -probes per lag setting
	intervals         []time.Duration // -intervals: --crdt-sync-interval of the lag part
	acc               accuracy.Config // -acc-minutes, -acc-clients, -seed, -lag
	benchBin          string
	profile           string // a folder for CPU profiles of the nodes; "" for none
	load              load   // spreadLoad, admitLoad with -admit, hotLoad with -hot
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("crdt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, args, parts)
	var intervals string
	var admit, hot bool
	fs.IntVar(&c.requests, "n", 20000, "requests of each setup's first, unmeasured run, which sizes the measured ones")
	fs.Float64Var(&c.seconds, "seconds", 5, "length of a measured throughput run")
	fs.IntVar(&c.clients, "c", 50, "clients (connections), each with -P requests in flight")
	fs.IntVar(&c.threads, "threads", 0, "throttled --threads, for every node (0, the server's default: one loop per CPU)")
	fs.IntVar(&c.probes, "probes", 200, "replication-lag probes per setting")
	fs.StringVar(&intervals, "intervals", "5ms,1ms,20ms", "--crdt-sync-interval values of the lag part; the first is also the throughput mesh's")
	fs.IntVar(&c.acc.Minutes, "acc-minutes", 10, "accuracy: simulated minutes of traffic")
	fs.IntVar(&c.acc.Clients, "acc-clients", 100, "accuracy: clients")
	fs.Uint64Var(&c.acc.Seed, "seed", 1, "accuracy: seed of the traffic")
	fs.DurationVar(&c.acc.Lag, "lag", 100*time.Millisecond, "accuracy: replication lag modelled in the mesh, in simulated time")
	fs.StringVar(&c.benchBin, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	fs.StringVar(&c.profile, "profile", "", "build throttled with net/http/pprof (a go build -overlay) and write CPU profiles of the nodes "+
		"during the first measured run of each setup at the highest -P into this folder")
	fs.BoolVar(&admit, "admit", false, "give the 100,000 keys limits no client reaches (CL.THROTTLE k:__rand_int__ 1000 5 1): every call is admitted and written")
	fs.BoolVar(&hot, "hot", false, "send every call to one key that is never full (CL.THROTTLE hot 1000000 1000000 1) instead of 100,000 keys")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.load = spreadLoad
	switch {
	case admit && hot:
		return c, errors.New("-admit and -hot are two loads: give one")
	case admit:
		c.load = admitLoad
	case hot:
		c.load = hotLoad
	}
	if err := c.Parse(fs); err != nil {
		return c, err
	}
	for v := range strings.SplitSeq(intervals, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < time.Millisecond || d > time.Second {
			return c, fmt.Errorf("-intervals: bad interval %q (1ms to 1s)", v)
		}
		c.intervals = append(c.intervals, d)
	}
	switch {
	case c.requests < 1 || c.seconds <= 0 || c.Runs < 1 || c.threads < 0 || c.probes < 1:
		return c, errors.New("-n, -seconds, -runs and -probes must be positive, -threads non-negative")
	case c.clients < meshSize:
		return c, fmt.Errorf("-c: want at least %d clients, one per node", meshSize)
	case c.acc.Minutes < 1 || c.acc.Clients < 1 || c.acc.Lag <= 0:
		return c, errors.New("-acc-minutes, -acc-clients and -lag must be positive")
	}
	return c, nil
}

func main() { harness.Main("crdt", parseFlags, bench) }

// runner holds what the parts share: the binary, the temp folder and the
// servers running, so that all of them are stopped at the end.
type runner struct {
	cfg  config
	logf func(format string, a ...any)
	tmp  string
	bin  string
	// live are the nodes started and not yet stopped.
	live map[*node]bool
}

func bench(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	r := &runner{cfg: cfg, live: map[*node]bool{}, logf: harness.Logf(stderr)}
	return r.main(ctx, stdout)
}

func (r *runner) main(ctx context.Context, stdout io.Writer) error {
	if !r.cfg.Skip["throughput"] || !r.cfg.Skip["lag"] {
		if err := harness.LookPaths(r.cfg.benchBin); err != nil {
			return err
		}
	}
	var err error
	if r.tmp, err = os.MkdirTemp("", "throttled-crdt-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)
	defer r.stopAll() // before the folder goes
	if r.cfg.profile != "" {
		r.bin, err = r.buildProfiling(ctx)
	} else {
		r.bin, err = harness.BuildThrottled(ctx, r.tmp, r.logf)
	}
	if err != nil {
		return err
	}
	began := time.Now()
	r.writeHeader(ctx, stdout)
	if !r.cfg.Skip["throughput"] {
		res, err := r.throughput(ctx)
		if err != nil {
			return err
		}
		writeThroughput(stdout, r.cfg, res)
	}
	if !r.cfg.Skip["lag"] {
		rows, err := r.lag(ctx)
		if err != nil {
			return err
		}
		writeLag(stdout, r.cfg, rows)
	}
	if !r.cfg.Skip["accuracy"] {
		res, err := r.accuracy(ctx)
		if err != nil {
			return err
		}
		writeAccuracy(stdout, res)
	}
	harness.Footer(stdout, began)
	return nil
}

func (r *runner) writeHeader(ctx context.Context, w io.Writer) {
	goVersion := harness.GoVersion(r.bin)
	harness.Heading(w, "Active-active (CRDT) mesh: 3 nodes vs one node", "go run ./bench/crdt "+strings.Join(r.cfg.Argv, " "))
	fmt.Fprintf(w, "- Machine: %s; the nodes, the load generator and the prober share them (%d CPUs for %d nodes and a client)\n",
		harness.Machine(), runtime.NumCPU(), meshSize)
	fmt.Fprintf(w, "- Load average at the start (1, 5, 15 min): %s\n", harness.LoadAvg())
	fmt.Fprintf(w, "- Go: %s; throttled built from ./cmd/throttled, every node with `--threads %d`%s\n", goVersion, r.cfg.threads, threadsNote(r.cfg.threads))
	if !r.cfg.Skip["throughput"] || !r.cfg.Skip["lag"] {
		fmt.Fprintf(w, "- Client: %s\n", harness.FirstLine(ctx, r.cfg.benchBin, "--version"))
	}
	if r.cfg.profile != "" {
		fmt.Fprintf(w, "- Profiled (-profile %s): the nodes serve net/http/pprof, and CPU profiles were taken during the first run of each setup at the highest -P\n", r.cfg.profile)
	}
}
