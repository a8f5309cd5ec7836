package scripting

import (
	"math"
	"strings"
	"testing"
)

// TestResult_LuaToRESP checks how a script's return value is written, with
// resp.Writer in both protocols.
func TestResult_LuaToRESP(t *testing.T) {
	cases := []struct {
		src          string
		resp2, resp3 string
	}{
		{"return 3.99", ":3\r\n", ":3\r\n"},
		{"return -3.9", ":-3\r\n", ":-3\r\n"},
		{"return -0.5", ":0\r\n", ":0\r\n"},
		{"return 1e300", ":-9223372036854775808\r\n", ":-9223372036854775808\r\n"},
		{"return 0/0", ":-9223372036854775808\r\n", ":-9223372036854775808\r\n"},
		{"return 'a\\0b'", "$3\r\na\x00b\r\n", "$3\r\na\x00b\r\n"},
		{"return true", ":1\r\n", ":1\r\n"},
		{"return false", "$-1\r\n", "_\r\n"},
		{"return nil", "$-1\r\n", "_\r\n"},
		{"return", "$-1\r\n", "_\r\n"},
		{"return function() end", "$-1\r\n", "_\r\n"},
		{"return {}", "*0\r\n", "*0\r\n"},
		{"return {1, {2, 'x'}, {err='E1'}, {ok='OK'}, false}", "*5\r\n:1\r\n*2\r\n:2\r\n$1\r\nx\r\n-E1\r\n+OK\r\n$-1\r\n", "*5\r\n:1\r\n*2\r\n:2\r\n$1\r\nx\r\n-E1\r\n+OK\r\n_\r\n"},
		{"return {err=5}", "*0\r\n", "*0\r\n"},
		{"return {ok='a\\r\\nb'}", "+a  b\r\n", "+a  b\r\n"},
		{"return {err='a\\nb'}", "-a b\r\n", "-a b\r\n"},
		{"return {1, 2, x=3}", "*2\r\n:1\r\n:2\r\n", "*2\r\n:1\r\n:2\r\n"},
		{"return {map={b=1, a='x'}}", "*4\r\n$1\r\nb\r\n:1\r\n$1\r\na\r\n$1\r\nx\r\n", "%2\r\n$1\r\nb\r\n:1\r\n$1\r\na\r\n$1\r\nx\r\n"},
		{"return {set={a=true}}", "*1\r\n$1\r\na\r\n", "~1\r\n$1\r\na\r\n"},
	}
	for _, c := range cases {
		e := newEngine(t)
		for proto, want := range map[int]string{2: c.resp2, 3: c.resp3} {
			if got := eval(t, e, newFakeDB(), proto, c.src, nil, nil); got != want {
				t.Errorf("RESP%d %s: got %q, want %q", proto, c.src, got, want)
			}
		}
	}
}

// TestResult_RESP3Types checks the RESP3-only types, which resp.Writer
// encodes natively for RESP3 clients and as RESP2 forms for the others.
func TestResult_RESP3Types(t *testing.T) {
	cases := []struct {
		src          string
		resp2, resp3 string
	}{
		{"return {double=3.14}", "$18\r\n3.1400000000000001\r\n", ",3.1400000000000001\r\n"},
		{"return {double=1/0}", "$3\r\ninf\r\n", ",inf\r\n"},
		{"return {big_number='1234567890123456789012'}", "$22\r\n1234567890123456789012\r\n", "(1234567890123456789012\r\n"},
		{"return {verbatim_string={format='txt', string='hi'}}", "$2\r\nhi\r\n", "=6\r\ntxt:hi\r\n"},
		{"return true", ":1\r\n", ":1\r\n"},
		{"return false", "$-1\r\n", "_\r\n"},
		{"redis.setresp(3) return true", ":1\r\n", "#t\r\n"},
		{"redis.setresp(3) return false", ":0\r\n", "#f\r\n"},
		{"redis.setresp(3) return {true, false}", "*2\r\n:1\r\n:0\r\n", "*2\r\n#t\r\n#f\r\n"},
	}
	for _, c := range cases {
		e := newEngine(t)
		for proto, want := range map[int]string{2: c.resp2, 3: c.resp3} {
			if got := eval(t, e, newFakeDB(), proto, c.src, nil, nil); got != want {
				t.Errorf("RESP%d %s: got %q, want %q", proto, c.src, got, want)
			}
		}
	}
}

