// Command raft benchmarks throttled's Raft mode (issue 13) on one machine, in
// one run, and prints the ratios as Markdown tables.
//
//	go run ./bench/raft [-runs 3] [-seconds 5] [-P 1,16] [-pin] [-skip etcd,failover]
//
// It has three parts:
//
//  1. throughput: redis-benchmark with CL.THROTTLE (bench/compare's case) at
//     each -P, 50 clients, against a single throttled node (everysec, the
//     default) and a 3-node throttled Raft cluster on loopback, with all
//     clients on the leader and with the clients spread over the three
//     nodes (one redis-benchmark per node at once, 17/17/16 clients, rps
//     summed): decisions per second and p50/p99 latency;
//  2. etcd: at -P 1, a 3-node etcd 3.4 (Debian's etcd-server) on loopback
//     taking puts from 50 clients with one request in flight each
//     (bench/raft/etcdload, on go.etcd.io/etcd/client/v3), measured in the
//     same rounds as the cluster: the strongly consistent store a user
//     would pick instead;
//  3. failover: kill -9 of the leader, then the time until a CL.THROTTLE
//     sent to a survivor after the kill gets a decision, median of
//     -failovers tries (the killed node is restarted between tries).
//
// Every node has its own data folder in a temp dir, every process runs on a
// free loopback port in its own process group, and all are stopped on exit,
// on error and on Ctrl-C. Progress goes to stderr, the report to stdout.
// Without redis-benchmark it fails; without etcd it leaves part 2 out and
// says why in the report. See bench/README.md ("Raft cluster").
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
)

// The parts of a run; -skip names them. etcd is measured inside the
// throughput part's -P 1 rounds, so it needs that part.
var parts = []string{"throughput", "etcd", "failover"}

