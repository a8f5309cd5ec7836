package scripting

import (
	"bytes"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Writer is what Run writes the script's reply to; *resp.Writer implements
// it. Proto is the client's protocol (2 or 3).
type Writer interface {
	Proto() int
	Int(n int64)
	Bulk(b []byte)
	BulkString(s string)
	Status(s string)
	Error(msg string)
	Null()
	Array(n int)
	Map(n int)
	Set(n int)
}

// RESP3Writer is implemented by a Writer that can also encode the RESP3 types
// a script may return ({double=}, {big_number=}, {verbatim_string=}, and
// booleans after redis.setresp(3)). Each method picks the encoding for the
// client's protocol: in RESP2 a boolean is :1/:0, a double and a big number
// are bulk strings ("%.17g" for the double), a verbatim string is a bulk
// string of its text. Without it Run writes those RESP2 forms in both
// protocols, which is exact for RESP2 clients only.
type RESP3Writer interface {
	Bool(v bool)
	Double(f float64)
	BigNumber(s string)
	VerbatimString(format, text string)
}

// maxReplyDepth bounds nesting when a script returns a table, so a table
// that contains itself ends in an error element instead of endless output;
// Redis stops the same way when its Lua stack runs out.
const maxReplyDepth = 1000

// writeValue writes a Lua value as a reply, with Redis' rules.
func (v *vm) writeValue(w Writer, lv lua.LValue, depth int) {
	if depth > maxReplyDepth {
		w.Error("ERR reached lua stack limit")
		return
	}
	switch lv := lv.(type) {
	case lua.LString:
		w.BulkString(string(lv))
	case lua.LNumber:
		w.Int(toInt64(float64(lv)))
	case lua.LBool:
		v.writeBool(w, bool(lv))
	case *lua.LTable:
		v.writeTable(w, lv, depth)
	default: // nil, functions, userdata, coroutines
		w.Null()
	}
}

// writeBool follows the script's protocol, not the client's: under RESP2
// (the default) true is 1 and false is a null; after redis.setresp(3) they
// are booleans.
func (v *vm) writeBool(w Writer, b bool) {
	if v.x.proto == 2 {
		if b {
			w.Int(1)
		} else {
			w.Null()
		}
		return
	}
	if w3, ok := w.(RESP3Writer); ok {
		w3.Bool(b)
		return
	}
	if b {
		w.Int(1)
	} else {
		w.Int(0)
	}
}

func (v *vm) writeTable(w Writer, t *lua.LTable, depth int) {
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		w.Error(string(s))
		return
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		w.Status(noNewlines(string(s)))
		return
	}
	w3, _ := w.(RESP3Writer)
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		if w3 != nil {
			w3.Double(float64(d))
		} else {
			w.BulkString(string(appendG(nil, float64(d), 17)))
		}
		return
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		if w3 != nil {
			w3.BigNumber(noNewlines(string(s)))
		} else {
			w.BulkString(noNewlines(string(s)))
		}
		return
	}
	if vt, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		format, fok := vt.RawGetString("format").(lua.LString)
		text, tok := vt.RawGetString("string").(lua.LString)
		if fok && tok {
			if w3 != nil {
				w3.VerbatimString(string(format), string(text))
			} else {
				w.BulkString(string(text))
			}
			return
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		w.Map(count(m))
		for k, val := m.Next(lua.LNil); k != lua.LNil; k, val = m.Next(k) {
			v.writeValue(w, k, depth+1)
			v.writeValue(w, val, depth+1)
		}
		return
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		w.Set(count(s))
		for k, _ := s.Next(lua.LNil); k != lua.LNil; k, _ = s.Next(k) {
			v.writeValue(w, k, depth+1)
		}
		return
	}
	// An array, cut at the first nil.
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	w.Array(n)
	for i := 1; i <= n; i++ {
		v.writeValue(w, t.RawGetInt(i), depth+1)
	}
}

// count returns the number of pairs in t. It walks with Next, whose order
// (insertion order in gopher-lua) is stable, unlike ForEach's.
func count(t *lua.LTable) int {
	n := 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n++
	}
	return n
}

// toInt64 converts like Redis' (long long) cast on x86-64: truncation toward
// zero, and the "integer indefinite" value for NaN and out-of-range numbers.
// Spelled out because Go leaves those cases to the architecture.
func toInt64(f float64) int64 {
	if f != f || f >= 9223372036854775807 || f < -9223372036854775808 {
		return math.MinInt64
	}
	return int64(f)
}

func noNewlines(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, s)
	}
	return s
}

