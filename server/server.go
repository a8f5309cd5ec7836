// Package server wires a throttled node together: the keyspace, the command
// table, the clock, the expiry sweeper, the listener and, with MetricsAddr,
// the Prometheus endpoint (metrics.go). cmd/throttled builds
// a Config from flags; tests start nodes in-process with the same code.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/tlsconf"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// Config configures a node. Zero fields mean the defaults.
type Config struct {
	// Bind is the address to listen on (default 127.0.0.1), or several
	// separated by spaces, as redis.conf's bind: "127.0.0.1 -::1". A
	// leading '-' makes an address optional (skipped where the machine
	// does not have it); "*" is every IPv4 address, "::*" every IPv6 one.
	Bind string
	// Port is the plain TCP port; 0 turns plain TCP off, as Redis' port 0
	// does (cmd/throttled's default is 6379; tests ask the OS for a free
	// port, proc.FreePort).
	Port int
	// TLSPort is the TLS port (tls-port); 0, the default, serves no TLS.
	// It can run beside Port. TLSCertFile and TLSKeyFile are the server's
	// certificate and key (PEM), TLSCACertFile the CA that signs client
	// certificates, and TLSAuthClients whether clients must show one:
	// "yes" (the default, as Redis), "no" or "optional".
	TLSPort                                int
	TLSCertFile, TLSKeyFile, TLSCACertFile string
	TLSAuthClients                         string
	// TLSReplication is tls-replication yes: members of a Raft group, and
	// nodes of a CRDT mesh, talk to each other over mutual TLS with
	// TLSCertFile and TLSKeyFile, verifying each other against
	// TLSCACertFile (the traffic on --cluster-addr and, on Raft, the
	// commands followers forward to the leader's TLS port).
	TLSReplication bool
	// NoProtectedMode is protected-mode no. By default (protected-mode
	// yes), while the default user has no password, clients from
	// non-loopback addresses are refused with Redis' DENIED reply.
	NoProtectedMode bool
	// Clients are the client limits: maxclients, timeout, tcp-keepalive,
	// client-query-buffer-limit, client-output-buffer-limit (nil:
	// commands.DefaultClientLimits).
	Clients *commands.ClientLimits
	// Databases is the number of databases (default 16).
	Databases int
	// RequirePass makes clients AUTH with this password: it is the default
	// user's.
	RequirePass string
	// PolicySecret keys the hash a policy with a secret principal keeps in
	// its keys; every member of a cluster or mesh needs the same one.
	PolicySecret string
	// PolicyFile is the YAML file of rate-limit policies: a single node and
	// a mesh node load it at start; POLICY RELOAD reads it again.
	PolicyFile string
	// ACLFile is the file of ACL users, read at start (it must exist and
	// load) and by ACL LOAD, written by ACL SAVE; empty keeps users in
	// memory only.
	ACLFile string
	// DebugClock freezes the clock at start; DEBUG CLOCK moves it.
	DebugClock bool
	// DebugClockStart, with DebugClock, is the clock's first instant in
	// Unix ns (0: the wall clock's at start). Tests of a mesh start every
	// node at one instant, as moving a node's clock back after it started
	// would break what it promised its peers.
	DebugClockStart int64
	// MaxBulkLen bounds one request argument (default 512 MiB).
	MaxBulkLen int64
	// MaxKeys and MaxMemory bound the keyspace (0: no bound); see store's
	// eviction order.
	MaxKeys, MaxMemory int64
	// MaxMemoryPolicy is what a write past those bounds does: evict
	// (store.VolatileTTL, the default, or store.AllKeysLRU) or, under
	// store.NoEviction, be refused as Redis refuses it.
	MaxMemoryPolicy store.EvictionPolicy
	// Dir is the data folder (Pebble); empty runs purely in memory.
	Dir string
	// AppendFsync is the fsync policy for Dir: always, everysec (default)
	// or no, as Redis' appendfsync.
	AppendFsync string
	// ReleaseIdleMemory returns the memory garbage holds to the operating
	// system once the node goes idle after a burst (see idlemem.go). It acts
	// on the whole process, so main sets it and tests leave it off.
	ReleaseIdleMemory bool
	// Threads is the number of event loops running commands (0: GOMAXPROCS,
	// one per CPU by default); see cmd/throttled's --threads.
	Threads int
	// ConfigFile is the file the settings came from, for INFO and CONFIG GET.
	ConfigFile string
	// Slowlog sets slowlog-log-slower-than and slowlog-max-len; nil means
	// Redis' defaults (commands.DefaultSlowlog).
	Slowlog *commands.SlowlogConfig
	// LatencyMonitorThreshold is latency-monitor-threshold in ms (0: off).
	LatencyMonitorThreshold int64
	// MetricsAddr, when set, is the host:port where /metrics serves
	// Prometheus metrics (see metrics.go), beside the /healthz and /readyz
	// probes (health.go); port 0 picks a free one.
	MetricsAddr string
	// Raft makes the node a member of a Raft group; nil runs a single node.
	Raft *RaftConfig
	// CRDT makes the node one of an active-active mesh; nil runs a single
	// node.
	CRDT   *CRDTConfig
	Logger *slog.Logger
}

