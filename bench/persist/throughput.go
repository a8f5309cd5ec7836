package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/redisbench"
	"github.com/throttleddb/throttled/internal/respconn"
)

// Part 1 runs redis-benchmark with these settings (as bench/compare does).
const (
	benchClients  = 50
	benchKeySpace = 100000
)

// benchParams are CL.THROTTLE's max_burst, count and period: keys live ~2 s,
// so nearly every call is allowed and writes.
var benchParams = []string{"15", "30", "60"}

// ratio is one line of a ratio table: servers[num] / servers[den]. A bar
// above 0 must be reached at pipeline depth barAt (0: at every depth).
type ratio struct {
	label    string
	num, den int
	bar      float64
	barAt    int
}

func (r *runner) throughput(ctx context.Context, w io.Writer) error {
	dir := func(name string) string { return filepath.Join(r.tmp, name) }
	noAOF := []string{"--save", "", "--appendonly", "no"}
	aof := func(policy string) []string {
		return []string{"--save", "", "--appendonly", "yes", "--appendfsync", policy}
	}
	// Each throttled mode next to the redis-server with the same policy.
	servers := []*server{
		{label: "throttled, in memory", args: []string{"--threads", "1", "--persistence", "off"}},
		{label: "redis-server, no AOF", redis: true, args: noAOF},
		{label: "throttled, everysec", args: []string{"--threads", "1", "--appendfsync", "everysec"}, dir: dir("t-everysec")},
		{label: "redis-server, AOF everysec", redis: true, args: aof("everysec"), dir: dir("r-everysec")},
		{label: "throttled, always", args: []string{"--threads", "1", "--appendfsync", "always"}, dir: dir("t-always")},
		{label: "redis-server, AOF always", redis: true, args: aof("always"), dir: dir("r-always")},
	}
	ratios := []ratio{
		{"throttled everysec / throttled in memory", 2, 0, 0.8, 0},
		{"throttled always / throttled in memory", 4, 0, 0.3, 16},
		{"throttled in memory / redis-server no AOF", 0, 1, 0, 0},
		{"throttled everysec / redis-server AOF everysec", 2, 3, 0, 0},
		{"throttled always / redis-server AOF always", 4, 5, 0, 0},
	}
	for _, s := range servers {
		if _, err := r.start(ctx, s); err != nil {
			return err
		}
		if err := preflight(ctx, s); err != nil {
			return err
		}
	}

	var pids []int
	for _, s := range servers {
		pids = append(pids, s.p.Pid())
	}
	results := map[[2]int][]float64{} // {pipeline, server index} -> rps of each run
	checkpoints := map[int]int64{}    // server index -> checkpoints during measured runs
	cpuPer := map[[2]int][]float64{}  // {pipeline, server index} -> µs of server CPU per request, each run
	for _, pl := range r.cfg.Pipelines {
		// A first run of -n requests sizes each server's measured runs to
		// about -seconds: long enough that throttled's checkpoints, which
		// run every 10 s under load, are part of what is measured.
		requests := make([]int, len(servers))
		for i, s := range servers {
			if err := harness.WaitIdle(ctx, pids, 0, r.logf); err != nil {
				return err
			}
			res, err := r.bench(ctx, s, pl, r.cfg.requests)
			if err != nil {
				return err
			}
			requests[i] = max(r.cfg.requests, int(res.RPS*r.cfg.seconds))
			r.logf("P=%-3d sizing    %-28s %9.0f rps -> %d requests per run", pl, s.label, res.RPS, requests[i])
		}
		for run := range r.cfg.Runs {
			order := []int{0, 1, 2, 3, 4, 5}
			if run%2 == 1 { // alternate who goes first
				slices.Reverse(order)
			}
			for _, i := range order {
				s := servers[i]
				if err := alive(servers...); err != nil {
					return err
				}
				if err := harness.WaitIdle(ctx, pids, 0, r.logf); err != nil {
					return err
				}
				before := checkpointsOf(ctx, s)
				cpuBefore, cpuErr := harness.CPUTime(s.p.Pid())
				res, err := r.bench(ctx, s, pl, requests[i])
				if err != nil {
					return err
				}
				cpuAfter, err := harness.CPUTime(s.p.Pid())
				if err = errors.Join(cpuErr, err); err != nil {
					return err
				}
				cps := checkpointsOf(ctx, s) - before
				checkpoints[i] += cps
				k := [2]int{pl, i}
				results[k] = append(results[k], res.RPS)
				cpuPer[k] = append(cpuPer[k], float64((cpuAfter-cpuBefore).Microseconds())/float64(requests[i]))
				r.logf("P=%-3d run %d/%d  %-28s %9.0f rps, %d checkpoints", pl, run+1, r.cfg.Runs, s.label, res.RPS, cps)
			}
		}
	}

	fmt.Fprintf(w, "\n### Throughput under each fsync policy\n\n")
	fmt.Fprintf(w, "redis-benchmark `-c %d -r %d -P <p> -q --csv`, sending `%s` to throttled and `%s` to redis-server. "+
		"Each measured run lasts about %g s (`-n` sized by a first, unmeasured run of %d requests), so that throttled's checkpoints (every 10 s under load) are part of it. "+
		"Requests per second, median of %d runs (± half the min-max range, in %% of the median); servers interleaved, order reversed every other run; before each measurement the servers must have been idle for a second (at most 20 ms of CPU). "+
		"CPU is the server process's user and system time per request (median), which the machine's noise moves less than rps; the kernel's writeback of the files is not in it. "+
		"A ratio is the median of the runs' ratios, the two servers measured in the same run, within a minute of each other.\n\n",
		benchClients, benchKeySpace, strings.Join(servers[0].throttle("k:__rand_int__", benchParams...), " "),
		"EVALSHA <sha of bench/gcra.lua> 1 k:__rand_int__ "+strings.Join(benchParams, " ")+" 1", r.cfg.seconds, r.cfg.requests, r.cfg.Runs)
	fmt.Fprintf(w, "| server | flags |")
	for _, pl := range r.cfg.Pipelines {
		fmt.Fprintf(w, " P=%d rps |", pl)
	}
	for _, pl := range r.cfg.Pipelines {
		fmt.Fprintf(w, " P=%d CPU µs/request |", pl)
	}
	fmt.Fprintf(w, " checkpoints during the runs |\n|---|---|%s---:|\n", strings.Repeat("---:|", 2*len(r.cfg.Pipelines)))
	for i, s := range servers {
		fmt.Fprintf(w, "| %s | `%s` |", s.label, flagsText(s))
		for _, pl := range r.cfg.Pipelines {
			fmt.Fprintf(w, " %s |", harness.RPSCell(results[[2]int{pl, i}]))
		}
		for _, pl := range r.cfg.Pipelines {
			fmt.Fprintf(w, " %.2f |", harness.Median(cpuPer[[2]int{pl, i}]))
		}
		if s.redis || s.dir == "" {
			fmt.Fprintf(w, " - |\n")
		} else {
			fmt.Fprintf(w, " %d |\n", checkpoints[i])
		}
	}
	// The "from CPU" columns are the ratio a server bound by its own CPU
	// would show: the inverse ratio of CPU per request.
	fmt.Fprintf(w, "\n| ratio |")
	for _, pl := range r.cfg.Pipelines {
		fmt.Fprintf(w, " P=%d |", pl)
	}
	for _, pl := range r.cfg.Pipelines {
		fmt.Fprintf(w, " P=%d from CPU |", pl)
	}
	fmt.Fprintf(w, " bar |\n|---|%s---|\n", strings.Repeat("---:|", 2*len(r.cfg.Pipelines)))
	for _, q := range ratios {
		fmt.Fprintf(w, "| %s |", q.label)
		for _, pl := range r.cfg.Pipelines {
			v := harness.PairedRatio(results[[2]int{pl, q.num}], results[[2]int{pl, q.den}])
			fmt.Fprintf(w, " %s |", harness.BarCell(v, q.bar > 0 && (q.barAt == 0 || q.barAt == pl), v >= q.bar))
		}
		for _, pl := range r.cfg.Pipelines {
			fmt.Fprintf(w, " %.2f |", harness.PairedRatio(cpuPer[[2]int{pl, q.den}], cpuPer[[2]int{pl, q.num}]))
		}
		switch {
		case q.bar == 0:
			fmt.Fprintf(w, " - |\n")
		case q.barAt == 0:
			fmt.Fprintf(w, " ≥ %.1f |\n", q.bar)
		default:
			fmt.Fprintf(w, " ≥ %.1f at P=%d |\n", q.bar, q.barAt)
		}
	}
	return nil
}

