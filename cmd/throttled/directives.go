package main

import (
	"slices"
	"strings"
)

// A redisDirective is a redis.conf directive that throttled reads without
// a flag of its own: something Redis has and throttled does differently or
// not at all. A line with it is accepted with a warning that says what
// throttled does instead, or, where running on without it would go against
// what the line asks for (a security or data setting), refused.
type redisDirective struct {
	// instead is what throttled does in the directive's place.
	instead string
	// asIs are the values (lower case, arguments joined by one space)
	// with which the line asks for what throttled does anyway: such a line
	// is read without a word.
	asIs []string
	// refused: any other value stops the start.
	refused bool
}

// What several directives share.
const (
	insteadOfRDB = "no RDB snapshots: every change goes to the log in dir, and checkpoints run on their own (see Persistence)"
	insteadOfAOF = "throttled's log in dir takes every change, with checkpoints in place of rewrites; appendfsync sets when it is synced"
	noReplicas   = "throttled has no Redis replicas: members of a Raft group or a mesh replicate (--replication raft or crdt)"
	noCluster    = "throttled is not a Redis Cluster: see --replication raft or crdt"
	encodings    = "throttled keeps values in encodings of its own, without these tunings"
	schedule     = "expiry and eviction run on throttled's own schedule"
	goMemory     = "Go's garbage collector frees memory, off the command path (maxmemory also sets GOMEMLIMIT)"
	noDefrag     = "no active defragmentation: Go's allocator reuses freed memory"
	cpuList      = "pin the process with CPUAffinity= in the systemd unit (or taskset)"
	procTitle    = "the process title stays the command line"
	syslog       = "logs go to standard error or logfile; under systemd the journal takes them"
	noTLSCache   = "Go's TLS resumes sessions with tickets, without a session cache to size"
)

// redisDirectives are every redis.conf directive of Redis 7.0.15 that is
// neither a flag (those the flags' table describes) nor include (which
// throttled reads as Redis does). Any other name is a bad directive, as in
// Redis.
var redisDirectives = directiveTable()

