// Command throttled runs a throttled node: a rate-limit datastore that speaks
// the Redis protocol.
//
//	throttled [--bind 127.0.0.1] [--port 6379] [--config file] [flags]
//	throttled --version | -v
//
// Settings come from flags and, optionally, a config file in redis.conf style
// (one "name value" per line, # comments) whose names are the flag names.
// Flags given on the command line win over the file. This is the only package
// that reads flags or the environment.
package main

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/hostport"
	"github.com/throttleddb/throttled/internal/memsize"
	"github.com/throttleddb/throttled/server"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	if le := (*configLineError)(nil); errors.As(err, &le) {
		fmt.Fprint(os.Stderr, le.redisReport())
	} else {
		fmt.Fprintln(os.Stderr, "throttled:", err)
	}
	os.Exit(exitStatus(err))
}

// exitRefused is the exit status of a start refused for its settings
// (sysexits.h's EX_CONFIG, which systemd shows as 78/CONFIG): starting
// again with the same settings would fail the same way, so the systemd
// unit names it in RestartPreventExitStatus=. Any other failure exits 1.
const exitRefused = 78

func exitStatus(err error) int {
	if ce := (*server.ConfigError)(nil); errors.As(err, &ce) || errors.Is(err, commands.ErrACLFile) {
		return exitRefused
	}
	return 1
}

// settings are what the flags fill in.
type settings struct {
	server.Config
	version     bool
	slowlog     commands.SlowlogConfig
	logLevel    logLevelFlag
	logFile     string
	pidFile     string
	persistence string
	replication string
	raft        server.RaftConfig
	crdt        server.CRDTConfig
	peers       string
	protected   bool
	clients     commands.ClientLimits
}

