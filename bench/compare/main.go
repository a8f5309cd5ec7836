// Command compare benchmarks throttled and redis-server side by side with
// redis-benchmark and prints the throughput ratios as Markdown tables.
//
//	go run ./bench/compare [-n 200000] [-P 1,16] [-runs 1] [-cases PING,CL.THROTTLE]
//
// It builds ./cmd/throttled (or uses -throttled), starts it and Debian's
// redis-server on free loopback ports, loads bench/gcra.lua (redis-cell's
// CL.THROTTLE as a Lua script) into redis-server, checks that both servers
// give the same reply to every case, then runs redis-benchmark for each case
// in the table in cases.go against both servers, interleaved. Progress goes to
// stderr and the report to stdout. Both servers are stopped on exit, on error
// and on Ctrl-C. See bench/README.md.
package main

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"math"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

type config struct {
	throttledBin   string
	throttledArgs  []string
	throttledAddr  string
	redisBin       string
	redisArgs      []string
	benchBin       string
	requests       int
	clients        int
	keyspace       int
	pipelines      []int
	runs           int
	threads        int
	cases          []string
	startTimeout   time.Duration
	benchTimeout   time.Duration
	pin            bool
	throttledFlags string // raw -throttled-args, for the report
	redisFlags     string // raw -redis-args, for the report
}

// hiddenFlags are accepted but left out of -h.
var hiddenFlags = map[string]bool{"throttled-addr": true}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pipelines, casesFlag string
	fs.StringVar(&c.throttledBin, "throttled", "", "prebuilt throttled binary (default: go build ./cmd/throttled into a temp dir)")
	// redis-server runs its commands on one thread; --threads 1 gives
	// throttled the same single core, which also leaves the other cores to
	// redis-benchmark on a small machine. Pass -throttled-args "" to use all.
	fs.StringVar(&c.throttledFlags, "throttled-args", "--threads 1 --persistence off", "extra arguments for throttled, after --bind and --port (shell-like quoting)")
	fs.StringVar(&c.throttledAddr, "throttled-addr", "", "benchmark an already running server at host:port in the throttled slot instead of starting one")
	fs.StringVar(&c.redisBin, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&c.redisFlags, "redis-args", "", "extra arguments for redis-server (shell-like quoting)")
	fs.StringVar(&c.benchBin, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	fs.BoolVar(&c.pin, "pin", false, "run the servers on CPU 0 and redis-benchmark on the other CPUs (taskset), so the client does not take CPU from the server it measures")
	fs.IntVar(&c.requests, "n", 200000, "requests per redis-benchmark run (-n)")
	fs.IntVar(&c.clients, "c", 50, "parallel connections (-c)")
	fs.IntVar(&c.keyspace, "r", 100000, "key space for __rand_int__ (-r)")
	fs.StringVar(&pipelines, "P", "1,16", "comma-separated pipeline depths (-P)")
	fs.IntVar(&c.runs, "runs", 1, "repeat each measurement this many times and report the median")
	fs.IntVar(&c.threads, "threads", 0, "redis-benchmark --threads (0: single-threaded client)")
	fs.StringVar(&casesFlag, "cases", "", "comma-separated case names to run (default: all)")
	fs.DurationVar(&c.startTimeout, "start-timeout", 15*time.Second, "how long a server may take to answer PING")
	fs.DurationVar(&c.benchTimeout, "bench-timeout", 10*time.Minute, "limit for one redis-benchmark run")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./bench/compare [flags]\n\n"+
			"Benchmarks throttled against redis-server with redis-benchmark; Markdown report on stdout.\n\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			if hiddenFlags[f.Name] {
				return
			}
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(stderr, "  -%s %s\n    \t%s", f.Name, name, usage)
			if f.DefValue != "" && f.DefValue != "0" {
				fmt.Fprintf(stderr, " (default %q)", f.DefValue)
			}
			fmt.Fprintln(stderr)
		})
		fmt.Fprintf(stderr, "\nCases: %s\n", strings.Join(caseNames(), ", "))
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.throttledArgs, err = splitArgs(c.throttledFlags); err != nil {
		return c, fmt.Errorf("-throttled-args: %w", err)
	}
	if c.redisArgs, err = splitArgs(c.redisFlags); err != nil {
		return c, fmt.Errorf("-redis-args: %w", err)
	}
	if c.pipelines, err = harness.ParsePipelines(pipelines); err != nil {
		return c, err
	}
	if casesFlag != "" {
		for name := range strings.SplitSeq(casesFlag, ",") {
			name = strings.TrimSpace(name)
			if findCase(name) == nil {
				return c, fmt.Errorf("-cases: unknown case %q (have %s)", name, strings.Join(caseNames(), ", "))
			}
			c.cases = append(c.cases, name)
		}
	}
	switch {
	case c.requests < 1, c.clients < 1, c.keyspace < 1, c.runs < 1, c.threads < 0:
		return c, errors.New("-n, -c, -r and -runs must be positive, -threads non-negative")
	case c.throttledAddr != "" && c.throttledBin != "":
		return c, errors.New("-throttled and -throttled-addr are exclusive")
	case c.pin && runtime.NumCPU() < 2:
		return c, errors.New("-pin needs at least two CPUs")
	}
	return c, nil
}

