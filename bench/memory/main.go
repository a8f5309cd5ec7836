// Command memory measures what an idle rate-limit key costs throttled in
// memory, beside redis-server holding the same names with the same TTL, and
// prints Markdown tables.
//
//	go run ./bench/memory [-keys 1000000,10000000] [-kinds cl,tb,fwc,tb2]
//
// For each key count, each server starts fresh and alone, its idle RSS is
// taken, it is filled with keys rl:user:0000000, rl:user:0000001, ... (15
// bytes each, as issue 26's figures) and left idle, and its RSS is taken
// again. throttled is filled once per kind, with one call per key that
// leaves the key an hour to live:
//
//	cl:  CL.THROTTLE key 10 1 3600    (a GCRA TAT, an int64)
//	tb:  TB.THROTTLE key 10 1 3600    (a token bucket's debt)
//	fwc: FWC.THROTTLE key 10 3600     (a fixed window's counter)
//
// and, on request only, tb2: TB.THROTTLE key 10 1 3600 twice in a row, a
// bucket whose debt has drained in part since it was full: the state that
// stays in the arena rather than packing into the key's slot.
//
// redis-server is filled with what redis-cell stores for CL.THROTTLE, `SET
// key <TAT> PX 3600000` (a 19-digit integer, Redis' int encoding), the
// baseline for every kind. The report gives each server's RSS growth per
// key, the ratio to redis-server's (issue 26's bar: at most 0.35), INFO's
// used_memory, the fill time, and throttled's garbage collector as
// GODEBUG=gctrace=1 reports it: its share of the process's CPU during the
// fill, the worst stop-the-world pause, and how long marking the whole heap
// takes once idle (the forced collection the idle server runs to give its
// garbage back), which grows with what the collector must scan per key.
//
// Every server runs on a free loopback port and is stopped on exit, on error
// and on Ctrl-C. Progress goes to stderr, the report to stdout. See
// bench/README.md ("Memory per idle key").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// kind is one rate-limit command the keys are written with.
type kind struct {
	name  string
	args  []string // after the key
	twice bool     // two calls per key
}

// kinds are the commands -kinds chooses from, in report order.
var kinds = []kind{
	{name: "cl", args: []string{"CL.THROTTLE", "10", "1", "3600"}},
	{name: "tb", args: []string{"TB.THROTTLE", "10", "1", "3600"}},
	{name: "fwc", args: []string{"FWC.THROTTLE", "10", "3600"}},
	{name: "tb2", args: []string{"TB.THROTTLE", "10", "1", "3600"}, twice: true},
}

// ttlMs is the TTL redis-server's keys get: that of the throttled keys.
const ttlMs = 3600 * 1000

// fillBatch is how many calls go in one pipeline while filling.
const fillBatch = 1000

type config struct {
	keys  []int
	kinds []kind
	argv  []string // as given, for the report
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{argv: args}
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keys, names string
	fs.StringVar(&keys, "keys", "1000000", "comma-separated key counts, each measured on fresh servers (at most 10,000,000: names have 7 digits)")
	fs.StringVar(&names, "kinds", "cl,tb,fwc", "comma-separated kinds of throttled keys: cl, tb, fwc, tb2")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, f := range strings.Split(keys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 10_000_000 {
			return c, fmt.Errorf("-keys: %q is not a count from 1 to 10000000", f)
		}
		c.keys = append(c.keys, n)
	}
	for _, f := range strings.Split(names, ",") {
		i := slices.IndexFunc(kinds, func(k kind) bool { return k.name == strings.TrimSpace(f) })
		if i < 0 {
			return c, fmt.Errorf("-kinds: unknown kind %q", f)
		}
		c.kinds = append(c.kinds, kinds[i])
	}
	return c, nil
}

func main() { harness.Main("memory", parseFlags, run) }

// keyName is the i-th key: 15 bytes for every i below 10,000,000.
func keyName(i int) string { return fmt.Sprintf("rl:user:%07d", i) }

// runner holds what the measurements share.
type runner struct {
	cfg  config
	logf func(format string, a ...any)
	tmp  string
	bin  string // throttled
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return err
	}
	r := &runner{cfg: cfg, logf: func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }}
	var err error
	if r.tmp, err = os.MkdirTemp("", "throttled-memory-"); err != nil {
		return err
	}
	defer os.RemoveAll(r.tmp)
	if r.bin, err = harness.BuildThrottled(ctx, r.tmp, r.logf); err != nil {
		return err
	}
	began := time.Now()
	r.writeHeader(ctx, stdout)
	for _, n := range cfg.keys {
		if err := r.measureAll(ctx, stdout, n); err != nil {
			return err
		}
	}
	harness.Footer(stdout, began)
	return nil
}

