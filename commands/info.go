package commands

import (
	"fmt"
	"github.com/throttleddb/throttled/internal/memsize"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/throttleddb/throttled/resp"
)

// infoSections are INFO's sections in Redis 7.0's order. "all" and
// "everything" show every one; "default" (and no argument) all but
// commandstats, as Redis. Modules is always empty here, and Redis'
// Latencystats section is not kept.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "modules", "commandstats", "errorstats", "cluster", "keyspace"}

// INFO [section ...]
func info(c *Ctx) {
	want := map[string]bool{}
	for _, a := range c.Args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	def := all || len(want) == 0 || want["default"]
	var out []byte
	for _, sec := range infoSections {
		if !want[sec] && !all && (!def || sec == "commandstats") {
			continue
		}
		if len(out) > 0 {
			out = append(out, "\r\n"...)
		}
		out = c.srv.infoSection(out, sec)
	}
	if want["policies"] || want["everything"] {
		// Ours, not Redis': like a module's section, only by name or
		// in "everything".
		if len(out) > 0 {
			out = append(out, "\r\n"...)
		}
		out = c.srv.infoPolicies(out)
	}
	c.W.Verbatim(out)
}

func (s *Server) infoSection(b []byte, sec string) []byte {
	line := func(k string, v any) { b = fmt.Appendf(b, "%s:%v\r\n", k, v) }
	heading := strings.ToUpper(sec[:1]) + sec[1:]
	if sec == "cpu" {
		heading = "CPU"
	}
	b = fmt.Appendf(b, "# %s\r\n", heading)
	switch sec {
	case "server":
		up := time.Since(s.start)
		exe, _ := os.Executable()
		line("redis_version", RedisVersion)
		line("throttled_version", Version)
		line("redis_git_sha1", "00000000")
		line("redis_mode", "standalone")
		line("os", runtime.GOOS+" "+runtime.GOARCH)
		line("arch_bits", 64)
		line("go_version", runtime.Version())
		line("process_id", pid)
		line("tcp_port", s.cfg.Port)
		line("server_time_usec", s.clock.Now()/1e3)
		line("uptime_in_seconds", int64(up.Seconds()))
		line("uptime_in_days", int64(up.Hours()/24))
		line("hz", 10)
		line("executable", exe)
		line("config_file", s.cfg.Settings["config-file"])
	case "clients":
		// Redis' recent maxima are over the last few seconds; ours are
		// over the connections now, as of their last round.
		n, maxIn, maxOut := 0, int64(0), int64(0)
		if net := s.net.Load(); net != nil {
			net.ForEachConn(func(c *resp.Conn) {
				m := c.Mem()
				n, maxIn, maxOut = n+1, max(maxIn, m.ReadBuf), max(maxOut, m.Output)
			})
		}
		line("connected_clients", n)
		line("cluster_connections", 0)
		line("maxclients", s.clientLimits().MaxClients)
		line("client_recent_max_input_buffer", maxIn)
		line("client_recent_max_output_buffer", maxOut)
		line("blocked_clients", 0)
		line("tracking_clients", 0)
		line("clients_in_timeout_table", 0)
	case "memory":
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		keys, dataset := s.store.Usage()
		maxKeys, maxMem := s.store.Limits()
		line("used_memory", m.HeapAlloc)
		line("used_memory_human", memsize.Human(int64(m.HeapAlloc)))
		line("used_memory_rss", rss())
		line("used_memory_peak", m.HeapSys)
		line("used_memory_dataset", dataset)
		line("used_memory_dataset_human", memsize.Human(dataset))
		scripts := s.scripts.Stats()
		line("number_of_cached_scripts", scripts.Scripts)
		line("used_memory_scripts", scripts.Bytes)
		line("maxmemory", maxMem)
		line("maxmemory_human", memsize.Human(maxMem))
		line("maxmemory_policy", s.store.EvictionPolicy().String())
		line("keys", keys)
		line("maxkeys", maxKeys)
	case "persistence":
		line("loading", 0)
		line("async_loading", 0)
		line("rdb_changes_since_last_save", 0)
		line("rdb_bgsave_in_progress", 0)
		line("aof_rewrite_in_progress", 0)
		p := s.cfg.Persistence
		if p == nil {
			line("aof_enabled", 0)
			break
		}
		ps := p.Stats()
		line("aof_enabled", 1)
		status := "ok"
		if ps.Err != nil {
			status = "err"
		}
		line("aof_last_write_status", status)
		line("aof_fsync", ps.Fsync.String())
		line("aof_pending_changes", ps.Pending)
		line("aof_changes_since_last_sync", ps.Unsynced)
		line("aof_last_sync_time", ps.LastSync)
		line("aof_group_commits", ps.GroupCommits)
		line("aof_syncs", ps.Syncs)
		line("aof_disk_bytes", ps.DiskBytes)
		line("aof_tombstone_compactions", ps.Compactions)
		line("aof_checkpoints", ps.Checkpoints)
		line("aof_last_checkpoint_time", ps.LastCheckpoint)
		line("aof_log_bytes", ps.LogBytes)
	case "stats":
		var ns resp.NetStats
		if net := s.net.Load(); net != nil {
			ns = net.Stats()
		}
		line("total_connections_received", ns.Received)
		line("total_commands_processed", s.CommandsProcessed())
		line("expired_keys", s.store.ExpiredKeys())
		line("evicted_keys", s.store.EvictedKeys())
		line("rejected_connections", ns.Rejected)
		var errs int64
		for sp, st := range s.stats {
			st.each(sp, func(_ string, c *cmdStats) { errs += c.errors.Load() })
		}
		line("total_error_replies", errs)
		line("client_query_buffer_limit_disconnections", ns.QueryLimit)
		line("client_output_buffer_limit_disconnections", ns.OutputLimit)
	case "replication":
		b = s.appendReplication(b)
		if s.cluster != nil {
			b = s.cluster.AppendInfo(b)
		}
		if s.mesh != nil {
			b = s.mesh.AppendInfo(b)
		}
	case "cpu":
		u, sys := cpuTimes()
		line("used_cpu_sys", fmt.Sprintf("%.6f", sys))
		line("used_cpu_user", fmt.Sprintf("%.6f", u))
	case "errorstats":
		s.errorStats.each(func(prefix string, n int64) {
			b = fmt.Appendf(b, "errorstat_%s:count=%d\r\n", prefix, n)
		})
	case "cluster":
		line("cluster_enabled", 0)
	case "commandstats":
		s.CommandStats(func(cs *CommandStats) {
			usec := cs.Time.Microseconds()
			b = fmt.Appendf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=0,failed_calls=%d\r\n",
				cs.Name, cs.Calls, usec, float64(usec)/float64(cs.Calls), cs.Errors)
		})
	case "keyspace":
		for db := range s.store.Databases() {
			if keys, exp := s.store.Counts(db); keys > 0 {
				b = fmt.Appendf(b, "db%d:keys=%d,expires=%d,avg_ttl=0\r\n", db, keys, exp)
			}
		}
	}
	return b
}

// ConnectedClients returns how many clients are connected.
func (s *Server) ConnectedClients() int {
	n := 0
	if net := s.net.Load(); net != nil {
		net.ForEachConn(func(*resp.Conn) { n++ })
	}
	return n
}

// ConnectionsReceived returns how many connections were accepted since the
// start.
func (s *Server) ConnectionsReceived() int64 {
	if net := s.net.Load(); net != nil {
		return net.Stats().Received
	}
	return 0
}
