package harness

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPairedRatio(t *testing.T) {
	// Per-run ratios 1, 1.2 and 3 (den has a fourth run, left out); the
	// ratio of the medians would be 10/5.
	num, den := []float64{10, 6, 12}, []float64{10, 5, 4, 9}
	if got := PairedRatio(num, den); got != 1.2 {
		t.Errorf("PairedRatio = %v, want 1.2", got)
	}
	if got := PairedRatio(nil, den); got != 0 {
		t.Errorf("PairedRatio(nil) = %v, want 0", got)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45678: "-45,678"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseCPUTime(t *testing.T) {
	stat := "1234 (redis server) S 1 1234 1234 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 4 0 100 0 0"
	got, err := parseCPUTime(stat)
	if want := 1750 * time.Millisecond; err != nil || got != want {
		t.Errorf("parseCPUTime = %v, %v; want %v", got, err, want)
	}
	if _, err := parseCPUTime("garbage"); err == nil {
		t.Error("parseCPUTime(garbage): want an error")
	}
}

func TestParsePipelines(t *testing.T) {
	got, err := ParsePipelines("1, 4,16")
	if err != nil || !slices.Equal(got, []int{1, 4, 16}) {
		t.Errorf("ParsePipelines = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "1,,16"} {
		if _, err := ParsePipelines(bad); err == nil {
			t.Errorf("ParsePipelines(%q): want an error", bad)
		}
	}
}

func TestCells(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{RPSCell(nil), "-"},
		{RPSCell([]float64{1234.4}), "1,234"},
		{RPSCell([]float64{900, 1000, 1100}), "1,000 ±10%"},
		{BarCell(0.25, true, false), "**0.25 ✗**"},
		{BarCell(2.5, true, true), "2.50 ✓"},
		{BarCell(2.5, false, false), "2.50"},
		{BarCell(math.Inf(1), true, true), "-"},
		{MsCell(nil), "-"},
		{MsCell([]float64{0, 0}), "-"},
		{MsCell([]float64{0.3, 0.1, 0.25}), "0.25"},
		{RunsCell(nil), "-"},
		{RunsCell([]float64{1.014, 0.5}), "1.01 0.50"},
		{JoinInts([]int{17, 17, 16}, "/"), "17/17/16"},
		{ratioHeader([]int{1, 16}), "| ratio | P=1 | P=16 | each run, P=1 | each run, P=16 | bar |\n|---|---:|---:|---|---|---|\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseSkip(t *testing.T) {
	parts := []string{"throughput", "memory"}
	got, err := ParseSkip(" memory, ", parts)
	if err != nil || len(got) != 1 || !got["memory"] {
		t.Errorf("ParseSkip = %v, %v", got, err)
	}
	if _, err := ParseSkip("disk", parts); err == nil {
		t.Error("ParseSkip(disk): want an error")
	}
}

func TestParseRSS(t *testing.T) {
	got, err := ParseRSS("Name:\tredis-server\nVmPeak:\t  100 kB\nVmRSS:\t    2048 kB\n")
	if err != nil || got != 2048<<10 {
		t.Errorf("ParseRSS = %d, %v; want %d", got, err, 2048<<10)
	}
	if _, err := ParseRSS("Name:\tx\n"); err == nil {
		t.Error("ParseRSS without VmRSS: want an error")
	}
}

func ratioHeader(pipelines []int) string {
	var b strings.Builder
	RatioHeader(&b, pipelines)
	return b.String()
}

func TestUnsettled(t *testing.T) {
	if got := Unsettled(true); got != "" {
		t.Errorf("settled: %q", got)
	}
	if got, want := Unsettled(false), " (still moving after 1m0s)"; got != want {
		t.Errorf("unsettled: %q, want %q", got, want)
	}
}
