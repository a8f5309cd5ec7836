package scripting

import (
	"context"
	"strings"
	"testing"
)

func TestSandbox_AbsentGlobals(t *testing.T) {
	for _, name := range []string{"os", "io", "require", "module", "package", "loadfile", "dofile", "print", "debug", "_GOPHER_LUA_VERSION", "channel", "struct", "cmsgpack"} {
		src := "return " + name
		got := eval(t, newEngine(t), newFakeDB(), 2, src, nil, nil)
		want := "-ERR user_script:1: Script attempted to access nonexistent global variable '" + name + "' script: " + SHA1Hex([]byte(src)) + ", on @user_script:1.\r\n"
		if got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}

func TestSandbox_PresentGlobals(t *testing.T) {
	names := []string{"assert", "collectgarbage", "error", "gcinfo", "getfenv", "getmetatable", "ipairs", "load", "loadstring",
		"newproxy", "next", "pairs", "pcall", "rawequal", "rawget", "rawset", "select", "setfenv", "setmetatable", "tonumber",
		"tostring", "type", "unpack", "xpcall", "_G", "_VERSION", "coroutine", "string", "table", "math", "redis", "cjson", "bit", "KEYS", "ARGV"}
	src := "local n = 0 for _, k in ipairs(ARGV) do if rawget(_G, k) ~= nil then n = n + 1 end end return n"
	if got, want := eval(t, newEngine(t), newFakeDB(), 2, src, nil, names), ":"+itoa(int64(len(names)))+"\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := eval(t, newEngine(t), newFakeDB(), 2, "return _VERSION", nil, nil); got != bulk("Lua 5.1") {
		t.Errorf("_VERSION: got %q", got)
	}
}

