package scripting

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// vm is one sandboxed interpreter. It runs one script at a time; idle ones
// wait in the Engine's pool.
type vm struct {
	e *Engine
	L *lua.LState

	// ctx is the LState's context for its whole life: gopher-lua checks
	// ctx.Done() before every instruction, which is how Kill stops a loop.
	ctx runCtx

	base    *lua.LTable // the real globals; scripts never see it
	globals *lua.LTable // the read-only view scripts get as _G
	// proxies maps each read-only view to the table behind it, so rawget,
	// next and pairs read through and rawset and table.* refuse to write.
	proxies map[*lua.LTable]*lua.LTable

	keys, argv   *lua.LTable
	nkeys, nargv int         // entries set by the previous run
	argsMeta     *lua.LTable // metatable of KEYS and ARGV
	argsDirty    bool        // the run added entries to KEYS or ARGV

	onError *lua.LFunction
	null    *lua.LUserData // cjson.null

	fns map[*Script]*lua.LFunction // compiled scripts bound to this LState
	gen uint64                     // Engine.gen when fns was last valid
	seq uint64                     // number of the current or last run

	x Exec // the run in progress

	// Read by Busy and Kill from other goroutines.
	start      atomic.Int64 // Engine.now() when the run began, 0 when idle
	running    atomic.Pointer[Script]
	slowLogged atomic.Bool

	// What onError saw when the script failed.
	failed    bool
	errMsg    string
	errHasMsg bool
	errWhere  string // "@user_script:3", "" when no Lua frame was found

	// Scratch for redis.call arguments, reused across calls.
	argBuf  []byte
	argEnds []int
	args    [][]byte
}

// Exec is one script run in progress, passed to the Caller for each
// redis.call. It belongs to the run: do not keep it after Call returns.
type Exec struct {
	script *Script
	caller Caller
	proto  int // reply protocol asked for with redis.setresp
	state  runState
	rand   rand48
}

// Script returns the running script.
func (x *Exec) Script() *Script { return x.script }

// Proto returns the protocol (2 or 3) the script asked for its redis.call
// replies with redis.setresp; the Caller must encode its reply with it.
func (x *Exec) Proto() int { return x.proto }

// MarkWrite must be called by the Caller before it executes a command that
// may write. It returns false when the run is being killed: the Caller must
// then not execute the command (return any error reply; the kill error wins).
// Marking first makes SCRIPT KILL and writes exclusive, so a killed script
// never leaves half of its writes behind.
func (x *Exec) MarkWrite() bool { return x.state.markWrite() }

// Wrote reports whether MarkWrite was called in this run.
func (x *Exec) Wrote() bool { return x.state.flags()&stateWrote != 0 }

func newVM(e *Engine) *vm {
	L := lua.NewState(lua.Options{
		SkipOpenLibs: true,
		// Lua 5.1 allows deep recursion (LUAI_MAXCALLS 20000); gopher-lua's
		// call stack is fixed, so allow more than its default of 256 frames.
		CallStackSize: 1024,
		// The value stack grows by large steps (each growth copies it) up to
		// 2 MiB; beyond that a script fails with "registry overflow".
		RegistrySize:     2 * 1024,
		RegistryMaxSize:  128 * 1024,
		RegistryGrowStep: 4 * 1024,
	})
	v := &vm{
		e:       e,
		L:       L,
		proxies: make(map[*lua.LTable]*lua.LTable),
		fns:     make(map[*Script]*lua.LFunction),
	}
	v.ctx.done = make(chan struct{})
	v.openLibs()
	L.SetContext(&v.ctx)
	return v
}

