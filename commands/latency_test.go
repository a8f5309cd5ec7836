package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/resp"
)

// compat/testdata/latency.txt checks LATENCY's texts and errors against
// redis-server with nothing sampled; these tests cover the samples.

func TestLatencyMonitor_Samples(t *testing.T) {
	var m latencyMonitor
	at := func(sec int64) time.Time { return time.Unix(1_800_000_000+sec, 0) }
	m.observe(false, time.Second, at(0))
	if len(m.events) != 0 {
		t.Fatalf("threshold 0 (off) recorded %v", m.events)
	}
	m.threshold.Store(5)
	for _, step := range []struct {
		fast bool
		took time.Duration
		sec  int64
	}{
		{false, 4900 * time.Microsecond, 0}, // 4 ms: under the threshold
		{false, 5 * time.Millisecond, 0},
		{false, 7 * time.Millisecond, 1},
		{false, 6 * time.Millisecond, 1}, // same second: the highest stays
		{false, 6 * time.Millisecond, 3},
		{true, 9 * time.Millisecond, 3},
	} {
		m.observe(step.fast, step.took, at(step.sec))
	}
	cmd, fast := m.events["command"], m.events["fast-command"]
	if cmd == nil || fast == nil || len(m.events) != 2 {
		t.Fatalf("events %v, want command and fast-command", m.events)
	}
	got := cmd.history()
	want := []latencySample{{at(0).Unix(), 5}, {at(1).Unix(), 7}, {at(3).Unix(), 6}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || cmd.max != 7 {
		t.Errorf("command: history %v max %d, want %v max 7", got, cmd.max, want)
	}
	if h := fast.history(); len(h) != 1 || h[0].latency != 9 {
		t.Errorf("fast-command: %v", h)
	}
	// The ring keeps the newest 160 seconds.
	for sec := range int64(200) {
		m.add("ring", sec+1, 1000+sec)
	}
	if h := m.events["ring"].history(); len(h) != latencySamples || h[0].time != 1040 || h[len(h)-1].time != 1199 {
		t.Errorf("ring: %d samples from %d to %d, want 160 from 1040 to 1199", len(h), h[0].time, h[len(h)-1].time)
	}
}

func TestLatencyMonitor_Doctor(t *testing.T) {
	var m latencyMonitor
	m.threshold.Store(5)
	m.add("command", 10, 100)
	m.add("command", 20, 101)
	got := m.doctor(10000, 128, 109)
	for _, want := range []string{
		"Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n" +
			"1. command: 2 latency spikes (average 15ms, mean deviation 5ms, period 4.50 sec). Worst all time event 20ms.\n\nI have a few advices for you:\n\n",
		// slowlog-log-slower-than 10 ms is above the 5 ms threshold.
		"'CONFIG SET slowlog-log-slower-than 5000'.\n",
		"- Check your Slow Log",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor lacks %q:\n%s", want, got)
		}
	}
	if got := m.doctor(-1, 128, 109); !strings.Contains(got, "Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than 5000'") {
		t.Errorf("with the SLOWLOG off:\n%s", got)
	}
}

// TestLatency_Wiring: a slow script is a "command" sample, which LATEST and
// HISTORY show, and RESET clears.
func TestLatency_Wiring(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	if got := do(s, c, "CONFIG", "SET", "latency-monitor-threshold", "1"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	// 200,000 turns of a Lua loop take several milliseconds (the
	// server's clock is the debug one, so the script cannot watch time).
	if got := do(s, c, "EVAL", "local n = 0 for i = 1, 200000 do n = n + i end return 1", "0"); got != ":1\r\n" {
		t.Fatalf("EVAL: %q", got)
	}
	latest := do(s, c, "LATENCY", "LATEST")
	if !strings.HasPrefix(latest, "*") || !strings.Contains(latest, "$7\r\ncommand\r\n") {
		t.Fatalf("LATENCY LATEST after a slow script: %q", latest)
	}
	if got := do(s, c, "LATENCY", "HISTORY", "command"); !strings.HasPrefix(got, "*1\r\n*2\r\n:") {
		t.Errorf("LATENCY HISTORY command: %q", got)
	}
	if got := do(s, c, "LATENCY", "RESET", "command"); got != ":1\r\n" {
		t.Errorf("LATENCY RESET command: %q", got)
	}
	if got := do(s, c, "LATENCY", "HISTORY", "command"); got != "*0\r\n" {
		t.Errorf("after RESET: %q", got)
	}
}