// newFlags defines the command line; the config file uses the same names.
func newFlags(stderr io.Writer) (*flag.FlagSet, *settings) {
	var s settings
	cfg := &s.Config
	fs := flag.NewFlagSet("throttled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Bind, "bind", "127.0.0.1", "address(es) to listen on, separated by spaces as redis.conf's bind; a leading - makes one optional")
	fs.IntVar(&cfg.Port, "port", server.DefaultPort, "TCP port to listen on (0: no plain TCP, as Redis)")
	fs.IntVar(&cfg.TLSPort, "tls-port", 0, "TLS port to listen on, beside --port (0: no TLS)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "the server's TLS certificate (PEM)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "the private key of --tls-cert-file (PEM)")
	fs.StringVar(&cfg.TLSCACertFile, "tls-ca-cert-file", "", "the CA certificate(s) that sign client certificates (PEM)")
	fs.StringVar(&cfg.TLSAuthClients, "tls-auth-clients", server.TLSAuthYes, "whether TLS clients must show a certificate the CA signed: yes, no or optional")
	fs.Var((*yesNoFlag)(&cfg.TLSReplication), "tls-replication", "yes: Raft members and mesh nodes talk over mutual TLS (--cluster-addr; Raft: and forwarding to the leader's --tls-port) with --tls-cert-file, verified against --tls-ca-cert-file; no: plain TCP")
	s.protected = true
	fs.Var((*yesNoFlag)(&s.protected), "protected-mode", "yes: while there is no requirepass, refuse clients from non-loopback addresses; no: let them in")
	s.clients = commands.DefaultClientLimits()
	fs.IntVar(&s.clients.MaxClients, "maxclients", s.clients.MaxClients, "most clients connected at once; the one over gets an error and is closed")
	fs.Var((*secondsFlag)(&s.clients.Timeout), "timeout", "close a client idle this many seconds (0: never)")
	fs.Var((*secondsFlag)(&s.clients.KeepAlive), "tcp-keepalive", "seconds of silence before TCP keepalive probes to a client (0: none)")
	fs.Var(memFlag[int]{&s.clients.MaxQueryLen}, "client-query-buffer-limit", "most bytes one unfinished request may hold, in Redis units (1mb at least); past it the client is closed")
	fs.Var((*outputLimitFlag)(&s.clients), "client-output-buffer-limit", "\"normal <hard> <soft> <seconds>\": close a client whose replies not yet taken pass hard, or stay over soft for the seconds (sizes in Redis units, 0 turns a bound off)")
	fs.BoolVar(&s.version, "version", false, "print the version, as redis-server --version does, and exit")
	fs.BoolVar(&s.version, "v", false, "the same as --version")
	fs.StringVar(&cfg.ConfigFile, "config", "", "read settings from this file (redis.conf style: one \"name value\" per line, names as the flags)")
	fs.StringVar(&cfg.RequirePass, "requirepass", "", "require clients to AUTH with this password (the default user's)")
	fs.StringVar(&cfg.PolicyFile, "policy-file", "", "YAML file of rate-limit policies, loaded at start (single node, mesh) and by POLICY RELOAD")
	fs.StringVar(&cfg.PolicySecret, "policy-secret", "", "the key of the hash that replaces a secret principal (an API key) in policy keys; the same on every member")
	fs.StringVar(&cfg.ACLFile, "aclfile", "", "file of ACL users (Redis' format), read at start and by ACL LOAD, written by ACL SAVE")
	fs.IntVar(&cfg.Databases, "databases", 16, "number of databases (SELECT 0..n-1)")
	fs.BoolVar(&cfg.DebugClock, "debug-clock", false, "freeze the clock at start; DEBUG CLOCK SET/ADVANCE move it (for tests)")
	fs.Int64Var(&cfg.MaxBulkLen, "proto-max-bulk-len", 512<<20, "largest request argument in bytes")
	fs.Int64Var(&cfg.MaxKeys, "maxkeys", 0, "most keys to hold; beyond it keys are evicted (0: no bound)")
	fs.Var(memFlag[int64]{&cfg.MaxMemory}, "maxmemory", "most memory keys may use, in Redis units (64mb, 1gb); beyond it keys are evicted (0: no bound)")
	fs.Var(&cfg.MaxMemoryPolicy, "maxmemory-policy", "what a write past --maxmemory or --maxkeys does: volatile-ttl (evict the key expiring soonest, then the least recently used), allkeys-lru, or noeviction (refuse writes with Redis' OOM error)")
	fs.StringVar(&cfg.Dir, "dir", "data", "data folder (created if missing); \"\" runs in memory only")
	fs.StringVar(&s.persistence, "persistence", "on", "on: keep state in --dir; off: in memory only")
	cfg.AppendFsync = "everysec"
	fs.Var(choiceFlag{&cfg.AppendFsync, []string{"everysec", "always", "no"}}, "appendfsync", "when changes are synced to disk: always (before each reply), everysec or no")
	s.logLevel = logLevelFlag{"info", slog.LevelInfo}
	fs.Var(&s.logLevel, "loglevel", "log level: debug, info, warn or error; Redis' verbose (debug), notice (info), warning (warn) and nothing (no log) too")
	fs.StringVar(&s.logFile, "logfile", "", "append the log to this file, opened for each line as redis-server does (\"\": standard error)")
	fs.StringVar(&s.pidFile, "pidfile", "", "write the process id to this file before listening, and remove it at exit (\"\": none)")
	fs.StringVar(&s.replication, "replication", "none", "none: a single node; raft: a member of a Raft group (needs --dir); crdt: a node of an active-active mesh")
	fs.StringVar(&s.raft.NodeID, "node-id", "", "raft, crdt: this node's id, unique in the cluster")
	fs.StringVar(&s.raft.ClusterAddr, "cluster-addr", "", "raft, crdt: host:port to listen on for the cluster's traffic (raft: and to advertise)")
	fs.StringVar(&s.raft.AnnounceAddr, "announce-addr", "", "raft: the RESP host:port other members and RAFT LEADER give out (default: the first --bind address and --port; required when that is a wildcard such as 0.0.0.0)")
	fs.StringVar(&s.peers, "peers", "", "raft: every member of a new cluster, this one included, used once to bootstrap; crdt: the other nodes (its own id is skipped); id=host:port,... (cluster addresses)")
	fs.DurationVar(&s.crdt.SyncInterval, "crdt-sync-interval", 5*time.Millisecond, "crdt: how often a node ships its changes to its peers")
	fs.DurationVar(&s.crdt.MaxSkew, "crdt-max-skew", 100*time.Millisecond, "crdt: the largest clock difference tolerated with a peer; one further off is refused")
	fs.StringVar(&s.raft.Join, "join", "", "raft: RESP host:port of a member of the cluster to join (instead of --peers)")
	fs.StringVar(&s.raft.RestoreFrom, "restore-from", "", "raft: a BACKUP folder a new one-member group starts from (--peers with this node only; add members with --join); refused once the member holds Raft state")
	fs.DurationVar(&s.raft.ApplyTimeout, "raft-apply-timeout", 2*time.Second, "raft: longest wait for the cluster before a command answers CLUSTERDOWN or UNKNOWN")
	fs.IntVar(&cfg.Threads, "threads", 0, "event loops serving connections and running commands, and GOMAXPROCS (0: one per CPU)")
	fs.Int64Var(&s.slowlog.SlowerThan, "slowlog-log-slower-than", commands.DefaultSlowlog.SlowerThan, "SLOWLOG: log commands that run this many microseconds or more (0: every command, -1: none)")
	fs.Int64Var(&s.slowlog.MaxLen, "slowlog-max-len", commands.DefaultSlowlog.MaxLen, "SLOWLOG: how many entries to keep, the oldest dropped first")
	cfg.Slowlog = &s.slowlog
	fs.Int64Var(&cfg.LatencyMonitorThreshold, "latency-monitor-threshold", 0, "LATENCY: sample commands that run this many milliseconds or more (0: off)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://host:port/metrics, and the /healthz and /readyz probes (default: off)")
	return fs, &s
}

// yesNoFlag is a boolean setting in redis.conf's form: yes or no.
type yesNoFlag bool

func (f *yesNoFlag) String() string {
	if *f {
		return "yes"
	}
	return "no"
}

func (f *yesNoFlag) Set(v string) error {
	switch strings.ToLower(v) {
	case "yes":
		*f = true
	case "no":
		*f = false
	default:
		return errors.New("want yes or no")
	}
	return nil
}

// secondsFlag is a duration given in whole seconds, as redis.conf gives
// timeout and tcp-keepalive.
type secondsFlag time.Duration

func (f *secondsFlag) String() string {
	return strconv.FormatInt(int64(time.Duration(*f)/time.Second), 10)
}

func (f *secondsFlag) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return errors.New("want whole seconds, 0 or more")
	}
	*f = secondsFlag(time.Duration(n) * time.Second)
	return nil
}

