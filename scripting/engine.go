package scripting

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Sentinel errors. Each has a reply text below that Redis defines exactly;
// the command layer maps one to the other.
var (
	// ErrNotBusy is Kill's answer when no script has run past the time limit.
	ErrNotBusy = errors.New("scripting: no script is busy")
	// ErrUnkillable is Kill's answer when the busy script has already written.
	ErrUnkillable = errors.New("scripting: the busy script has written")
	// ErrCompile wraps a script that does not compile (see ReplyError).
	ErrCompile = errors.New("scripting: compile error")
	// ErrShebang wraps a script whose "#!" line Redis would refuse.
	ErrShebang = errors.New("scripting: bad shebang")
	// ErrWriteFlag is returned by Script.ReadOnly for EVAL_RO of a script
	// whose shebang does not declare no-writes.
	ErrWriteFlag = errors.New("scripting: script may write")
)

// Reply texts of Redis 7.0 (without the leading '-').
const (
	ReplyNotBusy    = "NOTBUSY No scripts in execution right now."
	ReplyUnkillable = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	ReplyBusy       = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	ReplyNoScript   = "NOSCRIPT No matching script. Please use EVAL."
	ReplyWriteFlag  = "ERR Can not execute a script with write flag using *_ro command."

	// What a Caller returns (as an error reply) where Redis' scriptCall
	// refuses a command before running it. The engine appends the
	// " script: <sha>, on @user_script:<line>." suffix when redis.call
	// raises them.
	ReplyUnknownCommand = "ERR Unknown Redis command called from script"
	ReplyWrongArity     = "ERR Wrong number of args calling Redis command from script"
	ReplyNotAllowed     = "ERR This Redis command is not allowed from script"
	ReplyReadOnly       = "ERR Write commands are not allowed from read-only scripts."
)

// ReplyError is an error whose wire text Redis fixes; the command layer writes
// Reply as the error reply. It unwraps to one of the sentinels above.
type ReplyError struct {
	Reply string // the error reply without '-' or CRLF
	Err   error
}

func (e *ReplyError) Error() string { return e.Err.Error() + ": " + e.Reply }
func (e *ReplyError) Unwrap() error { return e.Err }

// Options configure an Engine. Zero values mean the defaults.
type Options struct {
	// TimeLimit is how long a script may run before it is busy (Redis'
	// busy-reply-threshold, formerly lua-time-limit): Busy reports it and
	// Kill may stop it. 0 means 5s; a negative value means never busy.
	TimeLimit time.Duration
	// Logger receives redis.log() lines and the slow-script warning. nil
	// discards them.
	Logger *slog.Logger
}

const defaultTimeLimit = 5 * time.Second

// RedisVersion is what scripts see as redis.REDIS_VERSION; it matches the
// version the server reports in HELLO and INFO.
const RedisVersion = "7.0.15"

// Engine is the script cache plus a pool of sandboxed interpreters. It is
// safe for concurrent use.
type Engine struct {
	log       *slog.Logger
	timeLimit atomic.Int64 // nanoseconds; <= 0 never busy
	epoch     time.Time    // origin of the monotonic run start times

	cacheMu sync.RWMutex // guards bySHA, bySrc, bytes
	bySHA   map[string]*Script
	bySrc   map[string]*Script // same scripts by body, so EVAL skips SHA1
	bytes   int

	pool   sync.Pool     // idle *vm
	gen    atomic.Uint64 // bumped by Flush; interpreters then drop their compiled functions
	active atomic.Int64  // scripts running now
	regMu  sync.Mutex    // guards reg
	reg    []weak.Pointer[vm]
}

