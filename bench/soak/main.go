// Command soak runs a throttled server under mixed load for a long time and
// reports whether its resources grow: RSS, open files, goroutines and keys,
// sampled every minute, with a growth-trend verdict.
//
//	go run ./bench/soak [-duration 30m] [-short] [-sample 1m] [-peak 30s]
//
// It builds ./cmd/throttled, starts it on free loopback ports with a data
// folder in a temp dir and --metrics-addr, measures the peak throughput of
// its load mix (CL.THROTTLE, the native FWC/SWL/SWC/TB/LB commands,
// GET/SET/INCR, EVALSHA of bench/gcra.lua; one-at-a-time, pipelined and
// short-lived connections), then drives half of that for -duration. The
// report (Markdown) goes to stdout, progress to stderr. See bench/README.md
// ("Soak").
package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/throttleddb/throttled/bench"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
)

type config struct {
	duration  time.Duration // -duration: the soak at half the peak
	sample    time.Duration // -sample: between two samples
	peak      time.Duration // -peak: the unpaced run that measures the peak
	keys      int           // -keys: key names per kind
	single    int           // -single: one-at-a-time workers
	pipelined int           // -pipelined: workers sending batches of pipeDepth
	churn     int           // -churn: workers opening a connection per batch
	bin       string        // -throttled: a binary instead of building one
	extra     []string      // -throttled-args
	argv      []string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{argv: args}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var short bool
	var extra string
	fs.DurationVar(&c.duration, "duration", 30*time.Minute, "how long the load at half the peak runs")
	fs.DurationVar(&c.sample, "sample", time.Minute, "time between two samples of the server's resources")
	fs.DurationVar(&c.peak, "peak", 30*time.Second, "length of the unpaced run that measures the peak")
	fs.BoolVar(&short, "short", false, "a quick check of the whole run: -duration 3m -sample 10s -peak 5s (flags given win)")
	fs.IntVar(&c.keys, "keys", 100000, "key names per kind of command")
	fs.IntVar(&c.single, "single", 6, "workers sending one command at a time")
	fs.IntVar(&c.pipelined, "pipelined", 2, fmt.Sprintf("workers sending pipelines of %d", pipeDepth))
	fs.IntVar(&c.churn, "churn", 2, fmt.Sprintf("workers opening a new connection for each PING and %d commands", churnBatch))
	fs.StringVar(&c.bin, "throttled", "", "throttled binary to run (default: build ./cmd/throttled)")
	fs.StringVar(&extra, "throttled-args", "", "more arguments for throttled, separated by spaces")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if short {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range map[string]*time.Duration{"duration": &c.duration, "sample": &c.sample, "peak": &c.peak} {
			if !given[name] {
				*v = map[string]time.Duration{"duration": 3 * time.Minute, "sample": 10 * time.Second, "peak": 5 * time.Second}[name]
			}
		}
	}
	c.extra = strings.Fields(extra)
	switch {
	case c.duration <= 0 || c.sample <= 0 || c.peak <= 0:
		return c, errors.New("-duration, -sample and -peak must be positive")
	case c.duration < 4*c.sample:
		return c, errors.New("-duration must hold at least 4 samples: the trend is fitted to the second half")
	case c.keys < 1 || c.single < 0 || c.pipelined < 0 || c.churn < 0 || c.single+c.pipelined+c.churn == 0:
		return c, errors.New("-keys must be positive, and there must be a worker")
	}
	return c, nil
}

func main() { harness.Main("soak", parseFlags, soak) }

// sample is one look at the server.
type sample struct {
	at         time.Duration // since the soak began
	ops        int64         // replies since the previous sample
	rate       float64       // ops per second since the previous sample
	errs       int64         // errors since the previous sample
	conns      int64         // connections opened since the previous sample
	cpu        float64       // server CPU, share of one core, since the previous sample
	rss        int64         // bytes
	fds        int
	goroutines int
	keys       int64
	clients    int64
	load       string // the machine's 1-minute load average: neighbours show here
}