// choiceFlag is a setting that takes one of a few words.
type choiceFlag struct {
	p       *string
	choices []string
}

func (f choiceFlag) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f choiceFlag) Set(v string) error {
	if !slices.Contains(f.choices, strings.ToLower(v)) {
		return fmt.Errorf("argument(s) must be one of the following: %s", strings.Join(f.choices, ", "))
	}
	*f.p = strings.ToLower(v)
	return nil
}

// outputLimitFlag is client-output-buffer-limit: each value sets the
// classes it names, so redis.conf's several lines (normal, replica,
// pubsub) add up.
type outputLimitFlag commands.ClientLimits

func (f *outputLimitFlag) String() string { return (*commands.ClientLimits)(f).OutputLimits() }

func (f *outputLimitFlag) Set(v string) error { return (*commands.ClientLimits)(f).SetOutputLimits(v) }

// goMemoryLimit is the Go runtime's soft memory limit for --maxmemory m.
// Eviction keeps the keys' accounted memory under m; without a limit the
// garbage collector lets the heap grow to twice the live data before it
// collects, so RSS would reach about 2m. The limit makes it collect sooner:
// the keys plus a quarter for garbage and 32 MiB for everything else
// (connections, the runtime, persistence's buffers). A GOMEMLIMIT in the
// environment wins.
func goMemoryLimit(m int64) int64 { return m + m/4 + 32<<20 }

// memFlag is a size flag in Redis' units ("64mb", "1gb").
type memFlag[T int | int64] struct{ p *T }

