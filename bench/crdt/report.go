package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
)

// The bar is the issue's: with the load on one node, the mesh keeps at
// least 0.7 of the single node's decisions per second (the other two spend
// their CPU applying its deltas).
const throughputBar = 0.7

var ratios = []harness.Ratio[setup]{
	{Label: "mesh, load on one node / single node", Num: oneSetup, Den: singleSetup, Bar: throughputBar},
	{Label: "mesh, load spread / single node", Num: spreadSetup, Den: singleSetup},
	{Label: "mesh, load spread / on one node", Num: spreadSetup, Den: oneSetup},
}

// threadsNote says what --threads 0 means.
func threadsNote(threads int) string {
	if threads == 0 {
		return fmt.Sprintf(" (the default: one loop per CPU, %d here)", runtime.NumCPU())
	}
	return ""
}

// lagBar is the bar: p99 under 20 ms at the default interval,
// under load.
const lagBar = 20 * time.Millisecond

func writeThroughput(w io.Writer, cfg config, res *results) {
	fmt.Fprintf(w, "\n### Decisions per second and latency\n\n")
	fmt.Fprintf(w, "redis-benchmark `-c %d -r %d -P <p> --csv %s`. ", cfg.clients, cfg.load.keys, strings.Join(cfg.load.cmd, " "))
	fmt.Fprintf(w, "Single node: `--threads %d --dir <tmp>/single`%s (appendfsync everysec, the default). ", cfg.threads, threadsNote(cfg.threads))
	fmt.Fprintf(w, "Mesh nodes: the same plus `--replication crdt --node-id X --cluster-addr <free> --peers a=...,b=...,c=... --crdt-sync-interval %v`. ", cfg.intervals[0])
	fmt.Fprintf(w, "Load on one node: every client on node a. Load spread: one redis-benchmark per node at once with %s clients, rps added up; "+
		"each is sized by two unmeasured runs (the second about a second long) to last as long as the others. ", harness.JoinInts(res.Clients, "/"))
	fmt.Fprintf(w, "Each measured run lasts about %g s. Figures are the median of %d runs (± half the min-max range); the setups take turns, "+
		"in an order reversed every other run, each after the servers have been idle for a second (at most twice the %v of CPU per second "+
		"they used together at rest, plus 20 ms). Latency (ms) is redis-benchmark's p50 and p99 (with -P, of a whole pipeline), "+
		"with the load spread the highest of the three nodes'. CPU is the servers' user+system time per request "+
		"(for the mesh, all three nodes'), median of the runs.\n\n", res.Seconds, res.Runs, res.Rest)
	fmt.Fprintf(w, "| setup |")
	for _, pl := range res.Pipelines {
		fmt.Fprintf(w, " P=%d rps | p50 | p99 | CPU µs/req |", pl)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", 4*len(res.Pipelines)))
	for _, s := range []setup{singleSetup, oneSetup, spreadSetup} {
		fmt.Fprintf(w, "| %s |", s)
		for _, pl := range res.Pipelines {
			smp := res.Series(pl, s)
			fmt.Fprintf(w, " %s | %s | %s | %s |", harness.RPSCell(smp.RPS()), harness.MsCell(smp.P50()), harness.MsCell(smp.P99()),
				oneDecimal(harness.Median(res.cpu[mkey{pl, s}])))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nA ratio is the median of the runs' ratios, its two figures measured in the same run.\n\n")
	res.WriteRatios(w, ratios, func(q harness.Ratio[setup], pl int, v float64) string {
		return harness.BarCell(v, q.Applies(pl), v >= q.Bar)
	})
}

func writeLag(w io.Writer, cfg config, rows []lagRow) {
	fmt.Fprintf(w, "\n### Replication lag\n\n")
	fmt.Fprintf(w, "A 3-node mesh per `--crdt-sync-interval` (other flags as above). A prober writes a fresh key on node a "+
		"(`CL.THROTTLE probe:<i> %s`, once) and, from the write's reply, peeks it on node b (the same with quantity 0) until the remaining drops; "+
		"the time until then, on a monotonic clock, is one lag (it includes one round trip of a peek). %d probes per row, one at a time, "+
		"0-5 ms apart; a probe not seen within %v is lost. Under load, redis-benchmark (`CL.THROTTLE k:__rand_int__ 15 30 60`, %d clients) "+
		"runs on node a all along; its rate is node a's commands per second meanwhile. INFO lag_ms is `crdt_peer_a:...lag_ms=` "+
		"read on b every %v (how far a's last watermark is behind b's clock, whole ms).\n\n",
		strings.Join(probeArgs, " "), cfg.probes, probeTimeout, cfg.clients, infoEvery)
	fmt.Fprintf(w, "| sync interval | load | load rps | probes | p50 | p99 | max | lost | INFO lag_ms p50 / p99 / max | bar |\n")
	fmt.Fprintf(w, "|---:|---|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range rows {
		bar := "-"
		if row.interval == 5*time.Millisecond && row.load != "none" {
			p99 := pct(row.lags, 99)
			ok := row.lost == 0 && p99 < lagBar
			bar = fmt.Sprintf("p99 < %v: %s", lagBar, map[bool]string{true: "✓", false: "**✗**"}[ok])
		}
		rps := "-"
		if row.loadRPS > 0 {
			rps = harness.Thousands(int64(row.loadRPS))
		}
		maxLag := time.Duration(0)
		if len(row.lags) > 0 {
			maxLag = slices.Max(row.lags)
		}
		fmt.Fprintf(w, "| %v | %s | %s | %d | %s | %s | %s | %d | %d / %d / %d | %s |\n", row.interval, row.load, rps, len(row.lags),
			msDur(pct(row.lags, 50)), msDur(pct(row.lags, 99)), msDur(maxLag), row.lost,
			pctInt(row.info, 50), pctInt(row.info, 99), maxInt(row.info), bar)
	}
}

func maxInt(xs []int64) int64 {
	if len(xs) == 0 {
		return -1
	}
	return slices.Max(xs)
}

func msDur(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func oneDecimal(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
