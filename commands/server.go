package commands

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/scripting"
	"github.com/throttleddb/throttled/store"
	"github.com/throttleddb/throttled/telemetry"
)

// RedisVersion is the server version INFO and HELLO report. Clients parse
// redis_version to pick features, so it names the Redis version whose
// behaviour we follow; throttled_version carries Version, our own.
const RedisVersion = "7.0.15"

// Version is throttled's own version. A release build stamps it with
// -ldflags -X (scripts/release.sh), so it is a variable; the value here is
// what a build from source reports.
var Version = "0.2.0-dev"

// Config configures a Server. Store and Clock are required.
type Config struct {
	Store *store.Store
	Clock clock.Clock
	// Manual is the clock when the server runs with --debug-clock; DEBUG CLOCK
	// SET and ADVANCE are refused without it.
	Manual *clock.Manual
	// RequirePass, when set, makes clients AUTH first: it is the default
	// user's password.
	RequirePass string
	// PolicySecret keys the hash that a policy with a secret principal
	// (an API key) keeps in its keys instead of the principal.
	PolicySecret string
	// PolicyFile is the YAML file of policies POLICY RELOAD reads.
	PolicyFile string
	// ACLFile is the file of users ACL LOAD reads and ACL SAVE writes; New
	// loads it. Empty: users live only in memory.
	ACLFile string
	// ProtectedMode is protected-mode yes: while there is no password,
	// clients from non-loopback addresses are refused (Protected).
	ProtectedMode bool
	// Clients are the client limits at start (nil: DefaultClientLimits);
	// SetNetwork hands them to the listener, and CONFIG SET changes them.
	Clients *ClientLimits
	// Settings are the values CONFIG GET reports for settings fixed at start
	// (bind, port, dir...), keyed by lower-case name.
	Settings map[string]string
	// Extra are settings the server defines, which CONFIG SET may change
	// (the TLS files); a name in both wins over Settings.
	Extra []Setting
	// Port is reported by INFO server.
	Port   int
	Logger *slog.Logger
	// Shutdown is called by SHUTDOWN; nil refuses the command.
	Shutdown func()
	// Persistence is the data folder the store's changes are written to;
	// nil when the server runs in memory only.
	Persistence *persistence.DB
	// Slowlog sets the SLOWLOG's starting values; nil means Redis'
	// defaults (DefaultSlowlog).
	Slowlog *SlowlogConfig
	// Latency is latency-monitor-threshold, in ms: runs this slow or
	// slower are LATENCY samples (0: the monitor is off).
	Latency int64
}

// Errors of New.
var (
	// ErrConfig: the configuration is unusable.
	ErrConfig = errors.New("commands: invalid configuration")
	// ErrACLFile: the ACL file does not load.
	ErrACLFile = errors.New("commands: the ACL file does not load")
)

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
	slow    slowlog
	latency latencyMonitor

	// syncReplies: replies wait for durability (appendfsync always).
	syncReplies bool
	// realClock: clock is the wall clock (see instant).
	realClock bool

	// cluster takes the keyspace commands of a replicated node (nil: run
	// them at once); applying is the state Apply runs commands with, used
	// by the replication mode's one applying goroutine.
	cluster Cluster
	// mesh is the active-active mode of a mesh node (nil: not one).
	mesh     Mesh
	applying connState
	// replayed are the users of the rules that came with applied
	// commands (replayUser); only the applying goroutine uses it.
	replayed map[string]*User

	// password is requirepass as CONFIG GET shows it (Redis keeps it in
	// clear for that); the default user has only its hash.
	password  atomic.Pointer[string]
	acl       *acl
	protected atomic.Bool // protected-mode
	// policies are the rate-limit policies (policy.go).
	policies *policyRegistry
	// errorStats counts error replies by prefix (INFO errorstats).
	errorStats errorStats
	// telemetry is the node's aggregator of TELEMETRY.REPORT (telemetry.go).
	telemetry telemetryState

	clientsMu sync.Mutex // guards clients
	clients   ClientLimits
}

