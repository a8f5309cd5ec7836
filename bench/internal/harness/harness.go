// Package harness holds what the benchmark programs (bench/compare,
// bench/persist, bench/accuracy, bench/raft, bench/crdt, bench/policy,
// bench/lease) share: building and starting the throttled binary, loading a Lua script, pinning processes to CPUs, describing the
// machine and its load, waiting for servers to go idle, the -P, -runs
// and -skip flags, a report's heading, and the small
// statistics and number formats of their reports.
package harness

import (
	"context"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/procattr"
	"github.com/throttleddb/throttled/internal/respconn"
)

// BuildThrottled builds ./cmd/throttled of the module the current directory
// is in into dir and returns the binary's path.
func BuildThrottled(ctx context.Context, dir string, logf func(string, ...any)) (string, error) {
	return Build(ctx, "cmd/throttled", filepath.Join(dir, "throttled"), logf)
}

// StartThrottled builds ./cmd/throttled into dir and runs it from there
// on a free loopback port, with args after --bind and --port; the
// process's Addr is where it listens. The caller stops it.
func StartThrottled(ctx context.Context, dir string, logf func(string, ...any), args ...string) (*proc.Process, error) {
	bin, err := BuildThrottled(ctx, dir, logf)
	if err != nil {
		return nil, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	logf("starting %s %s", bin, strings.Join(args, " "))
	return proc.Start(ctx, proc.Config{Name: "throttled", Path: bin, Args: args, Addr: proc.Addr(port), Dir: dir, Timeout: 30 * time.Second})
}

// Build runs go build in pkgDir, a folder of the throttled repository given
// relative to its root (the module the current directory is in), and
// writes the binary to out. pkgDir may hold a module of its own, as
// bench/raft/etcdload does: go build then uses that module's go.mod. flags
// go to go build before the package (bench/crdt's -profile passes an
// -overlay).
func Build(ctx context.Context, pkgDir, out string, logf func(string, ...any), flags ...string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := strings.TrimSpace(string(gomod))
	if root == "" || root == os.DevNull {
		return "", errors.New("not inside the throttled module: run from the repository")
	}
	dir := filepath.Join(filepath.Dir(root), pkgDir)
	logf("building %s", dir)
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Dir = dir
	cmd.SysProcAttr = procattr.Child()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", pkgDir, err, b)
	}
	return out, nil
}

// LoadScript loads a Lua script into the server at addr (SCRIPT LOAD) and
// returns its SHA.
func LoadScript(ctx context.Context, addr, script string) (string, error) {
	c, err := respconn.Dial(ctx, addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.Do("SCRIPT", "LOAD", script)
	if err != nil {
		return "", err
	}
	if sha, ok := v.(string); ok && len(sha) == 40 {
		return sha, nil
	}
	return "", fmt.Errorf("SCRIPT LOAD answered %v", v)
}

// ServerWrap runs a server on CPU 0 when pin is set (servers are measured one
// at a time, so they share it).
func ServerWrap(pin bool) []string {
	if !pin {
		return nil
	}
	return []string{"taskset", "-c", "0"}
}

// ClientWrap runs the load generator on the CPUs the servers do not use when
// pin is set.
func ClientWrap(pin bool) []string {
	if !pin {
		return nil
	}
	cpus := "1"
	if n := runtime.NumCPU(); n > 2 {
		cpus = fmt.Sprintf("1-%d", n-1)
	}
	return []string{"taskset", "-c", cpus}
}

// FirstLine runs "bin arg" and returns the first line of its output, for
// version strings.
func FirstLine(ctx context.Context, bin, arg string) string {
	out, err := exec.CommandContext(ctx, bin, arg).Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// Machine describes the host: CPU count (as nproc counts them), CPU model
// and OS when /proc tells them.
func Machine() string {
	parts := []string{fmt.Sprintf("%d CPUs (nproc)", runtime.NumCPU())}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				parts = append(parts, strings.TrimSpace(v))
				break
			}
		}
	}
	osinfo := runtime.GOOS + "/" + runtime.GOARCH
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		osinfo += ", kernel " + strings.TrimSpace(string(b))
	}
	return strings.Join(append(parts, osinfo), ", ")
}

// LoadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg: other
// work on a shared machine shows up here.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// ParsePipelines reads a -P flag: comma-separated pipeline depths.
func ParsePipelines(v string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-P: bad pipeline depth %q", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseSkip reads a -skip flag: comma-separated names out of parts.
func ParseSkip(v string, parts []string) (map[string]bool, error) {
	skip := map[string]bool{}
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(parts, p) {
			return nil, fmt.Errorf("-skip: unknown part %q (have %s)", p, strings.Join(parts, ", "))
		}
		skip[p] = true
	}
	return skip, nil
}

// Median of xs; 0 when empty.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// PairedRatio is the median over runs of num[i]/den[i], the two measured in
// the same run i, one right after the other. This VM's speed drifts over
// minutes (other machines share its host): pairing cancels the drift that a
// ratio of the two medians, each taken over the whole session, keeps. Runs
// beyond the shorter slice are left out; 0 when there are none.
func PairedRatio(num, den []float64) float64 {
	return Median(Ratios(num, den))
}

// Ratios returns num[i]/den[i] for each run i both have.
func Ratios(num, den []float64) []float64 {
	rs := make([]float64, 0, min(len(num), len(den)))
	for i := range min(len(num), len(den)) {
		rs = append(rs, num[i]/den[i])
	}
	return rs
}

// Thousands formats n as 1,234,567.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// RPSCell formats the median of xs (requests per second of each run) as
// 1,234 and, with more than one run, ± half the min-max range in % of the
// median; "-" when there are none.
func RPSCell(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	m := Median(xs)
	out := Thousands(int64(math.Round(m)))
	if len(xs) > 1 {
		out += fmt.Sprintf(" ±%.0f%%", 100*(slices.Max(xs)-slices.Min(xs))/2/m)
	}
	return out
}

// BarCell formats a ratio, marked ✓ or ✗ (in bold) when a bar applies to
// it; "-" when it is not a number.
func BarCell(v float64, applies, met bool) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case !applies:
		return fmt.Sprintf("%.2f", v)
	case met:
		return fmt.Sprintf("%.2f ✓", v)
	}
	return fmt.Sprintf("**%.2f ✗**", v)
}

// MsCell formats the median of xs, latencies in ms, as 1.23; "-" when
// there are none or the median is 0 (redis-benchmark before 7.0 reports no
// latency).
func MsCell(xs []float64) string {
	if m := Median(xs); m > 0 {
		return fmt.Sprintf("%.2f", m)
	}
	return "-"
}

// RunsCell lists each run's ratio, in run order, as "1.02 0.98"; "-" when
// there are none.
func RunsCell(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(out, " ")
}

// JoinInts formats xs joined by sep: 17/17/16.
func JoinInts(xs []int, sep string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, sep)
}

// RatioHeader writes the head of a ratio table: a column per pipeline
// depth for the ratio, one per depth for each run's ratios, and the bar.
func RatioHeader(w io.Writer, pipelines []int) {
	fmt.Fprintf(w, "| ratio |")
	for _, pl := range pipelines {
		fmt.Fprintf(w, " P=%d |", pl)
	}
	for _, pl := range pipelines {
		fmt.Fprintf(w, " each run, P=%d |", pl)
	}
	fmt.Fprintf(w, " bar |\n|---|%s%s---|\n", strings.Repeat("---:|", len(pipelines)), strings.Repeat("---|", len(pipelines)))
}

