package commands

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/scripting"
	"github.com/throttleddb/throttled/store"
)

// Version is the server version INFO and HELLO report. Clients parse
// redis_version to pick features, so it names the Redis version whose
// behaviour we follow; throttled_version carries our own.
const (
	Version      = "0.1.0"
	RedisVersion = "7.0.15"
)

// Config configures a Server. Store and Clock are required.
type Config struct {
	Store *store.Store
	Clock clock.Clock
	// Manual is the clock when the server runs with --debug-clock; DEBUG CLOCK
	// SET and ADVANCE are refused without it.
	Manual *clock.Manual
	// RequirePass, when set, makes clients AUTH first (user "default").
	RequirePass string
	// ProtectedMode is protected-mode yes: while there is no password,
	// clients from non-loopback addresses are refused (Protected).
	ProtectedMode bool
	// Clients are the client limits at start (nil: DefaultClientLimits);
	// SetNetwork hands them to the listener, and CONFIG SET changes them.
	Clients *ClientLimits
	// Settings are the values CONFIG GET reports for settings fixed at start
	// (bind, port, dir...), keyed by lower-case name.
	Settings map[string]string
	// Port is reported by INFO server.
	Port   int
	Logger *slog.Logger
	// Shutdown is called by SHUTDOWN; nil refuses the command.
	Shutdown func()
	// Persistence is the data folder the store's changes are written to;
	// nil when the server runs in memory only.
	Persistence *persistence.DB
}

// ErrConfig is returned by New when the configuration is unusable.
var ErrConfig = errors.New("commands: invalid configuration")

// Server runs commands against a store. It implements resp.Handler and is
// safe for concurrent use.
type Server struct {
	cfg   Config
	store *store.Store
	clock clock.Clock
	cmds  table
	stats map[*Spec]*cmdStats
	start time.Time
	net   atomic.Pointer[resp.Server]
	log   *slog.Logger
	conf  *settings
	// scripts is the Lua script cache and interpreters.
	scripts *scripting.Engine

	// syncReplies: replies wait for durability (appendfsync always).
	syncReplies bool

	// cluster takes the keyspace commands of a replicated node (nil: run
	// them at once); applying is the state Apply runs commands with, used
	// by the replication mode's one applying goroutine.
	cluster  Cluster
	applying connState

	commandsProcessed atomic.Int64
	password          atomic.Pointer[string] // requirepass; "" for none
	protected         atomic.Bool            // protected-mode

	clientsMu sync.Mutex // guards clients
	clients   ClientLimits
}

// cmdStats counts a command's calls and error replies for INFO. A container
// command (CONFIG, CLIENT, SCRIPT...) counts each subcommand apart, as Redis
// 7 does ("config|get"), in subs, parallel to Spec.Subcommands.
type cmdStats struct {
	calls, errors atomic.Int64
	subs          []cmdStats
}

// of returns the counters for spec called with args: its subcommand's when
// args name one, else st's own.
func (st *cmdStats) of(spec *Spec, args [][]byte) *cmdStats {
	if len(args) > 1 {
		for i, sub := range spec.Subcommands {
			if is(args[1], sub) {
				return &st.subs[i]
			}
		}
	}
	return st
}

// each calls fn with st's own counters and then each subcommand's, with the
// name INFO shows for them.
func (st *cmdStats) each(spec *Spec, fn func(name string, c *cmdStats)) {
	fn(spec.Name, st)
	for i, sub := range spec.Subcommands {
		fn(spec.Name+"|"+sub, &st.subs[i])
	}
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Clock == nil {
		return nil, ErrConfig
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:   cfg,
		store: cfg.Store,
		clock: cfg.Clock,
		cmds:  newTable(specs),
		stats: make(map[*Spec]*cmdStats, len(specs)),
		start: time.Now(),
		log:   cfg.Logger,

		scripts: scripting.New(scripting.Options{Logger: cfg.Logger}),
	}
	for _, sp := range specs {
		s.stats[sp] = &cmdStats{subs: make([]cmdStats, len(sp.Subcommands))}
	}
	s.syncReplies = cfg.Persistence != nil && cfg.Persistence.Stats().Fsync == persistence.Always
	s.password.Store(&cfg.RequirePass)
	s.protected.Store(cfg.ProtectedMode)
	s.clients = DefaultClientLimits()
	if cfg.Clients != nil {
		s.clients = *cfg.Clients
	}
	s.conf = newSettings(s)
	return s, nil
}