// New returns a server for cfg. It fails when the ACL file does not load.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || cfg.Clock == nil {
		return nil, ErrConfig
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	sl := DefaultSlowlog
	if cfg.Slowlog != nil {
		sl = *cfg.Slowlog
	}
	if err := sl.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	initACLIndex()
	s := &Server{
		cfg:   cfg,
		store: cfg.Store,
		clock: cfg.Clock,
		cmds:  newTable(specs),
		stats: make(map[*Spec]*cmdStats, len(specs)),
		start: time.Now(),
		log:   cfg.Logger,

		scripts:  scripting.New(scripting.Options{Logger: cfg.Logger}),
		replayed: map[string]*User{},
	}
	for _, sp := range specs {
		s.stats[sp] = &cmdStats{subs: make([]cmdStats, len(sp.Subcommands))}
	}
	_, s.realClock = cfg.Clock.(clock.Real)
	s.slow.slowerThan.Store(sl.SlowerThan)
	s.slow.maxLen.Store(sl.MaxLen)
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("%w: latency-monitor-threshold must be 0 or more, got %d", ErrConfig, cfg.Latency)
	}
	s.latency.threshold.Store(cfg.Latency)
	s.syncReplies = cfg.Persistence != nil && cfg.Persistence.Stats().Fsync == persistence.Always
	s.password.Store(&cfg.RequirePass)
	s.acl = newACL(cfg.RequirePass)
	if cfg.ACLFile != "" {
		if _, problem := s.loadACLFile(); problem != "" {
			return nil, fmt.Errorf("%w: %s", ErrACLFile, problem)
		}
	}
	s.protected.Store(cfg.ProtectedMode)
	s.clients = DefaultClientLimits()
	if cfg.Clients != nil {
		s.clients = *cfg.Clients
	}
	s.conf = newSettings(s)
	s.policies = newPolicyRegistry(cfg.Store, cfg.Logger)
	s.telemetry.agg = telemetry.New(telemetry.Limits{})
	return s, nil
}

// requirePass returns the password clients must AUTH with ("" for none).
func (s *Server) requirePass() string { return *s.password.Load() }

// RequireAuth reports whether new connections must authenticate (the
// default user has a password or is off); it is the resp.Config.RequireAuth
// of the listener.
func (s *Server) RequireAuth() bool { return s.acl.authRequired() }

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
	db int
	// user is who the connection is authenticated as (the default user
	// until AUTH); on a Raft replica applying the log, the user whose
	// rules came with the entry.
	user  *User
	locks store.LockSet
	watch store.Watch
	// watched are the keys WATCH took fingerprints of on a Raft node
	// (replicated.go); EXEC sends them with the transaction.
	watched []*watchedKey
	// multi is non-nil between MULTI and EXEC/DISCARD.
	multi *multiState
	// unpacked holds the packed states (store/packed.go) the command being
	// run has read, one after the other (Ctx.stateBuf); run starts it over
	// for each command, EXEC's and a script's inner ones too.
	unpacked []byte
	// ctx is reused by every command of the connection, so running a
	// command does not allocate one.
	ctx Ctx
	// script runs the commands of the connection's Lua scripts.
	script scriptCall
	// policy is what THROTTLE.POLICY's Spec.Locks found, which its Run
	// decides by (policy.go).
	policy pinnedPolicy
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
	// decision is what the throttle command being run decided (decide).
	decision decision
}

// DB returns the connection's selected database.
func (c *Ctx) DB() int { return c.st.db }