func soak(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	tmp, err := os.MkdirTemp("", "throttled-soak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := cfg.bin
	if bin == "" {
		if bin, err = harness.BuildThrottled(ctx, tmp, logf); err != nil {
			return err
		}
	}
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	mport, err := proc.FreePort()
	if err != nil {
		return err
	}
	addr, maddr := proc.Addr(port), proc.Addr(mport)
	args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", filepath.Join(tmp, "data"),
		"--metrics-addr", maddr}, cfg.extra...)
	logf("starting throttled %s", strings.Join(args, " "))
	p, err := proc.Start(ctx, proc.Config{Name: "throttled", Path: bin, Args: args, Addr: addr, Dir: tmp, Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer p.Stop()
	sha, err := harness.LoadScript(ctx, addr, bench.GCRALua)
	if err != nil {
		return err
	}
	began := time.Now()
	loadStart := harness.LoadAvg()

	var count counters
	var workers []*worker
	for kind, n := range map[string]int{"single": cfg.single, "pipelined": cfg.pipelined, "churn": cfg.churn} {
		for range n {
			workers = append(workers, &worker{kind: kind, addr: addr, keys: cfg.keys, sha: sha,
				seed: uint64(len(workers) + 1), count: &count})
		}
	}

	logf("measuring the peak for %v", cfg.peak)
	peakStart := time.Now()
	if err := runWorkers(ctx, workers, cfg.peak, nil); err != nil {
		return err
	}
	peakTook := time.Since(peakStart).Seconds()
	var peak float64
	for _, w := range workers {
		r := float64(w.done.Load()) / peakTook
		peak += r
		w.rate = r / 2
		w.done.Store(0)
	}
	peakErrs := count.errs.Load()
	if peak == 0 {
		return fmt.Errorf("no reply in the peak run (last error: %v)", deref(count.lastEr.Load()))
	}
	logf("peak %.0f commands/s; soaking at %.0f for %v, a sample every %v", peak, peak/2, cfg.duration, cfg.sample)

	var samples []sample
	var prev struct {
		ops, errs, conns int64
		cpu              time.Duration
		at               time.Time
	}
	soakStart := time.Now()
	look := func() error {
		now := time.Now()
		s, err := lookAt(ctx, p.Pid(), maddr)
		select {
		case <-p.Exited():
			// Say how it ended: a crash, or a signal from outside.
			return fmt.Errorf("throttled exited during the soak: %v\n--- its output ---\n%s", p.Stop(), p.Output())
		default:
		}
		if err != nil {
			return err
		}
		cpu, err := harness.CPUTime(p.Pid())
		if err != nil {
			return err
		}
		ops, errs, conns := count.ops.Load(), count.errs.Load(), count.conns.Load()
		s.at = now.Sub(soakStart)
		s.load, _, _ = strings.Cut(harness.LoadAvg(), " ")
		if len(samples) > 0 {
			s.ops, s.errs, s.conns = ops-prev.ops, errs-prev.errs, conns-prev.conns
			s.cpu = (cpu - prev.cpu).Seconds() / now.Sub(prev.at).Seconds()
			s.rate = float64(s.ops) / now.Sub(prev.at).Seconds()
		}
		prev.ops, prev.errs, prev.conns, prev.cpu, prev.at = ops, errs, conns, cpu, now
		samples = append(samples, s)
		logf("%s", s.line(cfg.sample))
		if s.errs > 0 {
			logf("        last error: %s", deref(count.lastEr.Load()))
		}
		return nil
	}
	if err := look(); err != nil {
		return err
	}
	if err := runWorkers(ctx, workers, cfg.duration, func(stop <-chan struct{}) error {
		tick := time.NewTicker(cfg.sample)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return nil
			case <-tick.C:
				if err := look(); err != nil {
					return err
				}
			}
		}
	}); err != nil {
		return err
	}
	if len(samples) == 0 || samples[len(samples)-1].at < cfg.duration-cfg.sample/2 {
		if err := look(); err != nil {
			return err
		}
	}
	select {
	case <-p.Exited():
		return fmt.Errorf("throttled exited during the soak: %v\n%s", p.Stop(), p.Output())
	default:
	}
	rep := report{cfg: cfg, bin: bin, args: args, peak: peak, peakErrs: peakErrs, samples: samples,
		loadStart: loadStart, loadEnd: harness.LoadAvg(), took: time.Since(began), lastErr: deref(count.lastEr.Load())}
	return rep.write(stdout)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// runWorkers runs every worker for d; watch, when given, runs beside them
