package main

import (
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"strconv"
	"strings"
	"time"
)

type reportInfo struct {
	cfg          config
	date         time.Time
	throttled    string // how the throttled binary was obtained
	goVersion    string
	redisVersion string
	benchVersion string
}

// writeReport prints the Markdown report: the setup, then per pipeline depth
// one table of cases and one of headline ratios, then the exact commands.
func writeReport(w io.Writer, info reportInfo, cs []benchCase, results map[mkey][]float64, costs map[mkey][]cost) {
	cfg := info.cfg
	fmt.Fprintf(w, "## throttled vs redis-server (redis-benchmark)\n\n")
	fmt.Fprintf(w, "- Date: %s\n", info.date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "- Machine: %s\n", harness.Machine())
	fmt.Fprintf(w, "- Go: %s\n", info.goVersion)
	fmt.Fprintf(w, "- redis-server version: %s\n", info.redisVersion)
	fmt.Fprintf(w, "- Client: %s, `-c %d -n %d -r %d%s -q --csv`, each figure the median of %d run(s)\n",
		info.benchVersion, cfg.clients, cfg.requests, cfg.keyspace, threadsFlag(cfg.threads), cfg.runs)
	if cfg.pin {
		fmt.Fprintf(w, "- CPUs (-pin): servers on CPU 0 (`%s`), redis-benchmark on the rest (`%s`)\n", strings.Join(harness.ServerWrap(cfg.pin), " "), strings.Join(harness.ClientWrap(cfg.pin), " "))
	} else {
		fmt.Fprintf(w, "- CPUs: client and both servers share all of them\n")
	}
	if cfg.throttledAddr != "" {
		fmt.Fprintf(w, "- throttled slot: external server at %s (not started by this run)\n", cfg.throttledAddr)
	} else {
		fmt.Fprintf(w, "- throttled: %s, `--bind 127.0.0.1 --port <free>`", info.throttled)
		if cfg.throttledFlags != "" {
			fmt.Fprintf(w, " plus `%s`", cfg.throttledFlags)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "- redis-server: `--save \"\" --appendonly no --port <free> --bind 127.0.0.1`")
	if cfg.redisFlags != "" {
		fmt.Fprintf(w, " plus `%s`", cfg.redisFlags)
	}
	fmt.Fprintln(w)

	spread := cfg.runs > 1
	for _, pl := range cfg.pipelines {
		fmt.Fprintf(w, "\n### Pipeline %d (`-P %d`)\n\n", pl, pl)
		if spread {
			fmt.Fprintf(w, "Requests per second, median (± half the min-max range, in %% of the median). "+
				"A ratio is the median of the runs' ratios, each of two figures measured one after the other in the same run.\n\n")
		}
		fmt.Fprintf(w, "| command | throttled rps | redis-server rps | throttled / redis-server |\n")
		fmt.Fprintf(w, "|---|---:|---:|---:|\n")
		for _, c := range cs {
			t := results[mkey{pl, c.Name, throttledSide}]
			r := results[mkey{pl, c.Name, redisSide}]
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Name, harness.RPSCell(t), harness.RPSCell(r), ratioCell(t, r))
		}
		var rows []string
		for _, h := range headlines {
			num := results[mkey{pl, h.Num.Case, h.Num.Side}]
			den := results[mkey{pl, h.Den.Case, h.Den.Side}]
			if len(num) == 0 || len(den) == 0 {
				continue // a case left out with -cases
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |\n", h.Label, ratioCell(num, den), runsCell(num, den)))
		}
		if len(rows) > 0 {
			fmt.Fprintf(w, "\n| headline (P=%d) | ratio | each run |\n|---|---:|---|\n%s", pl, strings.Join(rows, ""))
		}
		writeCosts(w, pl, cs, costs)
	}

	fmt.Fprintf(w, "\nCommands (`__rand_int__` is a random 12-digit number below %d):\n\n", cfg.keyspace)
	fmt.Fprintf(w, "| command | sent to throttled | sent to redis-server |\n|---|---|---|\n")
	for _, c := range cs {
		redis := c.command(redisSide)
		if len(redis) > 1 && redis[0] == "EVALSHA" {
			redis = append([]string{"EVALSHA", "<sha of bench/gcra.lua>"}, redis[2:]...)
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", c.Name, codeCell(c.Throttled), codeCell(redis))
	}
}

func threadsFlag(n int) string {
	if n == 0 {
		return ""
	}
	return " --threads " + strconv.Itoa(n)
}

func codeCell(cmd []string) string {
	if cmd == nil {
		return "-"
	}
	return "`" + strings.Join(cmd, " ") + "`"
}

// ratioCell is the median of the runs' ratios (harness.PairedRatio).
func ratioCell(num, den []float64) string {
	if len(num) == 0 || len(den) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", harness.PairedRatio(num, den))
}

// runsCell lists the ratio of each run, in run order.
func runsCell(num, den []float64) string {
	var out []string
	for _, r := range harness.Ratios(num, den) {
		out = append(out, fmt.Sprintf("%.2f", r))
	}
	return strings.Join(out, " ")
}

// writeCosts prints what each request cost in CPU, server and client, as
// medians over the runs. A client busy near 100% of its CPU means the rps
// measured redis-benchmark more than the server; the server's CPU per
// request is then the fairer comparison.
func writeCosts(w io.Writer, pl int, cs []benchCase, costs map[mkey][]cost) {
	med := func(k mkey, f func(cost) float64) string {
		var xs []float64
		for _, c := range costs[k] {
			xs = append(xs, f(c))
		}
		if len(xs) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", harness.Median(xs))
	}
	server := func(c cost) float64 { return c.server }
	client := func(c cost) float64 { return c.client }
	busy := func(c cost) float64 { return 100 * c.clientBusy }
	fmt.Fprintf(w, "\nCPU per request in µs (server; redis-benchmark), and how busy redis-benchmark kept its CPU, P=%d, medians:\n\n", pl)
	fmt.Fprintf(w, "| command | throttled | redis-server | client, throttled | client, redis-server | client busy %%, throttled | client busy %%, redis-server |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cs {
		t, r := mkey{pl, c.Name, throttledSide}, mkey{pl, c.Name, redisSide}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", c.Name,
			med(t, server), med(r, server), med(t, client), med(r, client), med(t, busy), med(r, busy))
	}
}
