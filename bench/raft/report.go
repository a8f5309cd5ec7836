package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
)

// ratio is a line of the ratio table, its bar at one depth.
type ratio = harness.Ratio[setup]

// The bars are issue 13's: the cluster at -P 16 keeps at least 0.15 of the
// single node's decisions per second, and at -P 1 decides at least twice as
// many as etcd puts with the same 50 requests in flight.
var ratios = []ratio{
	{Label: "cluster, clients on the leader / single node", Num: leaderSetup, Den: singleSetup, Bar: 0.15, BarAt: 16},
	{Label: "cluster, clients spread / single node", Num: spreadSetup, Den: singleSetup, Bar: 0.15, BarAt: 16},
	{Label: "cluster, clients spread / on the leader", Num: spreadSetup, Den: leaderSetup},
	{Label: "cluster, clients on the leader / etcd puts", Num: leaderSetup, Den: etcdSetup, Bar: 2, BarAt: 1},
}

// setupText says how each setup was run, for the report.
type setupText struct {
	single, member string // a throttled node's flags, <tmp> for the temp folder
	etcd           string // an etcd member's flags; "" when etcd was not run
}

func (r *runner) reportSetup() setupText {
	t := setupText{
		single: "--threads " + fmt.Sprint(r.cfg.threads) + " --dir <tmp>/single",
		member: "--threads " + fmt.Sprint(r.cfg.threads) + " --replication raft --node-id nX --cluster-addr <free> --dir <tmp>/nX --peers n1=...,n2=...,n3=...",
	}
	if r.etcd != nil {
		t.etcd = "--name infraX --data-dir <tmp>/etcd/infraX --listen-client-urls/--advertise-client-urls http://<free> " +
			"--listen-peer-urls/--initial-advertise-peer-urls http://<free> --initial-cluster infra1=...,infra2=...,infra3=... " +
			strings.Join(etcdFlags, " ")
	}
	return t
}

