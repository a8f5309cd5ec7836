package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
	"github.com/throttleddb/throttled/internal/respconn"
)

// The probe: a fresh key per probe, written once on node a and peeked
// (quantity 0) on node b. One call leaves 1000 of 1001; a node that has not
// merged it answers 1001. One token per hour: the state does not refill
// while a probe waits.
var (
	probeArgs = []string{"1000", "1", "3600"}
	// probeTimeout is how long a probe waits for its write to show on b
	// before it counts as lost.
	probeTimeout = 5 * time.Second
	// infoEvery is how often INFO replication is read on b during probes.
	infoEvery = 50 * time.Millisecond
)

// lagRow is one setting of the lag part.
type lagRow struct {
	interval time.Duration
	load     string // "none", or the redis-benchmark load on node a
	lags     []time.Duration
	lost     int
	info     []int64 // lag_ms of peer a in INFO replication on b, sampled
	loadRPS  float64 // the load's rps, 0 without load
}

// lag probes a mesh at each -intervals value under the load of each -P on
// node a, and at rest at the first interval.
func (r *runner) lag(ctx context.Context) ([]lagRow, error) {
	var rows []lagRow
	for i, iv := range r.cfg.intervals {
		mesh, err := r.startMesh(ctx, meshSize, "lag-"+iv.String(), "--crdt-sync-interval", iv.String())
		if err != nil {
			return nil, err
		}
		loads := r.cfg.Pipelines
		if i == 0 {
			loads = append([]int{0}, loads...)
		}
		for _, pl := range loads {
			row, err := r.probeRow(ctx, mesh, iv, pl)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
		r.stop(mesh...)
	}
	return rows, nil
}

// probeRow runs -probes probes on mesh, with redis-benchmark loading node a
// at pipeline pl meanwhile (no load when pl is 0).
func (r *runner) probeRow(ctx context.Context, mesh []*node, iv time.Duration, pl int) (lagRow, error) {
	row := lagRow{interval: iv, load: "none"}
	pctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	defer wg.Wait()
	if pl > 0 {
		row.load = fmt.Sprintf("`-c %d -P %d` on a", r.cfg.clients, pl)
		wg.Go(func() {
			_, _ = redisbench.Run(pctx, redisbench.Options{
				Bin: r.cfg.benchBin, Addr: mesh[0].addr, Clients: r.cfg.clients, Requests: 1 << 30, KeySpace: r.cfg.load.keys,
				Pipeline: pl, Command: r.cfg.load.cmd,
			})
		})
		select { // let the load build up
		case <-ctx.Done():
			return row, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	began := time.Now()
	cmds0, err := commandsProcessed(ctx, mesh[0].addr)
	if err != nil {
		return row, err
	}
	var infoMu sync.Mutex
	wg.Go(func() {
		tick := time.NewTicker(infoEvery)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			if ms, err := peerLag(pctx, mesh[1].addr, mesh[0].id); err == nil {
				infoMu.Lock()
				row.info = append(row.info, ms)
				infoMu.Unlock()
			}
		}
	})
	lags, lost, err := probe(pctx, mesh[0].addr, mesh[1].addr, fmt.Sprintf("probe:%v:%d:", iv, pl), r.cfg.probes)
	cmds1, cerr := commandsProcessed(ctx, mesh[0].addr)
	elapsed := time.Since(began)
	stopLoad()
	wg.Wait()
	if err != nil {
		return row, r.withOutput(err)
	}
	if cerr != nil {
		return row, cerr
	}
	// redis-benchmark is stopped, so it prints no rps: the load's rate is
	// node a's commands per second meanwhile (the probes' are few).
	if pl > 0 {
		row.loadRPS = float64(cmds1-cmds0) / elapsed.Seconds()
	}
	row.lags, row.lost = lags, lost
	r.logf("lag, interval %v, load %s: %d probes, p50 %v, p99 %v, %d lost; INFO lag_ms p99 %d",
		iv, row.load, len(lags), pct(lags, 50), pct(lags, 99), lost, pctInt(row.info, 99))
	return row, nil
}

// commandsProcessed is total_commands_processed in INFO stats of the
// node at addr.
func commandsProcessed(ctx context.Context, addr string) (int64, error) {
	info, err := respconn.Info(ctx, addr, "stats")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(info["total_commands_processed"], 10, 64)
}

// probe writes n fresh keys, one at a time, on the node at from, and after
// each write's reply peeks the key on the node at to until the write shows:
// the time from the reply to the first peek that shows it is one lag.
// Probes are spread over the sync interval's phase by a pause of 0-5 ms.
func probe(ctx context.Context, from, to, prefix string, n int) (lags []time.Duration, lost int, err error) {
	w, err := respconn.Dial(ctx, from, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer w.Close()
	rd, err := respconn.Dial(ctx, to, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	defer rd.Close()
	for i := range n {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		key := prefix + strconv.Itoa(i)
		v, err := w.Do(append([]string{"CL.THROTTLE", key}, probeArgs...)...)
		if err != nil {
			return nil, 0, err
		}
		if r, err := respconn.Ints(v); err != nil || len(r) != 5 || r[0] != 0 {
			return nil, 0, fmt.Errorf("CL.THROTTLE %s on %s answered %v (%v)", key, from, v, err)
		}
		t0 := time.Now()
		for {
			v, err := rd.Do(append(append([]string{"CL.THROTTLE", key}, probeArgs...), "0")...)
			if err != nil {
				return nil, 0, err
			}
			r, err := respconn.Ints(v)
			if err != nil || len(r) != 5 {
				return nil, 0, fmt.Errorf("peek of %s on %s answered %v (%v)", key, to, v, err)
			}
			if r[2] < r[1] {
				lags = append(lags, time.Since(t0))
				break
			}
			if time.Since(t0) > probeTimeout {
				lost++
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(time.Duration(i*7919%5000) * time.Microsecond):
		}
	}
	return lags, lost, nil
}

// peerLag reads the lag_ms INFO replication reports on the node at addr
// for peer id.
func peerLag(ctx context.Context, addr, id string) (int64, error) {
	info, err := respconn.Info(ctx, addr, "replication")
	if err != nil {
		return 0, err
	}
	return parseLagMs(info["crdt_peer_"+id])
}

// parseLagMs reads lag_ms out of a crdt_peer_<id> line's value,
// "addr=...,connected=1,lag_ms=3".
func parseLagMs(v string) (int64, error) {
	for f := range strings.SplitSeq(v, ",") {
		if ms, ok := strings.CutPrefix(f, "lag_ms="); ok {
			return strconv.ParseInt(ms, 10, 64)
		}
	}
	return 0, fmt.Errorf("no lag_ms in %q", v)
}

// pct is the p-th percentile (nearest rank) of ds; 0 when empty.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := make([]int64, len(ds))
	for i, d := range ds {
		s[i] = int64(d)
	}
	slices.Sort(s)
	return time.Duration(harness.Percentile(s, p))
}

// pctInt is the p-th percentile (nearest rank) of xs; -1 when empty.
func pctInt(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return -1
	}
	s := slices.Sorted(slices.Values(xs))
	return harness.Percentile(s, p)
}
