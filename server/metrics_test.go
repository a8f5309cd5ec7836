package server_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/replication/raft"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// scrape fetches the node's /metrics and parses it with Prometheus' own
// text parser.
func scrape(t *testing.T, n *server.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + n.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// value returns the value of the series of name whose labels include
// labels ("k=v" each); ok is false when there is none.
func value(families map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()+"="+l.GetValue()] = "yes"
		}
		match := true
		for _, l := range labels {
			match = match && have[l] != ""
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// dial opens a RESP connection to n, closed when the test ends.
func dial(t *testing.T, n *server.Node) *respconn.Conn {
	t.Helper()
	c, err := respconn.Dial(context.Background(), n.Addr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// run sends each command and fails on an error.
func run(t *testing.T, c *respconn.Conn, cmds ...[]string) {
	t.Helper()
	for _, cmd := range cmds {
		if _, err := c.Do(cmd...); err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
	}
}

func TestMetrics_SingleNode(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true, Dir: t.TempDir(), MetricsAddr: "127.0.0.1:0"})
	c := dial(t, n)
	run(t, c,
		[]string{"CL.THROTTLE", "k", "1", "1", "60"},
		[]string{"CL.THROTTLE", "k", "1", "1", "60"},
		[]string{"CL.THROTTLE", "k", "1", "1", "60"},
		[]string{"CL.THROTTLE", "k", "1", "1", "60", "0"}, // a peek: no decision
		[]string{"TB.THROTTLE", "t", "5", "1", "1"},
		[]string{"SET", "e", "v", "PX", "1"},
		[]string{"DEBUG", "CLOCK", "ADVANCE", "5000000"},
		[]string{"GET", "e"}, // expired
		[]string{"SET", "a", "1"},
		[]string{"SET", "s", "abc"},
	)
	if _, err := c.Do("INCR", "s"); err == nil {
		t.Fatal("INCR of a string: no error")
	}
	run(t, c, []string{"CONFIG", "SET", "maxkeys", "3"}) // k, t, a, s: one goes
	// The evictor lowers the keyspace to the new bound in the background.
	testwait.For(t, 10*time.Second, "the key over maxkeys evicted", func() bool {
		v, err := c.Do("DBSIZE")
		return err == nil && v == int64(3)
	})
	m := scrape(t, n)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"throttled_decisions_total", []string{"command=cl.throttle", "result=allowed"}, 2},
		{"throttled_decisions_total", []string{"command=cl.throttle", "result=limited"}, 1},
		{"throttled_decisions_total", []string{"command=tb.throttle", "result=allowed"}, 1},
		{"throttled_decisions_total", []string{"command=tb.throttle", "result=limited"}, 0},
		{"throttled_commands_total", []string{"command=cl.throttle"}, 4},
		{"throttled_commands_total", []string{"command=config|set"}, 1},
		{"throttled_command_errors_total", []string{"command=incr"}, 1},
		{"throttled_command_duration_seconds", []string{"command=cl.throttle"}, 4},
		{"throttled_connected_clients", nil, 1},
		{"throttled_connections_received_total", nil, 1},
		{"throttled_keys", nil, 3},
		{"throttled_expired_keys_total", nil, 1},
		{"throttled_evicted_keys_total", nil, 1},
		{"throttled_persistence_enabled", nil, 1},
		{"throttled_persistence_write_failed", nil, 0},
		{"throttled_persistence_fsync_policy", []string{"policy=everysec"}, 1},
		{"throttled_replication_mode", []string{"mode=none"}, 1},
	} {
		got, ok := value(m, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v: got %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	for _, name := range []string{"throttled_raft_term", "throttled_raft_state"} {
		if _, ok := m[name]; ok {
			t.Errorf("%s on a single node", name)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "throttled_persistence_last_sync_timestamp_seconds", "throttled_dataset_bytes"} {
		if _, ok := m[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	checkHistogram(t, m["throttled_command_duration_seconds"])
}

// TestMetrics_ScrapeWhileServing: scrapes read the counters while commands
// change them (the race detector watches), and see every command once
// they are done.
func TestMetrics_ScrapeWhileServing(t *testing.T) {
	n := servertest.Start(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	c := dial(t, n)
	const calls = 300
	run(t, c, []string{"CL.THROTTLE", "k", "1000", "1", "60"}) // the histogram is there from the first scrape
	done := make(chan error, 1)
	go func() {
		for range calls - 1 {
			if _, err := c.Do("CL.THROTTLE", "k", "1000", "1", "60"); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 5 {
		checkHistogram(t, scrape(t, n)["throttled_command_duration_seconds"])
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m := scrape(t, n)
	if got, _ := value(m, "throttled_decisions_total", "command=cl.throttle", "result=allowed"); got != calls {
		t.Errorf("allowed decisions: got %v, want %d", got, calls)
	}
}

// checkHistogram checks every command's histogram: bounds from 1 µs
// doubling, then +Inf; cumulative counts that end at the count.
func checkHistogram(t *testing.T, f *dto.MetricFamily) {
	t.Helper()
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("throttled_command_duration_seconds: %v", f)
	}
	for _, m := range f.Metric {
		h := m.Histogram
		bounds := h.GetBucket()
		if len(bounds) == 0 || bounds[0].GetUpperBound() != 1e-6 {
			t.Fatalf("%v: first bucket %v, want le=1e-06", m.Label, bounds)
		}
		last := bounds[len(bounds)-1]
		if !math.IsInf(last.GetUpperBound(), 1) || last.GetCumulativeCount() != h.GetSampleCount() {
			t.Errorf("%v: last bucket le=%v holds %d, want +Inf and the count %d", m.Label, last.GetUpperBound(), last.GetCumulativeCount(), h.GetSampleCount())
		}
		prev := uint64(0)
		for i, b := range bounds {
			if i > 0 && b != last && b.GetUpperBound() != 2*bounds[i-1].GetUpperBound() {
				t.Errorf("%v: bound %v after %v", m.Label, b.GetUpperBound(), bounds[i-1].GetUpperBound())
			}
			if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > h.GetSampleCount() {
				t.Errorf("%v: bucket le=%v holds %d (previous %d, count %d)", m.Label, b.GetUpperBound(), b.GetCumulativeCount(), prev, h.GetSampleCount())
			}
			prev = b.GetCumulativeCount()
		}
		if h.GetSampleCount() > 0 && h.GetSampleSum() <= 0 {
			t.Errorf("%v: sum %v for %d runs", m.Label, h.GetSampleSum(), h.GetSampleCount())
		}
	}
}

// TestMetrics_Raft: a one-member Raft group shows its Raft state, and
// counts the commands it applies.
func TestMetrics_Raft(t *testing.T) {
	addr, trans := hraft.NewInmemTransport("")
	logs := hraft.NewInmemStore()
	n := servertest.Start(t, server.Config{DebugClock: true, Dir: t.TempDir(), MetricsAddr: "127.0.0.1:0",
		Raft: &server.RaftConfig{
			NodeID: "n1", ClusterAddr: string(addr), Peers: map[string]string{"n1": string(addr)}, ApplyTimeout: 5 * time.Second,
			Tuning: raft.Tuning{Heartbeat: 50 * time.Millisecond, Election: 50 * time.Millisecond, LeaderLease: 50 * time.Millisecond, TrailingLogs: 16},
			Parts:  &raft.Parts{Logs: logs, Stable: logs, Snaps: hraft.NewInmemSnapshotStore(), Trans: trans},
		}})
	testwait.For(t, 10*time.Second, "leadership", func() bool {
		v, _ := value(scrape(t, n), "throttled_raft_state", "state=leader")
		return v == 1
	})
	c := dial(t, n)
	run(t, c, []string{"CL.THROTTLE", "k", "0", "1", "60"}, []string{"CL.THROTTLE", "k", "0", "1", "60"})
	m := scrape(t, n)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"throttled_replication_mode", []string{"mode=raft"}, 1},
		{"throttled_raft_state", []string{"state=follower"}, 0},
		{"throttled_raft_members", nil, 1},
		{"throttled_raft_reachable_members", nil, 1},
		{"throttled_decisions_total", []string{"command=cl.throttle", "result=allowed"}, 1},
		{"throttled_decisions_total", []string{"command=cl.throttle", "result=limited"}, 1},
		{"throttled_persistence_enabled", nil, 0},
	} {
		got, ok := value(m, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v: got %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	term, _ := value(m, "throttled_raft_term")
	commit, _ := value(m, "throttled_raft_commit_index")
	applied, _ := value(m, "throttled_raft_applied_index")
	if term < 1 || commit < 2 || applied < 2 {
		t.Errorf("term %v, commit index %v, applied index %v; want a term and the two commands' entries", term, commit, applied)
	}
}

// A mesh node reports its mode and, per peer, its link and lag: a stopped
// peer shows as disconnected.
func TestMetrics_CRDT(t *testing.T) {
	c := crdttest.New(t, 2, 1, server.Config{MetricsAddr: "127.0.0.1:0"})
	c.Connected()
	a := c.Nodes[0].Server
	testwait.For(t, 10*time.Second, "a lag from n2", func() bool {
		_, ok := value(scrape(t, a), "throttled_crdt_peer_lag_seconds", "peer=n2")
		return ok
	})
	m := scrape(t, a)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"throttled_replication_mode", []string{"mode=crdt"}, 1},
		{"throttled_crdt_peers", nil, 1},
		{"throttled_crdt_peer_connected", []string{"peer=n2"}, 1},
	} {
		if got, ok := value(m, tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v: got %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if lag, _ := value(m, "throttled_crdt_peer_lag_seconds", "peer=n2"); lag < 0 || lag > 10 {
		t.Errorf("lag from n2: %v s, want a small figure", lag)
	}
	c.Stop(c.Nodes[1])
	testwait.For(t, 10*time.Second, "n2 disconnected", func() bool {
		v, ok := value(scrape(t, a), "throttled_crdt_peer_connected", "peer=n2")
		return ok && v == 0
	})
}

func TestMetrics_OffOrAddressInUse(t *testing.T) {
	if addr := servertest.Start(t, server.Config{}).MetricsAddr(); addr != "" {
		t.Errorf("metrics served at %q without MetricsAddr", addr)
	}
	n := servertest.Start(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.Start(server.Config{Port: port, MetricsAddr: n.MetricsAddr()})
	if err == nil || !strings.Contains(err.Error(), "--metrics-addr") {
		t.Fatalf("second node on the same metrics address: got %v, want an --metrics-addr error", err)
	}
}