// bench runs redis-benchmark on s once.
func (r *runner) bench(ctx context.Context, s *server, pipeline, requests int) (redisbench.Result, error) {
	bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res, err := redisbench.Run(bctx, redisbench.Options{
		Addr: s.addr, Clients: benchClients, Requests: requests, KeySpace: benchKeySpace,
		Pipeline: pipeline, Command: s.throttle("k:__rand_int__", benchParams...), Wrap: harness.ClientWrap(r.cfg.pin),
	})
	if err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%s: %w\n--- server output ---\n%s", s.label, err, s.p.Output())
	}
	return res, err
}

// checkpointsOf returns throttled's aof_checkpoints (INFO persistence); 0
// for redis-server, or when it cannot be read.
func checkpointsOf(ctx context.Context, s *server) int64 {
	if s.redis {
		return 0
	}
	c, err := respconn.Dial(ctx, s.addr, 5*time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	v, err := c.Do("INFO", "persistence")
	info, ok := v.(string)
	if err != nil || !ok {
		return 0
	}
	for line := range strings.Lines(info) {
		if n, found := strings.CutPrefix(strings.TrimSpace(line), "aof_checkpoints:"); found {
			cps, _ := strconv.ParseInt(n, 10, 64)
			return cps
		}
	}
	return 0
}

// preflight sends the benchmark's command once and wants an allowed
// CL.THROTTLE reply, so that redis-benchmark is not timing errors.
func preflight(ctx context.Context, s *server) error {
	c, err := respconn.Dial(ctx, s.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	cmd := s.throttle("persist-preflight", benchParams...)
	v, err := c.Do(cmd...)
	if err == nil {
		var ints []int64
		if ints, err = respconn.Ints(v); err == nil && (len(ints) != 5 || ints[0] != 0) {
			err = fmt.Errorf("reply %v", ints)
		}
	}
	if err != nil {
		return fmt.Errorf("preflight %s: %q: %w", s.label, strings.Join(cmd, " "), err)
	}
	return nil
}

// flagsText is the server's flags as typed in a shell, the data folder
// shown as <tmp>.
func flagsText(s *server) string {
	out := shellWords(s.args)
	if s.dir != "" {
		out += " --dir <tmp>"
	}
	return out
}

// shellWords joins args with blanks, an empty one shown as "".
func shellWords(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" {
			a = `""`
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