// openLibs builds the sandbox Redis 7.0 gives scripts: Lua's base, table,
// string, math and coroutine libraries without file or OS access, redis.*,
// cjson and bit, all behind read-only views.
func (v *vm) openLibs() {
	L := v.L
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{"", lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	base := L.G.Global
	v.base = base
	// Redis leaves out file access and printing (print would write to the
	// server's stdout); require/module need package, which is not loaded.
	for _, name := range []string{"dofile", "loadfile", "print", "_printregs", "module", "require", "_GOPHER_LUA_VERSION"} {
		base.RawSetString(name, lua.LNil)
	}
	set := func(t *lua.LTable, name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }
	set(base, "pcall", v.pcall)
	set(base, "tostring", luaToString)
	set(base, "tonumber", luaToNumber)
	set(base, "rawget", v.rawget)
	set(base, "rawset", v.rawset)
	set(base, "next", v.next)
	base.RawSetString("pairs", L.NewClosure(luaPairs, base.RawGetString("next")))
	set(base, "setmetatable", v.setmetatable)
	set(base, "error", luaError)
	getfenv := base.RawGetString("getfenv").(*lua.LFunction).GFunction
	set(base, "getfenv", func(L *lua.LState) int {
		// Scripts may run with the real globals as their environment (see
		// run); getfenv must still hand out only the read-only view.
		n := getfenv(L)
		if L.Get(-1) == v.base {
			L.Replace(-1, v.globals)
		}
		return n
	})
	// gopher-lua's collectgarbage runs a full Go GC; a script must not be
	// able to stall the server that way, and memory figures would make
	// scripts nondeterministic.
	set(base, "collectgarbage", zero)
	set(base, "gcinfo", zero)

	tbl := base.RawGetString(lua.TabLibName).(*lua.LTable)
	for _, name := range []string{"insert", "remove", "sort"} {
		orig := tbl.RawGetString(name).(*lua.LFunction).GFunction
		set(tbl, name, v.guardWrite(orig))
	}

	str := base.RawGetString(lua.StringLibName).(*lua.LTable)
	// gopher-lua uses the string table as the strings' metatable (it has
	// __index = itself); give strings a separate, hidden one instead.
	str.RawSetString("__index", lua.LNil)
	smt := L.NewTable()
	smt.RawSetString("__index", str)
	smt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(lua.LString(""), smt)

	set(str, "dump", stringDump)
	loadstring := base.RawGetString("loadstring").(*lua.LFunction).GFunction
	set(base, "loadstring", func(L *lua.LState) int {
		if s, ok := L.Get(1).(lua.LString); ok && strings.HasPrefix(string(s), binaryChunk[:1]) {
			// Redis 7 builds Lua without binary chunk loading, so its parser
			// reads the ESC as text and fails on it.
			L.Push(lua.LNil)
			L.Push(lua.LString(chunkID(string(s)) + ":1: unexpected symbol near 'char(27)'"))
			return 2
		}
		return loadstring(L)
	})

	math := base.RawGetString(lua.MathLibName).(*lua.LTable)
	set(math, "random", v.mathRandom)
	set(math, "randomseed", v.mathRandomSeed)

	base.RawSetString("redis", v.redisLib())
	base.RawSetString("cjson", v.cjsonLib())
	base.RawSetString("bit", bitLib(L))

	// KEYS and ARGV are reused from run to run. A run may change their
	// entries (the next run overwrites them) but adding entries marks them
	// dirty, through __newindex or the raw writers, and gets them replaced.
	v.argsMeta = L.NewTable()
	v.argsMeta.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		v.argsDirty = true
		L.RawSet(L.CheckTable(1), L.CheckAny(2), L.CheckAny(3))
		return 0
	}))
	v.argsMeta.RawSetString("__metatable", lua.LFalse)
	v.newArgs()

	// Read-only views of every library table, then of the globals.
	for _, name := range []string{lua.TabLibName, lua.StringLibName, lua.MathLibName, lua.CoroutineLibName, "redis", "cjson", "bit"} {
		base.RawSetString(name, v.proxy(base.RawGetString(name).(*lua.LTable)))
	}
	bmt := L.NewTable()
	bmt.RawSetString("__index", L.NewFunction(nonexistentGlobal))
	bmt.RawSetString("__newindex", L.NewFunction(readonlyTable))
	base.Metatable = bmt
	v.globals = v.proxy(base)
	// Redis' _G and strings have metatables a script may read but not
	// change: getmetatable gives read-only views (Attempt to modify a
	// readonly table), not false. The strings' shows the string library's
	// view, so the table behind stays out of reach.
	v.globals.Metatable.(*lua.LTable).RawSetString("__metatable", v.proxy(bmt))
	shown := L.NewTable()
	shown.RawSetString("__index", base.RawGetString(lua.StringLibName))
	smt.RawSetString("__metatable", v.proxy(shown))
	base.RawSetString("_G", v.globals)
	// getfenv and loadstring hand out G.Global and Env: make both the view.
	L.G.Global = v.globals
	L.Env = v.globals

	v.onError = L.NewFunction(v.handleError)
}