func main() { harness.Main("compare", parseFlags, compare) }

// measurement key: pipeline depth, case name, side.
type mkey struct {
	pipeline int
	name     string
	side     side
}

func compare(ctx context.Context, cfg config, stdout, stderr io.Writer) (err error) {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	need := []string{cfg.redisBin, cfg.benchBin}
	if cfg.pin {
		need = append(need, "taskset")
	}
	for _, bin := range need {
		if _, err := exec.LookPath(bin); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "throttled-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	var procs []*proc.Process
	defer func() {
		for _, p := range slices.Backward(procs) {
			if serr := p.Stop(); serr != nil {
				logf("stop %s: %v", p.Name, serr)
			}
		}
	}()

	// throttled
	info := reportInfo{cfg: cfg, date: time.Now().UTC()}
	pids := map[side]int{} // the servers this run started, whose CPU it reads
	throttledAddr := cfg.throttledAddr
	if throttledAddr != "" {
		logf("throttled slot: existing server at %s", throttledAddr)
		ping := func(ctx context.Context) error { return respconn.Ping(ctx, throttledAddr) }
		if err := proc.WaitReady(ctx, throttledAddr, cfg.startTimeout, nil, ping); err != nil {
			return err
		}
		info.goVersion = runtime.Version() + " (runner; throttled slot is an external server)"
	} else {
		bin := cfg.throttledBin
		info.throttled = "prebuilt " + bin
		if bin == "" {
			if bin, err = harness.BuildThrottled(ctx, tmp, logf); err != nil {
				return err
			}
			info.throttled = "built from ./cmd/throttled"
		}
		info.goVersion = runtime.Version() + " (runner)"
		if bi, err := buildinfo.ReadFile(bin); err == nil {
			info.goVersion = bi.GoVersion + " (throttled binary)"
		}
		port, err := proc.FreePort()
		if err != nil {
			return err
		}
		throttledAddr = proc.Addr(port)
		targs := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}, cfg.throttledArgs...)
		logf("starting %s %s", bin, shellJoin(targs))
		p, err := proc.Start(ctx, proc.Config{Name: "throttled", Path: bin, Args: targs, Addr: throttledAddr, Timeout: cfg.startTimeout, Wrap: harness.ServerWrap(cfg.pin)})
		if err != nil {
			return err
		}
		procs = append(procs, p)
		pids[throttledSide] = p.Pid()
	}

	// redis-server
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	redisAddr := proc.Addr(port)
	rargs := append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1"}, cfg.redisArgs...)
	logf("starting %s %s", cfg.redisBin, shellJoin(rargs))
	rp, err := proc.Start(ctx, proc.Config{Name: "redis-server", Path: cfg.redisBin, Args: rargs, Addr: redisAddr, Dir: tmp, Timeout: cfg.startTimeout, Wrap: harness.ServerWrap(cfg.pin)})
	if err != nil {
		return err
	}
	procs = append(procs, rp)
	pids[redisSide] = rp.Pid()

	info.redisVersion = harness.FirstLine(ctx, cfg.redisBin, "--version")
	info.benchVersion = harness.FirstLine(ctx, cfg.benchBin, "--version")

	sha, err := harness.LoadScript(ctx, redisAddr, bench.GCRALua)
	if err != nil {
		return fmt.Errorf("load gcra.lua into redis-server: %w", err)
	}
	logf("gcra.lua loaded into redis-server, sha %s", sha)

	selected := selectCases(cfg.cases, sha)
	addrs := map[side]string{throttledSide: throttledAddr, redisSide: redisAddr}
	if err := preflight(ctx, selected, addrs, logf); err != nil {
		return err
	}

	results := map[mkey][]float64{}
	costs := map[mkey][]cost{}
	for _, pl := range cfg.pipelines {
		for r := range cfg.runs {
			for _, c := range selected {
				sides := []side{throttledSide, redisSide}
				if r%2 == 1 { // alternate who goes first
					slices.Reverse(sides)
				}
				for _, s := range sides {
					cmd := c.command(s)
					if cmd == nil {
						continue
					}
					if err := checkAlive(procs); err != nil {
						return err
					}
					serverBefore, cpuErr := serverCPU(pids, s)
					bctx, cancel := context.WithTimeout(ctx, cfg.benchTimeout)
					res, err := redisbench.Run(bctx, redisbench.Options{
						Bin: cfg.benchBin, Addr: addrs[s], Clients: cfg.clients, Requests: cfg.requests,
						KeySpace: cfg.keyspace, Pipeline: pl, Threads: cfg.threads, Command: cmd, Wrap: harness.ClientWrap(cfg.pin),
					})
					cancel()
					if err != nil {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						return withServerOutput(fmt.Errorf("%s on %s: %w", c.Name, s, err), procs)
					}
					k := mkey{pl, c.Name, s}
					results[k] = append(results[k], res.RPS)
					serverAfter, err := serverCPU(pids, s)
					if cpuErr == nil && err == nil {
						costs[k] = append(costs[k], newCost(cfg.requests, serverAfter-serverBefore, res))
					}
					logf("P=%-3d run %d/%d  %-12s %-12s %11s rps", pl, r+1, cfg.runs, c.Name, s, harness.Thousands(int64(math.Round(res.RPS))))
				}
			}
		}
	}
	writeReport(stdout, info, selected, results, costs)
	return nil
}

