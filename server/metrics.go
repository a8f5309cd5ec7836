package server

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/replication/raft"
)

// Prometheus metrics (--metrics-addr): /metrics serves the node's figures
// through prometheus/client_golang, plus its go_* and process_* collectors;
// /healthz and /readyz, on the same listener, are in health.go.
//
// Nothing is counted for Prometheus on the hot path: the collector reads, at
// scrape time, the counters the node keeps anyway (the commands' counters
// and run-time histograms behind INFO commandstats, the store's key counts,
// persistence's and Raft's state) and hands them over as const metrics. So
// a node serves commands at the same speed whether or not it is scraped, or
// has metrics on at all (docs/operations.md, "Metrics", has the figures).
//
// On a Raft group, commands that go through the log are counted where the
// log is applied, on every member (see commands/slowlog.go): each member
// counts the group's commands and decisions once, so graph one member's
// figures, or the leader's, rather than a sum over members.

// metricsServer serves /metrics and the health probes (health.go).
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
	// node is the node once Start has loaded and wired it; nil before,
	// while /healthz already answers and /readyz says "loading".
	node atomic.Pointer[Node]
	// metrics is /metrics' handler, set with node.
	metrics atomic.Pointer[http.Handler]
}

// listenMetrics opens the metrics listener and serves the health probes
// on it; Start does it before it loads the data folder, so that a busy
// address stops the start and a liveness probe is answered during a long
// load.
func listenMetrics(addr string, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	m := &metricsServer{ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeText(w, http.StatusOK, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { serveReady(w, m.node.Load()) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if h := m.metrics.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		writeText(w, http.StatusServiceUnavailable, "loading: the data folder is not loaded yet")
	})
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics: serve failed", "err", err)
		}
	}()
	return m, nil
}

// serve starts answering scrapes of n, and /readyz for it.
func (m *metricsServer) serve(n *Node, log *slog.Logger) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(n), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
	})
	m.metrics.Store(&h)
	m.node.Store(n)
}

// close stops serving; a scrape under way is cut off.
func (m *metricsServer) close() error { return m.srv.Close() }

// addr returns the address the metrics listener is bound to.
func (m *metricsServer) addr() string { return m.ln.Addr().String() }

// scrape is what one collection reads once and the metrics share.
type scrape struct {
	n *Node
	// pers is persistence's state, nil without a data folder of the
	// keyspace's own (in memory, or a Raft member).
	pers *persistence.Stats
	// raft is the member's view of its group, nil on a single node.
	raft *raft.Status
	// peers are a mesh node's peers, nil unless it is one.
	peers []crdt.PeerInfo
}

// scalar is a metric without labels, a counter or a gauge, read from a
// scrape.
type scalar struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*scrape) float64
}

func newScalar(kind prometheus.ValueType, name, help string, value func(*scrape) float64) scalar {
	return scalar{desc: prometheus.NewDesc(name, help, nil, nil), kind: kind, value: value}
}

// collector is the node's prometheus.Collector.
type collector struct {
	n *Node
	// node, pers and raft are read on every scrape, the last two only
	// when the node has a data folder of its own and is a Raft member.
	node, pers, raft []scalar

	commands, errors, decisions, duration *prometheus.Desc
	fsync, mode, raftState                *prometheus.Desc
	// A mesh node's: its peer count, and each peer's link and lag.
	crdtPeers, peerConnected, peerLag *prometheus.Desc
	// Each rate-limit policy's decisions (never per principal).
	policyDecisions *prometheus.Desc
	bounds          []float64 // the histogram's, in seconds
}

