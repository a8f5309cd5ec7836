package commands

import (
	"errors"
	"math"

	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/store"
)

// redis-cell's error texts. Its module replies "Cell error: ..." without an
// ERR prefix, so clients see the error code "Cell"; gateways written against
// redis-cell match these strings.
const (
	cellUsage    = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cellParse    = "Cell error: Store error: Couldn't parse as integer: "
	cellZeroRate = "Cell error: Store error: Zero rates are not supported"
	// redis-cell accepts negative numbers and wraps on overflow; we refuse
	// both, in the same style, and write nothing.
	cellNegative = "Cell error: Store error: Negative values are not supported"
	cellOverflow = "Cell error: Store error: Arithmetic overflow"
)

// CL.THROTTLE key max_burst count period [quantity]
//
// Replies [limited, limit, remaining, retry_after, reset_after] exactly as
// redis-cell 0.4/0.5 does (see gcra). The key holds the theoretical arrival
// time as an integer string of Unix nanoseconds, with a TTL of
// floor_ms(tat - now), so GET and PTTL show what redis-cell's keys show.
func clThrottle(c *Ctx) {
	if len(c.Args) != 5 && len(c.Args) != 6 {
		c.W.Error(cellUsage)
		return
	}
	var nums [4]int64
	nums[3] = 1 // quantity
	for i, a := range c.Args[2:] {
		n, ok := parseCellInt(a)
		if !ok {
			c.W.Error(cellParse + string(a))
			return
		}
		nums[i] = n
	}
	p, err := gcra.NewParams(nums[0], nums[1], nums[2])
	if err == nil && nums[3] < 0 {
		err = gcra.ErrNegative
	}
	if err != nil {
		c.W.Error(cellError(err))
		return
	}
	if c.srv.mesh != nil {
		l := limit{key: c.Args[1], gp: p, qty: nums[3]}
		l.run(c)
		return
	}
	db, key := c.DB(), c.Args[1]
	v, exists := c.Tx.Get(db, key)
	var tat int64
	if exists {
		var ok bool
		if tat, ok = storedTAT(v); !ok {
			if v.IsString() {
				c.W.Error(errNotInt)
			} else {
				c.W.Error(errWrongType)
			}
			return
		}
	}
	now := c.Tx.Now()
	newTAT, write, res, err := gcra.Decide(tat, p, now, nums[3])
	if err != nil {
		c.W.Error(cellError(err))
		return
	}
	if write {
		putTAT(c, db, key, newTAT, exists)
	}
	c.decide(nums[3], res.Limited)
	writeResult(c.W, gcraResult(res), false, false)
}

// putTAT stores a GCRA decision's TAT as redis-cell does: PEXPIRE
// floor_ms(newTAT - now), which Redis counts from the current millisecond.
// Less than a millisecond left is a TTL of 0, and the key stays to the end of
// this millisecond, so further calls within it are limited (vector V18; the
// rule is the store's). A TAT not ahead of now (a peek at a full bucket) is
// the same as no key: nothing is stored, and a key that held one goes.
func putTAT(c *Ctx, db int, key []byte, newTAT int64, exists bool) {
	now := c.Tx.Now()
	switch {
	case newTAT > now:
		c.Tx.Put(db, key, store.IntValue(newTAT), c.Tx.ExpiryIn(gcra.TTL(newTAT, now)))
	case exists:
		c.Tx.Delete(db, key)
	}
}

// storedTAT reads a key's value as a TAT: an integer string, read as
// redis-cell reads it (Rust integer parsing, so "+5" and "007" count too).
func storedTAT(v store.Value) (int64, bool) {
	switch v.Kind {
	case store.KindInt:
		return v.Int, true
	case store.KindString:
		return parseCellInt(v.Bytes)
	}
	return 0, false
}

func cellError(err error) string {
	switch {
	case errors.Is(err, gcra.ErrZeroRate):
		return cellZeroRate
	case errors.Is(err, gcra.ErrNegative):
		return cellNegative
	default:
		return cellOverflow
	}
}

// parseCellInt parses a number as redis-cell does (Rust's i64 parsing): an
// optional '+' or '-', then at least one digit, leading zeros allowed,
// nothing else, within int64.
func parseCellInt(b []byte) (int64, bool) {
	neg, u, ok := parseSigned(b)
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return int64(-u), true
	case !neg && u <= math.MaxInt64:
		return int64(u), true
	}
	return 0, false
}
