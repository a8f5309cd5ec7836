// Package harness holds what the benchmark programs (bench/compare,
// bench/persist, bench/accuracy) share: building the throttled binary,
// loading a Lua script, pinning processes to CPUs, describing the machine,
// and the small statistics and number formats of their reports.
package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

	"github.com/throttleddb/throttled/internal/procattr"
	"github.com/throttleddb/throttled/internal/respconn"
)

// BuildThrottled builds ./cmd/throttled of the module the current directory
// is in into dir and returns the binary's path.
func BuildThrottled(ctx context.Context, dir string, logf func(string, ...any)) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the throttled module: run from the repository")
	}
	root := filepath.Dir(gomod)
	bin := filepath.Join(dir, "throttled")
	logf("building ./cmd/throttled in %s", root)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/throttled")
	cmd.Dir = root
	cmd.SysProcAttr = procattr.Child()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/throttled: %w\n%s", err, out)
	}
	return bin, nil
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
