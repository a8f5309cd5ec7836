package commands

import (
	"math"
	"strconv"

	"github.com/throttleddb/throttled/store"
)

func del(c *Ctx) {
	if msg := c.keyRefusal(c.Args[1:]...); msg != "" {
		c.W.Error(msg)
		return
	}
	n := int64(0)
	for _, k := range c.Args[1:] {
		if c.deleteKey(k) {
			n++
		}
	}
	c.W.Int(n)
}

func exists(c *Ctx) {
	n := int64(0)
	for _, k := range c.Args[1:] {
		if c.keyExists(k) {
			n++
		}
	}
	c.W.Int(n)
}

func typeCmd(c *Ctx) {
	v, ok := c.value(c.Args[1])
	if !ok {
		c.W.Status("none")
		return
	}
	c.W.Status(typeName(v))
}

func keys(c *Ctx) {
	pat := string(c.Args[1])
	var found []string
	c.Tx.ForEach(c.DB(), func(k string, v store.Value, _ int64) bool {
		if globMatch(pat, k) && c.visible(v) {
			found = append(found, k)
		}
		return true
	})
	c.W.Array(len(found))
	for _, k := range found {
		c.W.BulkString(k)
	}
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
func scan(c *Ctx) {
	cursor, ok := parseCursor(c.Args[1])
	if !ok {
		c.W.Error("ERR invalid cursor")
		return
	}
	count, pat, typ := 10, "", ""
	hasPat, hasType := false, false
	for i := 2; i < len(c.Args); i += 2 {
		if i+1 >= len(c.Args) {
			c.W.Error(errSyntax)
			return
		}
		a, v := c.Args[i], c.Args[i+1]
		switch {
		case is(a, "COUNT"):
			n, ok := parseInt(v)
			if !ok {
				c.W.Error(errNotInt)
				return
			}
			if n < 1 {
				c.W.Error(errSyntax)
				return
			}
			count = int(min(n, math.MaxInt32))
		case is(a, "MATCH"):
			pat, hasPat = string(v), true
		case is(a, "TYPE"):
			typ, hasType = string(v), true
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	var found []string
	next := c.Tx.Scan(c.DB(), cursor, count, func(k string, v store.Value) {
		if hasPat && !globMatch(pat, k) {
			return
		}
		if (hasType && typeName(v) != typ) || !c.visible(v) {
			return
		}
		found = append(found, k)
	})
	c.W.Array(2)
	c.W.BulkString(strconv.FormatUint(next, 10))
	c.W.Array(len(found))
	for _, k := range found {
		c.W.BulkString(k)
	}
}

// parseCursor reads a SCAN cursor as Redis does (strtoul in base 10, with no
// leading space and nothing after the digits): an optional sign, digits,
// within 64 bits. A '-' negates modulo 2^64, and "" is 0.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg, u, ok := parseSigned(b)
	if neg {
		u = -u
	}
	return u, ok
}

func ttl(c *Ctx)  { ttlReply(c, false) }
func pttl(c *Ctx) { ttlReply(c, true) }

// ttlReply answers TTL (seconds, rounded to nearest) or PTTL (ms): -2 for a
// missing key, -1 for a key without expiry.
func ttlReply(c *Ctx, ms bool) {
	exp, ok := c.keyExpiry(c.Args[1])
	switch {
	case !ok:
		c.W.Int(-2)
	case exp == 0:
		c.W.Int(-1)
	default:
		left := max(exp-c.Tx.NowMs(), 0)
		if !ms {
			left = (left + 500) / 1000
		}
		c.W.Int(left)
	}
}

func expire(c *Ctx)    { expireCmd(c, "expire", 1000, true) }
func pexpire(c *Ctx)   { expireCmd(c, "pexpire", 1, true) }
func expireat(c *Ctx)  { expireCmd(c, "expireat", 1000, false) }
func pexpireat(c *Ctx) { expireCmd(c, "pexpireat", 1, false) }

// expireCmd is EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT:
// key time [NX | XX | GT | LT], time in units of unit ms, relative or absolute.
func expireCmd(c *Ctx, name string, unit int64, relative bool) {
	n, ok := parseInt(c.Args[2])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	var nx, xx, gt, lt bool
	for _, a := range c.Args[3:] {
		switch {
		case is(a, "NX"):
			nx = true
		case is(a, "XX"):
			xx = true
		case is(a, "GT"):
			gt = true
		case is(a, "LT"):
			lt = true
		default:
			c.W.Error("ERR Unsupported option " + sanitize(string(a), 128))
			return
		}
	}
	if nx && (xx || gt || lt) {
		c.W.Error(errExpireFlags)
		return
	}
	if gt && lt {
		c.W.Error("ERR GT and LT options at the same time are not compatible")
		return
	}
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		c.W.Error(invalidExpire(name))
		return
	}
	when := n * unit
	if relative {
		if when > math.MaxInt64-c.Tx.NowMs() {
			c.W.Error(invalidExpire(name))
			return
		}
		when += c.Tx.NowMs()
	}
	key := c.Args[1]
	cur, ok := c.keyExpiry(key)
	if !ok {
		c.W.Int(0)
		return
	}
	if msg := c.keyRefusal(key); msg != "" {
		c.W.Error(msg)
		return
	}
	// A key without expiry has an infinite TTL for GT and LT.
	switch {
	case nx && cur != 0, xx && cur == 0,
		gt && (cur == 0 || when <= cur),
		lt && cur != 0 && when >= cur:
		c.W.Int(0)
		return
	}
	c.setExpiry(key, when)
	c.W.Int(1)
}

func persist(c *Ctx) {
	exp, ok := c.keyExpiry(c.Args[1])
	if !ok || exp == 0 {
		c.W.Int(0)
		return
	}
	if msg := c.keyRefusal(c.Args[1]); msg != "" {
		c.W.Error(msg)
		return
	}
	c.setExpiry(c.Args[1], 0)
	c.W.Int(1)
}