// proxy returns an empty table that reads through to t and refuses writes,
// which is how Redis' read-only tables behave.
func (v *vm) proxy(t *lua.LTable) *lua.LTable {
	p := v.L.NewTable()
	mt := v.L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", v.L.NewFunction(readonlyTable))
	// getmetatable(p) returns false and setmetatable(p, ...) fails, so the
	// table behind stays out of reach.
	mt.RawSetString("__metatable", lua.LFalse)
	p.Metatable = mt
	v.proxies[p] = t
	return p
}

const readonlyText = "Attempt to modify a readonly table"

func readonlyTable(L *lua.LState) int {
	L.RaiseError(readonlyText)
	return 0
}

func nonexistentGlobal(L *lua.LState) int {
	L.RaiseError("Script attempted to access nonexistent global variable '%s'", luaString(L.Get(2)))
	return 0
}

func zero(L *lua.LState) int {
	L.Push(lua.LNumber(0))
	return 1
}

// guardWrite wraps a table.* function that changes its first argument.
func (v *vm) guardWrite(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok {
			v.checkWrite(L, t)
		}
		return fn(L)
	}
}

// luaError is Lua 5.1's error: the position prefix names the function at
// the given level only when it is a Lua function (gopher-lua's would skip
// to the next Lua frame, so pcall(error, "x") would gain a position).
func luaError(L *lua.LState) int {
	obj := L.CheckAny(1)
	level := L.OptInt(2, 1)
	if s, ok := obj.(lua.LString); ok && level > 0 {
		if dbg, ok := L.GetStack(level); ok {
			if _, err := L.GetInfo("Sl", dbg, lua.LNil); err == nil && dbg.What != "G" && dbg.CurrentLine >= 0 {
				obj = lua.LString(dbg.Source + ":" + itoa(int64(dbg.CurrentLine)) + ": " + string(s))
			}
		}
	}
	L.Error(obj, 0)
	return 0
}

// checkWrite is called before a raw change of t: it refuses the read-only
// views and notes changes to KEYS and ARGV.
func (v *vm) checkWrite(L *lua.LState, t *lua.LTable) {
	if v.proxies[t] != nil {
		// Raised by Lua's C API in Redis, so with no position.
		L.Error(lua.LString(readonlyText), 0)
	}
	if t == v.keys || t == v.argv {
		v.argsDirty = true
	}
}

func (v *vm) rawset(L *lua.LState) int {
	t := L.CheckTable(1)
	v.checkWrite(L, t)
	L.RawSet(t, L.CheckAny(2), L.CheckAny(3))
	L.SetTop(1)
	return 1
}

// behind returns the table a read-only view stands for, or t itself.
func (v *vm) behind(t *lua.LTable) *lua.LTable {
	if b := v.proxies[t]; b != nil {
		return b
	}
	return t
}

func (v *vm) rawget(L *lua.LState) int {
	L.Push(v.behind(L.CheckTable(1)).RawGet(L.CheckAny(2)))
	return 1
}

func (v *vm) next(L *lua.LState) int {
	t := v.behind(L.CheckTable(1))
	k, val := t.Next(L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(val)
	return 2
}

// luaPairs is pairs with our next (upvalue 1), which reads through views.
func luaPairs(L *lua.LState) int {
	t := L.CheckTable(1)
	L.Push(L.Get(lua.UpvalueIndex(1)))
	L.Push(t)
	L.Push(lua.LNil)
	return 3
}

func (v *vm) setmetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	v.checkWrite(L, t)
	L.CheckTypes(2, lua.LTNil, lua.LTTable)
	if mt, ok := t.Metatable.(*lua.LTable); ok && mt.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	L.SetMetatable(t, L.Get(2))
	L.SetTop(1)
	return 1
}

