package scripting

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Numbers as Lua 5.1 over C prints and reads them: gopher-lua uses Go's
// formatting and parsing, which differ in the corners scripts and clients
// notice (redis_rate returns tostring(float) to its clients).

// appendG appends f as C's printf("%.<prec>g") prints it (Go writes +Inf
// and NaN differently; the rest agrees).
func appendG(b []byte, f float64, prec int) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case f != f:
		if math.Signbit(f) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', prec, 64)
}

// luaString is Lua 5.1's tostring for the values errors and logs carry:
// numbers use "%.14g" (gopher-lua's own String does not).
func luaString(lv lua.LValue) string {
	switch lv := lv.(type) {
	case lua.LString:
		return string(lv)
	case lua.LNumber:
		return string(appendG(nil, float64(lv), 14))
	}
	return lv.String()
}

// luaToString replaces tostring so numbers print as in Lua 5.1 (redis_rate
// returns tostring(float) to its clients).
func luaToString(L *lua.LState) int {
	lv := L.CheckAny(1)
	if n, ok := lv.(lua.LNumber); ok {
		L.Push(lua.LString(appendG(nil, float64(n), 14)))
		return 1
	}
	L.Push(L.ToStringMeta(lv))
	return 1
}

// luaToNumber is Lua 5.1's tonumber: C strtod syntax (hex, inf, nan,
// exponents, surrounding spaces) or strtoul with a base.
func luaToNumber(L *lua.LState) int {
	base := 10
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		base = L.CheckInt(2)
	}
	if base == 10 {
		switch lv := L.CheckAny(1).(type) {
		case lua.LNumber:
			L.Push(lv)
			return 1
		case lua.LString:
			if f, ok := str2number(string(lv)); ok {
				L.Push(lua.LNumber(f))
				return 1
			}
		}
		L.Push(lua.LNil)
		return 1
	}
	var s string
	switch lv := L.Get(1).(type) {
	case lua.LString, lua.LNumber:
		s = luaString(lv)
	default:
		L.TypeError(1, lua.LTString)
	}
	if base < 2 || base > 36 {
		L.ArgError(2, "base out of range")
	}
	if f, ok := strtoul(s, base); ok {
		L.Push(lua.LNumber(f))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

func isSpace(c byte) bool { return c == ' ' || ('\t' <= c && c <= '\r') }

// cString cuts s at its first NUL, as C sees it.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// str2number converts like Lua 5.1's luaO_str2d over glibc's strtod.
func str2number(s string) (float64, bool) {
	s = cString(s)
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	f, n := strtod(s[i:])
	if n == 0 {
		return 0, false
	}
	for i += n; i < len(s); i++ {
		if !isSpace(s[i]) {
			return 0, false
		}
	}
	return f, true
}

// strtod parses the longest prefix of s that C's strtod accepts (no leading
// spaces) and returns the value and its length; 0 when there is none.
func strtod(s string) (float64, int) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	neg := i > 0 && s[0] == '-'
	digits := func(j int, ok func(byte) bool) int {
		for j < len(s) && ok(s[j]) {
			j++
		}
		return j
	}
	isDec := func(c byte) bool { return '0' <= c && c <= '9' }
	isHex := func(c byte) bool { return isDec(c) || ('a' <= c|0x20 && c|0x20 <= 'f') }
	rest := strings.ToLower(s[i:min(len(s), i+8)])
	switch {
	case strings.HasPrefix(rest, "infinity"), strings.HasPrefix(rest, "inf"):
		n := i + 3
		if strings.HasPrefix(rest, "infinity") {
			n = i + 8
		}
		if neg {
			return math.Inf(-1), n
		}
		return math.Inf(1), n
	case strings.HasPrefix(rest, "nan"):
		n := i + 3
		if n < len(s) && s[n] == '(' {
			j := n + 1
			for j < len(s) && (isDec(s[j]) || ('a' <= s[j]|0x20 && s[j]|0x20 <= 'z') || s[j] == '_') {
				j++
			}
			if j < len(s) && s[j] == ')' {
				n = j + 1
			}
		}
		f := math.NaN()
		if neg {
			f = math.Copysign(f, -1)
		}
		return f, n
	case len(rest) >= 3 && rest[0] == '0' && rest[1] == 'x' && (isHex(rest[2]) || rest[2] == '.' && len(rest) > 3 && isHex(rest[3])):
		j := digits(i+2, isHex)
		if j < len(s) && s[j] == '.' {
			j = digits(j+1, isHex)
		}
		mant := j
		if j+1 < len(s) && s[j]|0x20 == 'p' {
			k := j + 1
			if s[k] == '+' || s[k] == '-' {
				k++
			}
			if e := digits(k, isDec); e > k {
				j = e
			}
		}
		lit := s[:j]
		if j == mant {
			lit += "p0" // Go wants the binary exponent
		}
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !isRangeErr(err) {
			return 0, 0
		}
		return f, j
	}
	j := digits(i, isDec)
	nd := j - i
	if j < len(s) && s[j] == '.' {
		k := digits(j+1, isDec)
		nd += k - j - 1
		j = k
	}
	if nd == 0 {
		return 0, 0
	}
	if j < len(s) && s[j]|0x20 == 'e' {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if e := digits(k, isDec); e > k {
			j = e
		}
	}
	f, err := strconv.ParseFloat(s[:j], 64)
	if err != nil && !isRangeErr(err) {
		return 0, 0
	}
	return f, j
}

// strtoul converts like C's strtoul(s, &end, base) followed by Lua 5.1's
// check that only spaces follow; the result is the unsigned long as a double.
func strtoul(s string, base int) (float64, bool) {
	s = cString(s)
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' && digitVal(s[i+2]) < 16 {
		i += 2
	}
	var n uint64
	overflow := false
	start := i
	for ; i < len(s); i++ {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		hi, lo := mulAdd(n, uint64(base), uint64(d))
		if hi != 0 {
			overflow = true
		}
		n = lo
	}
	if i == start {
		return 0, false
	}
	for ; i < len(s); i++ {
		if !isSpace(s[i]) {
			return 0, false
		}
	}
	switch {
	case overflow:
		n = math.MaxUint64
	case neg:
		n = -n
	}
	return float64(n), true
}

func mulAdd(n, m, d uint64) (hi, lo uint64) {
	if n != 0 && n > (math.MaxUint64-d)/m {
		return 1, 0
	}
	return 0, n*m + d
}

func digitVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c|0x20 && c|0x20 <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}
