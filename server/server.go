// Package server wires a throttled node together: the keyspace, the command
// table, the clock, the expiry sweeper, the listener and, with MetricsAddr,
// the Prometheus endpoint (metrics.go). cmd/throttled builds
// a Config from flags; tests start nodes in-process with the same code.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// Config configures a node. Zero fields mean the defaults.
type Config struct {
	// Bind is the address to listen on (default 127.0.0.1).
	Bind string
	// Port is the TCP port (default 6379; 0 picks a free one).
	Port int
	// Databases is the number of databases (default 16).
	Databases int
	// RequirePass makes clients AUTH with this password: it is the default
	// user's.
	RequirePass string
	// ACLFile is the file of ACL users, read at start (it must exist and
	// load) and by ACL LOAD, written by ACL SAVE; empty keeps users in
	// memory only.
	ACLFile string
	// DebugClock freezes the clock at start; DEBUG CLOCK moves it.
	DebugClock bool
	// MaxBulkLen bounds one request argument (default 512 MiB).
	MaxBulkLen int64
	// MaxKeys and MaxMemory bound the keyspace (0: no bound); see store's
	// eviction order.
	MaxKeys, MaxMemory int64
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
	// MetricsAddr, when set, is the host:port where /metrics serves
	// Prometheus metrics (see metrics.go); port 0 picks a free one.
	MetricsAddr string
	// Raft makes the node a member of a Raft group; nil runs a single node.
	Raft   *RaftConfig
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
	net         *resp.Server
	ln          net.Listener
	metrics     *metricsServer // nil without MetricsAddr
	cancel      context.CancelFunc
	done        chan struct{} // closed when Serve returns
	once        sync.Once
	closeErr    error
}

// Start opens the listener and serves in the background.
func Start(cfg Config) (*Node, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Raft != nil {
		if err := checkRaft(&cfg); err != nil {
			return nil, err
		}
	}
	st, err := store.New(store.Config{Databases: cfg.Databases, MaxKeys: cfg.MaxKeys, MaxMemory: cfg.MaxMemory})
	if err != nil {
		return nil, err
	}
	var clk clock.Clock = clock.Real{}
	var manual *clock.Manual
	if cfg.DebugClock {
		manual = clock.NewManual(time.Now().UnixNano())
		clk = manual
	}
	var pdb *persistence.DB
	if cfg.Dir != "" && cfg.Raft == nil {
		if pdb, err = load(cfg, st, clk.Now()); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	if err != nil {
		closePersistence(pdb)
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	n := &Node{Store: st, Clock: clk, Persistence: pdb, ln: ln, done: make(chan struct{})}
	if cfg.MetricsAddr != "" {
		if n.metrics, err = listenMetrics(cfg.MetricsAddr); err != nil {
			ln.Close()
			closePersistence(pdb)
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	cmds, err := commands.New(commands.Config{
		Store:       st,
		Clock:       clk,
		Manual:      manual,
		RequirePass: cfg.RequirePass,
		ACLFile:     cfg.ACLFile,
		Port:        port,
		Logger:      cfg.Logger,
		Shutdown:    func() { n.Close() },
		Persistence: pdb,
		Slowlog:     cfg.Slowlog,
		Settings: map[string]string{
			"dir":                cfg.Dir,
			"bind":               cfg.Bind,
			"port":               strconv.Itoa(port),
			"proto-max-bulk-len": strconv.FormatInt(cmp.Or(cfg.MaxBulkLen, 512<<20), 10),
			"debug-clock":        yesNo(cfg.DebugClock),
			"threads":            strconv.Itoa(cmp.Or(cfg.Threads, runtime.GOMAXPROCS(0))),
			"config-file":        cfg.ConfigFile,
			"replication":        replicationMode(cfg.Raft),
			"metrics-addr":       n.MetricsAddr(),
		},
	})
	if err != nil {
		n.closeListeners()
		closePersistence(pdb)
		return nil, err
	}
	n.Commands = cmds
	sweepNow := clk.Now
	if cfg.Raft != nil {
		if n.raft, err = startRaft(&cfg, cmds, ln.Addr().String(), clk); err != nil {
			n.closeListeners()
			return nil, err
		}
		// A replica changes its keyspace only by applying the log, so
		// its expiry follows the log's time, never its own clock.
		sweepNow = n.raft.AppliedInstant
	}
	n.net = resp.NewServer(resp.Config{
		Limits:      resp.Limits{MaxBulkLen: cfg.MaxBulkLen},
		RequireAuth: cmds.RequireAuth,
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
		go releaseIdleMemory(ctx, cmds.CommandsProcessed, checkpoints, debug.FreeOSMemory, idleCheck)
	}
	// Metrics first: a client's SHUTDOWN may close the node as soon as
	// the RESP listener serves.
	if n.metrics != nil {
		n.metrics.serve(n, cfg.Logger)
		cfg.Logger.Info("serving metrics", "addr", n.metrics.addr(), "path", "/metrics")
	}
	go func() {
		defer close(n.done)
		if err := n.net.Serve(ln); err != nil && !errors.Is(err, resp.ErrServerClosed) {
			cfg.Logger.Error("serve failed", "err", err)
		}
	}()
	cfg.Logger.Info("listening", "addr", ln.Addr().String(), "debug_clock", cfg.DebugClock)
	return n, nil
}

// closeListeners closes the listeners of a start that failed.
func (n *Node) closeListeners() {
	n.ln.Close()
	if n.metrics != nil {
		n.metrics.close()
	}
}

// Addr returns the address the node listens on.
func (n *Node) Addr() string { return n.ln.Addr().String() }

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
	pdb, err := persistence.Open(persistence.Options{Dir: cfg.Dir, Fsync: policy, Logger: cfg.Logger})
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

func replicationMode(r *RaftConfig) string {
	if r != nil {
		return "raft"
	}
	return "none"
}
