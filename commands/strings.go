package commands

import (
	"bytes"
	"math"

	"github.com/throttleddb/throttled/store"
)

// stringAt returns key's value when it is a string. A key of another kind
// writes WRONGTYPE and returns ok false.
func (c *Ctx) stringAt(key []byte) (v store.Value, exists, ok bool) {
	v, exists = c.value(key)
	if exists && !v.IsString() {
		c.W.Error(errWrongType)
		return v, true, false
	}
	return v, exists, true
}

// bulkValue writes a string value as a bulk reply.
func (c *Ctx) bulkValue(v store.Value) {
	if v.Kind == store.KindInt {
		c.W.BulkInt(v.Int)
		return
	}
	c.W.Bulk(v.Bytes)
}

// ownedValue copies an argument into a value the store may keep.
func ownedValue(b []byte) store.Value {
	v := store.StringValue(b)
	if v.Kind == store.KindString {
		v.Bytes = append([]byte(nil), b...)
	}
	return v
}

func get(c *Ctx) {
	v, exists, ok := c.stringAt(c.Args[1])
	if !ok {
		return
	}
	if !exists {
		c.W.Null()
		return
	}
	c.bulkValue(v)
}

func getdel(c *Ctx) {
	if msg := c.keyRefusal(c.Args[1]); msg != "" {
		c.W.Error(msg)
		return
	}
	v, exists, ok := c.stringAt(c.Args[1])
	if !ok {
		return
	}
	if !exists {
		c.W.Null()
		return
	}
	c.bulkValue(v) // written before the delete: the bytes are still valid
	c.deleteKey(c.Args[1])
}

func mget(c *Ctx) {
	c.W.Array(len(c.Args) - 1)
	for _, k := range c.Args[1:] {
		v, ok := c.value(k)
		if !ok || !v.IsString() {
			c.W.Null()
			continue
		}
		c.bulkValue(v)
	}
}

func mset(c *Ctx) {
	if len(c.Args)%2 == 0 {
		c.W.Error(wrongArity("mset"))
		return
	}
	for i := 1; i < len(c.Args); i += 2 {
		c.putString(c.Args[i], c.Args[i+1], 0, false)
	}
	c.W.OK()
}

func setnx(c *Ctx) {
	if c.keyExists(c.Args[1]) {
		c.W.Int(0)
		return
	}
	c.putString(c.Args[1], c.Args[2], 0, false)
	c.W.Int(1)
}

func setex(c *Ctx)  { setWithTTL(c, "setex", 1000) }
func psetex(c *Ctx) { setWithTTL(c, "psetex", 1) }

// setWithTTL is SETEX (unit 1000 ms) and PSETEX (unit 1 ms): key ttl value.
func setWithTTL(c *Ctx, name string, unit int64) {
	n, ok := parseInt(c.Args[2])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	exp, ok := expireFrom(c.Tx.NowMs(), n, unit, true)
	if !ok {
		c.W.Error(invalidExpire(name))
		return
	}
	c.putString(c.Args[1], c.Args[3], exp, false)
	c.W.OK()
}

func invalidExpire(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }

// expireFrom turns a SET/SETEX-style expiry argument n (in units of unit ms,
// relative to nowMs when relative) into an absolute Unix ms, with Redis'
// checks: n must be positive and the result must not overflow.
func expireFrom(nowMs, n, unit int64, relative bool) (int64, bool) {
	if n <= 0 || n > math.MaxInt64/unit {
		return 0, false
	}
	ms := n * unit
	if relative {
		if ms > math.MaxInt64-nowMs {
			return 0, false
		}
		ms += nowMs
	}
	return ms, true
}

// setAccess: SET writes its key, and reads it too with GET (Redis'
// setGetKeys).
func setAccess(args [][]byte) KeyAccess {
	for _, a := range args[min(3, len(args)):] {
		if is(a, "GET") {
			return KeyRead | KeyWrite
		}
	}
	return KeyWrite
}

// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
func set(c *Ctx) {
	const (
		nx = 1 << iota
		xx
		getOld
		keepTTL
	)
	var flags int
	var unit int64 // 1000 for EX/EXAT, 1 for PX/PXAT; 0 when no expiry given
	var relative bool
	// opt is the expiry option given (EX, PX, EXAT or PXAT). Redis takes the
	// same option again, the last value winning, but no other.
	var opt, when []byte
	for i := 3; i < len(c.Args); i++ {
		a := c.Args[i]
		hasNext := i+1 < len(c.Args)
		switch {
		case is(a, "NX") && flags&xx == 0:
			flags |= nx
		case is(a, "XX") && flags&nx == 0:
			flags |= xx
		case is(a, "GET"):
			flags |= getOld
		case is(a, "KEEPTTL") && opt == nil:
			flags |= keepTTL
		case flags&keepTTL == 0 && hasNext && (is(a, "EX") || is(a, "PX") || is(a, "EXAT") || is(a, "PXAT")) &&
			(opt == nil || bytes.EqualFold(a, opt)):
			opt = a
			unit, relative = 1, len(a) == 2
			if a[0] == 'e' || a[0] == 'E' {
				unit = 1000
			}
			i++
			when = c.Args[i]
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	var exp int64
	if unit != 0 {
		n, ok := parseInt(when)
		if !ok {
			c.W.Error(errNotInt)
			return
		}
		if exp, ok = expireFrom(c.Tx.NowMs(), n, unit, relative); !ok {
			c.W.Error(invalidExpire("set"))
			return
		}
	}
	key := c.Args[1]
	var prev store.Value
	var exists bool
	if flags&getOld != 0 {
		var ok bool
		if prev, exists, ok = c.stringAt(key); !ok {
			return
		}
	} else {
		exists = c.keyExists(key)
	}
	apply := !(flags&nx != 0 && exists) && !(flags&xx != 0 && !exists)
	if flags&getOld != 0 {
		// Reply before writing: prev's bytes belong to the value being replaced.
		if exists {
			c.bulkValue(prev)
		} else {
			c.W.Null()
		}
	}
	if apply {
		c.putString(key, c.Args[2], exp, flags&keepTTL != 0)
	}
	if flags&getOld == 0 {
		if apply {
			c.W.OK()
		} else {
			c.W.Null()
		}
	}
}

func incr(c *Ctx) { incrementBy(c, 1) }
func decr(c *Ctx) { incrementBy(c, -1) }

func incrby(c *Ctx) {
	n, ok := parseInt(c.Args[2])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	incrementBy(c, n)
}

func decrby(c *Ctx) {
	n, ok := parseInt(c.Args[2])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	if n == math.MinInt64 {
		c.W.Error("ERR decrement would overflow")
		return
	}
	incrementBy(c, -n)
}

// incrementBy adds d to the integer at key (0 when missing), keeping its TTL.
func incrementBy(c *Ctx, d int64) {
	n, errText := c.addInt(c.Args[1], d)
	if errText != "" {
		c.W.Error(errText)
		return
	}
	c.W.Int(n)
}
