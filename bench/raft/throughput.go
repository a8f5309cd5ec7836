package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

// The load of the throughput part: bench/compare's CL.THROTTLE case.
const keySpace = 100000

// throttleCmd is the command redis-benchmark sends. Its keys live ~2 s
// (one token per 2 s, bucket of 16), so nearly every call is allowed and
// writes: in the cluster, nearly every call is a log entry's worth of work.
var throttleCmd = []string{"CL.THROTTLE", "k:__rand_int__", "15", "30", "60"}

// setup is one system under load.
type setup int

const (
	singleSetup setup = iota // the single node
	leaderSetup              // the cluster, every client on the leader
	spreadSetup              // the cluster, the clients split over its members
	etcdSetup                // etcd puts, at -P 1 only
)

var setupLabels = map[setup]string{
	singleSetup: "single node",
	leaderSetup: "3-node cluster, clients on the leader",
	spreadSetup: "3-node cluster, clients spread",
	etcdSetup:   "3-node etcd, puts",
}

func (s setup) String() string { return setupLabels[s] }

// results are the throughput part's measurements.
type results struct {
	harness.Throughput[setup]
	// refusals are the runs repeated because the cluster refused a
	// command (see retry).
	refusals []string
	// terms are the cluster's Raft term before and after the part.
	terms [2]uint64
	// leaderMoves counts the runs with the clients on the leader during
	// which another member took over: such a run measured a follower.
	leaderMoves int
}