// serverCPU is the CPU time the server on side s has used so far; an error
// when this run did not start it (-throttled-addr).
func serverCPU(pids map[side]int, s side) (time.Duration, error) {
	pid, ok := pids[s]
	if !ok {
		return 0, errors.New("server not started by this run")
	}
	return harness.CPUTime(pid)
}

// cost is the CPU one redis-benchmark run took, per request.
type cost struct {
	server, client float64 // µs of CPU per request
	clientBusy     float64 // client CPU / elapsed time
}

func newCost(requests int, server time.Duration, res redisbench.Result) cost {
	perRequest := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(requests) }
	return cost{
		server:     perRequest(server),
		client:     perRequest(res.CPU),
		clientBusy: res.CPU.Seconds() / res.Elapsed.Seconds(),
	}
}

// selectCases returns the cases named in names (all when empty), in table
// order, with the script SHA filled in.
func selectCases(names []string, sha string) []benchCase {
	var out []benchCase
	for _, c := range cases {
		if len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, c.Name) }) {
			continue
		}
		c.Redis = slices.Clone(c.Redis)
		for i, a := range c.Redis {
			if a == shaArg {
				c.Redis[i] = sha
			}
		}
		out = append(out, c)
	}
	return out
}

func findCase(name string) *benchCase {
	for i := range cases {
		if strings.EqualFold(cases[i].Name, name) {
			return &cases[i]
		}
	}
	return nil
}

func caseNames() []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.Name)
	}
	return out
}

func (c benchCase) command(s side) []string {
	if s == throttledSide {
		return c.Throttled
	}
	return c.Redis
}

// preflight sends every case once to each server, with __rand_int__ replaced
// by a key unique to this run, and fails on an error reply (which would stop
// redis-benchmark anyway, less readably) or on differing replies for
// SameReply cases.
func preflight(ctx context.Context, cs []benchCase, addrs map[side]string, logf func(string, ...any)) error {
	conns := map[side]*respconn.Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for s, addr := range addrs {
		c, err := respconn.Dial(ctx, addr, 5*time.Second)
		if err != nil {
			return fmt.Errorf("preflight: %s: %w", s, err)
		}
		conns[s] = c
	}
	tag := "preflight-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range cs {
		replies := map[side]any{}
		for _, s := range []side{throttledSide, redisSide} {
			cmd := c.command(s)
			if cmd == nil {
				continue
			}
			args := make([]string, len(cmd))
			for i, a := range cmd {
				args[i] = strings.ReplaceAll(a, "__rand_int__", tag)
			}
			v, err := conns[s].Do(args...)
			if err != nil {
				return fmt.Errorf("preflight: %s on %s: %q: %w", c.Name, s, strings.Join(args, " "), err)
			}
			replies[s] = v
		}
		if c.SameReply && c.Throttled != nil && c.Redis != nil &&
			!reflect.DeepEqual(replies[throttledSide], replies[redisSide]) {
			return fmt.Errorf("preflight: %s: throttled replied %v, redis-server %v", c.Name, replies[throttledSide], replies[redisSide])
		}
		logf("preflight %-12s ok: %v", c.Name, replies[throttledSide])
	}
	return nil
}

func checkAlive(procs []*proc.Process) error {
	for _, p := range procs {
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited during the benchmark: %v\n--- %s output ---\n%s", p.Name, p.Stop(), p.Name, p.Output())
		default:
		}
	}
	return nil
}

func withServerOutput(err error, procs []*proc.Process) error {
	for _, p := range procs {
		select {
		case <-p.Exited():
			err = fmt.Errorf("%w\n--- %s exited; its output ---\n%s", err, p.Name, p.Output())
		default:
		}
	}
	return err
}