func newCollector(n *Node) *collector {
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	c := &collector{
		n: n,
		node: []scalar{
			newScalar(gauge, "throttled_connected_clients", "Client connections open.",
				func(s *scrape) float64 { return float64(s.n.Commands.ConnectedClients()) }),
			newScalar(counter, "throttled_connections_received_total", "Client connections accepted.",
				func(s *scrape) float64 { return float64(s.n.Commands.ConnectionsReceived()) }),
			newScalar(gauge, "throttled_keys", "Keys held, in all databases.",
				func(s *scrape) float64 { keys, _ := s.n.Store.Usage(); return float64(keys) }),
			newScalar(gauge, "throttled_dataset_bytes", "Memory the keys take, as maxmemory counts it.",
				func(s *scrape) float64 { _, b := s.n.Store.Usage(); return float64(b) }),
			newScalar(counter, "throttled_expired_keys_total", "Keys removed because they expired.",
				func(s *scrape) float64 { return float64(s.n.Store.ExpiredKeys()) }),
			newScalar(counter, "throttled_evicted_keys_total", "Keys evicted to stay under maxkeys or maxmemory.",
				func(s *scrape) float64 { return float64(s.n.Store.EvictedKeys()) }),
			newScalar(gauge, "throttled_persistence_enabled", "1 when the keyspace has a data folder of its own (a single node with --dir), else 0.",
				func(s *scrape) float64 { return boolFloat(s.pers != nil) }),
		},
		pers: []scalar{
			newScalar(gauge, "throttled_persistence_write_failed", "1 after a write to the data folder failed: writes are refused (MISCONF).",
				func(s *scrape) float64 { return boolFloat(s.pers.Err != nil) }),
			newScalar(gauge, "throttled_persistence_pending_changes", "Changes appended but not yet written to the log.",
				func(s *scrape) float64 { return float64(s.pers.Pending) }),
			newScalar(gauge, "throttled_persistence_unsynced_changes", "Changes not yet synced to disk: what a power loss could cost now.",
				func(s *scrape) float64 { return float64(s.pers.Unsynced) }),
			newScalar(gauge, "throttled_persistence_last_sync_timestamp_seconds", "When the log was last synced to disk.",
				func(s *scrape) float64 { return float64(s.pers.LastSync) }),
			newScalar(gauge, "throttled_persistence_last_checkpoint_timestamp_seconds", "When the last checkpoint was done (0 before the first).",
				func(s *scrape) float64 { return float64(s.pers.LastCheckpoint) }),
			newScalar(counter, "throttled_persistence_checkpoints_total", "Checkpoints done.",
				func(s *scrape) float64 { return float64(s.pers.Checkpoints) }),
			newScalar(counter, "throttled_persistence_group_commits_total", "Group commits written to the log.",
				func(s *scrape) float64 { return float64(s.pers.GroupCommits) }),
			newScalar(counter, "throttled_persistence_syncs_total", "Syncs of the log to disk.",
				func(s *scrape) float64 { return float64(s.pers.Syncs) }),
			newScalar(counter, "throttled_persistence_tombstone_compactions_total", "Compactions run to drop deleted keys from disk.",
				func(s *scrape) float64 { return float64(s.pers.Compactions) }),
			newScalar(gauge, "throttled_persistence_log_bytes", "Log written since the last checkpoint began.",
				func(s *scrape) float64 { return float64(s.pers.LogBytes) }),
			newScalar(gauge, "throttled_persistence_disk_bytes", "Space the data folder takes on disk.",
				func(s *scrape) float64 { return float64(s.pers.DiskBytes) }),
		},
		raft: []scalar{
			newScalar(gauge, "throttled_raft_term", "The member's current Raft term.",
				func(s *scrape) float64 { return float64(s.raft.Term) }),
			newScalar(gauge, "throttled_raft_commit_index", "The highest log index known committed.",
				func(s *scrape) float64 { return float64(s.raft.CommitIndex) }),
			newScalar(gauge, "throttled_raft_applied_index", "The highest log index applied to this member's keyspace.",
				func(s *scrape) float64 { return float64(s.raft.AppliedIndex) }),
			newScalar(gauge, "throttled_raft_last_snapshot_index", "The log index of the member's last snapshot.",
				func(s *scrape) float64 { return float64(s.raft.LastSnapshotIndex) }),
			newScalar(gauge, "throttled_raft_members", "Members of the Raft configuration.",
				func(s *scrape) float64 { return float64(s.raft.Members) }),
			newScalar(gauge, "throttled_raft_reachable_members", "Members this member can reach, itself included.",
				func(s *scrape) float64 { return float64(s.raft.Reachable) }),
		},
		commands: prometheus.NewDesc("throttled_commands_total", "Commands run, by command (subcommands as \"config|get\").",
			[]string{"command"}, nil),
		errors: prometheus.NewDesc("throttled_command_errors_total", "Commands run that replied with an error, by command.",
			[]string{"command"}, nil),
		decisions: prometheus.NewDesc("throttled_decisions_total", "Throttle decisions, by command and result (allowed or limited); peeks (quantity 0) are not counted.",
			[]string{"command", "result"}, nil),
		duration: prometheus.NewDesc("throttled_command_duration_seconds", "How long commands ran, by command.",
			[]string{"command"}, nil),
		fsync: prometheus.NewDesc("throttled_persistence_fsync_policy", "The data folder's appendfsync policy: 1 for the policy in force.",
			[]string{"policy"}, nil),
		mode: prometheus.NewDesc("throttled_replication_mode", "The replication mode: 1 for the mode the node runs (none, raft or crdt).",
			[]string{"mode"}, nil),
		crdtPeers: prometheus.NewDesc("throttled_crdt_peers", "Peers of this node of a CRDT mesh.", nil, nil),
		peerConnected: prometheus.NewDesc("throttled_crdt_peer_connected", "1 while this node and the peer are connected both ways, else 0.",
			[]string{"peer"}, nil),
		peerLag: prometheus.NewDesc("throttled_crdt_peer_lag_seconds", "How far the peer's last watermark is behind this node's clock (absent before its first).",
			[]string{"peer"}, nil),
		policyDecisions: prometheus.NewDesc("throttled_policy_decisions_total", "THROTTLE.POLICY decisions, by policy id and result (allowed, limited, or shadow_limited: refused by a shadow policy and let through).",
			[]string{"policy", "result"}, nil),
		raftState: prometheus.NewDesc("throttled_raft_state", "The member's Raft state: 1 for the state it is in, 0 for the others.",
			[]string{"state"}, nil),
	}
	for i := range commands.DurationBuckets - 1 {
		c.bounds = append(c.bounds, commands.DurationBound(i).Seconds())
	}
	return c
}