func (m memFlag[T]) String() string {
	if m.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*m.p), 10)
}

func (m memFlag[T]) Set(v string) error {
	n, err := memsize.Parse(v)
	*m.p = T(n)
	return err
}

func run(args []string, stdout, stderr io.Writer) (err error) {
	// Every error until server.Start is in the settings (see exitStatus).
	checking := true
	defer func() {
		if err != nil && checking {
			err = &server.ConfigError{Err: err}
		}
	}()
	fs, s := newFlags(stderr)
	// A bad flag is one line (main's), and --help is printHelp's.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return printHelp(fs, stdout)
	} else if err != nil {
		return fmt.Errorf("%w (throttled --help lists the flags)", err)
	}
	if s.version {
		_, err := io.WriteString(stdout, versionLine())
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var warnings []configWarning
	if s.ConfigFile != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if warnings, err = applyConfigFile(fs, s.ConfigFile, set); err != nil {
			return err
		}
	}
	switch s.persistence {
	case "on":
	case "off":
		s.Dir = ""
	default:
		return fmt.Errorf("--persistence: want on or off, got %q", s.persistence)
	}
	if err := s.replicationConfig(fs); err != nil {
		return err
	}
	if s.MaxKeys < 0 {
		return fmt.Errorf("--maxkeys: must be 0 or more, got %d", s.MaxKeys)
	}
	if s.Threads < 0 {
		return fmt.Errorf("--threads: must be 0 or more, got %d", s.Threads)
	}
	if err := s.slowlog.Validate(); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if s.LatencyMonitorThreshold < 0 {
		return fmt.Errorf("--latency-monitor-threshold: must be 0 or more, got %d", s.LatencyMonitorThreshold)
	}
	if s.clients.MaxClients < 1 {
		return fmt.Errorf("--maxclients: must be 1 or more, got %d", s.clients.MaxClients)
	}
	if s.clients.MaxQueryLen < 1<<20 {
		return fmt.Errorf("--client-query-buffer-limit: must be 1mb or more, got %d", s.clients.MaxQueryLen)
	}
	s.NoProtectedMode = !s.protected
	s.Clients = &s.clients
	if s.Threads > 0 {
		// As many Ps as loops, with or without a data folder. One more,
		// for persistence's background work, was tried: idle, it cost the
		// loop 5% of its CPU per request at -P 1 (the scheduler starts a
		// thread for it whenever a goroutine wakes), and under everysec
		// 10-20% (A/B, pinned, 3 pairs each: 1.88 against 2.35 µs per
		// CL.THROTTLE at -P 16, 11.8 against 13.3 µs at -P 1). Its gain,
		// that a CPU-bound checkpoint cannot hold the loop's P for Go's
		// 10 ms time slices, was smaller.
		runtime.GOMAXPROCS(s.Threads)
	}
	if s.MaxMemory > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(goMemoryLimit(s.MaxMemory))
	}
	cfg := s.Config
	cfg.ReleaseIdleMemory = true
	if cfg.Logger, err = newLogger(s.logFile, s.logLevel.level, stderr); err != nil {
		return err
	}
	for _, w := range warnings {
		w.log(cfg.Logger)
	}

	checking = false
	// Both before the port opens: a client that got an answer finds the
	// PID file, and a signal sent then stops the server cleanly (one that
	// comes while the data folder loads, once it has loaded) rather than
	// killing it unsynced.
	defer writePIDFile(s.pidFile, cfg.Logger)()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	n, err := server.Start(cfg)
	if err != nil {
		return err
	}
	// Start returns once the data folder has loaded and the listeners
	// accept: that is ready for systemd's Type=notify. A Raft member is
	// ready then too, without waiting for a leader: members started one
	// by one would each wait for the others, past systemd's start timeout
	// (/readyz says when a leader is known).
	sdNotify("READY=1\nMAINPID="+strconv.Itoa(os.Getpid()), cfg.Logger)
	select {
	case got := <-sig:
		cfg.Logger.Info("shutting down", "signal", got.String())
	case <-n.Done():
		cfg.Logger.Info("shutting down", "reason", "SHUTDOWN")
	}
	sdNotify("STOPPING=1", cfg.Logger)
	return n.Close()
}