// until they stop, and its error stops them early.
func runWorkers(ctx context.Context, workers []*worker, d time.Duration, watch func(stop <-chan struct{}) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.run(ctx) })
	}
	var err error
	if watch != nil {
		err = watch(ctx.Done())
		cancel()
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return nil
}

// lookAt reads the server's RSS and open files from /proc, and its
// goroutines, keys and clients from /metrics.
func lookAt(ctx context.Context, pid int, maddr string) (sample, error) {
	var s sample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.rss, err = harness.ParseRSS(string(status)); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	m, err := scrape(ctx, maddr)
	if err != nil {
		return s, err
	}
	s.goroutines = int(m["go_goroutines"])
	s.keys = int64(m["throttled_keys"])
	s.clients = int64(m["throttled_connected_clients"])
	return s, nil
}

// scrape reads the unlabelled metrics of /metrics at maddr.
func scrape(ctx context.Context, maddr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+maddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads Prometheus' text format, keeping the series without
// labels.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		out[name] = f
	}
	return out, sc.Err()
}

func (s sample) line(every time.Duration) string {
	return fmt.Sprintf("%6s  %8.0f cmd/s  %d errors  cpu %3.0f%%  rss %6.1f MiB  fds %4d  goroutines %4d  keys %7d  clients %3d  load %s",
		s.at.Round(time.Second), float64(s.ops)/every.Seconds(), s.errs, 100*s.cpu, float64(s.rss)/(1<<20), s.fds, s.goroutines, s.keys, s.clients, s.load)
}

// report is the Markdown the run prints.
type report struct {
	cfg                config
	bin                string
	args               []string
	peak               float64
	peakErrs           int64
	samples            []sample
	loadStart, loadEnd string
	took               time.Duration
	lastErr            string
}

// series are the resources judged for growth.
var series = []struct {
	name string
	get  func(s sample) float64
	unit func(v float64) string
}{
	{"RSS", func(s sample) float64 { return float64(s.rss) / (1 << 20) }, func(v float64) string { return fmt.Sprintf("%.1f MiB", v) }},
	{"open files", func(s sample) float64 { return float64(s.fds) }, func(v float64) string { return fmt.Sprintf("%.1f", v) }},
	{"goroutines", func(s sample) float64 { return float64(s.goroutines) }, func(v float64) string { return fmt.Sprintf("%.1f", v) }},
	// The keyspace settles where expiry keeps up with the load, so its
	// size follows the rate: a neighbour that takes CPU for a few
	// minutes moves it by a tenth. Keys are judged per 1,000 commands/s
	// of the same minute, which keys that never expire would still make
	// grow.
	{"keys per 1,000 commands/s", func(s sample) float64 {
		if s.rate <= 0 {
			return 0
		}
		return float64(s.keys) / (s.rate / 1000)
	}, func(v float64) string { return harness.Thousands(int64(v)) }},
}

// secondHalf returns the samples from the middle of the soak on, the ones
// the trend is fitted to: the first half lets the keyspace and the heap
// reach their working size.
func secondHalf(samples []sample, d time.Duration) []sample {
	for i, s := range samples {
		if s.at >= d/2-time.Second {
			return samples[i:]
		}
	}
	return nil
}

// verdicts fits each series over the second half.
func verdicts(samples []sample, d time.Duration) []trend {
	half := secondHalf(samples, d)
	t := make([]float64, len(half))
	for i, s := range half {
		t[i] = s.at.Hours()
	}
	var out []trend
	for _, se := range series {
		y := make([]float64, len(half))
		for i, s := range half {
			y[i] = se.get(s)
		}
		out = append(out, fit(t, y))
	}
	return out
}

