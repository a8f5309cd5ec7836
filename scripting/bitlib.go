package scripting

import (
	"math"
	"math/bits"

	lua "github.com/yuin/gopher-lua"
)

// bitLib is LuaBitOp 1.0 (the "bit" module Redis bundles): 32-bit
// operations whose results are signed 32-bit numbers.
func bitLib(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	unary := func(op func(uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int { return bitRet(L, op(bitArg(L, 1))) }
	}
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1)
			for i := L.GetTop(); i > 1; i-- {
				b = op(b, bitArg(L, i))
			}
			return bitRet(L, b)
		}
	}
	shift := func(op func(b uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1)
			return bitRet(L, op(b, uint(bitArg(L, 2)&31)))
		}
	}
	fns := map[string]lua.LGFunction{
		"tobit":   unary(func(b uint32) uint32 { return b }),
		"bnot":    unary(func(b uint32) uint32 { return ^b }),
		"bswap":   unary(bits.ReverseBytes32),
		"band":    fold(func(a, b uint32) uint32 { return a & b }),
		"bor":     fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":    fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift":  shift(func(b uint32, n uint) uint32 { return b << n }),
		"rshift":  shift(func(b uint32, n uint) uint32 { return b >> n }),
		"arshift": shift(func(b uint32, n uint) uint32 { return uint32(int32(b) >> n) }),
		"rol":     shift(func(b uint32, n uint) uint32 { return bits.RotateLeft32(b, int(n)) }),
		"ror":     shift(func(b uint32, n uint) uint32 { return bits.RotateLeft32(b, -int(n)) }),
		"tohex":   bitToHex,
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}

// bitArg converts argument i as LuaBitOp does: add 2^52+2^51 and keep the
// low 32 bits of the double, which rounds to nearest and wraps modulo 2^32.
// Numeric strings count as numbers.
func bitArg(L *lua.LState, i int) uint32 {
	f, ok := toNumber(L.Get(i))
	b := uint32(math.Float64bits(f + 6755399441055744.0))
	if b == 0 && !ok {
		L.TypeError(i, lua.LTNumber)
	}
	return b
}

func bitRet(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

func bitToHex(L *lua.LState) int {
	b := bitArg(L, 1)
	n := int32(8)
	if L.GetTop() >= 2 {
		n = int32(bitArg(L, 2))
	}
	digits := "0123456789abcdef"
	if n < 0 {
		n, digits = -n, "0123456789ABCDEF"
	}
	if n < 0 || n > 8 { // n was -2^31, which has no positive counterpart
		n = 8
	}
	var buf [8]byte
	for i := n - 1; i >= 0; i-- {
		buf[i] = digits[b&15]
		b >>= 4
	}
	L.Push(lua.LString(buf[:n]))
	return 1
}
