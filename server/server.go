// Package server wires a throttled node together: the keyspace, the command
// table, the clock, the expiry sweeper and the listener. cmd/throttled builds
// a Config from flags; tests start nodes in-process with the same code.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/commands"
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
	// RequirePass makes clients AUTH with this password.
	RequirePass string
	// DebugClock freezes the clock at start; DEBUG CLOCK moves it.
	DebugClock bool
	// MaxBulkLen bounds one request argument (default 512 MiB).
	MaxBulkLen int64
	// MaxKeys and MaxMemory bound the keyspace (0: no bound); see store's
	// eviction order.
	MaxKeys, MaxMemory int64
	// ConfigFile is the file the settings came from, for INFO and CONFIG GET.
	ConfigFile string
	Logger     *slog.Logger
}

// DefaultPort is Redis' port, so clients work without changes.
const DefaultPort = 6379

// Node is a running server.
type Node struct {
	Store    *store.Store
	Commands *commands.Server
	Clock    clock.Clock
	net      *resp.Server
	ln       net.Listener
	cancel   context.CancelFunc
	done     chan struct{} // closed when Serve returns
	once     sync.Once
	closeErr error
}

// Start opens the listener and serves in the background.
func Start(cfg Config) (*Node, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
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
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Bind, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	n := &Node{Store: st, Clock: clk, ln: ln, done: make(chan struct{})}
	cmds, err := commands.New(commands.Config{
		Store:       st,
		Clock:       clk,
		Manual:      manual,
		RequirePass: cfg.RequirePass,
		Port:        port,
		Logger:      cfg.Logger,
		Shutdown:    func() { n.Close() },
		Settings: map[string]string{
			"bind":               cfg.Bind,
			"port":               strconv.Itoa(port),
			"proto-max-bulk-len": strconv.FormatInt(cmp0(cfg.MaxBulkLen, 512<<20), 10),
			"debug-clock":        yesNo(cfg.DebugClock),
			"threads":            strconv.Itoa(runtime.GOMAXPROCS(0)),
			"config-file":        cfg.ConfigFile,
		},
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.Commands = cmds
	n.net = resp.NewServer(resp.Config{
		Limits:      resp.Limits{MaxBulkLen: cfg.MaxBulkLen},
		RequireAuth: cmds.RequireAuth,
		Logger:      cfg.Logger,
	}, cmds)
	cmds.SetNetwork(n.net)
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go st.Sweep(ctx, clk.Now)
	go func() {
		defer close(n.done)
		if err := n.net.Serve(ln); err != nil && !errors.Is(err, resp.ErrServerClosed) {
			cfg.Logger.Error("serve failed", "err", err)
		}
	}()
	cfg.Logger.Info("listening", "addr", ln.Addr().String(), "debug_clock", cfg.DebugClock)
	return n, nil
}

// Addr returns the address the node listens on.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// Done is closed once the node has stopped serving (Close, or SHUTDOWN).
func (n *Node) Done() <-chan struct{} { return n.done }

// Close stops accepting, closes the connections and stops the sweeper. It is
// safe to call more than once.
func (n *Node) Close() error {
	n.once.Do(func() {
		n.cancel()
		n.closeErr = n.net.Close()
		if errors.Is(n.closeErr, net.ErrClosed) {
			n.closeErr = nil
		}
	})
	<-n.done
	return n.closeErr
}

func cmp0(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