// pcall is Redis 7's: when the error is a table with a string err field
// (what redis.call raises), the caller gets that string, as before 7.0.
func (v *vm) pcall(L *lua.LState) int {
	L.CheckAny(1)
	fn := L.Get(1)
	if fn.Type() != lua.LTFunction && L.GetMetaField(fn, "__call").Type() != lua.LTFunction {
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a " + fn.Type().String() + " value"))
		return 2
	}
	if err := L.PCall(L.GetTop()-1, lua.MultRet, nil); err != nil {
		L.Push(lua.LFalse)
		var obj lua.LValue = lua.LString(err.Error())
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			obj = ae.Object
		}
		if t, ok := obj.(*lua.LTable); ok {
			switch e := t.RawGetString("err").(type) {
			case lua.LString, lua.LNumber:
				obj = lua.LString(luaString(e))
			}
		}
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// handleError is the message handler of the top-level call. Like Redis'
// __redis__err__handler it notes where the error happened: in the frame that
// raised it, or in that frame's caller when a Go function (redis.call,
// error) raised it.
func (v *vm) handleError(L *lua.LState) int {
	obj := L.Get(1)
	v.failed = true
	v.errWhere = ""
	if dbg, ok := L.GetStack(1); ok {
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err == nil && dbg.What == "G" {
			dbg, ok = L.GetStack(2)
			if ok {
				_, err = L.GetInfo("Sl", dbg, lua.LNil)
				ok = err == nil
			}
		}
		if ok {
			src := "=[C]"
			if dbg.What != "G" {
				src = "@" + dbg.Source
			}
			v.errWhere = src + ":" + itoa(int64(dbg.CurrentLine))
		}
	}
	if t, ok := obj.(*lua.LTable); ok {
		switch e := t.RawGetString("err").(type) {
		case lua.LString, lua.LNumber:
			v.errMsg, v.errHasMsg = luaString(e), true
		default:
			v.errMsg, v.errHasMsg = "", false
		}
	} else {
		v.errMsg, v.errHasMsg = "ERR "+luaString(obj), true
	}
	L.Push(obj)
	return 1
}

// run executes s with KEYS and ARGV and writes its reply to w. It returns
// false when gopher-lua failed in a way that may have left the interpreter
// inconsistent; it must then not be reused.
func (v *vm) run(s *Script, keys, argv [][]byte, w Writer) bool {
	L := v.L
	fn := v.fns[s]
	if fn == nil {
		fn = L.NewFunctionFromProto(s.proto)
		v.fns[s] = fn
	}
	// A script that never assigns a global runs with the real globals as
	// its environment, which saves a metatable hop on every global read; it
	// cannot write them (it has no SETGLOBAL, the table is unreachable and
	// writes to missing names hit base's __newindex). Other scripts get the
	// read-only view. Reset both: setfenv may have changed them.
	if s.setsGlobals {
		fn.Env = v.globals
	} else {
		fn.Env = v.base
	}
	L.Env = v.globals
	v.setArgs(keys, argv)
	v.failed = false

	err, sound := v.call(fn)
	switch {
	case !sound:
		w.Error("ERR Error running script: " + err.Error())
		return false
	case err != nil:
		v.writeError(w, s, err)
	default:
		v.writeValue(w, L.Get(-1), 0)
	}
	L.SetTop(0)
	v.checkArgs()
	return true
}

// call calls fn under the error handler. PCall can still let a Go panic out
// (when the value stack is full as an error is caught, it fails to push the
// handler); sound is false then.
func (v *vm) call(fn *lua.LFunction) (err error, sound bool) {
	defer func() {
		if r := recover(); r != nil {
			err, sound = fmt.Errorf("%v", r), false
			var ae *lua.ApiError
			if e, ok := r.(error); ok && errors.As(e, &ae) {
				err = errors.New(luaString(ae.Object))
			}
		}
	}()
	v.L.Push(fn)
	return v.L.PCall(0, 1, v.onError), true
}

// setArgs fills KEYS and ARGV, reusing the tables and, where the value is
// unchanged, the strings of the previous run.
func (v *vm) setArgs(keys, argv [][]byte) {
	fill(v.keys, keys, v.nkeys)
	fill(v.argv, argv, v.nargv)
	v.nkeys, v.nargv = len(keys), len(argv)
}

func fill(t *lua.LTable, args [][]byte, prev int) {
	for i, a := range args {
		if old, ok := t.RawGetInt(i + 1).(lua.LString); ok && string(old) == string(a) {
			continue
		}
		t.RawSetInt(i+1, lua.LString(a))
	}
	for i := len(args) + 1; i <= prev; i++ {
		t.RawSetInt(i, lua.LNil)
	}
}

// checkArgs replaces KEYS and ARGV when the run added entries that fill
// would not overwrite, so the next run cannot see them.
func (v *vm) checkArgs() {
	if v.argsDirty {
		v.newArgs()
	}
}

func (v *vm) newArgs() {
	v.keys, v.argv = v.L.NewTable(), v.L.NewTable()
	v.keys.Metatable, v.argv.Metatable = v.argsMeta, v.argsMeta
	v.base.RawSetString("KEYS", v.keys)
	v.base.RawSetString("ARGV", v.argv)
	v.nkeys, v.nargv, v.argsDirty = 0, 0, false
}

func (v *vm) writeError(w Writer, s *Script, err error) {
	var msg string
	st := v.x.state.flags()
	switch {
	case st&stateKilled != 0:
		msg = "ERR Script killed by user with SCRIPT KILL..."
	case st&stateAborted != 0:
		msg = "ERR Script aborted: " + v.ctx.Err().Error()
	case v.failed && v.errHasMsg:
		msg = v.errMsg
	case v.failed:
		msg = "ERR unknown error"
	default:
		// The handler could not run (the call stack was full, for "stack
		// overflow"): no position, and the message without gopher-lua's
		// traceback.
		msg = "ERR " + err.Error()
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			msg = "ERR " + luaString(ae.Object)
		}
	}
	if v.failed && v.errWhere != "" {
		msg += " script: " + s.sha + ", on " + v.errWhere + "."
	}
	w.Error(msg)
}

