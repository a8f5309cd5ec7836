package scripting

import (
	"math"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// The cjson module follows lua-cjson 2.1.0 as Redis 7.0 bundles it, with its
// default settings: numbers with 14 significant digits, NaN and Inf refused
// when encoding but accepted when decoding, nesting limited to 1000, sparse
// arrays (more than 10 slots and over half holes) refused. The settings
// functions (encode_max_depth and friends) are not provided: in Redis they
// change state shared by every later script.
const (
	cjsonMaxDepth    = 1000
	cjsonSparseRatio = 2
	cjsonSparseSafe  = 10
)

func (v *vm) cjsonLib() *lua.LTable {
	L := v.L
	t := L.NewTable()
	// Lua-cjson's null is a NULL light userdata; one userdata per
	// interpreter compares equal to itself the same way.
	v.null = L.NewUserData()
	t.RawSetString("null", v.null)
	t.RawSetString("encode", L.NewFunction(v.cjsonEncode))
	t.RawSetString("decode", L.NewFunction(v.cjsonDecode))
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	return t
}

func (v *vm) cjsonEncode(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.ArgError(1, "expected 1 argument")
	}
	b := v.jsonAppend(L, nil, L.Get(1), 0)
	L.Push(lua.LString(b))
	return 1
}

func (v *vm) jsonAppend(L *lua.LState, b []byte, lv lua.LValue, depth int) []byte {
	switch val := lv.(type) {
	case lua.LString:
		return jsonString(b, string(val))
	case lua.LNumber:
		return jsonNumber(L, b, val)
	case lua.LBool:
		if val {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case *lua.LNilType:
		return append(b, "null"...)
	case *lua.LUserData:
		if val == v.null {
			return append(b, "null"...)
		}
	case *lua.LTable:
		depth++
		if depth > cjsonMaxDepth {
			L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := jsonArrayLen(L, val); n > 0 {
			b = append(b, '[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b = append(b, ',')
				}
				b = v.jsonAppend(L, b, val.RawGetInt(i), depth)
			}
			return append(b, ']')
		}
		b = append(b, '{')
		first := true
		for k, e := val.Next(lua.LNil); k != lua.LNil; k, e = val.Next(k) {
			if !first {
				b = append(b, ',')
			}
			first = false
			switch k := k.(type) {
			case lua.LNumber:
				b = append(jsonNumber(L, append(b, '"'), k), '"', ':')
			case lua.LString:
				b = append(jsonString(b, string(k)), ':')
			default:
				L.RaiseError("Cannot serialise %s: table key must be a number or string", k.Type())
			}
			b = v.jsonAppend(L, b, e, depth)
		}
		return append(b, '}')
	}
	L.RaiseError("Cannot serialise %s: type not supported", lv.Type())
	return nil
}

// jsonArrayLen returns the array length of t, or -1 when t must be encoded
// as an object: any key that is not a positive integer, or too sparse to
// be an array (an error, with lua-cjson's defaults).
func jsonArrayLen(L *lua.LState, t *lua.LTable) int {
	maxKey, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		f := float64(n)
		if !ok || f < 1 || math.Floor(f) != f {
			return -1
		}
		maxKey = max(maxKey, int(min(f, math.MaxInt32)))
		items++
	}
	if maxKey > items*cjsonSparseRatio && maxKey > cjsonSparseSafe {
		L.RaiseError("Cannot serialise table: excessively sparse array")
	}
	return maxKey
}

func jsonNumber(L *lua.LState, b []byte, n lua.LNumber) []byte {
	f := float64(n)
	if math.IsInf(f, 0) || f != f {
		L.RaiseError("Cannot serialise number: must not be NaN or Inf")
	}
	return appendG(b, f, 14)
}

// jsonString quotes s with lua-cjson's escapes: control characters, '"',
// '\\', '/' and DEL. Other bytes, UTF-8 or not, pass through.
func jsonString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '/':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, `\b`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\f':
			b = append(b, `\f`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// JSON tokens, named as lua-cjson names them in its errors.
type jsonTokenType int

const (
	tObjBegin jsonTokenType = iota
	tObjEnd
	tArrBegin
	tArrEnd
	tString
	tNumber
	tBoolean
	tNull
	tColon
	tComma
	tEnd
	tError
)

var jsonTokenNames = [...]string{"T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING",
	"T_NUMBER", "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END", "T_ERROR"}

type jsonToken struct {
	typ   jsonTokenType
	index int    // offset of the token, for errors
	str   string // string value, or the error for tError
	num   float64
	b     bool
}

type jsonDecoder struct {
	L     *lua.LState
	v     *vm
	s     string
	p     int
	depth int
	buf   []byte
}

func (v *vm) cjsonDecode(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.ArgError(1, "expected 1 argument")
	}
	var s string
	switch a := L.Get(1).(type) {
	case lua.LString, lua.LNumber:
		s = luaString(a)
	default:
		L.TypeError(1, lua.LTString)
	}
	if len(s) >= 2 && (s[0] == 0 || s[1] == 0) {
		L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
	}
	d := &jsonDecoder{L: L, v: v, s: s}
	val := d.value(d.next())
	if t := d.next(); t.typ != tEnd {
		d.fail("the end", t)
	}
	L.Push(val)
	return 1
}

func (d *jsonDecoder) fail(expected string, t jsonToken) {
	found := t.str
	if t.typ != tError {
		found = jsonTokenNames[t.typ]
	}
	d.L.RaiseError("Expected %s but found %s at character %d", expected, found, t.index+1)
}

// at returns the byte at i, 0 past the end (lua-cjson reads a C string).
func (d *jsonDecoder) at(i int) byte {
	if i < len(d.s) {
		return d.s[i]
	}
	return 0
}

