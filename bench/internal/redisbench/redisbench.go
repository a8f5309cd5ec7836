// Package redisbench runs redis-benchmark for one command and parses its
// --csv output: requests per second and, from Redis 7 on, latency
// percentiles.
package redisbench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/procattr"
)

// Options describe one redis-benchmark run.
type Options struct {
	Bin       string   // redis-benchmark binary; "" means "redis-benchmark" on PATH
	Addr      string   // host:port
	Clients   int      // -c
	Requests  int      // -n
	KeySpace  int      // -r; __rand_int__ in Command is replaced by a random number below it
	Pipeline  int      // -P
	Threads   int      // --threads, 0 to leave it out
	Command   []string // the command and its arguments, sent verbatim
	ExtraArgs []string // more redis-benchmark options, placed before the command
	Wrap      []string // a command to run redis-benchmark under (taskset -c 1), or nil
}

// Args returns redis-benchmark's argument list for o.
func (o Options) Args() ([]string, error) {
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", o.Addr, err)
	}
	if len(o.Command) == 0 {
		return nil, errors.New("no command to benchmark")
	}
	args := []string{
		"-h", host, "-p", port,
		"-c", strconv.Itoa(o.Clients),
		"-n", strconv.Itoa(o.Requests),
		"-r", strconv.Itoa(o.KeySpace),
		"-P", strconv.Itoa(o.Pipeline),
		"-q", "--csv",
	}
	if o.Threads > 0 {
		args = append(args, "--threads", strconv.Itoa(o.Threads))
	}
	args = append(args, o.ExtraArgs...)
	return append(args, o.Command...), nil
}

// Figures are what redis-benchmark's --csv line reports.
type Figures struct {
	RPS float64
	// P50 and P99 are the latency percentiles in ms: the time from sending
	// a request (with -P, its pipeline) to its reply. 0 when the CSV has no
	// such column (redis-benchmark before 7.0).
	P50, P99 float64
}

// Result is one run's outcome.
type Result struct {
	Figures
	// CPU is the user plus system time redis-benchmark used, and Elapsed
	// how long it ran: when CPU nears Elapsed the client, not the server,
	// set the rps.
	CPU, Elapsed time.Duration
	Command      string // the command line that was run, for messages
	Output       string // stdout and stderr
}

// Run runs redis-benchmark once. A non-zero exit, an "Error from server" in the
// output or a missing rps figure is an error that includes the full output.
// Cancelling ctx kills redis-benchmark.
func Run(ctx context.Context, o Options) (Result, error) {
	args, err := o.Args()
	if err != nil {
		return Result{}, err
	}
	bin := o.Bin
	if bin == "" {
		bin = "redis-benchmark"
	}
	name, argv := proc.CommandLine(o.Wrap, bin, args)
	cmd := exec.CommandContext(ctx, name, argv...)
	// Own process group: a terminal Ctrl-C reaches the runner, which cancels ctx.
	cmd.SysProcAttr = procattr.Child()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	res := Result{Command: bin + " " + strings.Join(quoteAll(args), " ")}
	began := time.Now()
	runErr := cmd.Run()
	res.Elapsed = time.Since(began)
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	res.Output = stdout.String() + stderr.String()
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	fail := func(why string) (Result, error) {
		return res, fmt.Errorf("%s: %s\n--- output ---\n%s", res.Command, why, strings.TrimSpace(res.Output))
	}
	if runErr != nil {
		return fail(runErr.Error())
	}
	if strings.Contains(res.Output, "Error from server") {
		return fail(`"Error from server" in the output`)
	}
	if res.Figures, err = ParseCSV(stdout.String()); err != nil {
		return fail(err.Error())
	}
	return res, nil
}

// RunAll runs one redis-benchmark per element of opts, all at once, each
// for at most timeout, and returns their results in the order of opts. The
// error joins those of the runs that failed; ctx's error when it was
// cancelled.
func RunAll(ctx context.Context, timeout time.Duration, opts []Options) ([]Result, error) {
	out := make([]Result, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i], errs[i] = Run(rctx, o)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, err
	}
	return out, nil
}

// Sum is the figures of runs made at once against several servers, as one
// system: their rps added up, and the highest of their latency percentiles.
func Sum(rs []Result) Figures {
	var f Figures
	for _, r := range rs {
		f.RPS += r.RPS
		f.P50 = max(f.P50, r.P50)
		f.P99 = max(f.P99, r.P99)
	}
	return f
}

// Series are the figures of the measured runs of one setup, in run order.
type Series []Figures

// RPS is each run's requests per second.
func (s Series) RPS() []float64 { return s.column(func(f Figures) float64 { return f.RPS }) }

// P50 is each run's median latency in ms.
func (s Series) P50() []float64 { return s.column(func(f Figures) float64 { return f.P50 }) }

// P99 is each run's 99th percentile latency in ms.
func (s Series) P99() []float64 { return s.column(func(f Figures) float64 { return f.P99 }) }

func (s Series) column(figure func(Figures) float64) []float64 {
	out := make([]float64, len(s))
	for i, f := range s {
		out[i] = figure(f)
	}
	return out
}

// ParseCSV extracts the figures from redis-benchmark --csv output holding
// exactly one test: a header line starting with "test" with an "rps" column
// (and, optionally, "p50_latency_ms" and "p99_latency_ms"), then one data
// line. Lines that are not CSV records (warnings) are skipped.
func ParseCSV(out string) (Figures, error) {
	var header []string
	var rows [][]string
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, `"`) {
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil {
			return Figures{}, fmt.Errorf("bad CSV line %q: %w", line, err)
		}
		if header == nil && len(rec) > 0 && rec[0] == "test" {
			header = rec
			continue
		}
		rows = append(rows, rec)
	}
	if !slices.Contains(header, "rps") {
		return Figures{}, errors.New(`no CSV header with an "rps" column`)
	}
	if len(rows) != 1 {
		return Figures{}, fmt.Errorf("want 1 CSV result row, got %d", len(rows))
	}
	// column reads the named column of the row; absent is 0.
	column := func(name string) (float64, error) {
		i := slices.Index(header, name)
		if i < 0 {
			return 0, nil
		}
		if i >= len(rows[0]) {
			return 0, fmt.Errorf("CSV row %q has no %s column", rows[0], name)
		}
		v, err := strconv.ParseFloat(rows[0][i], 64)
		if err != nil {
			return 0, fmt.Errorf("bad %s %q: %w", name, rows[0][i], err)
		}
		return v, nil
	}
	var f Figures
	var errs [3]error
	f.RPS, errs[0] = column("rps")
	f.P50, errs[1] = column("p50_latency_ms")
	f.P99, errs[2] = column("p99_latency_ms")
	if err := errors.Join(errs[:]...); err != nil {
		return Figures{}, err
	}
	if f.RPS <= 0 {
		return Figures{}, fmt.Errorf("rps is %v", f.RPS)
	}
	return f, nil
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return out
}