func TestResult_SelfReferenceEnds(t *testing.T) {
	got := eval(t, newEngine(t), newFakeDB(), 2, "local t = {} t[1] = t return t", nil, nil)
	if !strings.HasSuffix(got, "-ERR reached lua stack limit\r\n") || strings.Count(got, "*1\r\n") != maxReplyDepth+1 {
		t.Errorf("got %d bytes ending %q", len(got), got[max(0, len(got)-40):])
	}
}

// TestCall_RESPToLua checks how redis.call replies look to the script.
func TestCall_RESPToLua(t *testing.T) {
	describe := `
local function d(v)
  if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys+1] = tostring(k) end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do
    local e = v[k] if e == nil then e = v[tonumber(k)] end
    out[#out+1] = k .. '=' .. d(e)
  end
  return '{' .. table.concat(out, ',') .. '}'
end
`
	cases := []struct {
		name  string
		setup string // Lua run first
		call  string
		want  string
	}{
		{"integer", "", "redis.call('incrby', 'n', 41)", "number:41"},
		{"bulk", "redis.call('set', 'k', 'v')", "redis.call('get', 'k')", "string:v"},
		{"null bulk", "", "redis.call('get', 'nokey')", "boolean:false"},
		{"array", "", "redis.call('time')", "{1=string:1700000000,2=string:123456}"},
		{"status", "", "redis.call('set', 'k', 'v')", "{ok=string:OK}"},
		{"status type", "", "redis.call('type', 'k')", "{ok=string:string}"},
		{"error via pcall", "redis.call('set', 's', 'x')", "redis.pcall('incr', 's')", "{err=string:ERR value is not an integer or out of range}"},
		{"unknown via pcall", "", "redis.pcall('nosuch')", "{err=string:ERR Unknown Redis command called from script}"},
		{"no args via pcall", "", "redis.pcall()", "{err=string:ERR Please specify at least one argument for this redis lib call}"},
		{"bad arg via pcall", "", "redis.pcall('get', {})", "{err=string:ERR Lua redis lib command arguments must be strings or integers}"},
		{"lua pcall of call", "redis.call('set', 's', 'x')", "select(2, pcall(redis.call, 'incr', 's'))", "string:ERR value is not an integer or out of range"},
		{"resp3 null", "redis.setresp(3)", "redis.call('get', 'nokey')", "nil:nil"},
		{"resp3 map", "redis.setresp(3)", "redis.call('hgetall', 'h')", "{map={f1=string:v1,f2=number:2}}"},
		{"resp2 map", "", "redis.call('hgetall', 'h')", "{1=string:f1,2=string:v1,3=string:f2,4=number:2}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := describe + c.setup + "\nreturn d(" + c.call + ")"
			got := eval(t, newEngine(t), newFakeDB(), 2, src, nil, nil)
			if want := bulk(c.want); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}

	// RESP3 types the fake keyspace does not produce.
	raw := []struct{ reply, want string }{
		{"~2\r\n$1\r\na\r\n:1\r\n", "{set={1=boolean:true,a=boolean:true}}"},
		{",3.5\r\n", "{double=number:3.5}"},
		{",inf\r\n", "{double=number:inf}"},
		{"#t\r\n", "boolean:true"},
		{"#f\r\n", "boolean:false"},
		{"(12345678901234567890\r\n", "{big_number=string:12345678901234567890}"},
		{"=8\r\nmkd:abcd\r\n", "{verbatim_string={format=string:mkd,string=string:abcd}}"},
		{"|1\r\n+key\r\n+val\r\n:7\r\n", "number:7"},
		{"*-1\r\n", "boolean:false"},
		{"*2\r\n_\r\n:1\r\n", "{2=number:1}"},
		{"-NOCODE\r\n", "{err=string:ERR NOCODE}"},
		{"-WRONGTYPE Operation against a key\r\n", "{err=string:WRONGTYPE Operation against a key}"},
		{"!11\r\nERR blob er\r\n", "{err=string:ERR blob er}"},
		{":1\r\n:2", "{err=string:ERR Protocol error in the reply of the command called from script}"},
		{"$5\r\nab\r\n", "{err=string:ERR Protocol error in the reply of the command called from script}"},
	}
	for _, r := range raw {
		got := eval(t, newEngine(t), rawCaller(r.reply), 2, describe+"return d(redis.pcall('x'))", nil, nil)
		if want := bulk(r.want); got != want {
			t.Errorf("reply %q: got %q, want %q", r.reply, got, want)
		}
	}
}

func bulk(s string) string { return "$" + itoa(int64(len(s))) + "\r\n" + s + "\r\n" }

// TestCall_ErrorsRaised checks redis.call's error texts and the position
// suffix, on the line where the call is.
func TestCall_ErrorsRaised(t *testing.T) {
	cases := []struct{ src, want string }{
		{"return redis.call()", "-ERR Please specify at least one argument for this redis lib call script: %s, on @user_script:1.\r\n"},
		{"local x = 1\nreturn redis.call('get', true)", "-ERR Lua redis lib command arguments must be strings or integers script: %s, on @user_script:2.\r\n"},
		{"\n\nredis.call('get')", "-ERR Wrong number of args calling Redis command from script script: %s, on @user_script:3.\r\n"},
		{"local function f()\n  return redis.call('nosuch')\nend\nreturn f()", "-ERR Unknown Redis command called from script script: %s, on @user_script:2.\r\n"},
		{"error('boom')", "-ERR user_script:1: boom script: %s, on @user_script:1.\r\n"},
		{"error({err='MYCODE custom'})", "-MYCODE custom script: %s, on @user_script:1.\r\n"},
		{"error(redis.error_reply('X y'))", "-X y script: %s, on @user_script:1.\r\n"},
		{"error(nil)", "-ERR nil script: %s, on @user_script:1.\r\n"},
		{"error(42)", "-ERR 42 script: %s, on @user_script:1.\r\n"},
		{"local t = nil\nreturn t.x", "-ERR user_script:2: attempt to index a non-table object(nil) with key 'x' script: %s, on @user_script:2.\r\n"},
		{"return redis.sha1hex()", "-ERR wrong number of arguments script: %s, on @user_script:1.\r\n"},
		{"redis.setresp(4)", "-ERR RESP version must be 2 or 3. script: %s, on @user_script:1.\r\n"},
		{"redis.setresp()", "-ERR redis.setresp() requires one argument. script: %s, on @user_script:1.\r\n"},
		{"redis.set_repl(8)", "-ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE. script: %s, on @user_script:1.\r\n"},
		{"redis.log(redis.LOG_WARNING)", "-ERR redis.log() requires two arguments or more. script: %s, on @user_script:1.\r\n"},
		{"redis.log('x', 'y')", "-ERR First argument must be a number (log level). script: %s, on @user_script:1.\r\n"},
		{"redis.log(9, 'y')", "-ERR Invalid debug level. script: %s, on @user_script:1.\r\n"},
	}
	for _, c := range cases {
		got := eval(t, newEngine(t), newFakeDB(), 2, c.src, nil, nil)
		want := strings.Replace(c.want, "%s", SHA1Hex([]byte(c.src)), 1)
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", c.src, got, want)
		}
	}
}

