package main

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func hours(n int) []float64 {
	t := make([]float64, n)
	for i := range t {
		t[i] = float64(i) / 60 // one sample a minute
	}
	return t
}

func TestFit(t *testing.T) {
	t16 := hours(16)
	flat := make([]float64, 16)
	leak := make([]float64, 16)
	noisy := make([]float64, 16)
	smallDrift := make([]float64, 16)
	falling := make([]float64, 16)
	for i := range flat {
		flat[i] = 100
		leak[i] = 100 + float64(i)                   // +1 a minute: 15 over the half hour, 15%
		noisy[i] = 100 + 8*float64(i%2) - 4          // ±4 around 100, no trend
		smallDrift[i] = 1000 + 0.1*float64(i) + 0.01 // steady but 0.15%: not growth
		falling[i] = 200 - 2*float64(i)
	}
	for _, tc := range []struct {
		name    string
		y       []float64
		growing bool
		slope   float64 // per hour, checked when not NaN
	}{
		{"flat", flat, false, 0},
		{"leak", leak, true, 60},
		{"noisy", noisy, false, math.NaN()},
		{"small drift", smallDrift, false, 6},
		{"falling", falling, false, -120},
	} {
		got := fit(t16, tc.y)
		if got.Growing != tc.growing {
			t.Errorf("%s: growing %v, want %v (%+v)", tc.name, got.Growing, tc.growing, got)
		}
		if !math.IsNaN(tc.slope) && math.Abs(got.Slope-tc.slope) > 1e-6 {
			t.Errorf("%s: slope %v per hour, want %v", tc.name, got.Slope, tc.slope)
		}
	}
	// A leak hidden in noise as large as the rise is not called growth;
	// the same leak with little noise is.
	zigzag := make([]float64, 16)
	for i := range zigzag {
		zigzag[i] = 100 + 0.5*float64(i) + 30*float64(i%2)
	}
	if got := fit(t16, zigzag); got.Growing {
		t.Errorf("leak under noise: %+v, want no growth called", got)
	}
	if got := fit(hours(2), []float64{1, 100}); got.Growing || got.Slope != 0 {
		t.Errorf("two samples: %+v, want no trend", got)
	}
}

func TestParseFlags_Short(t *testing.T) {
	c, err := parseFlags([]string{"-short", "-duration", "1m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.duration != time.Minute || c.sample != 10*time.Second || c.peak != 5*time.Second {
		t.Errorf("-short -duration 1m: got duration %v sample %v peak %v, want 1m 10s 5s", c.duration, c.sample, c.peak)
	}
	c, err = parseFlags(nil, io.Discard)
	if err != nil || c.duration != 30*time.Minute || c.sample != time.Minute {
		t.Errorf("defaults: got %v %v, %v; want 30m 1m", c.duration, c.sample, err)
	}
	for _, args := range [][]string{{"-duration", "2m"}, {"-single", "0", "-pipelined", "0", "-churn", "0"}, {"x"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q): want an error", args)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader("# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 28\n" +
		"throttled_decisions_total{command=\"cl.throttle\",result=\"allowed\"} 5\nthrottled_keys 1.5e+06\n"))
	if err != nil || m["go_goroutines"] != 28 || m["throttled_keys"] != 1.5e6 || len(m) != 2 {
		t.Errorf("got %v, %v", m, err)
	}
}

func TestVerdicts_SecondHalf(t *testing.T) {
	// RSS climbs for the first half (warm-up) and then stays: no growth.
	var samples []sample
	for i := range 31 {
		rss := int64(100 << 20)
		if i < 15 {
			rss = int64(50+i*3) << 20
		}
		samples = append(samples, sample{at: time.Duration(i) * time.Minute, rss: rss, fds: 30, goroutines: 28, keys: 1000})
	}
	for i, tr := range verdicts(samples, 30*time.Minute) {
		if tr.Growing {
			t.Errorf("%s: %+v, want no growth", series[i].name, tr)
		}
	}
	// Open files that rise by one every minute of the second half do.
	for i := 15; i < 31; i++ {
		samples[i].fds = 30 + i
	}
	if tr := verdicts(samples, 30*time.Minute)[1]; !tr.Growing {
		t.Errorf("open files +1 a minute: %+v, want growth", tr)
	}
	// Keys that follow the rate do not grow; keys that pile up while the
	// rate stays do.
	for i := range samples {
		samples[i].rate = 30000 + 500*float64(i)
		samples[i].keys = int64(6 * samples[i].rate)
	}
	if tr := verdicts(samples, 30*time.Minute)[3]; tr.Growing {
		t.Errorf("keys following the rate: %+v, want no growth", tr)
	}
	for i := range samples {
		samples[i].rate = 30000
		samples[i].keys = 180000 + 2000*int64(i)
	}
	if tr := verdicts(samples, 30*time.Minute)[3]; !tr.Growing {
		t.Errorf("keys piling up at a steady rate: %+v, want growth", tr)
	}
}