// runCtx is the context of a vm's LState. Done closes when the current run
// is killed or aborted; the channel is replaced before the next run, so a vm
// allocates nothing per run unless a run was stopped.
type runCtx struct {
	done chan struct{} // written by reset, on the vm's goroutine, under mu

	mu    sync.Mutex // guards seq, err, funcs and the closing of done
	seq   uint64     // the run done belongs to
	err   error
	funcs []*afterFunc
}

type afterFunc struct{ f func() }

var (
	errKilled  = errors.New("script killed by user with SCRIPT KILL")
	errAborted = errors.New("context canceled")
)

func (c *runCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *runCtx) Done() <-chan struct{}       { return c.done }
func (c *runCtx) Value(any) any               { return nil }

func (c *runCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc lets context.WithCancel children (gopher-lua makes one per
// coroutine) hook the cancellation without a goroutine per child.
func (c *runCtx) AfterFunc(f func()) func() bool {
	a := &afterFunc{f}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	c.funcs = append(c.funcs, a)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.funcs {
			if x == a {
				c.funcs = append(c.funcs[:i], c.funcs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel stops run seq, if it is still the current one.
func (c *runCtx) cancel(seq uint64, err error) {
	c.mu.Lock()
	if c.seq != seq || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	funcs := c.funcs
	c.funcs = nil
	close(c.done)
	c.mu.Unlock()
	for _, a := range funcs {
		a.f()
	}
}

// reset readies the context for run seq.
func (c *runCtx) reset(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.done = make(chan struct{})
		c.err = nil
	}
	c.seq = seq
	// Children of the previous run were never cancelled; forget them.
	c.funcs = nil
}

var _ context.Context = (*runCtx)(nil)

// binaryChunk is the header of a Lua 5.1 binary chunk on a 64-bit
// little-endian machine, as Redis' string.dump starts its result.
const binaryChunk = "\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00"

// stringDump stands for string.dump: gopher-lua has no Lua 5.1 bytecode,
// so a Lua function dumps to the header alone. No binary chunk loads in
// Redis 7 either (see loadstring), so the header is all a script can use.
func stringDump(L *lua.LState) int {
	if fn, ok := L.Get(1).(*lua.LFunction); !ok || fn.IsG {
		L.RaiseError("unable to dump given function")
	}
	L.Push(lua.LString(binaryChunk))
	return 1
}

// chunkID is Lua's luaO_chunkid for a chunk loaded from a string: its
// first line (C's string ends at a NUL), cut at 63 bytes as Redis 7.0.15's
// Lua does, with "..." when more follows.
func chunkID(src string) string {
	src = cString(src)
	n := strings.IndexAny(src, "\n\r")
	if n < 0 {
		n = len(src)
	}
	const max = 63
	if n > max {
		n = max
	}
	if n < len(src) {
		return `[string "` + src[:n] + `..."]`
	}
	return `[string "` + src + `"]`
}