// CommandsProcessed returns how many commands have run (INFO's
// total_commands_processed).
func (s *Server) CommandsProcessed() int64 { return s.commandsProcessed.Load() }

// requirePass returns the password clients must AUTH with ("" for none).
func (s *Server) requirePass() string { return *s.password.Load() }

// RequireAuth reports whether new connections must authenticate; it is the
// resp.Config.RequireAuth of the listener.
func (s *Server) RequireAuth() bool { return s.requirePass() != "" }

// SetNetwork gives the server the listener it serves, for CLIENT LIST, CLIENT
// KILL and INFO clients, and hands it the client limits.
func (s *Server) SetNetwork(n *resp.Server) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	n.SetClientLimits(s.clients.ClientLimits)
	s.net.Store(n)
}

// connState is what the server keeps per connection.
type connState struct {
	db    int
	locks store.LockSet
	watch store.Watch
	// watched are the keys WATCH took fingerprints of on a Raft node
	// (replicated.go); EXEC sends them with the transaction.
	watched []*watchedKey
	// multi is non-nil between MULTI and EXEC/DISCARD.
	multi *multiState
	// ctx is reused by every command of the connection, so running a
	// command does not allocate one.
	ctx Ctx
	// script runs the commands of the connection's Lua scripts.
	script scriptCall
}

type multiState struct {
	queue [][][]byte // copies of the queued commands' arguments
	specs []*Spec
	bad   bool // a command failed to queue: EXEC answers EXECABORT
}

// Ctx is what a command's Run gets: the connection, its arguments, the
// keyspace at the command's instant and the reply writer.
type Ctx struct {
	srv *Server
	// Conn is the client's connection; nil when a replica applies a
	// command from the log.
	Conn *resp.Conn
	W    *resp.Writer
	Args [][]byte
	// Tx is the keyspace at the command's instant, with its shards locked.
	Tx store.Tx
	st *connState
}

// DB returns the connection's selected database.
func (c *Ctx) DB() int { return c.st.db }

func (s *Server) state(c *resp.Conn) *connState {
	if st, ok := c.State.(*connState); ok {
		return st
	}
	st := &connState{}
	c.State = st
	return st
}

// ServeRESP runs one command and writes its reply.
func (s *Server) ServeRESP(c *resp.Conn, args [][]byte) {
	st := s.state(c)
	spec := s.cmds.lookup(args[0])
	if spec == nil {
		s.reject(c, st, nil, unknownCommand(args))
		return
	}
	if (spec.Arity > 0 && len(args) != spec.Arity) || len(args) < -spec.Arity {
		s.reject(c, st, spec, wrongArity(spec.Name))
		return
	}
	if !c.Authenticated() && spec.Flags&NoAuth == 0 {
		s.reject(c, st, spec, errNoAuth)
		return
	}
	if s.scripts.Busy() && !allowedWhileBusy(spec, args) {
		s.reject(c, st, spec, scripting.ReplyBusy)
		return
	}
	if spec.Flags&Write != 0 && s.cfg.Persistence != nil {
		if err := s.cfg.Persistence.Err(); err != nil {
			s.reject(c, st, spec, "MISCONF Errors writing to the data folder, so writes are refused: "+err.Error())
			return
		}
	}
	if st.multi != nil && spec.Flags&NoQueue == 0 {
		if s.cluster != nil && !logged(spec, args) {
			s.reject(c, st, spec, errNotLogged)
			return
		}
		st.multi.queue = append(st.multi.queue, copyArgs(args))
		st.multi.specs = append(st.multi.specs, spec)
		c.SetMulti(len(st.multi.queue))
		c.W.Status("QUEUED")
		return
	}
	if s.cluster != nil && logged(spec, args) {
		c.Touch(spec.fullName(args), s.clock.Now())
		s.propose(c, st, spec, args)
		return
	}
	now := s.clock.Now()
	c.Touch(spec.fullName(args), now)
	s.execute(c, &c.W, st, spec, args, now)
}