// raftStates are the states throttled_raft_state reports, one series each.
var raftStates = []string{"follower", "candidate", "leader", "shutdown"}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, list := range [][]scalar{c.node, c.pers, c.raft} {
		for _, g := range list {
			ch <- g.desc
		}
	}
	for _, d := range []*prometheus.Desc{c.commands, c.errors, c.decisions, c.duration, c.fsync, c.mode, c.raftState,
		c.crdtPeers, c.peerConnected, c.peerLag, c.policyDecisions} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := &scrape{n: c.n}
	if p := c.n.Persistence; p != nil {
		st := p.Stats()
		s.pers = &st
	}
	mode := "none"
	if r := c.n.raft; r != nil {
		st := r.Status()
		s.raft, mode = &st, "raft"
	}
	if m := c.n.mesh; m != nil {
		s.peers, mode = m.Peers(), "crdt"
	}
	emit := func(list []scalar) {
		for _, g := range list {
			ch <- prometheus.MustNewConstMetric(g.desc, g.kind, g.value(s))
		}
	}
	emit(c.node)
	ch <- prometheus.MustNewConstMetric(c.mode, prometheus.GaugeValue, 1, mode)
	if s.pers != nil {
		emit(c.pers)
		ch <- prometheus.MustNewConstMetric(c.fsync, prometheus.GaugeValue, 1, s.pers.Fsync.String())
	}
	if s.raft != nil {
		emit(c.raft)
		for _, state := range raftStates {
			ch <- prometheus.MustNewConstMetric(c.raftState, prometheus.GaugeValue, boolFloat(state == s.raft.State), state)
		}
	}
	if c.n.mesh != nil {
		c.collectPeers(ch, s.peers)
	}
	c.n.Commands.CommandStats(func(cs *commands.CommandStats) { c.collectCommand(ch, cs) })
	c.n.Commands.PolicyStats(func(id string, st *commands.PolicyStats) {
		ch <- prometheus.MustNewConstMetric(c.policyDecisions, prometheus.CounterValue, float64(st.Allowed.Load()), id, "allowed")
		ch <- prometheus.MustNewConstMetric(c.policyDecisions, prometheus.CounterValue, float64(st.Limited.Load()), id, "limited")
		ch <- prometheus.MustNewConstMetric(c.policyDecisions, prometheus.CounterValue, float64(st.ShadowLimited.Load()), id, "shadow_limited")
	})
}

// collectPeers sends a mesh node's peer figures.
func (c *collector) collectPeers(ch chan<- prometheus.Metric, peers []crdt.PeerInfo) {
	ch <- prometheus.MustNewConstMetric(c.crdtPeers, prometheus.GaugeValue, float64(len(peers)))
	for _, p := range peers {
		ch <- prometheus.MustNewConstMetric(c.peerConnected, prometheus.GaugeValue, boolFloat(p.Connected), p.ID)
		if p.LagMs >= 0 {
			ch <- prometheus.MustNewConstMetric(c.peerLag, prometheus.GaugeValue, float64(p.LagMs)/1e3, p.ID)
		}
	}
}

// collectCommand sends one command's counters and histogram.
func (c *collector) collectCommand(ch chan<- prometheus.Metric, cs *commands.CommandStats) {
	ch <- prometheus.MustNewConstMetric(c.commands, prometheus.CounterValue, float64(cs.Calls), cs.Name)
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(cs.Errors), cs.Name)
	if cs.Throttle {
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(cs.Allowed), cs.Name, "allowed")
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(cs.Limited), cs.Name, "limited")
	}
	buckets := make(map[float64]uint64, len(c.bounds))
	var below uint64
	for i, le := range c.bounds {
		below += uint64(cs.Buckets[i])
		buckets[le] = below
	}
	ch <- prometheus.MustNewConstHistogram(c.duration, uint64(cs.Calls), cs.Time.Seconds(), buckets, cs.Name)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