// DefaultPort is Redis' port, so clients work without changes.
const DefaultPort = 6379

// Node is a running server.
type Node struct {
	Store    *store.Store
	Commands *commands.Server
	Clock    clock.Clock
	// Persistence is the open data folder, nil in memory and in Raft mode
	// (the Raft log and snapshots keep the state then).
	Persistence *persistence.DB
	raft        *raftNode
	certs       *tlsconf.Certs // nil without TLS
	mesh        *crdt.Node
	net         *resp.Server
	lns, tlsLns []net.Listener // one per bind address; none when the port is 0
	metrics     *metricsServer // nil without MetricsAddr
	cancel      context.CancelFunc
	done        chan struct{} // closed when Serve returns
	once        sync.Once
	closeErr    error
}

// Start opens the listeners and serves in the background.
func Start(cfg Config) (*Node, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Port == 0 && cfg.TLSPort == 0 {
		return nil, refused(errors.New("port and tls-port are both 0: configured to listen nowhere"))
	}
	certs, err := loadTLS(&cfg)
	if err != nil {
		return nil, refused(err)
	}
	var tlsCfg *tls.Config
	if cfg.TLSPort != 0 {
		tlsCfg = certs.ClientPort()
	}
	if cfg.Raft != nil {
		if err := checkRaft(&cfg); err != nil {
			return nil, refused(err)
		}
	}
	var incarnation uint64
	if cfg.CRDT != nil {
		if incarnation, err = prepareCRDT(&cfg); err != nil {
			return nil, err
		}
	} else if cfg.Dir != "" {
		if err := checkNotCRDT(cfg.Dir); err != nil {
			return nil, refused(err)
		}
	}
	st, err := store.New(store.Config{Databases: cfg.Databases, MaxKeys: cfg.MaxKeys, MaxMemory: cfg.MaxMemory, EvictionPolicy: cfg.MaxMemoryPolicy})
	if err != nil {
		return nil, err
	}
	var clk clock.Clock = clock.Real{}
	var manual *clock.Manual
	if cfg.DebugClock {
		manual = clock.NewManual(cmp.Or(cfg.DebugClockStart, time.Now().UnixNano()))
		clk = manual
	}
	var metrics *metricsServer
	if cfg.MetricsAddr != "" {
		if metrics, err = listenMetrics(cfg.MetricsAddr, cfg.Logger); err != nil {
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	var pdb *persistence.DB
	if cfg.Dir != "" && cfg.Raft == nil {
		if cfg.CRDT != nil {
			st.SetHold(crdt.HoldMarks) // until the node starts
		}
		if pdb, err = load(cfg, st, clk.Now()); err != nil {
			if metrics != nil {
				metrics.close()
			}
			return nil, err
		}
	}
	n := &Node{Store: st, Clock: clk, Persistence: pdb, certs: certs, metrics: metrics, done: make(chan struct{})}
	fail := func(err error) (*Node, error) {
		n.closeListeners()
		closePersistence(pdb)
		return nil, err
	}
	if n.lns, err = listen(cfg.Bind, cfg.Port); err != nil {
		return fail(err)
	}
	if n.tlsLns, err = listen(cfg.Bind, cfg.TLSPort); err != nil {
		return fail(err)
	}
	cmds, err := commands.New(commands.Config{
		Store:         st,
		Clock:         clk,
		Manual:        manual,
		RequirePass:   cfg.RequirePass,
		PolicySecret:  cfg.PolicySecret,
		PolicyFile:    cfg.PolicyFile,
		ProtectedMode: !cfg.NoProtectedMode,
		Clients:       cfg.Clients,
		Port:          listenPort(n.lns),
		Logger:        cfg.Logger,
		Shutdown:      func() { n.Close() },
		Persistence:   pdb,
		ACLFile:       cfg.ACLFile,
		Slowlog:       cfg.Slowlog,
		Latency:       cfg.LatencyMonitorThreshold,
		Settings: map[string]string{
			"dir":                cfg.Dir,
			"bind":               cfg.Bind,
			"port":               strconv.Itoa(listenPort(n.lns)),
			"proto-max-bulk-len": strconv.FormatInt(cmp.Or(cfg.MaxBulkLen, 512<<20), 10),
			"debug-clock":        yesNo(cfg.DebugClock),
			"threads":            strconv.Itoa(cmp.Or(cfg.Threads, runtime.GOMAXPROCS(0))),
			"config-file":        cfg.ConfigFile,
			"replication":        replicationMode(&cfg),
			"metrics-addr":       n.MetricsAddr(),
		},
		Extra: tlsSettings(&cfg, certs, listenPort(n.tlsLns)),
	})
	if err != nil {
		return fail(err)
	}
	n.Commands = cmds
	sweepNow := clk.Now
	if cfg.Raft != nil {
		if from := cfg.Raft.RestoreFrom; from != "" {
			if err := loadBackup(from, st, clk.Now(), cfg.Logger); err != nil {
				n.closeListeners()
				return nil, err
			}
		}
		if n.raft, err = startRaft(&cfg, cmds, n.respAddr(cfg.TLSReplication), certs, clk); err != nil {
			n.closeListeners()
			return nil, err
		}
		// A replica changes its keyspace only by applying the log, so
		// its expiry follows the log's time, never its own clock.
		sweepNow = n.raft.AppliedInstant
	}
	if cfg.CRDT != nil {
		if cfg.TLSReplication && cfg.CRDT.Transport == nil {
			// The mesh's traffic on --cluster-addr goes over the same
			// mutual TLS as a Raft member's.
			cc := *cfg.CRDT
			cc.Transport = crdt.TCP{Addr: cc.ClusterAddr, ServerTLS: certs.MemberServer(), ClientTLS: certs.MemberClient()}
			cfg.CRDT = &cc
		}
		if n.mesh, err = startCRDT(&cfg, incarnation, cmds, st, clk); err != nil {
			n.closeListeners()
			closePersistence(pdb)
			return nil, err
		}
	}
	if cfg.PolicyFile != "" && cfg.Raft == nil {
		// A Raft member's policies come from the log: POLICY RELOAD, sent
		// to any member, puts its file there.
		if _, err := cmds.LoadPolicyFile(); err != nil {
			return fail(err)
		}
	}
	n.net = resp.NewServer(resp.Config{
		Limits:      resp.Limits{MaxBulkLen: cfg.MaxBulkLen},
		RequireAuth: cmds.RequireAuth,
		Protected:   cmds.Protected,
		Logger:      cfg.Logger,
		Loops:       cfg.Threads,
	}, cmds)
	cmds.SetNetwork(n.net)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go st.Sweep(ctx, sweepNow)
	if cfg.ReleaseIdleMemory {
		checkpoints := func() int64 { return 0 }
		if pdb != nil {
			checkpoints = pdb.Checkpoints
		}
		// The buffers idle connections give back, and the tables'
		// arrays the sweeper lets go, are garbage the allocation count
		// does not see: each idleAllocs of them counts as a checkpoint
		// does, so that an idle node returns them too.
		freed := func() int64 { return checkpoints() + (n.net.Stats().Trimmed+st.Released())/idleAllocs }
		go releaseIdleMemory(ctx, cmds.CommandsProcessed, freed, debug.FreeOSMemory, idleCheck)
	}
	// Metrics first: a client's SHUTDOWN may close the node as soon as
	// the RESP listener serves.
	if n.metrics != nil {
		n.metrics.serve(n, cfg.Logger)
		cfg.Logger.Info("serving metrics and health probes", "addr", n.metrics.addr(), "paths", "/metrics /healthz /readyz")
	}
	var serving sync.WaitGroup
	serve := func(lns []net.Listener, tc *tls.Config) {
		for _, ln := range lns {
			serving.Go(func() {
				if err := n.net.ServeTLS(ln, tc); err != nil && !errors.Is(err, resp.ErrServerClosed) {
					// The node stops: a listener that fails for
					// good leaves clients that cannot reach it.
					cfg.Logger.Error("serve failed", "addr", ln.Addr().String(), "err", err)
					go n.net.Close()
				}
			})
		}
	}
	serve(n.lns, nil)
	serve(n.tlsLns, tlsCfg)
	go func() {
		serving.Wait()
		close(n.done)
	}()
	cfg.Logger.Info("listening", "addr", n.Addr(), "tls_addr", n.TLSAddr(), "debug_clock", cfg.DebugClock)
	return n, nil
}

// listen opens a TCP listener on port at each bind address, or none for
// port 0. The listeners set no TCP keepalive: resp sets tcp-keepalive on
// each connection it accepts.
func listen(bind string, port int) ([]net.Listener, error) {
	if port == 0 {
		return nil, nil
	}
	var lns []net.Listener
	for _, a := range strings.Fields(bind) {
		optional := strings.HasPrefix(a, "-")
		a = strings.TrimPrefix(a, "-")
		switch a {
		case "*":
			a = "0.0.0.0"
		case "::*":
			a = "::"
		}
		// IPv6 listeners take IPv6 only, as Redis' do, so that "* ::*"
		// can listen on both.
		network := "tcp"
		if ip := net.ParseIP(a); ip != nil && ip.To4() == nil {
			network = "tcp6"
		} else if ip != nil {
			network = "tcp4"
		}
		lc := net.ListenConfig{KeepAlive: -1}
		ln, err := lc.Listen(context.Background(), network, net.JoinHostPort(a, strconv.Itoa(port)))
		if optional && (errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT)) {
			continue
		}
		if err != nil {
			closeAll(lns)
			return nil, err
		}
		lns = append(lns, ln)
	}
	if len(lns) == 0 {
		return nil, fmt.Errorf("bind %q: no address to listen on", bind)
	}
	return lns, nil
}

// listenPort is the port of lns, or 0 without a listener.
func listenPort(lns []net.Listener) int {
	if len(lns) == 0 {
		return 0
	}
	return lns[0].Addr().(*net.TCPAddr).Port
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}

// closeListeners closes the listeners of a start that failed.
func (n *Node) closeListeners() {
	closeAll(n.lns)
	closeAll(n.tlsLns)
	if n.metrics != nil {
		n.metrics.close()
	}
}

// Addr returns the plain TCP address the node listens on (the first bind
// address's), "" with port 0.
func (n *Node) Addr() string { return listenAddr(n.lns) }

// respAddr is the RESP address other members reach this one at: the TLS
// one under tls-replication, the plain one otherwise.
func (n *Node) respAddr(tls bool) string {
	if tls {
		return n.TLSAddr()
	}
	return n.Addr()
}

// TLSAddr returns the TLS address the node listens on (the first bind
// address's), "" without tls-port.
func (n *Node) TLSAddr() string { return listenAddr(n.tlsLns) }

func listenAddr(lns []net.Listener) string {
	if len(lns) == 0 {
		return ""
	}
	return lns[0].Addr().String()
}

// MetricsAddr returns the address /metrics is served on, "" without
// Config.MetricsAddr.
func (n *Node) MetricsAddr() string {
	if n.metrics == nil {
		return ""
	}
	return n.metrics.addr()
}

// Done is closed once the node has stopped serving (Close, or SHUTDOWN).
func (n *Node) Done() <-chan struct{} { return n.done }

// Close stops accepting, closes the connections once their commands have
// run, stops the sweeper and then saves and closes the data folder, so every
// change a client saw acknowledged is on disk. It is safe to call more than
// once.
func (n *Node) Close() error {
	n.once.Do(func() {
		err := n.net.Close()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
		if n.metrics != nil {
			err = errors.Join(err, n.metrics.close())
		}
		n.cancel()
		if n.raft != nil {
			err = errors.Join(err, n.raft.close())
		}
		if n.mesh != nil {
			err = errors.Join(err, n.mesh.Close())
		}
		if n.Persistence != nil {
			err = errors.Join(err, n.Persistence.Close())
		}
		n.closeErr = err
	})
	<-n.done
	return n.closeErr
}

// load opens the data folder and loads its keys into st (dropping the ones
// expired at now) before the node takes clients, then has st journal every
// change to it.
func load(cfg Config, st *store.Store, now int64) (*persistence.DB, error) {
	policy, err := persistence.ParseFsync(cmp.Or(cfg.AppendFsync, "everysec"))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	opts := persistence.Options{Dir: cfg.Dir, Fsync: policy, Logger: cfg.Logger}
	if cfg.CRDT != nil {
		opts.Beside = meshFiles
	}
	pdb, err := persistence.Open(opts)
	if err != nil {
		return nil, err
	}
	keys, err := pdb.Load(st, now)
	if err != nil {
		closePersistence(pdb)
		return nil, err
	}
	st.SetJournal(pdb)
	cfg.Logger.Info("loaded data folder", "dir", cfg.Dir, "keys", keys, "appendfsync", policy.String(), "took", time.Since(start).Round(time.Millisecond))
	return pdb, nil
}

// closePersistence closes a data folder opened by a start that then failed.
func closePersistence(pdb *persistence.DB) {
	if pdb != nil {
		pdb.Close()
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func replicationMode(cfg *Config) string {
	switch {
	case cfg.Raft != nil:
		return "raft"
	case cfg.CRDT != nil:
		return "crdt"
	}
	return "none"
}