func directiveTable() map[string]redisDirective {
	table := map[string]redisDirective{}
	add := func(d redisDirective, names ...string) {
		for _, name := range names {
			table[name] = d
		}
	}
	warn := func(instead string, names ...string) { add(redisDirective{instead: instead}, names...) }
	warnUnless := func(asIs, instead string, names ...string) {
		add(redisDirective{instead: instead, asIs: []string{asIs}}, names...)
	}
	refuse := func(instead string, asIs []string, names ...string) {
		add(redisDirective{instead: instead, asIs: asIs, refused: true}, names...)
	}

	// The process: throttled stays in the foreground of whatever runs it.
	warnUnless("no", "throttled does not fork: it runs in the foreground, as systemd's Type=notify and Type=exec expect (examples/systemd)", "daemonize")
	// Whatever the line says, throttled notifies systemd when NOTIFY_SOCKET
	// is set (sdNotify), as Redis' supervised auto does: only upstart warns.
	add(redisDirective{instead: "throttled notifies systemd only (READY=1 and STOPPING=1 when NOTIFY_SOCKET is set, Type=notify); it raises no SIGSTOP for upstart", asIs: []string{"no", "systemd", "auto"}}, "supervised")
	warnUnless("no", "throttled shows no logo", "always-show-logo")
	warnUnless("no", procTitle, "set-proc-title")
	warn(procTitle, "proc-title-template")
	warnUnless("no", syslog, "syslog-enabled")
	warn(syslog, "syslog-ident", "syslog-facility")
	warn("a crash prints Go's stack traces to standard error", "crash-log-enabled", "crash-memcheck-enabled")
	warnUnless("no", "set OOMScoreAdjust= in the systemd unit", "oom-score-adj")
	warn("set OOMScoreAdjust= in the systemd unit", "oom-score-adj-values")
	warn("throttled does not fork, so transparent huge pages cost it no copy-on-write latency: they stay as the system sets them", "disable-thp")
	warn(goMemory, "jemalloc-bg-thread")
	warn(cpuList, "server_cpulist", "bio_cpulist", "aof_rewrite_cpulist", "bgsave_cpulist")
	warn("threads sets the event loops, which read, run and reply", "io-threads", "io-threads-do-reads")
	warn("the listen backlog is the kernel's (net.core.somaxconn)", "tcp-backlog")
	warn("throttled sets no socket mark", "socket-mark-id")
	warn("connections to other members leave from the address the system picks", "bind-source-addr")
	warnUnless("default", "SIGINT and SIGTERM stop accepting, finish the commands under way, sync the data folder and exit", "shutdown-on-sigint", "shutdown-on-sigterm")
	warn("shutdown waits for no replica: it syncs the data folder and exits", "shutdown-timeout")
	warn("throttled checks the kernel for no known bugs", "ignore-warnings")
	warnUnless("no", "CONFIG SET cannot change dir or the other file settings at all", "enable-protected-configs")
	warn("throttled's DEBUG only reads (DIGEST, CLOCK) unless started with --debug-clock; ACL rules govern it (@dangerous)", "enable-debug-command")
	warnUnless("no", "throttled has no MODULE command", "enable-module-command")

	// Persistence: one log and its checkpoints in dir.
	warnUnless("", insteadOfRDB, "save")
	warn(insteadOfRDB, "dbfilename", "rdbcompression", "rdbchecksum", "rdb-del-sync-files", "rdb-save-incremental-fsync")
	warnUnless("yes", "after a failed write to the data folder, writes are refused with MISCONF (as yes)", "stop-writes-on-bgsave-error")
	warnUnless("yes", "every change goes to the log in dir, whatever appendonly says (persistence off runs in memory)", "appendonly")
	warn(insteadOfAOF, "appendfilename", "appenddirname", "no-appendfsync-on-rewrite", "auto-aof-rewrite-percentage",
		"auto-aof-rewrite-min-size", "aof-use-rdb-preamble", "aof-timestamp-enabled", "aof-rewrite-incremental-fsync", "aof-disable-auto-gc")
	warnUnless("yes", "a last write cut short by a crash is dropped at load (as yes)", "aof-load-truncated")
	warn("throttled has no DUMP or RESTORE", "sanitize-dump-payload")

	// Replication and cluster: throttled's own (Raft, mesh), not Redis'.
	refuse("throttled cannot replicate from a Redis primary: members of a Raft group or a mesh replicate (--replication raft or crdt)", nil, "replicaof", "slaveof")
	warn(noReplicas, "masterauth", "masteruser", "replica-serve-stale-data", "replica-read-only", "repl-diskless-sync",
		"repl-diskless-sync-delay", "repl-diskless-sync-max-replicas", "repl-diskless-load", "repl-disable-tcp-nodelay",
		"replica-priority", "replica-lazy-flush", "repl-backlog-size", "repl-backlog-ttl", "repl-ping-replica-period",
		"repl-timeout", "replica-announce-ip", "replica-announce-port", "replica-announced", "replica-ignore-disk-write-errors",
		"replica-ignore-maxmemory", "min-replicas-to-write", "min-replicas-max-lag", "propagation-error-behavior",
		"slave-serve-stale-data", "slave-read-only", "slave-priority", "slave-lazy-flush", "slave-announce-ip",
		"slave-announce-port", "slave-ignore-maxmemory", "min-slaves-to-write", "min-slaves-max-lag", "repl-ping-slave-period")
	refuse(noCluster, []string{"no"}, "cluster-enabled")
	warn(noCluster, "cluster-config-file", "cluster-node-timeout", "cluster-port", "cluster-announce-ip", "cluster-announce-port",
		"cluster-announce-bus-port", "cluster-announce-tls-port", "cluster-announce-hostname", "cluster-preferred-endpoint-type",
		"cluster-require-full-coverage", "cluster-replica-no-failover", "cluster-slave-no-failover", "cluster-replica-validity-factor",
		"cluster-slave-validity-factor", "cluster-migration-barrier", "cluster-allow-replica-migration",
		"cluster-allow-reads-when-down", "cluster-allow-pubsubshard-when-down", "cluster-link-sendbuf-limit")
	warn("tls-replication yes encrypts the members' traffic", "tls-cluster")

	// Memory: eviction and upkeep of throttled's own.
	warn("eviction samples 16 keys of the shard being written (see Bounded memory)", "maxmemory-samples", "maxmemory-eviction-tenacity")
	warn("client-output-buffer-limit and client-query-buffer-limit bound each client", "maxmemory-clients")
	warn("eviction goes by expiry, then least recently used: there are no LFU counters", "lfu-log-factor", "lfu-decay-time")
	warn(schedule, "active-expire-effort", "activerehashing", "hz", "dynamic-hz")
	warn(goMemory, "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-server-del", "lazyfree-lazy-user-del", "lazyfree-lazy-user-flush")
	warnUnless("no", noDefrag, "activedefrag")
	warn(noDefrag, "active-defrag-ignore-bytes", "active-defrag-threshold-lower", "active-defrag-threshold-upper",
		"active-defrag-cycle-min", "active-defrag-cycle-max", "active-defrag-max-scan-fields")
	warn(encodings, "hash-max-listpack-entries", "hash-max-listpack-value", "hash-max-ziplist-entries", "hash-max-ziplist-value",
		"list-max-listpack-size", "list-max-ziplist-size", "list-compress-depth", "set-max-intset-entries",
		"zset-max-listpack-entries", "zset-max-listpack-value", "zset-max-ziplist-entries", "zset-max-ziplist-value",
		"hll-sparse-max-bytes", "stream-node-max-bytes", "stream-node-max-entries")

	// Features throttled does not have, and run-time settings.
	warnUnless("", "no keyspace notifications: throttled has no Pub/Sub", "notify-keyspace-events")
	warn("throttled has no Pub/Sub channels", "acl-pubsub-default")
	warn("throttled keeps no ACL LOG", "acllog-max-len")
	warn("throttled has no CLIENT TRACKING", "tracking-table-max-keys")
	warn("INFO has no latencystats section: see LATENCY, SLOWLOG and the metrics", "latency-tracking", "latency-tracking-info-percentiles")
	warn("scripts start with a 5000 ms limit; CONFIG SET busy-reply-threshold changes it once running", "busy-reply-threshold", "lua-time-limit")

	// Clients and TLS: refused where running on would let in what the
	// line keeps out, or keep out what it lets in.
	refuse("throttled listens on TCP only: bind and port (or tls-port)", nil, "unixsocket")
	warn("throttled listens on no Unix socket", "unixsocketperm")
	refuse("give the CA certificates in one file, tls-ca-cert-file", nil, "tls-ca-cert-dir")
	refuse("throttled reads unencrypted keys only: decrypt the key file", nil, "tls-key-file-pass", "tls-client-key-file-pass")
	warn("members show tls-cert-file to each other", "tls-client-cert-file", "tls-client-key-file")
	warn("Go's TLS uses elliptic-curve key exchange only", "tls-dh-params-file")
	refuse("throttled speaks TLS 1.2 and 1.3, Redis' default", []string{"tlsv1.2 tlsv1.3", "tlsv1.3 tlsv1.2"}, "tls-protocols")
	refuse("throttled uses Go's TLS cipher suites (TLS 1.3's fixed, TLS 1.2's secure defaults)", nil, "tls-ciphers", "tls-ciphersuites")
	warn("Go's TLS picks the cipher suite itself", "tls-prefer-server-ciphers")
	warn(noTLSCache, "tls-session-caching", "tls-session-cache-size", "tls-session-cache-timeout")

	// Directives that are not settings.
	refuse("take commands away with ACL rules instead (aclfile, ACL SETUSER)", nil, "rename-command")
	refuse("put users in the aclfile", nil, "user")
	refuse("throttled loads no modules (redis-cell's CL.THROTTLE is built in)", nil, "loadmodule")
	return table
}

// asksAsIs says whether the values ask for what throttled does anyway.
func (d redisDirective) asksAsIs(values []string) bool {
	return slices.Contains(d.asIs, strings.ToLower(strings.Join(values, " ")))
}