// Main runs a benchmark program and exits: it parses the command line with
// parse, then runs body until it returns or Ctrl-C/SIGTERM cancels its
// context. Exit codes: 0 done (or -h), 2 bad flags, 1 failed, 130
// interrupted. Errors go to stderr prefixed with the program's name.
func Main[C any](name string, parse func(args []string, stderr io.Writer) (C, error), body func(ctx context.Context, cfg C, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, name, os.Args[1:], os.Stdout, os.Stderr, parse, body)
	stop()
	os.Exit(code)
}

func run[C any](ctx context.Context, name string, args []string, stdout, stderr io.Writer,
	parse func([]string, io.Writer) (C, error), body func(context.Context, C, io.Writer, io.Writer) error) int {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 2
	}
	if err := body(ctx, cfg, stdout, stderr); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, name+": interrupted")
			return 130
		}
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	return 0
}

// CPUTime is the user plus system CPU time of process pid so far.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUTime(string(b))
}

// parseCPUTime reads utime and stime (fields 14 and 15, in clock ticks of
// 10 ms) from a /proc/<pid>/stat line. The command name in parentheses may
// hold blanks, so fields are counted after its closing parenthesis.
func parseCPUTime(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	f := strings.Fields(stat[i+1:]) // f[0] is field 3
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("bad /proc/<pid>/stat line %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// WaitIdle waits until the processes pids together have used at most twice
// rest + 20 ms of CPU over the last second, so that one server's leftover
// work, such as expiring the previous run's keys or a Pebble compaction,
// does not land in another's measurement. rest is what they use per second
// when nothing is asked of them (see RestCPU; 0 for a single server, whose
// own timers cost less than the margin). It is twice rest because a
// cluster's idle cost moves with the machine's load: three throttled
// members measured 110 ms at rest and 130-220 ms idle after runs on a
// shared 2-core VM. It gives up after 30 s, saying so through logf, and
// measures anyway.
func WaitIdle(ctx context.Context, pids []int, rest time.Duration, logf func(string, ...any)) error {
	const margin, deadline = 20 * time.Millisecond, 30 * time.Second
	began := time.Now()
	for {
		used, err := cpuOver(ctx, pids, time.Second)
		if err != nil || used <= 2*rest+margin {
			return err
		}
		if time.Since(began) > deadline {
			logf("servers still busy after %v (%v of CPU in the last second, %v at rest); measuring anyway", deadline, used, rest)
			return nil
		}
	}
}

// RestCPU is the CPU the processes pids use per second when nothing is
// asked of them: the least they used in one of three seconds. Members of a
// cluster are never quite idle: they exchange heartbeats and probes.
func RestCPU(ctx context.Context, pids []int) (time.Duration, error) {
	least := time.Duration(math.MaxInt64)
	for range 3 {
		used, err := cpuOver(ctx, pids, time.Second)
		if err != nil {
			return 0, err
		}
		least = min(least, used)
	}
	return least, nil
}

// cpuOver is the CPU the processes pids use together over the next window.
func cpuOver(ctx context.Context, pids []int, window time.Duration) (time.Duration, error) {
	cpu := func() (time.Duration, error) {
		var sum time.Duration
		for _, pid := range pids {
			d, err := CPUTime(pid)
			if err != nil {
				return 0, err
			}
			sum += d
		}
		return sum, nil
	}
	before, err := cpu()
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	after, err := cpu()
	return after - before, err
}

// GoVersion is the Go release that built the binary bin, "(throttled
// binary)", or the runner's own when bin cannot be read, "(runner)".
func GoVersion(bin string) string {
	if bi, err := buildinfo.ReadFile(bin); err == nil {
		return bi.GoVersion + " (throttled binary)"
	}
	return runtime.Version() + " (runner)"
}

// Footer writes a report's last line: how long the run took since began
// and the load average at its end.
func Footer(w io.Writer, began time.Time) {
	fmt.Fprintf(w, "\nWhole run: %s. Load average at the end: %s.\n", time.Since(began).Round(time.Second), LoadAvg())
}