// printHelp answers --help and -h: what throttled is and every flag.
func printHelp(fs *flag.FlagSet, stdout io.Writer) error {
	_, err := io.WriteString(stdout, `Usage: throttled [--config file] [--flag value ...]

throttled is a rate-limit datastore that speaks the Redis protocol.
A flag given on the command line wins over the config file, which takes
the same names in redis.conf's form (one "name value" a line).

Flags:
`)
	fs.SetOutput(stdout)
	fs.PrintDefaults()
	return err
}

// versionLine is what --version prints, in the shape of redis-server's
// ("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64
// build=e08dbad3e06f3fb"), so that scripts that read one read the other:
// throttled's version, the Redis version whose behaviour it follows, the
// commit it was built from and whether the tree had changes (00000000:0
// when the build did not record them, as Redis built outside git), the Go
// release in place of the allocator, the word size, and a build id that
// changes with anything in the build (dependencies, Go, flags).
func versionLine() string {
	sha, dirty, build := "00000000", "0", uint64(0)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			switch {
			case st.Key == "vcs.revision":
				sha = st.Value[:min(8, len(st.Value))]
			case st.Key == "vcs.modified" && st.Value == "true":
				dirty = "1"
			}
		}
		h := fnv.New64a()
		h.Write([]byte(bi.String()))
		build = h.Sum64()
	}
	return fmt.Sprintf("throttled server v=%s redis=%s sha=%s:%s go=%s bits=%d build=%x\n",
		commands.Version, commands.RedisVersion, sha, dirty, runtime.Version(), strconv.IntSize, build)
}

// The settings that only mean something in some replication modes, and
// the modes that take them.
var modeFlags = map[string]string{
	"node-id": "raft or crdt", "cluster-addr": "raft or crdt", "peers": "raft or crdt",
	"announce-addr": "raft", "join": "raft", "restore-from": "raft", "raft-apply-timeout": "raft",
	"crdt-sync-interval": "crdt", "crdt-max-skew": "crdt",
}

// replicationConfig checks the replication settings and fills s.Raft or
// s.CRDT.
func (s *settings) replicationConfig(fs *flag.FlagSet) error {
	if s.replication != "none" && s.replication != "raft" && s.replication != "crdt" {
		return fmt.Errorf("--replication: want none, raft or crdt, got %q", s.replication)
	}
	var refused error
	fs.Visit(func(f *flag.Flag) {
		if modes, ok := modeFlags[f.Name]; ok && refused == nil && !strings.Contains(modes, s.replication) {
			refused = fmt.Errorf("--%s: only with --replication %s", f.Name, modes)
		}
	})
	if refused != nil || s.replication == "none" {
		return refused
	}
	peers, err := parsePeers(s.peers)
	if err != nil {
		return fmt.Errorf("--peers: %w", err)
	}
	if s.replication == "crdt" {
		if s.crdt.SyncInterval <= 0 {
			return fmt.Errorf("--crdt-sync-interval: must be positive, got %s", s.crdt.SyncInterval)
		}
		s.crdt.NodeID, s.crdt.ClusterAddr, s.crdt.Peers = s.raft.NodeID, s.raft.ClusterAddr, peers
		s.CRDT = &s.crdt
		return nil
	}
	if s.raft.ApplyTimeout <= 0 {
		return fmt.Errorf("--raft-apply-timeout: must be positive, got %s", s.raft.ApplyTimeout)
	}
	s.raft.Peers = peers
	s.Raft = &s.raft
	return nil
}

// parsePeers reads "id=host:port,id=host:port".
func parsePeers(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	peers := map[string]string{}
	addrs := map[string]string{}
	for _, item := range strings.Split(v, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("want id=host:port, got %q", item)
		}
		if err := hostport.Dialable(addr); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("id %q is given twice", id)
		}
		if other, dup := addrs[addr]; dup {
			return nil, fmt.Errorf("%s and %s have the same address %s", other, id, addr)
		}
		peers[id], addrs[addr] = addr, id
	}
	return peers, nil
}
