package commands

import (
	"bytes"

	"github.com/throttleddb/throttled/gcra"
)

// THROTTLE.ALL [QUANTITY q] LIMIT alg key params... [LIMIT alg key params...] ...
//
// checks several rate limits at one instant and consumes q from every one of
// them only if all allow; otherwise nothing is consumed anywhere. alg and its
// params are those of the single commands, without their quantity:
//
//	LIMIT CL  key max_burst count period          (CL.THROTTLE, seconds)
//	LIMIT FWC key limit window [MS]
//	LIMIT SWL key limit window [MS]
//	LIMIT SWC key limit window [SUBWINDOWS n] [MS]
//	LIMIT TB  key capacity refill_count refill_period [MS]
//	LIMIT LB  key capacity leak_count leak_period [MS]
//
// The reply is [limited, reply1, reply2, ...]: limited is 1 when any limit
// refused, and each reply is what that limit's own command answers. When the
// request is refused, a limit that refused shows its refusal (with its
// retry_after) and a limit that would have allowed shows its current state,
// as a peek would, since nothing was taken from it.
func throttleAll(c *Ctx) {
	args := c.Args[1:]
	qty := int64(1)
	if len(args) >= 2 && is(args[0], "QUANTITY") {
		n, ok := parseInt(args[1])
		switch {
		case !ok:
			c.W.Error(errNotInt)
			return
		case n < 0:
			c.W.Error("ERR quantity must not be negative")
			return
		}
		qty, args = n, args[2:]
	}
	// Room for the usual handful of limits without allocating.
	limits := make([]limit, 0, 8)
	for len(args) > 0 {
		if len(args) < 3 || !is(args[0], "LIMIT") {
			c.W.Error(errSyntax)
			return
		}
		l, used, errText := parseAllLimit(args[1], args[2:])
		if errText != "" {
			c.W.Error(errText)
			return
		}
		for _, o := range limits {
			if bytes.Equal(o.key, l.key) {
				c.W.Error("ERR THROTTLE.ALL names the key '" + sanitize(string(l.key), 128) + "' more than once")
				return
			}
		}
		l.qty = qty
		limits = append(limits, l)
		args = args[2+used:]
	}
	if len(limits) == 0 {
		c.W.Error(errSyntax)
		return
	}
	limited, errText := decideAll(c, limits, qty, false)
	if errText != "" {
		c.W.Error(errText)
		return
	}
	c.decide(qty, limited)
	c.W.Array(1 + len(limits))
	if limited {
		c.W.Int(1)
	} else {
		c.W.Int(0)
	}
	for i := range limits {
		limits[i].reply(c)
	}
}

// parseAllLimit parses one "alg key params..." of THROTTLE.ALL (args start
// at the key) and returns how many arguments after alg it used.
func parseAllLimit(alg []byte, args [][]byte) (limit, int, string) {
	for _, f := range []struct {
		name string
		fam  *family
	}{{"FWC", famFWC}, {"SWL", famSWL}, {"SWC", famSWC}, {"TB", famTB}, {"LB", famLB}} {
		if is(alg, f.name) {
			return parseEngineLimit(f.fam, args, true)
		}
	}
	if !is(alg, "CL") {
		return limit{}, 0, "ERR unknown algorithm '" + sanitize(string(alg), 32) + "' (use CL, FWC, SWL, SWC, TB or LB)"
	}
	if len(args) < 4 {
		return limit{}, 0, errSyntax
	}
	var nums [3]int64
	for i, a := range args[1:4] {
		n, ok := parseCellInt(a)
		if !ok {
			return limit{}, 0, cellParse + string(a)
		}
		nums[i] = n
	}
	p, err := gcra.NewParams(nums[0], nums[1], nums[2])
	if err != nil {
		return limit{}, 0, cellError(err)
	}
	return limit{key: args[0], gp: p}, 4, ""
}

// throttleAllKeys finds THROTTLE.ALL's keys for locking: the argument two
// after each LIMIT keyword. Parameters are numbers or the keywords MS and
// SUBWINDOWS, never LIMIT, and the walk jumps over each key, so a key named
// "LIMIT" is not mistaken for a keyword. When the command is malformed the
// parser rejects it before any key is read.
func throttleAllKeys(args [][]byte, fn func(key []byte)) {
	for i := 1; i < len(args); i++ {
		if is(args[i], "LIMIT") && i+2 < len(args) {
			fn(args[i+2])
			i += 2
		}
	}
}