// New returns an Engine with an empty script cache.
func New(opts Options) *Engine {
	e := &Engine{
		log:   opts.Logger,
		epoch: time.Now(),
		bySHA: make(map[string]*Script),
		bySrc: make(map[string]*Script),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.SetTimeLimit(opts.TimeLimit)
	return e
}

// SetTimeLimit changes the busy threshold (CONFIG SET busy-reply-threshold);
// 0 means the default, negative means never busy.
func (e *Engine) SetTimeLimit(d time.Duration) {
	if d == 0 {
		d = defaultTimeLimit
	}
	e.timeLimit.Store(int64(d))
}

// TimeLimit returns the busy threshold (negative: never busy).
func (e *Engine) TimeLimit() time.Duration { return time.Duration(e.timeLimit.Load()) }

// Flags are a script's shebang flags ("#!lua flags=no-writes,allow-oom").
type Flags uint8

const (
	// FlagEvalCompat marks a script without a shebang: Redis runs it with
	// the pre-7.0 rules (it may write; flags do not apply).
	FlagEvalCompat Flags = 1 << iota
	FlagNoWrites
	FlagAllowOOM
	FlagAllowStale
	FlagNoCluster
	FlagAllowCrossSlot
)

var flagNames = []struct {
	name string
	flag Flags
}{
	{"no-writes", FlagNoWrites},
	{"allow-oom", FlagAllowOOM},
	{"allow-stale", FlagAllowStale},
	{"no-cluster", FlagNoCluster},
	{"allow-cross-slot-keys", FlagAllowCrossSlot},
}

// Script is a compiled script. It is immutable and may be used by any number
// of runs at once.
type Script struct {
	sha         string
	src         string
	flags       Flags
	proto       *lua.FunctionProto
	setsGlobals bool // has a SETGLOBAL instruction (see vm.run)
}

// SHA returns the lower-case hex SHA1 of the body, the EVALSHA name.
func (s *Script) SHA() string { return s.sha }

// Source returns the body as sent to EVAL or SCRIPT LOAD (replication and
// the AOF rewrite EVALSHA as EVAL with it).
func (s *Script) Source() string { return s.src }

// Flags returns the shebang flags.
func (s *Script) Flags() Flags { return s.flags }

// ReadOnly says whether a run must refuse write commands: always for
// EVAL_RO/EVALSHA_RO (ro), and for scripts declaring no-writes. A script
// with a shebang but without no-writes cannot run through *_RO at all:
// that returns a *ReplyError wrapping ErrWriteFlag.
func (s *Script) ReadOnly(ro bool) (bool, error) {
	if s.flags&FlagEvalCompat != 0 {
		return ro, nil
	}
	if s.flags&FlagNoWrites != 0 {
		return true, nil
	}
	if ro {
		return true, &ReplyError{Reply: ReplyWriteFlag, Err: ErrWriteFlag}
	}
	return false, nil
}

// Load returns the script with this body, compiling and caching it on first
// sight (EVAL, SCRIPT LOAD). Errors are *ReplyError with Redis' text, such as
// "ERR Error compiling script (new function): user_script:1: ...".
func (e *Engine) Load(src []byte) (*Script, error) {
	e.cacheMu.RLock()
	s := e.bySrc[string(src)]
	e.cacheMu.RUnlock()
	if s != nil {
		return s, nil
	}
	s, err := compile(string(src))
	if err != nil {
		return nil, err
	}
	e.cacheMu.Lock()
	if old := e.bySHA[s.sha]; old != nil {
		s = old
	} else {
		e.bySHA[s.sha] = s
		e.bySrc[s.src] = s
		e.bytes += len(s.src)
	}
	e.cacheMu.Unlock()
	return s, nil
}

// Lookup finds a cached script by SHA1 hex, in any case (EVALSHA).
func (e *Engine) Lookup(sha []byte) (*Script, bool) {
	if len(sha) != 40 {
		return nil, false
	}
	var low [40]byte
	for i, c := range sha {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	e.cacheMu.RLock()
	s := e.bySHA[string(low[:])]
	e.cacheMu.RUnlock()
	return s, s != nil
}

// Exists reports whether a script is cached (SCRIPT EXISTS).
func (e *Engine) Exists(sha []byte) bool {
	_, ok := e.Lookup(sha)
	return ok
}

// Sources returns the body of every cached script, in SHA order: a Raft
// snapshot carries them, so that a replica restored from it answers EVALSHA
// as the others do.
func (e *Engine) Sources() []string {
	e.cacheMu.RLock()
	defer e.cacheMu.RUnlock()
	list := make([]string, 0, len(e.bySHA))
	for _, sha := range slices.Sorted(maps.Keys(e.bySHA)) {
		list = append(list, e.bySHA[sha].src)
	}
	return list
}

// Flush empties the cache (SCRIPT FLUSH). Runs in progress finish normally.
func (e *Engine) Flush() {
	e.cacheMu.Lock()
	e.bySHA = make(map[string]*Script)
	e.bySrc = make(map[string]*Script)
	e.bytes = 0
	e.cacheMu.Unlock()
	// Interpreters keep a compiled function per script; a new generation
	// makes them drop those on their next run so flushed scripts are freed.
	e.gen.Add(1)
}

// Stats describe the cache, for INFO.
type Stats struct {
	Scripts int // number_of_cached_scripts
	Bytes   int // total body length
}

// Stats returns the cache size.
func (e *Engine) Stats() Stats {
	e.cacheMu.RLock()
	defer e.cacheMu.RUnlock()
	return Stats{Scripts: len(e.bySHA), Bytes: e.bytes}
}

// SHA1Hex returns the lower-case hex SHA1 of b, as Redis names scripts.
func SHA1Hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

func compile(src string) (*Script, error) {
	s := &Script{sha: SHA1Hex([]byte(src)), src: src}
	flags, n, err := parseShebang(src)
	if err != nil {
		return nil, err
	}
	s.flags = flags
	// The shebang line is skipped but its newline kept, so line numbers in
	// errors still match the text the user sent.
	chunk, err := parse.Parse(strings.NewReader(src[n:]), chunkName)
	if err == nil {
		s.proto, err = lua.Compile(chunk, chunkName)
	}
	if err != nil {
		return nil, &ReplyError{
			Reply: "ERR Error compiling script (new function): " + compileMessage(err, src[n:]),
			Err:   ErrCompile,
		}
	}
	// gopher-lua gives the main chunk Lua 5.0's implicit "arg" table, built
	// on every call but unreachable (no local is declared for it). Lua 5.1
	// has no such table for the main chunk; dropping it saves a map per run.
	s.proto.IsVarArg &^= lua.VarArgNeedsArg
	s.setsGlobals = setsGlobals(s.proto)
	return s, nil
}

// chunkName is the name Redis gives every EVAL body, so error positions read
// "user_script:<line>:".
const chunkName = "user_script"

// compileMessage renders a gopher-lua syntax error in Lua 5.1's shape,
// "user_script:<line>: <message> near '<token>'". The messages themselves are
// gopher-lua's ("syntax error"), not Lua's ("'=' expected").
func compileMessage(err error, src string) string {
	var pe *parse.Error
	var ce *lua.CompileError
	switch {
	case errors.As(err, &pe):
		line, tok := pe.Pos.Line, "'"+pe.Token+"'"
		if line == parse.EOF {
			line, tok = strings.Count(src, "\n")+1, "'<eof>'"
		}
		return chunkName + ":" + itoa(int64(line)) + ": " + pe.Message + " near " + tok
	case errors.As(err, &ce):
		return chunkName + ":" + itoa(int64(ce.Line)) + ": " + ce.Message
	}
	return strings.TrimSpace(err.Error())
}

// setsGlobals reports whether p or a function inside it assigns a global.
func setsGlobals(p *lua.FunctionProto) bool {
	for _, inst := range p.Code {
		if int(inst>>26) == lua.OP_SETGLOBAL { // gopher-lua's opcode field
			return true
		}
	}
	for _, f := range p.FunctionPrototypes {
		if setsGlobals(f) {
			return true
		}
	}
	return false
}

// parseShebang reads Redis 7's "#!lua flags=a,b" first line. It returns the
// flags and the length of the line without its newline.
func parseShebang(src string) (Flags, int, error) {
	if !strings.HasPrefix(src, "#!") {
		return FlagEvalCompat, 0, nil
	}
	n := strings.IndexByte(src, '\n')
	if n < 0 {
		return 0, 0, shebangError("Invalid script shebang")
	}
	parts := strings.Fields(src[:n])
	if parts[0] != "#!lua" {
		return 0, 0, shebangError("Unexpected engine in script shebang: " + parts[0])
	}
	var flags Flags
	for _, p := range parts[1:] {
		list, ok := strings.CutPrefix(p, "flags=")
		if !ok {
			return 0, 0, shebangError("Unknown lua shebang option: " + p)
		}
		if list == "" {
			continue
		}
	next:
		for _, name := range strings.Split(list, ",") {
			for _, f := range flagNames {
				if f.name == name {
					flags |= f.flag
					continue next
				}
			}
			return 0, 0, shebangError("Unexpected flag in script shebang: " + name)
		}
	}
	return flags, n, nil
}

func shebangError(msg string) error {
	return &ReplyError{Reply: "ERR " + msg, Err: ErrShebang}
}