type config struct {
	harness.PartFlags         // -P, -runs, -skip
	requests          int     // -n: requests of the run that sizes the measured ones
	seconds           float64 // -seconds: how long a measured run lasts, about
	clients           int     // -c
	failovers         int
	threads           int // throttled's --threads, every node
	pin               bool
	benchBin          string
	etcdBin           string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("raft", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, args, parts)
	fs.IntVar(&c.requests, "n", 20000, "requests of each setup's first, unmeasured run, which sizes the measured ones")
	fs.Float64Var(&c.seconds, "seconds", 5, "length of a measured run (throttled and etcd)")
	fs.IntVar(&c.clients, "c", 50, "clients (connections), each with -P requests in flight")
	fs.IntVar(&c.failovers, "failovers", 5, "leader kills to time; the median is reported")
	// redis-server runs commands on one thread and bench/compare and
	// bench/persist give throttled the same; here three nodes and the
	// client share the machine, which one thread per node also keeps fair.
	fs.IntVar(&c.threads, "threads", 1, "throttled --threads, for every node")
	fs.BoolVar(&c.pin, "pin", false, "run the servers on CPU 0 and the clients on the other CPUs (taskset)")
	fs.StringVar(&c.benchBin, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	fs.StringVar(&c.etcdBin, "etcd", "etcd", "etcd binary (Debian's etcd-server, 3.4)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.Parse(fs); err != nil {
		return c, err
	}
	if c.Skip["throughput"] {
		c.Skip["etcd"] = true
	}
	switch {
	case c.requests < 1 || c.seconds <= 0 || c.Runs < 1 || c.failovers < 1 || c.threads < 0:
		return c, errors.New("-n, -seconds, -runs and -failovers must be positive, -threads non-negative")
	case c.clients < clusterSize:
		return c, fmt.Errorf("-c: want at least %d clients, one per node", clusterSize)
	case !c.Skip["etcd"] && !slices.Contains(c.Pipelines, 1):
		return c, errors.New("etcd is compared at -P 1: include 1 in -P or -skip etcd")
	case c.pin && runtime.NumCPU() < 2:
		return c, errors.New("-pin needs at least two CPUs")
	}
	return c, nil
}

func main() { harness.Main("raft", parseFlags, bench) }

// runner holds what the parts share: the binaries, the temp folder, and
// the servers, so that all of them are stopped at the end.
type runner struct {
	cfg  config
	logf func(format string, a ...any)
	tmp  string
	bin  string // throttled

	single  *node    // the single node; nil without the throughput part
	cluster *cluster // the 3-node throttled cluster
	etcd    *etcd    // nil when etcd is not measured
	// noEtcd says why etcd was left out, for the report.
	noEtcd string
}

func bench(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	r := &runner{cfg: cfg, logf: harness.Logf(stderr)}
	return r.main(ctx, stdout)
}

func (r *runner) main(ctx context.Context, stdout io.Writer) error {
	need := []string{r.cfg.benchBin}
	if r.cfg.pin {
		need = append(need, "taskset")
	}
	if err := harness.LookPaths(need...); err != nil {
		return err
	}
	if !r.cfg.Skip["etcd"] {
		if _, err := exec.LookPath(r.cfg.etcdBin); err != nil {
			r.noEtcd = fmt.Sprintf("%v (Debian: apt-get install etcd-server)", err)
			r.logf("etcd left out: %s", r.noEtcd)
		}
	}
	var err error
	if r.tmp, err = os.MkdirTemp("", "throttled-raft-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)
	defer r.stopAll() // before the folder goes
	if r.bin, err = harness.BuildThrottled(ctx, r.tmp, r.logf); err != nil {
		return err
	}
	var load string
	if !r.cfg.Skip["etcd"] && r.noEtcd == "" {
		if load, err = harness.Build(ctx, "bench/raft/etcdload", filepath.Join(r.tmp, "etcdload"), r.logf); err != nil {
			return fmt.Errorf("%w\n(etcdload is built from the Go module proxy; -skip etcd leaves etcd out)", err)
		}
	}
	began := time.Now()
	r.writeHeader(ctx, stdout, load)

	if r.cluster, err = r.startCluster(ctx); err != nil {
		return err
	}
	if !r.cfg.Skip["throughput"] {
		if r.single, err = r.startSingle(ctx); err != nil {
			return err
		}
		if load != "" {
			if r.etcd, err = r.startEtcd(ctx, load); err != nil {
				return err
			}
		}
		res, err := r.throughput(ctx)
		if err != nil {
			return err
		}
		writeThroughput(stdout, r.reportSetup(), res)
		// The failover part needs only the cluster: free the CPU and
		// memory the others hold.
		r.stopEtcd()
		r.single.stop(r.logf)
	}
	if !r.cfg.Skip["failover"] {
		tries, err := r.failovers(ctx)
		if err != nil {
			return err
		}
		writeFailovers(stdout, tries)
	}
	harness.Footer(stdout, began)
	return nil
}

func (r *runner) writeHeader(ctx context.Context, w io.Writer, load string) {
	goVersion := harness.GoVersion(r.bin)
	harness.Heading(w, "Raft: a 3-node throttled cluster vs one node and vs etcd", "go run ./bench/raft "+strings.Join(r.cfg.Argv, " "))
	fmt.Fprintf(w, "- Machine: %s\n", harness.Machine())
	fmt.Fprintf(w, "- Load average at the start (1, 5, 15 min): %s\n", harness.LoadAvg())
	fmt.Fprintf(w, "- Go: %s; throttled built from ./cmd/throttled, every node with `--threads %d`\n", goVersion, r.cfg.threads)
	fmt.Fprintf(w, "- Client: %s\n", harness.FirstLine(ctx, r.cfg.benchBin, "--version"))
	switch {
	case r.cfg.Skip["etcd"]:
		fmt.Fprintf(w, "- etcd: skipped (-skip)\n")
	case r.noEtcd != "":
		fmt.Fprintf(w, "- etcd: **not measured**: %s\n", r.noEtcd)
	default:
		fmt.Fprintf(w, "- etcd: %s; load from bench/raft/etcdload on %s\n", harness.FirstLine(ctx, r.cfg.etcdBin, "--version"), etcdClientVersion(load))
	}
	if r.cfg.pin {
		fmt.Fprintf(w, "- CPUs (-pin): servers on CPU 0 (`%s`), clients on the rest (`%s`)\n",
			strings.Join(harness.ServerWrap(true), " "), strings.Join(harness.ClientWrap(true), " "))
	} else {
		fmt.Fprintf(w, "- CPUs: the clients and every server share all of them\n")
	}
}

// etcdClientVersion reads the etcd client module's version from the
// etcdload binary.
func etcdClientVersion(bin string) string {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "an unknown client (" + err.Error() + ")"
	}
	for _, d := range bi.Deps {
		if d.Path == "go.etcd.io/etcd/client/v3" {
			return d.Path + " " + d.Version
		}
	}
	return "an unknown client"
}

// stopAll stops every server still running.
func (r *runner) stopAll() {
	r.stopEtcd()
	if r.single != nil {
		r.single.stop(r.logf)
	}
	if r.cluster != nil {
		for _, n := range r.cluster.nodes {
			n.stop(r.logf)
		}
	}
}

// start runs a server under -pin's CPU wrapper, its working directory the
// temp folder.
func (r *runner) start(ctx context.Context, c proc.Config) (*proc.Process, error) {
	c.Dir, c.Wrap = r.tmp, harness.ServerWrap(r.cfg.pin)
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	return proc.Start(ctx, c)
}