func (r *runner) writeHeader(ctx context.Context, w io.Writer) {
	goVersion := harness.GoVersion(r.bin)
	fmt.Fprintf(w, "## Memory per idle key: throttled vs redis-server\n\n")
	fmt.Fprintf(w, "- Command: `%s`\n", strings.TrimSpace("go run ./bench/memory "+strings.Join(r.cfg.argv, " ")))
	fmt.Fprintf(w, "- Date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- Machine: %s\n", harness.Machine())
	fmt.Fprintf(w, "- Go: %s; throttled built from ./cmd/throttled\n", goVersion)
	fmt.Fprintf(w, "- redis-server: %s\n", harness.FirstLine(ctx, "redis-server", "--version"))
	fmt.Fprintf(w, "- Load average at the start (1, 5, 15 min): %s\n", harness.LoadAvg())
}

// result is what one server measured.
type result struct {
	label, command string
	idle, full     int64 // RSS in bytes, before and after filling
	settled        bool  // full RSS stopped changing before the deadline
	usedMemory     int64 // INFO memory
	pttl           int64 // of the first key after the fill
	fill           time.Duration
	gc             *gcStats // nil on redis-server
	noBar          bool     // a kind issue 26 sets no bar for (tb2)
}

// measureAll measures redis-server and then throttled once per kind, with n
// keys each, and writes their tables.
func (r *runner) measureAll(ctx context.Context, w io.Writer, n int) error {
	base, err := r.measure(ctx, n, nil)
	if err != nil {
		return err
	}
	res := []result{base}
	for i := range r.cfg.kinds {
		m, err := r.measure(ctx, n, &r.cfg.kinds[i])
		if err != nil {
			return err
		}
		res = append(res, m)
	}
	keys := int64(n)
	fmt.Fprintf(w, "\n### %s idle keys\n\n", harness.Thousands(keys))
	fmt.Fprintf(w, "Each server fresh and alone (throttled `--threads 1 --persistence off`, redis-server `--save \"\" --appendonly no`), "+
		"keys `%s`..`%s` written pipelined %d at a time on one connection. "+
		"RSS is VmRSS once it stayed within 1 MiB (or 0.5%%) for %v; growth = RSS after - RSS before writing. "+
		"used_memory is Go's HeapAlloc on throttled and the allocator's figure on redis-server. "+
		"GC columns (GODEBUG=gctrace=1): the collector's CPU over the process's CPU from start to idle, the longest stop-the-world pause, "+
		"and the wall time of the last forced collection's mark phase, which the idle server runs over the whole heap.\n\n",
		keyName(0), keyName(n-1), fillBatch, harness.RSSQuiet)
	fmt.Fprintf(w, "| server | each key written with | PTTL | idle RSS | RSS with keys | growth | growth per key | used_memory | write time | GC CPU | worst pause | idle mark |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range res {
		gcCPU, pause, mark := "-", "-", "-"
		if m.gc != nil {
			gcCPU = fmt.Sprintf("%.1f%%", 100*m.gc.share())
			pause = fmt.Sprintf("%.2f ms", m.gc.worstPauseMs)
			mark = fmt.Sprintf("%.1f ms", m.gc.lastForcedMarkMs)
		}
		fmt.Fprintf(w, "| %s | `%s` | %d ms | %s | %s%s | %s | %d B | %s | %.1f s | %s | %s | %s |\n",
			m.label, m.command, m.pttl, harness.MiB(m.idle), harness.MiB(m.full), harness.Unsettled(m.settled), harness.MiB(m.full-m.idle),
			(m.full-m.idle)/keys, harness.MiB(m.usedMemory), m.fill.Seconds(), gcCPU, pause, mark)
	}
	fmt.Fprintf(w, "\n| ratio to redis-server | RSS growth | used_memory | bar (RSS growth, issue 26) |\n|---|---:|---:|---|\n")
	for _, m := range res[1:] {
		g := float64(m.full-m.idle) / float64(base.full-base.idle)
		bar := "≤ 0.35"
		if m.noBar {
			bar = "none (held as bytes)"
		}
		fmt.Fprintf(w, "| %s | %s | %.2f | %s |\n", m.label, harness.BarCell(g, !m.noBar, g <= 0.35),
			float64(m.usedMemory)/float64(base.usedMemory), bar)
	}
	return nil
}

