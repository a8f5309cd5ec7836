package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

// load is what redis-benchmark sends: its -r and its command.
type load struct {
	keys int
	cmd  []string
}

// spreadLoad is bench/compare's CL.THROTTLE case: a key admits one call
// every 2 s and a burst of 16. At -P 1 (some 50,000 calls a second, one per
// key every 2 s) nearly every call is admitted and writes, a delta to ship;
// a server that answers several times faster fills its keys within seconds
// and then mostly refuses, which writes nothing.
var spreadLoad = load{keys: 100000, cmd: []string{"CL.THROTTLE", "k:__rand_int__", "15", "30", "60"}}

// admitLoad (-admit) gives the same keys limits no client reaches in a run
// (5 a second and a burst of 1001: at 10 calls a second a key fills in
// 200 s), so every call on every server is admitted and written.
var admitLoad = load{keys: 100000, cmd: []string{"CL.THROTTLE", "k:__rand_int__", "1000", "5", "1"}}

// hotLoad (-hot) puts every call on one key whose limit no client reaches:
// one tenant's key, every call a write to the same debt log.
var hotLoad = load{keys: 1, cmd: []string{"CL.THROTTLE", "hot", "1000000", "1000000", "1"}}

// setup is one system under load.
type setup int

const (
	singleSetup setup = iota // the single node
	oneSetup                 // the mesh, every client on node a
	spreadSetup              // the mesh, the clients split over its nodes
)

var setupLabels = map[setup]string{
	singleSetup: "single node",
	oneSetup:    "3-node mesh, load on one node",
	spreadSetup: "3-node mesh, load spread on all three",
}

func (s setup) String() string { return setupLabels[s] }

// setupFiles name the setups in -profile's file names.
var setupFiles = map[setup]string{singleSetup: "single", oneSetup: "one", spreadSetup: "spread"}

// mkey names a setup at a pipeline depth.
type mkey struct {
	pipeline int
	setup    setup
}

// results are the throughput part's measurements.
type results struct {
	harness.Throughput[setup]
	// cpu is each setup's server CPU per request (µs), per run.
	cpu map[mkey][]float64
}

// throughput measures every setup at every -P, -runs times, each run's
// setups in an order reversed every other run.
func (r *runner) throughput(ctx context.Context) (*results, error) {
	single, err := r.startSingle(ctx, "single")
	if err != nil {
		return nil, err
	}
	defer r.stop(single)
	mesh, err := r.startMesh(ctx, meshSize, "mesh", "--crdt-sync-interval", r.cfg.intervals[0].String())
	if err != nil {
		return nil, err
	}
	defer r.stop(mesh...)
	all := append([]*node{single}, mesh...)
	res := &results{cpu: map[mkey][]float64{}, Throughput: harness.Throughput[setup]{Pipelines: r.cfg.Pipelines, Runs: r.cfg.Runs,
		Seconds: r.cfg.seconds, Clients: harness.SplitEven(r.cfg.clients, meshSize)}}
	if res.Rest, err = harness.RestCPU(ctx, pids(all)); err != nil {
		return nil, err
	}
	r.logf("at rest the servers use %v of CPU per second", res.Rest)
	targets := func(s setup) ([]*node, []int) {
		switch s {
		case singleSetup:
			return []*node{single}, []int{r.cfg.clients}
		case oneSetup:
			return mesh[:1], []int{r.cfg.clients}
		}
		return mesh, res.Clients
	}
	setups := []setup{singleSetup, oneSetup, spreadSetup}
	for _, pl := range r.cfg.Pipelines {
		// Unmeasured runs size each setup's measured runs to about
		// -seconds, node by node: a first of -n requests, then one sized
		// by it to last about a second, whose rates are used. A mesh node
		// can start a run much faster than it goes on (nodes b and c have
		// not yet fallen behind with a's deltas), so one short run is not
		// enough: the nodes with the load spread would end far apart.
		requests := map[setup][]int{}
		for _, s := range setups {
			nodes, clients := targets(s)
			n := harness.SplitByWeight(r.cfg.requests, clients)
			var rps []float64
			for pass := range 2 {
				var err error
				if _, rps, err = r.redisBench(ctx, nodes, clients, n, pl); err != nil {
					return nil, err
				}
				r.logf("P=%-3d sizing %d  %-40s %v rps", pl, pass+1, s, rps)
				n = harness.SizeRuns(rps, 1, clients)
			}
			requests[s] = harness.SizeRuns(rps, r.cfg.seconds, clients)
			r.logf("P=%-3d sizing    %-40s %v requests per run", pl, s, requests[s])
		}
		for run := range r.cfg.Runs {
			order := slices.Clone(setups)
			if run%2 == 1 {
				slices.Reverse(order)
			}
			for _, s := range order {
				if err := harness.WaitIdle(ctx, pids(all), res.Rest, r.logf); err != nil {
					return nil, err
				}
				nodes, clients := targets(s)
				used := pids(mesh)
				if s == singleSetup {
					used = pids(nodes)
				}
				before, err := cpuOf(used)
				if err != nil {
					return nil, err
				}
				var profiled sync.WaitGroup
				if r.cfg.profile != "" && run == 0 && pl == slices.Max(r.cfg.Pipelines) {
					profiled.Go(func() {
						who := mesh
						if s == singleSetup {
							who = nodes
						}
						r.profileCPU(ctx, who, fmt.Sprintf("p%d-%s", pl, setupFiles[s]), time.Duration(r.cfg.seconds*0.8*float64(time.Second)))
					})
				}
				smp, _, err := r.redisBench(ctx, nodes, clients, requests[s], pl)
				profiled.Wait()
				if err != nil {
					return nil, err
				}
				after, err := cpuOf(used)
				if err != nil {
					return nil, err
				}
				k := mkey{pl, s}
				res.Add(pl, s, smp)
				total := 0
				for _, n := range requests[s] {
					total += n
				}
				res.cpu[k] = append(res.cpu[k], float64((after-before).Microseconds())/float64(total))
				r.logf("P=%-3d run %d/%d  %-40s %9.0f rps, p50 %.3f ms, p99 %.3f ms, %.1f µs CPU/request", pl, run+1, r.cfg.Runs, s,
					smp.RPS, smp.P50, smp.P99, res.cpu[k][len(res.cpu[k])-1])
			}
		}
	}
	return res, nil
}

// cpuOf is the CPU the processes pids have used so far, together.
func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := harness.CPUTime(pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// redisBench runs one redis-benchmark per node at once, with clients[i]
// connections and requests[i] requests on nodes[i], and returns their
// summed rps and highest latencies, and each one's rps.
func (r *runner) redisBench(ctx context.Context, nodes []*node, clients, requests []int, pl int) (redisbench.Figures, []float64, error) {
	opts := make([]redisbench.Options, len(nodes))
	for i, n := range nodes {
		opts[i] = redisbench.Options{
			Bin: r.cfg.benchBin, Addr: n.addr, Clients: clients[i], Requests: requests[i], KeySpace: r.cfg.load.keys,
			Pipeline: pl, Command: r.cfg.load.cmd,
		}
	}
	out, err := redisbench.RunAll(ctx, 10*time.Minute, opts)
	if err != nil {
		if ctx.Err() != nil {
			return redisbench.Figures{}, nil, err
		}
		return redisbench.Figures{}, nil, r.withOutput(err)
	}
	rps := make([]float64, len(out))
	for i, o := range out {
		rps[i] = float64(int64(o.RPS + 0.5))
	}
	return redisbench.Sum(out), rps, nil
}