func (s *Server) state(c *resp.Conn) *connState {
	if st, ok := c.State.(*connState); ok {
		return st
	}
	st := &connState{user: s.acl.def}
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
	// As in Redis, a connection that has not authenticated may run
	// commands again once the default user needs no password.
	if !c.Authenticated() && spec.Flags&NoAuth == 0 && s.RequireAuth() {
		s.reject(c, st, spec, errNoAuth)
		return
	}
	if r := st.user.rules.Load(); !r.unrestricted {
		if r == s.acl.none {
			// The user is gone (ACL DELUSER, ACL LOAD) and this
			// connection not closed yet: close it now, as Redis would
			// have before reading more from it.
			c.CloseAfterReply()
			return
		}
		if d := r.check(spec, args); d != permitted {
			s.reject(c, st, spec, d.reply(spec, args))
			return
		}
	}
	if s.scripts.Busy() && !allowedWhileBusy(spec, args) {
		s.reject(c, st, spec, scripting.ReplyBusy)
		return
	}
	if s.store.OutOfMemory() && refusedOnOOM(st, spec) {
		s.reject(c, st, spec, errOOM)
		return
	}
	if spec.Flags&Write != 0 && s.cfg.Persistence != nil {
		if err := s.cfg.Persistence.Err(); err != nil {
			s.reject(c, st, spec, "MISCONF Errors writing to the data folder, so writes are refused: "+err.Error())
			return
		}
	}
	if spec.Prepare != nil {
		var errText string
		if args, errText = spec.Prepare(s, args); errText != "" {
			s.reject(c, st, spec, errText)
			return
		}
	}
	if st.multi != nil && spec.Flags&NoMulti != 0 {
		s.reject(c, st, spec, errNoMulti)
		return
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
	start := time.Now()
	now := s.instant(start)
	c.Touch(spec.fullName(args), now)
	s.execute(c, &c.W, st, spec, args, now, start)
}

// refusedOnOOM reports whether spec is refused while the store is over its
// bounds under maxmemory-policy noeviction, as Redis' processCommand
// decides: a DenyOOM command, EXEC of a transaction that queued one, and
// inside MULTI anything but EXEC, DISCARD, QUIT and RESET, since queuing
// takes memory too. (A script's own OOM rules are in runScript.)
func refusedOnOOM(st *connState, spec *Spec) bool {
	switch {
	case spec.Flags&DenyOOM != 0:
		return true
	case spec.Name == "exec":
		return st.multi != nil && slices.ContainsFunc(st.multi.specs, func(sp *Spec) bool { return sp.Flags&DenyOOM != 0 })
	case st.multi != nil:
		return spec.Name != "discard" && spec.Name != "quit" && spec.Name != "reset"
	}
	return false
}

// instant is the instant of a command dispatched at start: start itself
// on the real clock, so that one reading of the clock gives both the
// command's instant and the start of its timing (see run), else the
// injected clock's.
func (s *Server) instant(start time.Time) int64 {
	if s.realClock {
		return start.UnixNano()
	}
	return s.clock.Now()
}

// execute runs spec with args at instant now, with the shards of its keys
// locked, and writes its reply to w. c is the client's connection, or nil
// when a replica applies a command from the log. The command is timed from
// start, before it waits for its locks (see run).
func (s *Server) execute(c *resp.Conn, w *resp.Writer, st *connState, spec *Spec, args [][]byte, now int64, start time.Time) {
	st.locks.Reset()
	s.addLocks(&st.locks, st, spec, args)
	s.store.Lock(&st.locks)
	if s.mesh != nil {
		// Read with the locks held: see Mesh.Now.
		now = s.mesh.Now()
	}
	st.ctx = Ctx{srv: s, Conn: c, W: w, Args: args, Tx: s.store.Tx(now), st: st}
	s.run(&st.ctx, spec, start)
	st.ctx.Args = nil // they alias the reader's buffer
	s.store.Unlock(&st.locks)
}

// stateBuf returns room for one packed state's bytes (store.PackedLen)
// that no other read of the command is given: a decision that reads an FWC
// state allocates nothing once the connection has run one.
func (c *Ctx) stateBuf() []byte {
	u := c.st.unpacked
	if cap(u)-len(u) < store.PackedLen {
		// A new array: the slices handed out keep the old one.
		u = make([]byte, 0, max(2*cap(u), 4*store.PackedLen))
	}
	n := len(u)
	c.st.unpacked = u[:n+store.PackedLen]
	return u[n : n : n+store.PackedLen]
}

// addLocks adds the shards spec needs for args to l, for the connection st.
func (s *Server) addLocks(l *store.LockSet, st *connState, spec *Spec, args [][]byte) {
	if spec.allKeys(args) {
		l.AddAll()
		return
	}
	if spec.Locks != nil {
		spec.Locks(s, st, args, l)
	}
	if spec.KeysFn != nil {
		spec.KeysFn(args, func(k []byte) { l.Add(s.store, k) })
		return
	}
	spec.keys(args, func(k []byte) { l.Add(s.store, k) })
}

// run executes spec with its locks held, counts it and logs it in the
// SLOWLOG when it was slow. The command is timed from start: for a command
// inside EXEC or a script, the moment run is called, so its Run alone, as
// Redis times a command; for the others, the moment the dispatcher read
// the clock for the command's instant, so the time also counts the wait for
// the shards' locks, which only a connection holding them for long (a slow
// script) makes more than a few nanoseconds. That saves a reading of the
// clock per command, 25-35 ns where a cheap command takes 250 ns
// (docs/operations.md, "SLOWLOG").
func (s *Server) run(c *Ctx, spec *Spec, start time.Time) {
	mark := c.W.Len()
	c.st.unpacked = c.st.unpacked[:0]
	if msg := s.meshRefusal(spec); msg != "" {
		c.W.Error(msg)
	} else {
		spec.Run(c)
	}
	took := time.Since(start)
	b := c.W.Bytes()
	failed := len(b) > mark && b[mark] == '-'
	if failed {
		s.errorStats.count(b[mark:])
	}
	s.stats[spec].of(spec, c.Args).record(took, failed, c.decision)
	c.decision = undecided // EXEC's inner runs must not leave theirs to EXEC
	if spec.Flags&SkipSlowlog == 0 {
		if s.slow.slow(took) {
			s.logSlow(c, spec, took)
		}
		s.latency.observe(spec.Flags&Fast != 0, took, start.Add(took))
	}
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
	s.errorStats.count([]byte("-" + msg))
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
