package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/throttleddb/throttled/bench/internal/accuracy"
	"github.com/throttleddb/throttled/bench/internal/harness"
)

// accSizes are the meshes the accuracy workload is spread over.
var accSizes = []int{2, 3}

// accSyncInterval is the accuracy meshes' --crdt-sync-interval: the lag
// is modelled in simulated time, so the real interval only sets how long
// each barrier waits.
const accSyncInterval = time.Millisecond

// accResults are the accuracy part's tallies: the single node's, then one
// per mesh size.
type accResults struct {
	cfg    accuracy.Config // as run (Addrs: the single node's)
	single []accuracy.Result
	mesh   map[int][]accuracy.Result
	took   time.Duration
}

// accuracy replays the workload against a single node and against meshes
// of accSizes nodes, all at once (the answers do not depend on speed).
func (r *runner) accuracy(ctx context.Context) (*accResults, error) {
	began := time.Now()
	single, err := r.startSingle(ctx, "acc-single", "--debug-clock")
	if err != nil {
		return nil, err
	}
	defer r.stop(single)
	meshes := map[int][]*node{}
	for _, n := range accSizes {
		mesh, err := r.startMesh(ctx, n, fmt.Sprintf("acc%d", n), "--debug-clock", "--crdt-sync-interval", accSyncInterval.String())
		if err != nil {
			return nil, err
		}
		defer r.stop(mesh...)
		meshes[n] = mesh
	}
	base := r.cfg.acc
	base.Start = accuracy.StartAfter(time.Now())
	res := &accResults{mesh: map[int][]accuracy.Result{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(accSizes)+1)
	run := func(i int, nodes []*node) {
		cfg := base
		for _, n := range nodes {
			cfg.Addrs = append(cfg.Addrs, n.addr)
		}
		prefix := fmt.Sprintf("accuracy, %d node(s): ", len(nodes))
		cfg.Logf = func(format string, a ...any) { r.logf(prefix+format, a...) }
		out, err := accuracy.Measure(ctx, cfg)
		mu.Lock()
		defer mu.Unlock()
		errs[i] = err
		if len(nodes) == 1 {
			res.single, res.cfg = out, cfg
		} else {
			res.mesh[len(nodes)] = out
		}
	}
	wg.Go(func() { run(0, []*node{single}) })
	for i, n := range accSizes {
		wg.Go(func() { run(i+1, meshes[n]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, r.withOutput(err)
	}
	res.took = time.Since(began)
	return res, nil
}

// studyCRDT is crdt-design.md section 5's figure for each algorithm at
// N = 2 and 3, Δ = 5 ms: admissions against one exact limiter ("vs
// exact"), its own workload (300 req/s on one key, round-robin).
var studyCRDT = map[string]string{
	"GCRA": "+0.1% / +0.0%",
	"TB":   "+0.1% / +0.0%",
	"FWC":  "naive INCR FWC: +12.1% / +12.2%",
}

func writeAccuracy(w io.Writer, res *accResults) {
	cfg := res.cfg
	fmt.Fprintf(w, "\n### Accuracy, requests round-robin over the nodes\n\n")
	fmt.Fprintf(w, "bench/accuracy's workload (package bench/internal/accuracy) against a single node (`--debug-clock`) and against meshes of %s nodes "+
		"(`--debug-clock --crdt-sync-interval %v`), all in this run. In a mesh each request goes to the next node in turn, in time order; "+
		"the replay models a replication lag of **%v of simulated time**: a batch of requests spans at most that, the nodes run their parts of it at once, "+
		"and every node merges the others' writes before the next batch. So a request sees every other node's request made %v or more before it, "+
		"and may or may not see those made less than that before.\n\n", harness.JoinInts(accSizes, " and "), accSyncInterval, cfg.Lag, cfg.Lag)
	accuracy.Describe(w, cfg)
	fmt.Fprintf(w, "\nDeviation (over-admitted / under-admitted). \"Allowed vs single\" compares the requests allowed with the single node's; "+
		"the study's figures (crdt-design.md section 5, Δ = 5 ms, N = 2 / 3) are that measure on its own workload (300 req/s on one key), not a deviation.\n\n")
	fmt.Fprintf(w, "| algorithm | single node | ")
	for _, n := range accSizes {
		fmt.Fprintf(w, "%d nodes | allowed vs single, %d nodes | ", n, n)
	}
	fmt.Fprintf(w, "study, CRDT, N = 2 / 3 |\n|---|---:|")
	for range accSizes {
		fmt.Fprintf(w, "---:|---:|")
	}
	fmt.Fprintf(w, "---|\n")
	for i, s := range res.single {
		fmt.Fprintf(w, "| %s | %s |", s.Alg.Name, devCell(s))
		for _, n := range accSizes {
			m := res.mesh[n][i]
			fmt.Fprintf(w, " %s | %+.2f%% |", devCell(m), 100*float64(m.Allowed-s.Allowed)/float64(s.Allowed))
		}
		study := studyCRDT[s.Alg.Name]
		if study == "" {
			study = "— (exact once delivered)"
		}
		fmt.Fprintf(w, " %s |\n", study)
	}
	fmt.Fprintf(w, "\nBarriers (waits for the mesh to converge) per algorithm:")
	for _, n := range accSizes {
		fmt.Fprintf(w, " %d nodes %d-%d;", n, minBarriers(res.mesh[n]), maxBarriers(res.mesh[n]))
	}
	fmt.Fprintf(w, " the accuracy part took %s.\n", res.took.Round(time.Second))
}

func devCell(r accuracy.Result) string {
	return fmt.Sprintf("%.2f%% (%d / %d)", r.Deviation(), r.Over, r.Under)
}

func minBarriers(rs []accuracy.Result) int {
	m := -1
	for _, r := range rs {
		if m < 0 || r.Barriers < m {
			m = r.Barriers
		}
	}
	return m
}

func maxBarriers(rs []accuracy.Result) int {
	m := 0
	for _, r := range rs {
		m = max(m, r.Barriers)
	}
	return m
}