// execute runs spec with args at instant now, with the shards of its keys
// locked, and writes its reply to w. c is the client's connection, or nil
// when a replica applies a command from the log.
func (s *Server) execute(c *resp.Conn, w *resp.Writer, st *connState, spec *Spec, args [][]byte, now int64) {
	st.locks.Reset()
	s.addLocks(&st.locks, spec, args)
	s.store.Lock(&st.locks)
	st.ctx = Ctx{srv: s, Conn: c, W: w, Args: args, Tx: s.store.Tx(now), st: st}
	s.run(&st.ctx, spec)
	st.ctx.Args = nil // they alias the reader's buffer
	s.store.Unlock(&st.locks)
}

// addLocks adds the shards spec needs for args to l.
func (s *Server) addLocks(l *store.LockSet, spec *Spec, args [][]byte) {
	if spec.allKeys(args) {
		l.AddAll()
		return
	}
	if spec.KeysFn != nil {
		spec.KeysFn(args, func(k []byte) { l.Add(s.store, k) })
		return
	}
	spec.keys(args, func(k []byte) { l.Add(s.store, k) })
}

// run executes spec with its locks held and counts it.
func (s *Server) run(c *Ctx, spec *Spec) {
	mark := c.W.Len()
	spec.Run(c)
	st := s.stats[spec].of(spec, c.Args)
	st.calls.Add(1)
	if b := c.W.Bytes(); len(b) > mark && b[mark] == '-' {
		st.errors.Add(1)
	}
	s.commandsProcessed.Add(1)
}

// reject answers a command that could not be run (spec is nil when the
// command is unknown); inside MULTI it also dooms the transaction, as Redis
// does. A rejected EXEC discards the transaction at once and says why, even
// outside MULTI, as Redis' execCommandAbort does.
func (s *Server) reject(c *resp.Conn, st *connState, spec *Spec, msg string) {
	if spec != nil && spec.Name == "exec" {
		s.endMulti(c, st)
		c.W.Error("EXECABORT Transaction discarded because of: " + strings.TrimPrefix(msg, "ERR "))
		return
	}
	if st.multi != nil {
		st.multi.bad = true
	}
	c.W.Error(msg)
}

// endMulti leaves MULTI and forgets the watched keys, as EXEC and DISCARD do.
// It takes the shard locks of the watched keys: the caller must hold none.
func (s *Server) endMulti(c *resp.Conn, st *connState) {
	st.multi = nil
	if c != nil {
		c.SetMulti(-1)
	}
	s.unwatch(st)
}

// unwatch forgets the connection's watched keys.
func (s *Server) unwatch(st *connState) {
	s.store.Unwatch(&st.watch)
	st.watched = nil
}

// BeforeReply holds a connection's replies until every change made so far
// is durable, when the fsync policy promises that (appendfsync always): so
// no client sees the effect of a change that a crash could still undo. One
// wait covers a whole pipelined batch, and the connections waiting together
// share one fsync (group commit).
// Under the other policies replies never wait, and a write error shows as
// MISCONF on the writes that follow.
func (s *Server) BeforeReply(c *resp.Conn) error {
	if s.syncReplies {
		p := s.cfg.Persistence
		return p.WaitDurable(p.LastSeq())
	}
	return nil
}

// Closed releases a connection's state.
func (s *Server) Closed(c *resp.Conn) {
	if st, ok := c.State.(*connState); ok {
		s.unwatch(st)
	}
}

func copyArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a):]
	}
	return out
}

// pid is reported by INFO.
var pid = os.Getpid()