func (r report) write(w io.Writer) error {
	goVersion := runtime.Version() + " (runner)"
	if bi, err := buildinfo.ReadFile(r.bin); err == nil {
		goVersion = bi.GoVersion + " (throttled binary)"
	}
	var ops, errs, conns int64
	for _, s := range r.samples {
		ops, errs, conns = ops+s.ops, errs+s.errs, conns+s.conns
	}
	fmt.Fprintf(w, "## Soak: throttled under mixed load\n\n")
	fmt.Fprintf(w, "- Command: `%s`\n", strings.TrimSpace("go run ./bench/soak "+strings.Join(r.cfg.argv, " ")))
	fmt.Fprintf(w, "- Date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- Machine: %s\n", harness.Machine())
	fmt.Fprintf(w, "- Go: %s; throttled `%s`\n", goVersion, strings.Join(r.args, " "))
	fmt.Fprintf(w, "- Load average at the start (1, 5, 15 min): %s; at the end: %s\n", r.loadStart, r.loadEnd)
	fmt.Fprintf(w, "- Workers: %d one command at a time, %d pipelining %d, %d opening a connection for each PING and %d commands; keys: %s names per kind\n",
		r.cfg.single, r.cfg.pipelined, pipeDepth, r.cfg.churn, churnBatch, harness.Thousands(int64(r.cfg.keys)))
	fmt.Fprintf(w, "- Peak (unpaced, %v): %s commands/s (%d errors); soak at half of it, each worker at half its own peak rate\n",
		r.cfg.peak, harness.Thousands(int64(r.peak)), r.peakErrs)
	fmt.Fprintf(w, "- Soak: %v, %s commands (%s/s), %s connections opened, %d errors%s\n\n",
		r.cfg.duration, harness.Thousands(ops), harness.Thousands(int64(float64(ops)/r.cfg.duration.Seconds())),
		harness.Thousands(conns), errs, lastErr(errs+r.peakErrs, r.lastErr))
	fmt.Fprintf(w, "| time | commands/s | errors | server CPU | RSS (MiB) | open files | goroutines | keys | clients | load (1 min) |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, s := range r.samples {
		rate, cpu := "-", "-"
		if i > 0 {
			d := (s.at - r.samples[i-1].at).Seconds()
			rate = harness.Thousands(int64(float64(s.ops) / d))
			cpu = fmt.Sprintf("%.0f%%", 100*s.cpu)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.1f | %d | %d | %s | %d | %s |\n", fmtAt(s.at), rate, s.errs, cpu,
			float64(s.rss)/(1<<20), s.fds, s.goroutines, harness.Thousands(s.keys), s.clients, s.load)
	}
	half := secondHalf(r.samples, r.cfg.duration)
	fmt.Fprintf(w, "\nTrend over the second half (%s to %s, %d samples): least-squares line; a series grows when the line's rise over the half is above twice the samples' scatter around it (σ) and above %.0f%% of its mean.\n\n",
		fmtAt(half[0].at), fmtAt(half[len(half)-1].at), len(half), 100*growthShare)
	fmt.Fprintf(w, "| series | mean | slope per hour | rise over the half | σ | verdict |\n|---|---:|---:|---:|---:|---|\n")
	var growing []string
	for i, tr := range verdicts(r.samples, r.cfg.duration) {
		se := series[i]
		verdict := "no growth trend"
		if tr.Growing {
			verdict = "**grows**"
			growing = append(growing, se.name)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", se.name, se.unit(tr.Mean), se.unit(tr.Slope), se.unit(tr.Rise), se.unit(tr.Noise), verdict)
	}
	fmt.Fprintf(w, "\nWhole run: %s.\n", r.took.Round(time.Second))
	if len(growing) > 0 {
		return fmt.Errorf("growth trend in %s", strings.Join(growing, ", "))
	}
	if errs+r.peakErrs > 0 {
		return fmt.Errorf("%d errors (last: %s)", errs+r.peakErrs, r.lastErr)
	}
	return nil
}

func lastErr(n int64, last string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (last: `%s`)", last)
}

// fmtAt formats a time into the soak as m:ss.
func fmtAt(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