// TestCall_Arguments checks what the Caller receives.
func TestCall_Arguments(t *testing.T) {
	db := newFakeDB()
	eval(t, newEngine(t), db, 2, "redis.call('SET', KEYS[1], 0.1, 'EX', 60) redis.call('set', 'b', 1e20) redis.call('set', 'c', -0) redis.call('set', 'd', 1/0) redis.call('set', 'e', 3)", []string{"k"}, nil)
	want := [][]string{{"SET", "k", "0.10000000000000001", "EX", "60"}, {"set", "b", "1e+20"}, {"set", "c", "-0"}, {"set", "d", "inf"}, {"set", "e", "3"}}
	if len(db.calls) != len(want) {
		t.Fatalf("got calls %q", db.calls)
	}
	for i := range want {
		if strings.Join(db.calls[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("call %d: got %q, want %q", i, db.calls[i], want[i])
		}
	}
}

func TestCall_Proto(t *testing.T) {
	var protos []int
	c := CallerFunc(func(x *Exec, _ [][]byte) []byte {
		protos = append(protos, x.Proto())
		return []byte("+OK\r\n")
	})
	eval(t, newEngine(t), c, 3, "redis.call('ping') redis.setresp(3) redis.call('ping') redis.setresp(2) redis.call('ping')", nil, nil)
	if len(protos) != 3 || protos[0] != 2 || protos[1] != 3 || protos[2] != 2 {
		t.Errorf("got protos %v, want [2 3 2]", protos)
	}
	// A new run starts at RESP2 again.
	protos = nil
	eval(t, newEngine(t), c, 3, "redis.call('ping')", nil, nil)
	if len(protos) != 1 || protos[0] != 2 {
		t.Errorf("got %v, want [2]", protos)
	}
}

func TestNumbers_ToStringToNumber(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"tostring(0.1 + 0.2)", "0.3"},
		{"tostring(1/3)", "0.33333333333333"},
		{"tostring(1e15)", "1e+15"},
		{"tostring(123456789012)", "123456789012"},
		{"tostring(-0.0)", "-0"},
		{"tostring(1/0)", "inf"},
		{"tostring(-1/0)", "-inf"},
		{"tostring(0.10000002384186)", "0.10000002384186"},
		{"tostring(tonumber('0x1A'))", "26"},
		{"tostring(tonumber('  12  '))", "12"},
		{"tostring(tonumber('1e3'))", "1000"},
		{"tostring(tonumber('.5'))", "0.5"},
		{"tostring(tonumber('5.'))", "5"},
		{"tostring(tonumber('12abc'))", "nil"},
		{"tostring(tonumber(''))", "nil"},
		{"tostring(tonumber('0x'))", "nil"},
		{"tostring(tonumber('inf'))", "inf"},
		{"tostring(tonumber('-Infinity'))", "-inf"},
		{"tostring(tonumber('10', 2))", "2"},
		{"tostring(tonumber('ff', 16))", "255"},
		{"tostring(tonumber('0xff', 16))", "255"},
		{"tostring(tonumber('zz', 36))", "1295"},
		{"tostring(tonumber('8', 8))", "nil"},
		{"tostring(tonumber(12))", "12"},
		{"tostring(tonumber({}))", "nil"},
		{"tostring(tonumber('1e500'))", "inf"},
	}
	for _, c := range cases {
		got := eval(t, newEngine(t), newFakeDB(), 2, "return "+c.expr, nil, nil)
		if want := bulk(c.want); got != want {
			t.Errorf("%s: got %q, want %q", c.expr, got, want)
		}
	}
	if got := eval(t, newEngine(t), newFakeDB(), 2, "return tonumber('1', 99)", nil, nil); !strings.Contains(got, "base out of range") {
		t.Errorf("tonumber base 99: got %q", got)
	}
}

func TestToInt64(t *testing.T) {
	for f, want := range map[float64]int64{
		3.99: 3, -3.99: -3, 9.2e18: 9200000000000000000, 9.3e18: math.MinInt64,
		-9.3e18: math.MinInt64, math.Inf(1): math.MinInt64, math.NaN(): math.MinInt64,
	} {
		if got := toInt64(f); got != want {
			t.Errorf("toInt64(%v) = %d, want %d", f, got, want)
		}
	}
}

func TestAppendG_MatchesPrintf(t *testing.T) {
	// Expected values printed by glibc's printf("%.17g") and ("%.14g").
	for _, c := range []struct {
		f    float64
		prec int
		want string
	}{
		{0.1, 17, "0.10000000000000001"},
		{1e16, 17, "10000000000000000"},
		{1e17, 17, "1e+17"},
		{123456789.123, 17, "123456789.123"},
		{0.1 + 0.2, 14, "0.3"},
		{1e15, 14, "1e+15"},
		{1e-5, 14, "1e-05"},
		{100, 14, "100"},
	} {
		if got := string(appendG(nil, c.f, c.prec)); got != c.want {
			t.Errorf("%%.%dg of %v: got %s, want %s", c.prec, c.f, got, c.want)
		}
	}
}