// throughput measures every setup at every -P, -runs times, each run's
// setups in an order reversed every other run; etcd goes with them at -P 1.
func (r *runner) throughput(ctx context.Context) (*results, error) {
	res := &results{Throughput: harness.Throughput[setup]{Pipelines: r.cfg.Pipelines, Runs: r.cfg.Runs, Seconds: r.cfg.seconds,
		Clients: harness.SplitEven(r.cfg.clients, clusterSize)}}
	var err error
	if res.Rest, err = harness.RestCPU(ctx, r.pids()); err != nil {
		return nil, err
	}
	r.logf("at rest the servers use %v of CPU per second", res.Rest)
	if res.terms[0], err = r.cluster.term(ctx); err != nil {
		return nil, err
	}
	for _, pl := range r.cfg.Pipelines {
		setups := []setup{singleSetup, leaderSetup, spreadSetup}
		// A first run of -n requests sizes each setup's measured runs to
		// about -seconds, node by node: with the clients spread, the three
		// redis-benchmarks then end together and their rps add up.
		requests := map[setup][]int{}
		for _, s := range setups {
			addrs, clients, err := r.targets(ctx, s)
			if err != nil {
				return nil, err
			}
			var rps []float64
			err = r.retry(ctx, res, func() (err error) {
				_, rps, err = r.redisBench(ctx, addrs, clients, harness.SplitByWeight(r.cfg.requests, clients), pl)
				return err
			})
			if err != nil {
				return nil, err
			}
			requests[s] = harness.SizeRuns(rps, r.cfg.seconds, clients)
			r.logf("P=%-3d sizing    %-40s %v rps -> %v requests per run", pl, s, roundAll(rps), requests[s])
		}
		if pl == 1 && r.etcd != nil {
			setups = append(setups, etcdSetup)
		}
		for run := range r.cfg.Runs {
			order := slices.Clone(setups)
			if run%2 == 1 { // alternate who goes first
				slices.Reverse(order)
			}
			for _, s := range order {
				if err := harness.WaitIdle(ctx, r.pids(), res.Rest, r.logf); err != nil {
					return nil, err
				}
				var smp redisbench.Figures
				err := r.retry(ctx, res, func() (err error) {
					smp, err = r.measure(ctx, s, pl, requests[s], res)
					return err
				})
				if err != nil {
					return nil, err
				}
				res.Add(pl, s, smp)
				r.logf("P=%-3d run %d/%d  %-40s %9.0f rps, p50 %.3f ms, p99 %.3f ms", pl, run+1, r.cfg.Runs, s, smp.RPS, smp.P50, smp.P99)
			}
		}
	}
	if res.terms[1], err = r.cluster.term(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// maxRefusals is how many times one run is tried again after the cluster
// refused a command.
const maxRefusals = 4

// retry runs f, and runs it again, up to maxRefusals times, when the
// cluster answered a command with UNKNOWN (not confirmed within
// --raft-apply-timeout, 2 s) or CLUSTERDOWN (no leader), which stops
// redis-benchmark. On a busy shared machine a commit can stall that long;
// each such run is counted in the report.
func (r *runner) retry(ctx context.Context, res *results, f func() error) error {
	for try := 0; ; try++ {
		err := f()
		if err == nil || try == maxRefusals || ctx.Err() != nil {
			return err
		}
		refused := refusal(err.Error())
		if refused == "" {
			return err
		}
		res.refusals = append(res.refusals, refused)
		r.logf("the cluster refused a command (%s); running again", refused)
		if err := harness.WaitIdle(ctx, r.pids(), res.Rest, r.logf); err != nil {
			return err
		}
	}
}

// refusal finds the cluster's refusal in redis-benchmark's output: the
// error's first word, "" when there is none.
func refusal(out string) string {
	for _, code := range []string{"UNKNOWN", "CLUSTERDOWN"} {
		if strings.Contains(out, "Error from server: "+code) {
			return code
		}
	}
	return ""
}

// measure runs setup s once.
func (r *runner) measure(ctx context.Context, s setup, pl int, requests []int, res *results) (redisbench.Figures, error) {
	if s == etcdSetup {
		return r.etcd.put(ctx, r.cfg.clients, r.cfg.seconds, harness.ClientWrap(r.cfg.pin))
	}
	addrs, clients, err := r.targets(ctx, s)
	if err != nil {
		return redisbench.Figures{}, err
	}
	smp, _, err := r.redisBench(ctx, addrs, clients, requests, pl)
	if err != nil || s != leaderSetup {
		return smp, err
	}
	after, _, err := r.targets(ctx, s)
	if err == nil && after[0] != addrs[0] {
		res.leaderMoves++
		r.logf("the leader moved from %s to %s during the run", addrs[0], after[0])
	}
	return smp, err
}

// targets returns the addresses setup s sends to and the clients each
// gets. The leader is looked up anew each time: leadership may move.
func (r *runner) targets(ctx context.Context, s setup) ([]string, []int, error) {
	switch s {
	case singleSetup:
		return []string{r.single.addr}, []int{r.cfg.clients}, nil
	case leaderSetup:
		lead, err := r.cluster.leader(ctx, r.cluster.nodes)
		if err != nil {
			return nil, nil, err
		}
		return []string{lead.addr}, []int{r.cfg.clients}, nil
	case spreadSetup:
		var addrs []string
		for _, n := range r.cluster.nodes {
			addrs = append(addrs, n.addr)
		}
		return addrs, harness.SplitEven(r.cfg.clients, len(addrs)), nil
	}
	return nil, nil, fmt.Errorf("no redis-benchmark target for %s", s)
}

// redisBench runs one redis-benchmark per address at once, with clients[i]
// connections and requests[i] requests on addrs[i], and returns their
// summed rps and highest latencies, and each one's rps.
func (r *runner) redisBench(ctx context.Context, addrs []string, clients, requests []int, pl int) (redisbench.Figures, []float64, error) {
	opts := make([]redisbench.Options, len(addrs))
	for i, addr := range addrs {
		opts[i] = redisbench.Options{
			Bin: r.cfg.benchBin, Addr: addr, Clients: clients[i], Requests: requests[i], KeySpace: keySpace,
			Pipeline: pl, Command: throttleCmd, Wrap: harness.ClientWrap(r.cfg.pin),
		}
	}
	out, err := redisbench.RunAll(ctx, 10*time.Minute, opts)
	if err != nil {
		if ctx.Err() != nil {
			return redisbench.Figures{}, nil, err
		}
		return redisbench.Figures{}, nil, r.withServerOutput(err)
	}
	rps := make([]float64, len(out))
	for i, o := range out {
		rps[i] = o.RPS
	}
	return redisbench.Sum(out), rps, nil
}

// withServerOutput adds the last lines of every throttled node's output,
// whole for a node that has exited.
func (r *runner) withServerOutput(err error) error {
	for _, n := range r.nodes() {
		select {
		case <-n.p.Exited():
			err = fmt.Errorf("%w\n--- %s exited; its output ---\n%s", err, n.id, n.p.Output())
		default:
			err = fmt.Errorf("%w\n--- %s, the end of its output ---\n%s", err, n.id, harness.LastLines(n.p.Output(), 10))
		}
	}
	return err
}

// nodes are the throttled processes running now.
func (r *runner) nodes() []*node {
	var out []*node
	if r.single != nil && r.single.p != nil {
		out = append(out, r.single)
	}
	if r.cluster != nil {
		for _, n := range r.cluster.nodes {
			if n.p != nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// pids are every server process running now, for harness.WaitIdle.
func (r *runner) pids() []int {
	var out []int
	for _, n := range r.nodes() {
		out = append(out, n.p.Pid())
	}
	if r.etcd != nil {
		for _, m := range r.etcd.members {
			out = append(out, m.p.Pid())
		}
	}
	return out
}

func roundAll(xs []float64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(x + 0.5)
	}
	return out
}
