package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/bench/internal/redisbench"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-P", "1, 16", "-skip", "accuracy", "-intervals", "5ms,2ms", "-lag", "20ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Pipelines, []int{1, 16}) || !c.Skip["accuracy"] || c.Skip["lag"] ||
		!slices.Equal(c.intervals, []time.Duration{5 * time.Millisecond, 2 * time.Millisecond}) || c.acc.Lag != 20*time.Millisecond {
		t.Errorf("got %+v", c)
	}
	if c.load.keys != 100000 {
		t.Errorf("default load: %+v, want 100,000 keys", c.load)
	}
	if c, _ := parseFlags([]string{"-admit"}, io.Discard); c.load.keys != 100000 || c.load.cmd[2] != "1000" {
		t.Errorf("-admit: load %+v, want the keys with limits nobody reaches", c.load)
	}
	if _, err := parseFlags([]string{"-admit", "-hot"}, io.Discard); err == nil {
		t.Error("-admit -hot: no error")
	}
	if c, _ := parseFlags([]string{"-hot"}, io.Discard); c.load.keys != 1 || c.load.cmd[1] != "hot" {
		t.Errorf("-hot: load %+v, want one key", c.load)
	}
	for _, args := range [][]string{
		{"-skip", "disk"}, {"-P", "0"}, {"-runs", "0"}, {"-c", "2"}, {"-intervals", "0ms"}, {"-intervals", "2s"},
		{"-lag", "0s"}, {"-probes", "0"}, {"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestParseLagMs(t *testing.T) {
	if ms, err := parseLagMs("addr=127.0.0.1:7101,connected=1,lag_ms=17"); err != nil || ms != 17 {
		t.Errorf("got %d, %v; want 17", ms, err)
	}
	if ms, err := parseLagMs("addr=x,connected=0,lag_ms=-1"); err != nil || ms != -1 {
		t.Errorf("before the first watermark: got %d, %v; want -1", ms, err)
	}
	if _, err := parseLagMs(""); err == nil {
		t.Error("no lag_ms: want an error")
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // out of order
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if got := pct(ds, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := pct(ds, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := pct(nil, 99); got != 0 {
		t.Errorf("p99 of none = %v", got)
	}
	if got := pctInt([]int64{3, 1, 2}, 50); got != 2 {
		t.Errorf("pctInt = %d", got)
	}
	if got := pctInt(nil, 50); got != -1 {
		t.Errorf("pctInt of none = %d", got)
	}
}

func TestWriteThroughput(t *testing.T) {
	cfg, _ := parseFlags(nil, io.Discard)
	res := &results{Throughput: harness.Throughput[setup]{Pipelines: []int{1, 16}, Runs: 2, Seconds: 5, Clients: []int{17, 17, 16}, Rest: 90 * time.Millisecond},
		cpu: map[mkey][]float64{{1, singleSetup}: {2, 4}},
	}
	for k, runs := range map[mkey]redisbench.Series{
		{1, singleSetup}: {{RPS: 100}, {RPS: 200}}, {1, oneSetup}: {{RPS: 80}, {RPS: 150}}, {1, spreadSetup}: {{RPS: 90}, {RPS: 180}},
		{16, singleSetup}: {{RPS: 1000}, {RPS: 1000}}, {16, oneSetup}: {{RPS: 500}, {RPS: 600}}, {16, spreadSetup}: {{RPS: 700}, {RPS: 700}},
	} {
		for _, f := range runs {
			res.Add(k.pipeline, k.setup, f)
		}
	}
	var b bytes.Buffer
	writeThroughput(&b, cfg, res)
	out := b.String()
	// Paired ratios: (0.8, 0.75) at P=1, (0.5, 0.6) at P=16.
	for _, want := range []string{
		"| mesh, load on one node / single node | 0.78 ✓ | **0.55 ✗** | 0.80 0.75 | 0.50 0.60 | ≥ 0.7 |",
		"| single node | 150 ±33% | - | - | 3.0 |",
		"redis-benchmark `-c 50 -r 100000 -P <p> --csv CL.THROTTLE k:__rand_int__ 15 30 60`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteLag(t *testing.T) {
	cfg, _ := parseFlags(nil, io.Discard)
	ms := time.Millisecond
	rows := []lagRow{
		{interval: 5 * ms, load: "none", lags: []time.Duration{2 * ms, 3 * ms}, info: []int64{1, 2}},
		{interval: 5 * ms, load: "`-c 50 -P 1` on a", loadRPS: 12345.6, lags: []time.Duration{5 * ms, 30 * ms}, info: []int64{4}},
		{interval: 20 * ms, load: "`-c 50 -P 1` on a", lags: []time.Duration{25 * ms}},
	}
	var b bytes.Buffer
	writeLag(&b, cfg, rows)
	out := b.String()
	for _, want := range []string{
		"| 5ms | none | - | 2 | 2.00 ms | 3.00 ms | 3.00 ms | 0 | 1 / 2 / 2 | - |",
		"| 5ms | `-c 50 -P 1` on a | 12,345 | 2 | 5.00 ms | 30.00 ms | 30.00 ms | 0 | 4 / 4 / 4 | p99 < 20ms: **✗** |",
		"| 20ms | `-c 50 -P 1` on a | - | 1 | 25.00 ms | 25.00 ms | 25.00 ms | 0 | -1 / -1 / -1 | - |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