// Boxed small integers: converting an LNumber to an LValue allocates, and
// counters (INCR, EXISTS, EXPIRE) are mostly small.
var smallInts = func() (t [1025]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i - 1)
	}
	return t
}()

func number(n int64) lua.LValue {
	if n >= -1 && n < int64(len(smallInts))-1 {
		return smallInts[n+1]
	}
	return lua.LNumber(n)
}

// replyParser turns the RESP reply of a redis.call into Lua values with
// Redis' rules. The reply comes from our own writer, but a malformed one
// still only makes the call fail.
type replyParser struct {
	L   *lua.LState
	b   []byte
	i   int
	bad bool
}

// line returns the bytes up to the next CRLF and moves past it.
func (p *replyParser) line() []byte {
	j := bytes.Index(p.b[p.i:], crlf)
	if j < 0 {
		p.bad = true
		return nil
	}
	l := p.b[p.i : p.i+j]
	p.i += j + 2
	return l
}

var crlf = []byte("\r\n")

func (p *replyParser) int(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		p.bad = true
	}
	return n
}

// blob reads n bytes and the CRLF after them.
func (p *replyParser) blob(n int64) []byte {
	if n < 0 || int64(len(p.b)-p.i) < n+2 {
		p.bad = true
		return nil
	}
	b := p.b[p.i : p.i+int(n)]
	p.i += int(n) + 2
	return b
}

func (p *replyParser) table(field string, val lua.LValue) *lua.LTable {
	t := p.L.CreateTable(0, 1)
	t.RawSetString(field, val)
	return t
}

// value parses one reply; isErr reports a top-level error reply.
func (p *replyParser) value() (val lua.LValue, isErr bool) {
	if p.i >= len(p.b) {
		p.bad = true
		return lua.LNil, false
	}
	typ := p.b[p.i]
	p.i++
	l := p.line()
	if p.bad {
		return lua.LNil, false
	}
	switch typ {
	case '+':
		return p.table("ok", lua.LString(l)), false
	case '-':
		return p.table("err", lua.LString(errorText(string(l)))), true
	case '!': // RESP3 blob error
		return p.table("err", lua.LString(errorText(string(p.blob(p.int(l)))))), true
	case ':':
		return number(p.int(l)), false
	case '$':
		n := p.int(l)
		if n < 0 {
			return lua.LFalse, false
		}
		return lua.LString(p.blob(n)), false
	case '*', '>':
		n := p.int(l)
		if n < 0 {
			return lua.LFalse, false
		}
		t := p.L.CreateTable(int(min(n, 1024)), 0)
		for j := int64(1); j <= n && !p.bad; j++ {
			e, _ := p.value()
			t.RawSetInt(int(j), e)
		}
		return t, false
	case '%':
		n := p.int(l)
		m := p.L.CreateTable(0, int(min(n, 1024)))
		for j := int64(0); j < n && !p.bad; j++ {
			k, _ := p.value()
			e, _ := p.value()
			if k != lua.LNil {
				m.RawSet(k, e)
			}
		}
		return p.table("map", m), false
	case '~':
		n := p.int(l)
		s := p.L.CreateTable(0, int(min(n, 1024)))
		for j := int64(0); j < n && !p.bad; j++ {
			if k, _ := p.value(); k != lua.LNil {
				s.RawSet(k, lua.LTrue)
			}
		}
		return p.table("set", s), false
	case '_':
		return lua.LNil, false
	case '#':
		return lua.LBool(len(l) == 1 && l[0] == 't'), false
	case ',':
		f, err := strconv.ParseFloat(string(l), 64)
		if err != nil && !isRangeErr(err) {
			p.bad = true
		}
		return p.table("double", lua.LNumber(f)), false
	case '(':
		return p.table("big_number", lua.LString(l)), false
	case '=':
		b := p.blob(p.int(l))
		if len(b) < 4 || b[3] != ':' {
			p.bad = true
			return lua.LNil, false
		}
		vt := p.L.CreateTable(0, 2)
		vt.RawSetString("string", lua.LString(b[4:]))
		vt.RawSetString("format", lua.LString(b[:3]))
		return p.table("verbatim_string", vt), false
	case '|': // attributes are not shown to scripts
		n := p.int(l)
		for j := int64(0); j < 2*n && !p.bad; j++ {
			p.value()
		}
		return p.value()
	}
	p.bad = true
	return lua.LNil, false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// errorText is how Redis keeps an error reply for Lua: the first word is the
// code when there is more than one word, else the code ERR is added; CR and
// LF at either end are dropped.
func errorText(s string) string {
	code, msg, ok := strings.Cut(s, " ")
	if !ok {
		code, msg = "ERR", s
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
