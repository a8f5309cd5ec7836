// Command persist measures what durability costs throttled, side by side with
// redis-server in the same run, and prints Markdown tables.
//
//	go run ./bench/persist [-n 100000] [-seconds 12] [-P 1,16] [-runs 3] [-pin] [-keys 1000000] [-skip memory,restart]
//
// It has three parts:
//
//  1. throughput: CL.THROTTLE under redis-benchmark on throttled in memory,
//     with appendfsync everysec and with always, against redis-server running
//     bench/gcra.lua through EVALSHA without AOF, with AOF everysec and always;
//  2. memory: RSS and INFO memory of fresh servers holding -keys idle
//     hour-long CL.THROTTLE keys;
//  3. restart: how long throttled takes to reopen a data folder holding those
//     keys (and redis-server to reload its AOF).
//
// Every server runs on a free loopback port and is stopped on exit, on error
// and on Ctrl-C. Progress goes to stderr, the report to stdout. See
// bench/README.md ("Durability and memory").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench"
	"github.com/throttleddb/throttled/internal/proc"
)

// The parts of a run, in order; -skip names them.
var parts = []string{"throughput", "memory", "restart"}

type config struct {
	harness.PartFlags         // -P, -runs, -skip
	requests          int     // -n: requests of the run that sizes the measured ones
	seconds           float64 // -seconds: how long a measured run lasts, about
	pin               bool
	keys              int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("persist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.Register(fs, args, parts)
	fs.IntVar(&c.requests, "n", 100000, "requests of each server's first, unmeasured run, which sizes the measured ones")
	fs.Float64Var(&c.seconds, "seconds", 12, "length of a measured run: long enough for throttled's checkpoints (every 10 s under load) to count")
	fs.BoolVar(&c.pin, "pin", false, "run the servers on CPU 0 and redis-benchmark on the other CPUs (taskset)")
	fs.IntVar(&c.keys, "keys", 1000000, "keys written for the memory and restart parts")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if err := c.Parse(fs); err != nil {
		return c, err
	}
	switch {
	case c.requests < 1 || c.Runs < 1 || c.keys < 1 || c.seconds <= 0:
		return c, errors.New("-n, -seconds, -runs and -keys must be positive")
	case c.pin && runtime.NumCPU() < 2:
		return c, errors.New("-pin needs at least two CPUs")
	}
	return c, nil
}

func main() { harness.Main("persist", parseFlags, persist) }

// persist runs the parts of the benchmark cfg asks for.
func persist(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	r := &runner{cfg: cfg, logf: harness.Logf(stderr)}
	return r.main(ctx, stdout)
}

// runner holds what the parts share: the throttled binary, the temp folder
// and every process started, so that all of them are stopped at the end.
type runner struct {
	cfg   config
	logf  func(format string, a ...any)
	tmp   string
	bin   string          // throttled
	procs []*proc.Process // every process started, stopped by stopAll
}

func (r *runner) main(ctx context.Context, stdout io.Writer) error {
	need := []string{"redis-server", "redis-benchmark"}
	if r.cfg.pin {
		need = append(need, "taskset")
	}
	if err := harness.LookPaths(need...); err != nil {
		return err
	}
	var err error
	if r.tmp, err = os.MkdirTemp("", "throttled-persist-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)
	defer r.stopAll() // before the folder goes
	if r.bin, err = harness.BuildThrottled(ctx, r.tmp, r.logf); err != nil {
		return err
	}
	began := time.Now()
	r.writeHeader(ctx, stdout)

	var filled []*server // the memory part's persisted servers, reused by restart
	if !r.cfg.Skip["throughput"] {
		if err := r.throughput(ctx, stdout); err != nil {
			return err
		}
		r.stopAll() // free CPU and memory for the next parts
	}
	if !r.cfg.Skip["memory"] {
		if filled, err = r.memory(ctx, stdout); err != nil {
			return err
		}
	}
	if !r.cfg.Skip["restart"] {
		if err := r.restart(ctx, stdout, filled); err != nil {
			return err
		}
	}
	harness.Footer(stdout, began)
	return nil
}

func (r *runner) writeHeader(ctx context.Context, w io.Writer) {
	goVersion := harness.GoVersion(r.bin)
	harness.Heading(w, "Durability and memory: throttled vs redis-server", "go run ./bench/persist "+shellWords(r.cfg.Argv))
	fmt.Fprintf(w, "- Machine: %s\n", harness.Machine())
	fmt.Fprintf(w, "- Go: %s; throttled built from ./cmd/throttled, every instance with `--threads 1`\n", goVersion)
	fmt.Fprintf(w, "- redis-server: %s\n", harness.FirstLine(ctx, "redis-server", "--version"))
	fmt.Fprintf(w, "- Client: %s\n", harness.FirstLine(ctx, "redis-benchmark", "--version"))
	fmt.Fprintf(w, "- Load average at the start (1, 5, 15 min): %s\n", harness.LoadAvg())
	if r.cfg.pin {
		fmt.Fprintf(w, "- CPUs (-pin): servers on CPU 0 (`%s`), redis-benchmark on the rest (`%s`)\n",
			strings.Join(harness.ServerWrap(r.cfg.pin), " "), strings.Join(harness.ClientWrap(r.cfg.pin), " "))
	} else {
		fmt.Fprintf(w, "- CPUs: the client and the servers share all of them\n")
	}
}

// server is one throttled or redis-server instance.
type server struct {
	label string
	redis bool
	args  []string // after --bind and --port
	dir   string   // data folder (--dir), "" when it has none

	addr string
	p    *proc.Process
	sha  string // of gcra.lua, on redis-server
}

// throttle returns the rate-limit call on key with CL.THROTTLE's arguments
// (max_burst, count, period): CL.THROTTLE on throttled, gcra.lua on redis.
func (s *server) throttle(key string, params ...string) []string {
	if s.redis {
		return append(append([]string{"EVALSHA", s.sha, "1", key}, params...), "1")
	}
	return append([]string{"CL.THROTTLE", key}, params...)
}

// start runs s on a free port and returns the time from starting the process
// until it answered PING. On redis-server it then loads gcra.lua.
func (r *runner) start(ctx context.Context, s *server) (time.Duration, error) {
	if s.dir != "" {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return 0, err
		}
	}
	port, err := proc.FreePort()
	if err != nil {
		return 0, err
	}
	s.addr = proc.Addr(port)
	name, path := "throttled", r.bin
	if s.redis {
		name, path = "redis-server", "redis-server"
	}
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}, s.args...)
	if s.dir != "" {
		args = append(args, "--dir", s.dir)
	}
	r.logf("starting %s: %s %s", s.label, name, shellWords(args))
	began := time.Now()
	p, err := proc.Start(ctx, proc.Config{Name: s.label, Path: path, Args: args, Addr: s.addr,
		Dir: r.tmp, Timeout: 5 * time.Minute, Wrap: harness.ServerWrap(r.cfg.pin)})
	took := time.Since(began)
	if err != nil {
		return 0, err
	}
	s.p = p
	r.procs = append(r.procs, p)
	if s.redis {
		if s.sha, err = harness.LoadScript(ctx, s.addr, bench.GCRALua); err != nil {
			return 0, fmt.Errorf("%s: load gcra.lua: %w", s.label, err)
		}
	}
	return took, nil
}

// stopAll stops every process started so far (SIGTERM, SIGKILL after 5 s).
func (r *runner) stopAll() {
	for _, p := range slices.Backward(r.procs) {
		if err := p.Stop(); err != nil {
			r.logf("stop %s: %v", p.Name, err)
		}
	}
	r.procs = nil
}

// alive fails if a server has exited, with its output.
func alive(servers ...*server) error {
	for _, s := range servers {
		select {
		case <-s.p.Exited():
			return fmt.Errorf("%s exited: %v\n--- its output ---\n%s", s.label, s.p.Stop(), s.p.Output())
		default:
		}
	}
	return nil
}