// measure starts a fresh server (redis-server when k is nil, else
// throttled), fills it with n keys and measures it, and stops it.
func (r *runner) measure(ctx context.Context, n int, k *kind) (result, error) {
	port, err := proc.FreePort()
	if err != nil {
		return result{}, err
	}
	addr := proc.Addr(port)
	m := result{label: "redis-server", command: "SET key <TAT> PX 3600000"}
	cfg := proc.Config{Name: "redis-server", Path: "redis-server", Addr: addr, Dir: r.tmp, Timeout: time.Minute,
		Args: []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no"}}
	if k != nil {
		m.label, m.command = "throttled, "+k.name, strings.Join(append([]string{k.args[0], "key"}, k.args[1:]...), " ")
		if k.twice {
			m.command, m.noBar = m.command+", twice", true
		}
		cfg = proc.Config{Name: "throttled", Path: r.bin, Addr: addr, Dir: r.tmp, Timeout: time.Minute,
			Wrap: []string{"env", "GODEBUG=gctrace=1"},
			Args: []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--threads", "1", "--persistence", "off"}}
	}
	r.logf("starting %s", m.label)
	p, err := proc.Start(ctx, cfg)
	if err != nil {
		return m, err
	}
	defer func() {
		if err := p.Stop(); err != nil {
			r.logf("stop %s: %v", m.label, err)
		}
	}()
	if m.idle, _, err = harness.SettledRSS(ctx, p.Pid()); err != nil {
		return m, err
	}
	began := time.Now()
	if err := r.fill(ctx, addr, n, k); err != nil {
		return m, fmt.Errorf("%s: %w", m.label, err)
	}
	m.fill = time.Since(began)
	r.logf("%s: wrote %d keys in %v", m.label, n, m.fill.Round(time.Millisecond))
	if err := harness.WaitIdle(ctx, []int{p.Pid()}, 0, r.logf); err != nil {
		return m, err
	}
	if m.full, m.settled, err = harness.SettledRSS(ctx, p.Pid()); err != nil {
		return m, err
	}
	info, err := respconn.Info(ctx, addr, "memory")
	if err != nil {
		return m, err
	}
	m.usedMemory, _ = strconv.ParseInt(info["used_memory"], 10, 64)
	if m.pttl, err = pttl(ctx, addr, keyName(0)); err != nil {
		return m, err
	}
	if k != nil {
		cpu, err := harness.CPUTime(p.Pid())
		if err != nil {
			return m, err
		}
		gc := parseGCTrace(p.Output())
		gc.processCPU = cpu
		m.gc = &gc
	}
	r.logf("%s: RSS %s idle, %s with %d keys", m.label, harness.MiB(m.idle), harness.MiB(m.full), n)
	return m, nil
}

// fill writes keys 0..n-1 to the server at addr, pipelined: the kind's call
// on throttled (each must be allowed), SET ... PX on redis-server (k nil).
// It then checks that DBSIZE is n.
func (r *runner) fill(ctx context.Context, addr string, n int, k *kind) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true,
		PoolSize: 1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer c.Close()
	// What redis-cell would store: a TAT an hour ahead, in nanoseconds.
	tat := time.Now().Add(time.Hour).UnixNano()
	for lo := 0; lo < n; lo += fillBatch {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < min(lo+fillBatch, n); i++ {
				if k == nil {
					p.Set(ctx, keyName(i), tat, ttlMs*time.Millisecond)
					continue
				}
				args := []any{k.args[0], keyName(i)}
				for _, a := range k.args[1:] {
					args = append(args, a)
				}
				p.Do(ctx, args...)
				if k.twice {
					p.Do(ctx, args...)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("writing keys: %w", err)
		}
		if k == nil {
			continue
		}
		for _, cmd := range cmds {
			if v, err := cmd.(*redis.Cmd).Int64Slice(); err != nil || len(v) < 5 || v[0] != 0 {
				return fmt.Errorf("%v answered %v, %v; want an allowed call", cmd.Args(), v, err)
			}
		}
	}
	got, err := c.DBSize(ctx).Result()
	if err != nil {
		return err
	}
	if got != int64(n) {
		return fmt.Errorf("DBSIZE is %d after writing %d keys", got, n)
	}
	return nil
}

// pttl returns the PTTL of key on the server at addr.
func pttl(ctx context.Context, addr, key string) (int64, error) {
	c, err := respconn.Dial(ctx, addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	v, err := c.Do("PTTL", key)
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, errors.New("PTTL: not an integer")
	}
	return n, nil
}
