package scripting

import (
	"context"
	"log/slog"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Caller runs the Redis commands of redis.call and redis.pcall.
//
// Call executes args (args[0] is the command name, in any case) as the
// script's client and returns the complete reply encoded in RESP for
// x.Proto() (2, or 3 after redis.setresp(3)). Errors are error replies, with
// Redis' texts: see the Reply* constants for the ones Redis' script layer
// produces itself. args and its byte slices are only valid during the call
// and must not be modified; the returned bytes need only stay valid until
// the next Call. Before executing a command that may write, Call must call
// x.MarkWrite() and must not execute it if that returns false.
type Caller interface {
	Call(x *Exec, args [][]byte) []byte
}

// CallerFunc adapts a function to Caller.
type CallerFunc func(x *Exec, args [][]byte) []byte

// Call calls f.
func (f CallerFunc) Call(x *Exec, args [][]byte) []byte { return f(x, args) }

// Redis' log levels (LL_DEBUG ... LL_WARNING) and replication flags.
const (
	logDebug = iota
	logVerbose
	logNotice
	logWarning
)

const (
	replNone = 0
	replAOF  = 1
	replRepl = 2
	replAll  = replAOF | replRepl
)

func (v *vm) redisLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return v.redisCall(L, true) },
		"pcall":              func(L *lua.LState) int { return v.redisCall(L, false) },
		"error_reply":        errorReply,
		"status_reply":       statusReply,
		"sha1hex":            sha1hex,
		"log":                v.log,
		"setresp":            v.setresp,
		"set_repl":           v.setRepl,
		"replicate_commands": replicateCommands,
		"breakpoint":         breakpoint,
		"debug":              func(*lua.LState) int { return 0 },
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, n := range map[string]int{
		"LOG_DEBUG": logDebug, "LOG_VERBOSE": logVerbose, "LOG_NOTICE": logNotice, "LOG_WARNING": logWarning,
		"REPL_NONE": replNone, "REPL_AOF": replAOF, "REPL_SLAVE": replRepl, "REPL_REPLICA": replRepl, "REPL_ALL": replAll,
	} {
		t.RawSetString(name, lua.LNumber(n))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(RedisVersion))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum(RedisVersion)))
	return t
}

// versionNum is Redis' REDIS_VERSION_NUM: 0x00MMmmpp.
func versionNum(s string) int {
	n := 0
	for _, part := range strings.SplitN(s, ".", 3) {
		p := 0
		for _, c := range part {
			p = p*10 + int(c-'0')
		}
		n = n<<8 | p
	}
	return n
}

// errorTable is Redis' luaPushError: the error table {err="ERR <msg>"}.
func errorTable(L *lua.LState, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString("ERR "+msg))
	return t
}

// raise raises the error table of msg, as Redis' luaError does.
func raise(L *lua.LState, msg string) int {
	L.Error(errorTable(L, msg), 0)
	return 0
}

// redisCall is redis.call (raise) and redis.pcall.
func (v *vm) redisCall(L *lua.LState, raiseErr bool) int {
	x := &v.x
	if x.caller == nil {
		return raise(L, "redis.call/pcall can only be called inside a script invocation")
	}
	args, bad := v.callArgs(L)
	if bad != "" {
		if raiseErr {
			return raise(L, bad)
		}
		L.Push(errorTable(L, bad))
		return 1
	}
	p := replyParser{L: L, b: x.caller.Call(x, args)}
	val, isErr := p.value()
	if p.bad || p.i != len(p.b) { // not exactly one reply
		val, isErr = errorTable(L, "Protocol error in the reply of the command called from script"), true
	}
	if isErr && raiseErr {
		L.Error(val, 0)
	}
	L.Push(val)
	return 1
}

// callArgs converts the arguments of redis.call into the reusable args
// buffers. Numbers become "%.17g" text, as Redis formats them.
func (v *vm) callArgs(L *lua.LState) ([][]byte, string) {
	n := L.GetTop()
	if n == 0 {
		return nil, "Please specify at least one argument for this redis lib call"
	}
	buf, ends := v.argBuf[:0], v.argEnds[:0]
	for i := 1; i <= n; i++ {
		switch a := L.Get(i).(type) {
		case lua.LString:
			buf = append(buf, a...)
		case lua.LNumber:
			buf = appendG(buf, float64(a), 17)
		default:
			return nil, "Lua redis lib command arguments must be strings or integers"
		}
		ends = append(ends, len(buf))
	}
	args, start := v.args[:0], 0
	for _, end := range ends {
		args = append(args, buf[start:end:end])
		start = end
	}
	v.argBuf, v.argEnds, v.args = buf, ends, args
	return args, ""
}

// errorReply is redis.error_reply: a bad argument returns (does not raise)
// an error table, as in Redis.
func errorReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(errorText(strings.TrimPrefix(string(s), "-"))))
	L.Push(t)
	return 1
}

func statusReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

func sha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "wrong number of arguments")
	}
	var s string
	switch a := L.Get(1).(type) {
	case lua.LString, lua.LNumber:
		s = luaString(a)
	}
	L.Push(lua.LString(SHA1Hex([]byte(s))))
	return 1
}

func replicateCommands(L *lua.LState) int {
	L.Push(lua.LTrue)
	return 1
}

// breakpoint returns false: there is no debugger (SCRIPT DEBUG).
func breakpoint(L *lua.LState) int {
	L.Push(lua.LFalse)
	return 1
}

// log is redis.log(level, ...): the arguments joined by spaces, at the
// matching slog level.
func (v *vm) log(L *lua.LState) int {
	argc := L.GetTop()
	if argc < 2 {
		return raise(L, "redis.log() requires two arguments or more.")
	}
	lv, ok := toNumber(L.Get(1))
	if !ok {
		return raise(L, "First argument must be a number (log level).")
	}
	level := int(lv)
	if level < logDebug || level > logWarning {
		return raise(L, "Invalid debug level.")
	}
	sl := [...]slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn}[level]
	ctx := context.Background()
	if !v.e.log.Enabled(ctx, sl) {
		return 0
	}
	var b strings.Builder
	for j := 2; j <= argc; j++ {
		switch a := L.Get(j).(type) {
		case lua.LString, lua.LNumber:
			if j != 2 {
				b.WriteByte(' ')
			}
			b.WriteString(luaString(a))
		}
	}
	v.e.log.Log(ctx, sl, b.String(), "script", v.x.script.sha)
	return 0
}

// toNumber is lua_tonumber: numbers, and strings that read as numbers.
func toNumber(lv lua.LValue) (float64, bool) {
	switch lv := lv.(type) {
	case lua.LNumber:
		return float64(lv), true
	case lua.LString:
		return str2number(string(lv))
	}
	return 0, false
}

func (v *vm) setresp(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "redis.setresp() requires one argument.")
	}
	n, _ := toNumber(L.Get(1))
	if p := int(n); p == 2 || p == 3 {
		v.x.proto = p
		return 0
	}
	return raise(L, "RESP version must be 2 or 3.")
}

// setRepl validates like Redis and does nothing else: throttled replicates
// the effects of a script as a whole, whatever the script asks.
func (v *vm) setRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		return raise(L, "redis.set_repl() requires two arguments.")
	}
	n, _ := toNumber(L.Get(1))
	if int(n)&^replAll != 0 {
		return raise(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}