func (d *jsonDecoder) errToken(msg string) jsonToken {
	return jsonToken{typ: tError, index: d.p, str: msg}
}

func (d *jsonDecoder) next() jsonToken {
	for {
		switch d.at(d.p) {
		case ' ', '\t', '\r', '\n':
			d.p++
			continue
		}
		break
	}
	c := d.at(d.p)
	t := jsonToken{index: d.p}
	if typ, ok := jsonSingle(c); ok {
		d.p++
		t.typ = typ
		return t
	}
	rest := d.s[min(d.p, len(d.s)):]
	switch {
	case c == 0:
		t.typ = tEnd
	case c == '"':
		return d.string()
	case c == '-' || '0' <= c && c <= '9' || jsonNonFinite(rest):
		f, n := strtod(rest)
		if n == 0 {
			return d.errToken("invalid number")
		}
		d.p += n
		t.typ, t.num = tNumber, f
	case hasPrefix(rest, "true"):
		d.p += 4
		t.typ, t.b = tBoolean, true
	case hasPrefix(rest, "false"):
		d.p += 5
		t.typ = tBoolean
	case hasPrefix(rest, "null"):
		d.p += 4
		t.typ = tNull
	default:
		return d.errToken("invalid token")
	}
	return t
}

func jsonSingle(c byte) (jsonTokenType, bool) {
	switch c {
	case '{':
		return tObjBegin, true
	case '}':
		return tObjEnd, true
	case '[':
		return tArrBegin, true
	case ']':
		return tArrEnd, true
	case ':':
		return tColon, true
	case ',':
		return tComma, true
	}
	return 0, false
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// jsonNonFinite reports the inf/nan spellings lua-cjson accepts by default.
func jsonNonFinite(s string) bool {
	if len(s) < 3 {
		return false
	}
	w := string([]byte{s[0] | 0x20, s[1] | 0x20, s[2] | 0x20})
	return w == "inf" || w == "nan"
}

func (d *jsonDecoder) string() jsonToken {
	start := d.p
	d.p++ // opening quote
	d.buf = d.buf[:0]
	for {
		c := d.at(d.p)
		switch c {
		case '"':
			d.p++
			return jsonToken{typ: tString, index: start, str: string(d.buf)}
		case 0:
			return d.errToken("unexpected end of string")
		case '\\':
			esc := d.at(d.p + 1)
			switch esc {
			case '"', '\\', '/':
			case 'b':
				esc = '\b'
			case 'f':
				esc = '\f'
			case 'n':
				esc = '\n'
			case 'r':
				esc = '\r'
			case 't':
				esc = '\t'
			case 'u':
				if !d.unicodeEscape() {
					return d.errToken("invalid unicode escape code")
				}
				continue
			default:
				return d.errToken("invalid escape code")
			}
			d.buf = append(d.buf, esc)
			d.p += 2
		default:
			d.buf = append(d.buf, c)
			d.p++
		}
	}
}

func (d *jsonDecoder) hex4(i int) int {
	n := 0
	for j := i; j < i+4; j++ {
		v := digitVal(d.at(j))
		if v > 15 {
			return -1
		}
		n = n<<4 | v
	}
	return n
}

// unicodeEscape decodes \uXXXX, or a surrogate pair of them, into UTF-8.
func (d *jsonDecoder) unicodeEscape() bool {
	cp := d.hex4(d.p + 2)
	if cp < 0 {
		return false
	}
	n := 6
	if cp&0xF800 == 0xD800 {
		if cp&0x400 != 0 || d.at(d.p+6) != '\\' || d.at(d.p+7) != 'u' {
			return false
		}
		lo := d.hex4(d.p + 8)
		if lo < 0 || lo&0xFC00 != 0xDC00 {
			return false
		}
		cp = (cp&0x3FF)<<10 | lo&0x3FF + 0x10000
		n = 12
	}
	d.buf = utf8.AppendRune(d.buf, rune(cp))
	d.p += n
	return true
}

func (d *jsonDecoder) descend() {
	d.depth++
	if d.depth > cjsonMaxDepth {
		d.L.RaiseError("Found too many nested data structures (%d) at character %d", d.depth, d.p)
	}
}

func (d *jsonDecoder) value(t jsonToken) lua.LValue {
	switch t.typ {
	case tObjBegin:
		return d.object()
	case tArrBegin:
		return d.array()
	case tString:
		return lua.LString(t.str)
	case tNumber:
		return lua.LNumber(t.num)
	case tBoolean:
		return lua.LBool(t.b)
	case tNull:
		return d.v.null
	}
	d.fail("value", t)
	return nil
}

func (d *jsonDecoder) object() lua.LValue {
	d.descend()
	obj := d.L.NewTable()
	t := d.next()
	if t.typ == tObjEnd {
		d.depth--
		return obj
	}
	for {
		if t.typ != tString {
			d.fail("object key string", t)
		}
		key := t.str
		if t = d.next(); t.typ != tColon {
			d.fail("colon", t)
		}
		obj.RawSetString(key, d.value(d.next()))
		t = d.next()
		if t.typ == tObjEnd {
			d.depth--
			return obj
		}
		if t.typ != tComma {
			d.fail("comma or object end", t)
		}
		t = d.next()
	}
}

func (d *jsonDecoder) array() lua.LValue {
	d.descend()
	arr := d.L.NewTable()
	t := d.next()
	if t.typ == tArrEnd {
		d.depth--
		return arr
	}
	for i := 1; ; i++ {
		arr.RawSetInt(i, d.value(t))
		t = d.next()
		if t.typ == tArrEnd {
			d.depth--
			return arr
		}
		if t.typ != tComma {
			d.fail("comma or array end", t)
		}
		t = d.next()
	}
}
