package scripting

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// rand48 is the 48-bit linear congruential generator of POSIX lrand48, which
// Redis ships as redisLrand48 so math.random gives the same numbers on every
// platform. Every run starts from seed 0, as Redis reseeds before each EVAL,
// so a script's random numbers depend only on the script.
type rand48 struct{ x uint64 }

const (
	rand48Mask = 1<<48 - 1
	rand48Max  = math.MaxInt32 // REDIS_LRAND48_MAX
)

func (r *rand48) seed(s int32) { r.x = uint64(uint32(s))<<16 | 0x330E }

func (r *rand48) next() int32 {
	r.x = (0x5DEECE66D*r.x + 0xB) & rand48Mask
	return int32(r.x >> 17)
}

// mathRandom is Lua 5.1's math.random over rand48.
func (v *vm) mathRandom(L *lua.LState) int {
	r := float64(v.x.rand.next()%rand48Max) / rand48Max
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

// mathRandomSeed is Lua 5.1's math.randomseed: its seed goes through
// luaL_checkint, which takes a number or a string that converts to one
// ("42", " 0x10 ") and truncates it to an int.
func (v *vm) mathRandomSeed(L *lua.LState) int {
	var seed float64
	switch a := L.Get(1).(type) {
	case lua.LNumber:
		seed = float64(a)
	case lua.LString:
		f, ok := str2number(string(a))
		if !ok {
			argTypeError(L, 1, "randomseed", "number")
		}
		seed = f
	default:
		argTypeError(L, 1, "randomseed", "number")
	}
	v.x.rand.seed(int32(int64(seed)))
	return 0
}

// argTypeError raises Lua 5.1's luaL_typerror text, which names the
// function in quotes and an absent argument "no value".
func argTypeError(L *lua.LState, n int, fn, want string) {
	got := "no value"
	if n <= L.GetTop() {
		got = L.Get(n).Type().String()
	}
	L.RaiseError("bad argument #%d to '%s' (%s expected, got %s)", n, fn, want, got)
}
