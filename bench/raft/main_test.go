package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-P", "1, 16", "-skip", "failover", "-runs", "5", "-c", "30"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Pipelines, []int{1, 16}) || !c.Skip["failover"] || c.Skip["etcd"] || c.Runs != 5 || c.clients != 30 {
		t.Errorf("got %+v", c)
	}
	// Without the throughput part there is nothing to pair etcd with.
	if c, err := parseFlags([]string{"-skip", "throughput", "-P", "16"}, io.Discard); err != nil || !c.Skip["etcd"] {
		t.Errorf("-skip throughput: got %+v, %v; want etcd skipped too", c.Skip, err)
	}
	for _, args := range [][]string{
		{"-skip", "disk"}, {"-P", "0"}, {"-runs", "0"}, {"-failovers", "0"}, {"-c", "2"}, {"extra"},
		{"-P", "16"}, // etcd is compared at -P 1
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestLoadReportSample(t *testing.T) {
	// 200 puts in 2 s: latencies 1..200 µs, given out of order.
	var lat []int64
	for i := int64(200); i >= 1; i-- {
		lat = append(lat, i)
	}
	got, err := loadReport{ElapsedNS: 2e9, LatencyUS: lat}.figures()
	if want := (redisbench.Figures{RPS: 100, P50: 0.1, P99: 0.198}); err != nil || got != want {
		t.Errorf("figures = %+v, %v; want %+v", got, err, want)
	}
	if _, err := (loadReport{ElapsedNS: 1e9}).figures(); err == nil {
		t.Error("a report without puts: want an error")
	}
}

func TestRefusal(t *testing.T) {
	for out, want := range map[string]string{
		"Error from server: UNKNOWN The cluster did not confirm the command": "UNKNOWN",
		"x\nError from server: CLUSTERDOWN no leader":                        "CLUSTERDOWN",
		"Error from server: ERR unknown command":                             "",
		"exit status 1":                                                      "",
	} {
		if got := refusal(out); got != want {
			t.Errorf("refusal(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestWriteThroughput(t *testing.T) {
	res := &results{Throughput: harness.Throughput[setup]{Pipelines: []int{1, 16}, Runs: 2, Seconds: 5, Clients: []int{17, 17, 16}, Rest: 90 * time.Millisecond},
		refusals: []string{"UNKNOWN"}, terms: [2]uint64{2, 4},
	}
	type key struct {
		pl int
		s  setup
	}
	for k, runs := range map[key]redisbench.Series{
		{1, singleSetup}:  {{RPS: 40000, P50: 0.5, P99: 2}, {RPS: 50000, P50: 0.7, P99: 3}},
		{1, leaderSetup}:  {{RPS: 8000, P50: 5, P99: 20}, {RPS: 12000, P50: 6, P99: 30}},
		{1, spreadSetup}:  {{RPS: 10000}, {RPS: 14000}},
		{1, etcdSetup}:    {{RPS: 4000, P50: 12, P99: 40}, {RPS: 5000, P50: 10, P99: 35}},
		{16, singleSetup}: {{RPS: 400000}, {RPS: 500000}},
		{16, leaderSetup}: {{RPS: 50000}, {RPS: 100000}},
		{16, spreadSetup}: {{RPS: 60000}, {RPS: 60000}},
	} {
		for _, f := range runs {
			res.Add(k.pl, k.s, f)
		}
	}
	var b strings.Builder
	writeThroughput(&b, setupText{single: "S", member: "M", etcd: "E"}, res)
	out := b.String()
	for _, want := range []string{
		"| single node | 45,000 ±11% | 0.60 | 2.50 | 450,000 ±11% | - | - |",
		"| 3-node etcd, puts | 4,500 ±11% | 11.00 | 37.50 | - | - | - |",
		// Each run's ratio: 0.2 and 0.24 at P=1, 0.125 and 0.2 at P=16.
		"| cluster, clients on the leader / single node | 0.22 | 0.16 ✓ | 0.20 0.24 | 0.12 0.20 | ≥ 0.15 at P=16 |",
		"| cluster, clients spread / single node | 0.27 | **0.14 ✗** |",
		"| cluster, clients on the leader / etcd puts | 2.20 ✓ | - | 2.00 2.40 | - | ≥ 2 at P=1 |",
		"1 run(s) stopped at a refused command and were run again (UNKNOWN)",
		"twice the 90ms of CPU per second",
		"term went from 2 to 4 during these runs: 2 election(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	b.Reset()
	writeThroughput(&b, setupText{single: "S", member: "M"}, res)
	if out := b.String(); strings.Contains(out, "etcd") {
		t.Errorf("etcd not run, yet the report names it:\n%s", out)
	}
}

func TestRatioCell(t *testing.T) {
	q := ratio{Bar: 0.15, BarAt: 16}
	for _, tc := range []struct {
		v    float64
		pl   int
		want string
	}{
		{0.1496, 16, "**0.1496 ✗**"},
		{0.149, 16, "**0.149 ✗**"},
		{0.1449, 16, "**0.14 ✗**"},
		{0.15, 16, "0.15 ✓"},
		{0.1496, 1, "0.15"},
	} {
		if got := ratioCell(tc.v, q, tc.pl); got != tc.want {
			t.Errorf("ratioCell(%v, P=%d) = %q, want %q", tc.v, tc.pl, got, tc.want)
		}
	}
}

func TestWriteFailovers(t *testing.T) {
	var b strings.Builder
	writeFailovers(&b, []failoverTry{
		{"n1", "n2", 1200 * time.Millisecond}, {"n2", "n3", 900 * time.Millisecond}, {"n3", "n1", 2500 * time.Millisecond},
	})
	out := b.String()
	for _, want := range []string{"| 2 | n2 | n3 | 0.90 s |", "Median of 3: **1.20 s** (from 0.90 s to 2.50 s)."} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