// TestSandbox_ReadOnly checks every way to change the shared tables.
func TestSandbox_ReadOnly(t *testing.T) {
	const ro = "Attempt to modify a readonly table"
	for _, src := range []string{
		"x = 1",
		"redis = nil",
		"KEYS = {}",
		"function f() end",
		"_G.x = 1",
		"_G.redis = nil",
		"rawset(_G, 'x', 1)",
		"string.x = 1",
		"math.random = nil",
		"redis.call = nil",
		"cjson.encode = nil",
		"bit.band = nil",
		"table.insert = nil",
		"coroutine.x = 1",
		"table.insert(_G, 1)",
		"table.insert(string, 1)",
		"table.remove(math)",
		"table.sort(redis)",
		"rawset(string, 'x', 1)",
		"setmetatable(_G, nil)",
		"setmetatable(string, {})",
		"getfenv(1).x = 1",
		"getfenv(0).x = 1",
		"getfenv(tostring).x = 1",
		"loadstring('x = 1')()",
		"local f = load(function() return nil end) getfenv(f).x = 1",
		"getmetatable(_G).__index = {}",
		"rawset(getmetatable(_G), '__newindex', nil)",
		"getmetatable('').__index = {}",
		"getmetatable('').__index.rep = nil",
	} {
		got := eval(t, newEngine(t), newFakeDB(), 2, src, nil, nil)
		if !strings.Contains(got, ro) {
			t.Errorf("%s: got %q, want the readonly error", src, got)
		}
	}
	// The libraries' metatables are hidden; _G's and the strings' are
	// read-only tables, as in Redis.
	for expr, want := range map[string]string{
		"getmetatable(string)":               "$-1\r\n",
		"type(getmetatable(_G))":             "$5\r\ntable\r\n",
		"type(getmetatable(''))":             "$5\r\ntable\r\n",
		"getmetatable('').__index == string": ":1\r\n",
	} {
		if got := eval(t, newEngine(t), newFakeDB(), 2, "return "+expr, nil, nil); got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

// TestSandbox_Reads checks that the read-only views read like the tables.
func TestSandbox_Reads(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"return _G._G == _G", ":1\r\n"},
		{"return rawget(_G, 'nosuch') == nil", ":1\r\n"},
		{"return rawget(string, 'rep') == string.rep", ":1\r\n"},
		{"local n = 0 for k, v in pairs(string) do n = n + 1 end return n > 10", ":1\r\n"},
		{"local k, v = next(math) return k ~= nil", ":1\r\n"},
		{"return #_G", ":0\r\n"},
		{"return ('x'):rep(3)", bulk("xxx")},
		{"return string.format('%s-%d', 'a', 7)", bulk("a-7")},
		{"return type(string.gmatch)", bulk("function")},
		{"return math.pi > 3", ":1\r\n"},
		{"return redis.nosuch == nil", ":1\r\n"},
		{"return select('#', unpack({1, 2, 3}))", ":3\r\n"},
		{"return loadstring('return 1 + 1')()", ":2\r\n"},
		{"local ok, e = pcall(error, 'x') return {tostring(ok), e}", "*2\r\n$5\r\nfalse\r\n$1\r\nx\r\n"},
		{"return xpcall(function() error('x', 0) end, function(m) return 'h:' .. m end)", "$-1\r\n"},
		{"local co = coroutine.create(function(a) coroutine.yield(a + 1) return 10 end) local _, v = coroutine.resume(co, 1) local _, w = coroutine.resume(co) return {v, w}", "*2\r\n:2\r\n:10\r\n"},
		{"local t = setmetatable({}, {__index = function(t, k) return k .. '!' end}) return t.hi", bulk("hi!")},
		{"return collectgarbage('count')", ":0\r\n"},
		{"local function f() end return getfenv(f) == _G and getfenv(1) == _G and getfenv(0) == _G", ":1\r\n"},
		{"if false then x = 1 end return getfenv(1) == _G and rawget(_G, 'x') == nil", ":1\r\n"},
		{"return getmetatable(KEYS)", "$-1\r\n"},
		{"local x = 1 local function f() return nosuch end return f()", ""},
	} {
		got := eval(t, newEngine(t), newFakeDB(), 2, c.src, nil, nil)
		if c.want == "" {
			if !strings.Contains(got, "nonexistent global variable 'nosuch'") {
				t.Errorf("%s: got %q", c.src, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.src, got, c.want)
		}
	}
}

// TestSandbox_Isolation runs scripts that try to leave state behind on one
// interpreter and checks the next run sees none.
func TestSandbox_Isolation(t *testing.T) {
	e := newEngine(t)
	v := newVM(e)
	db := newFakeDB()
	eval := func(t *testing.T, e *Engine, c Caller, proto int, src string, keys, argv []string) string {
		t.Helper()
		s, err := e.Load([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		w := writer(proto)
		e.runOn(context.Background(), v, s, bs(keys), bs(argv), c, w)
		return string(w.Bytes())
	}
	for _, dirty := range []string{
		"KEYS[3] = 'x' KEYS.extra = 1 ARGV[2] = 'y'",
		"table.insert(KEYS, 'x') rawset(ARGV, 'extra', 1)",
		"KEYS[1] = 'changed'",
		"setfenv(1, {}) ",
		"setfenv(0, {})",
		"math.randomseed(7)",
		"redis.setresp(3)",
		"KEYS[100000] = 1",
	} {
		eval(t, e, db, 2, dirty, []string{"k1"}, []string{"a1"})
		check := "return {#KEYS, KEYS[1], tostring(KEYS.extra), #ARGV, tostring(ARGV.extra), tostring(rawget(_G, 'x')), loadstring('return 1')(), math.random(1000), type(redis.call('get', 'nokey'))}"
		want := "*9\r\n:1\r\n$2\r\nk2\r\n$3\r\nnil\r\n:0\r\n$3\r\nnil\r\n$3\r\nnil\r\n:1\r\n:171\r\n$7\r\nboolean\r\n"
		if got := eval(t, e, db, 2, check, []string{"k2"}, nil); got != want {
			t.Errorf("after %q:\n got %q\nwant %q", dirty, got, want)
		}
	}
}

// TestDeterminism_Random checks that every run sees the same sequence, the
// one Redis (lrand48 seeded with 0) gives.
func TestDeterminism_Random(t *testing.T) {
	e := newEngine(t)
	src := "return {math.random(100), math.random(100), math.random(100), math.random(10, 20), tostring(math.random())}"
	// glibc: srand48(0); lrand48() -> 366850414, 1610402240, 206956554,
	// 1869309841, 1239749840.
	want := "*5\r\n:18\r\n:75\r\n:10\r\n:19\r\n" + bulk("0.57730350670279")
	for i := 0; i < 3; i++ {
		if got := eval(t, e, newFakeDB(), 2, src, nil, nil); got != want {
			t.Fatalf("run %d: got %q, want %q", i, got, want)
		}
	}
	// math.randomseed(42) gives glibc's srand48(42) sequence (1598855263 first).
	if got, want := eval(t, e, newFakeDB(), 2, "math.randomseed(42) return math.random(1000000)", nil, nil), ":744526\r\n"; got != want {
		t.Errorf("seeded: got %q, want %q", got, want)
	}
	if got := eval(t, e, newFakeDB(), 2, "return math.random(0)", nil, nil); !strings.Contains(got, "interval is empty") {
		t.Errorf("random(0): got %q", got)
	}
}

// TestLimits checks that scripts that exhaust gopher-lua's stacks fail
// cleanly, and that the interpreter is not reused after a failure that may
// have left it inconsistent.
func TestLimits(t *testing.T) {
	e := newEngine(t)
	for src, want := range map[string]string{
		"local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(900)":  ":900\r\n",
		"local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(5000)": "-ERR user_script:1: stack overflow\r\n",
		"return select('#', unpack({}, 1, 1e7))":                                               "-ERR Error running script: user_script:1: registry overflow\r\n",
		"local t = {} for i = 1, 100000 do t[i] = i end return select('#', unpack(t))":         ":100000\r\n",
	} {
		if got := eval(t, e, newFakeDB(), 2, src, nil, nil); got != want {
			t.Errorf("%s: got %q, want %q", src, got, want)
		}
		if got := eval(t, e, newFakeDB(), 2, "return 1", nil, nil); got != ":1\r\n" {
			t.Errorf("after %s: got %q", src, got)
		}
	}
}
