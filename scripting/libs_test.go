package scripting

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// evalValue runs "return <expr>" and returns the reply.
func evalValue(t *testing.T, expr string) string {
	t.Helper()
	return eval(t, newEngine(t), newFakeDB(), 2, "return "+expr, nil, nil)
}

func TestCJSON_Encode(t *testing.T) {
	for expr, want := range map[string]string{
		`cjson.encode({1, 2, 3})`:              `[1,2,3]`,
		`cjson.encode({})`:                     `{}`,
		`cjson.encode({a = 1})`:                `{"a":1}`,
		`cjson.encode({[1] = 'a', [3] = 'c'})`: `["a",null,"c"]`,
		`cjson.encode({[1.5] = 'x'})`:          `{"1.5":"x"}`,
		`cjson.encode('a/b"c\\d\n\t\1\127é')`:  `"a\/b\"c\\d\n\t\u0001\u007fé"`,
		`cjson.encode(0.1)`:                    `0.1`,
		`cjson.encode(1/3)`:                    `0.33333333333333`,
		`cjson.encode(1e20)`:                   `1e+20`,
		`cjson.encode(true)`:                   `true`,
		`cjson.encode(nil)`:                    `null`,
		`cjson.encode(cjson.null)`:             `null`,
		`cjson.encode({a = {b = {false}}})`:    `{"a":{"b":[false]}}`,
		`cjson.encode({[1] = 1, [20] = 2})`:    `Cannot serialise table: excessively sparse array`,
		`cjson.encode({[true] = 1})`:           `Cannot serialise boolean: table key must be a number or string`,
		`cjson.encode(print)`:                  `nonexistent global variable 'print'`,
		`cjson.encode(function() end)`:         `Cannot serialise function: type not supported`,
		`cjson.encode(0/0)`:                    `Cannot serialise number: must not be NaN or Inf`,
		`cjson.encode()`:                       `expected 1 argument`,
		`(function() local t = {} t[1] = t return cjson.encode(t) end)()`: `Cannot serialise, excessive nesting (1001)`,
	} {
		got := evalValue(t, expr)
		if strings.HasPrefix(got, "-") {
			if !strings.Contains(got, want) {
				t.Errorf("%s: got %q, want error %q", expr, got, want)
			}
			continue
		}
		if got != bulk(want) {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

func TestCJSON_Decode(t *testing.T) {
	for expr, want := range map[string]string{
		`cjson.decode('[1,"a",true,null]')[2]`:               bulk("a"),
		`cjson.decode('[1,"a",true,null]')[4] == cjson.null`: ":1\r\n",
		`#cjson.decode('[1,2,3]')`:                           ":3\r\n",
		`cjson.decode('{"a":{"b":[5]}}').a.b[1]`:             ":5\r\n",
		`cjson.decode(' "x\\u00e9\\ud83d\\ude00\\n\\/" ')`:   bulk("xé😀\n/"),
		`cjson.decode('-1.5e2')`:                             ":-150\r\n",
		`tostring(cjson.decode('Infinity'))`:                 bulk("inf"),
		`cjson.decode('0x10')`:                               ":16\r\n",
		`cjson.decode(12)`:                                   ":12\r\n",
		`cjson.encode(cjson.decode('{"k":[1,{"x":"y"}]}'))`:  bulk(`{"k":[1,{"x":"y"}]}`),
		`cjson.decode('')`:                                   "Expected value but found T_END at character 1",
		`cjson.decode('[1,')`:                                "Expected value but found T_END at character 4",
		`cjson.decode('[1 2]')`:                              "Expected comma or array end but found T_NUMBER at character 4",
		`cjson.decode('{1:2}')`:                              "Expected object key string but found T_NUMBER at character 2",
		`cjson.decode('{"a" 2}')`:                            "Expected colon but found T_NUMBER at character 6",
		`cjson.decode('{"a":2 "b"}')`:                        "Expected comma or object end but found T_STRING at character 8",
		`cjson.decode('x')`:                                  "Expected value but found invalid token at character 1",
		`cjson.decode('"abc')`:                               "Expected value but found unexpected end of string at character 5",
		`cjson.decode('"\\q"')`:                              "Expected value but found invalid escape code at character 2",
		`cjson.decode('"\\ud800x"')`:                         "Expected value but found invalid unicode escape code at character 2",
		`cjson.decode('1 2')`:                                "Expected the end but found T_NUMBER at character 3",
		`cjson.decode('+1')`:                                 "Expected value but found invalid token at character 1",
		`cjson.decode('-')`:                                  "Expected value but found invalid number at character 1",
		`cjson.decode(string.rep('[', 1001))`:                "Found too many nested data structures (1001) at character 1001",
		`cjson.decode('a\0')`:                                "JSON parser does not support UTF-16 or UTF-32",
	} {
		got := evalValue(t, expr)
		if strings.HasPrefix(got, "-") {
			if !strings.Contains(got, want) {
				t.Errorf("%s: got %q, want error %q", expr, got, want)
			}
			continue
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

func TestBit(t *testing.T) {
	for expr, want := range map[string]string{
		"bit.band(0xff, 0x0f)":      ":15\r\n",
		"bit.band(7, 6, 3)":         ":2\r\n",
		"bit.bor(1, 2, 4)":          ":7\r\n",
		"bit.bxor(5, 3)":            ":6\r\n",
		"bit.bnot(0)":               ":-1\r\n",
		"bit.lshift(1, 31)":         ":-2147483648\r\n",
		"bit.lshift(1, 33)":         ":2\r\n",
		"bit.rshift(-1, 28)":        ":15\r\n",
		"bit.arshift(-256, 4)":      ":-16\r\n",
		"bit.rol(0x12345678, 8)":    ":878082066\r\n",
		"bit.ror(0x12345678, 8)":    ":2014458966\r\n",
		"bit.bswap(0x12345678)":     ":2018915346\r\n",
		"bit.tobit(0xffffffff)":     ":-1\r\n",
		"bit.tobit(2^32 + 5)":       ":5\r\n",
		"bit.tobit(2.5)":            ":2\r\n",
		"bit.tobit(3.5)":            ":4\r\n",
		"bit.tobit('12')":           ":12\r\n",
		"bit.tohex(255)":            bulk("000000ff"),
		"bit.tohex(255, -4)":        bulk("00FF"),
		"bit.tohex(-1, 2)":          bulk("ff"),
		"bit.tohex(0x12345678, 12)": bulk("12345678"),
	} {
		if got := evalValue(t, expr); got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
	if got := evalValue(t, "bit.band()"); !strings.Contains(got, "number expected") {
		t.Errorf("bit.band(): got %q", got)
	}
}

func TestRedisLib(t *testing.T) {
	for expr, want := range map[string]string{
		"redis.sha1hex('')":                   bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709"),
		"redis.sha1hex('return 1')":           bulk("e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
		"redis.error_reply('My')":             "-ERR My\r\n",
		"redis.error_reply('-WRONGTYPE bad')": "-WRONGTYPE bad\r\n",
		"redis.error_reply('x y\\r\\n')":      "-x y\r\n",
		"redis.error_reply(1).err":            bulk("ERR wrong number or type of arguments"),
		"redis.status_reply('a', 'b').err":    bulk("ERR wrong number or type of arguments"),
		"redis.replicate_commands()":          ":1\r\n",
		"redis.breakpoint()":                  "$-1\r\n",
		"redis.debug('x')":                    "$-1\r\n",
		"redis.set_repl(redis.REPL_ALL)":      "$-1\r\n",
		"{redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}": "*5\r\n:0\r\n:1\r\n:2\r\n:2\r\n:3\r\n",
		"{redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}":               "*4\r\n:0\r\n:1\r\n:2\r\n:3\r\n",
		"redis.REDIS_VERSION":     bulk("7.0.15"),
		"redis.REDIS_VERSION_NUM": ":458767\r\n",
	} {
		if got := evalValue(t, expr); got != want {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

func TestRedisLog(t *testing.T) {
	var buf bytes.Buffer
	e := New(Options{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	src := "redis.log(redis.LOG_WARNING, 'w', 1.5, {}, 'x') redis.log(redis.LOG_NOTICE, 'n') redis.log(redis.LOG_DEBUG, 'hidden') return 1"
	s, _ := e.Load([]byte(src))
	e.Run(context.Background(), s, nil, nil, newFakeDB(), writer(2))
	out := buf.String()
	for _, want := range []string{`level=WARN msg="w 1.5 x" script=` + s.SHA(), `level=INFO msg=n`} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line logged: %q", out)
	}
}

func TestLuaError_Levels(t *testing.T) {
	for src, want := range map[string]string{
		"local ok, e = pcall(error, 'x') return e":                                                  "x",
		"local ok, e = pcall(function() error('x') end) return e":                                   "user_script:1: x",
		"local ok, e = pcall(function() error('x', 0) end) return e":                                "x",
		"local function f() error('x', 2) end\nlocal ok, e = pcall(function()\n f()\nend) return e": "user_script:3: x",
	} {
		if got := eval(t, newEngine(t), newFakeDB(), 2, src, nil, nil); got != bulk(want) {
			t.Errorf("%s: got %q, want %q", src, got, bulk(want))
		}
	}
}