// writeThroughput prints the throughput part: how it was run, a table of
// rps and latency per setup, and the ratios.
func writeThroughput(w io.Writer, t setupText, res *results) {
	clients := 0
	for _, c := range res.Clients {
		clients += c
	}
	fmt.Fprintf(w, "\n### Decisions per second and latency\n\n")
	fmt.Fprintf(w, "redis-benchmark `-c %d -r %d -P <p> --csv %s`. ", clients, keySpace, strings.Join(throttleCmd, " "))
	fmt.Fprintf(w, "Single node: `%s` (appendfsync everysec, the default). ", t.single)
	fmt.Fprintf(w, "Cluster members: `%s`. ", t.member)
	fmt.Fprintf(w, "With the clients spread, one redis-benchmark per member runs at once with %s clients, and their rps add up; "+
		"each is sized by a first, unmeasured run to last as long as the others. ", harness.JoinInts(res.Clients, "/"))
	if t.etcd != "" {
		fmt.Fprintf(w, "etcd members: `%s`; bench/raft/etcdload puts random keys of 8 bytes (out of %d) with 256-byte values "+
			"from %d goroutines sharing one gRPC connection to the leader, one put in flight each. ", t.etcd, keySpace, clients)
	}
	fmt.Fprintf(w, "Each measured run lasts about %g s. Figures are the median of %d runs (± half the min-max range, in %% of the median); "+
		"the setups take turns, in an order reversed every other run, each after the servers have been idle for a second "+
		"(using at most twice the %v of CPU per second they used together at rest, after the start, plus 20 ms). "+
		"Latency (ms) is redis-benchmark's p50 and p99 (with -P, of a whole pipeline), with the clients spread the highest of the three members'",
		res.Seconds, res.Runs, res.Rest)
	if t.etcd != "" {
		fmt.Fprintf(w, "; for etcd, of each put")
	}
	fmt.Fprintf(w, ".\n\n")

	fmt.Fprintf(w, "| setup |")
	for _, pl := range res.Pipelines {
		fmt.Fprintf(w, " P=%d rps | P=%d p50 | P=%d p99 |", pl, pl, pl)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", 3*len(res.Pipelines)))
	for _, s := range []setup{singleSetup, leaderSetup, spreadSetup, etcdSetup} {
		if s == etcdSetup && t.etcd == "" {
			continue
		}
		fmt.Fprintf(w, "| %s |", s)
		for _, pl := range res.Pipelines {
			smp := res.Series(pl, s)
			fmt.Fprintf(w, " %s | %s | %s |", harness.RPSCell(smp.RPS()), harness.MsCell(smp.P50()), harness.MsCell(smp.P99()))
		}
		fmt.Fprintln(w)
	}
	if res.terms[1] > res.terms[0] {
		fmt.Fprintf(w, "\nThe cluster's Raft term went from %d to %d during these runs: %d election(s).\n",
			res.terms[0], res.terms[1], res.terms[1]-res.terms[0])
	}
	if n := len(res.refusals); n > 0 {
		fmt.Fprintf(w, "\n%d run(s) stopped at a refused command and were run again (%s): UNKNOWN is a command the cluster "+
			"did not confirm within `--raft-apply-timeout` (2 s), CLUSTERDOWN one that found no leader.\n", n, strings.Join(res.refusals, ", "))
	}
	if res.leaderMoves > 0 {
		fmt.Fprintf(w, "\nLeadership moved during %d of the runs with the clients on the leader: those measured a follower for part of the run.\n", res.leaderMoves)
	}

	fmt.Fprintf(w, "\nA ratio is the median of the runs' ratios, its two figures measured in the same run, within a minute of each other.\n\n")
	shown := ratios
	if t.etcd == "" {
		shown = slices.DeleteFunc(slices.Clone(ratios), func(q ratio) bool { return q.Den == etcdSetup })
	}
	res.WriteRatios(w, shown, func(q ratio, pl int, v float64) string {
		if len(res.Series(pl, q.Num)) == 0 || len(res.Series(pl, q.Den)) == 0 {
			return "-"
		}
		return ratioCell(v, q, pl)
	})
}

// ratioCell formats ratio q's value v at depth pl, marked when its bar
// applies there. A miss that two decimals would show as the bar itself
// (0.149 as 0.15) gets the decimals that tell them apart, up to five.
func ratioCell(v float64, q ratio, pl int) string {
	applies := q.Applies(pl)
	if applies && v < q.Bar {
		for d := 2; d <= 5; d++ {
			if shown := fmt.Sprintf("%.*f", d, v); shown != fmt.Sprintf("%.*f", d, q.Bar) {
				return "**" + shown + " ✗**"
			}
		}
	}
	return harness.BarCell(v, applies, v >= q.Bar)
}

// writeFailovers prints each leader kill and the median.
func writeFailovers(w io.Writer, tries []failoverTry) {
	fmt.Fprintf(w, "\n### Failover\n\n")
	fmt.Fprintf(w, "The leader is killed with SIGKILL while %d connections poll the two survivors with `CL.THROTTLE failover 15 30 60`, "+
		"one request every %v in turn; the time runs from the kill to the first reply with a decision (allowed or limited) "+
		"to a request sent after it. The killed member is restarted and caught up before the next try.\n\n", pollWorkers, pollInterval)
	fmt.Fprintf(w, "| try | killed | next leader | kill to first decision |\n|---:|---|---|---:|\n")
	var secs []float64
	for i, t := range tries {
		fmt.Fprintf(w, "| %d | %s | %s | %s |\n", i+1, t.killed, t.next, seconds(t.took))
		secs = append(secs, t.took.Seconds())
	}
	fmt.Fprintf(w, "\nMedian of %d: **%s** (from %s to %s).\n", len(tries),
		seconds(time.Duration(harness.Median(secs)*float64(time.Second))),
		seconds(time.Duration(slices.Min(secs)*float64(time.Second))), seconds(time.Duration(slices.Max(secs)*float64(time.Second))))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
