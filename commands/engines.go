package commands

import (
	"errors"
	"math"
	"strconv"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// The native algorithm commands:
//
//	FWC.THROTTLE key limit window [quantity] [MS]
//	SWL.THROTTLE key limit window [quantity] [MS]
//	SWC.THROTTLE key limit window [quantity] [SUBWINDOWS n] [MS]
//	TB.THROTTLE  key capacity refill_count refill_period [quantity] [MS]
//	LB.THROTTLE  key capacity leak_count leak_period [quantity] [MS]
//
// Times are whole seconds, or milliseconds with MS. The reply is redis-cell's
// [limited, limit, remaining, retry_after, reset_after] in the same unit
// (LB.THROTTLE adds delay). Each key holds one engine's state (a store kind
// per engine) and expires when the state is back to full.

// family describes one engine command's arguments.
type family struct {
	kind   store.Kind // the kind its keys hold
	params []string   // names of the numbers after the key, for errors
	// subwindows: the command takes SUBWINDOWS n (SWC).
	subwindows bool
	// delay: the reply has a sixth element, the delay (LB).
	delay bool
	// build makes the limiter from the numbers (as many as params), times
	// already in ns.
	build func(nums [3]int64, subwindows int64) (engines.Limiter, error)
	// times marks which params are times (converted from s or ms to ns).
	times []bool
}

var (
	famFWC = &family{kind: store.KindFWC, params: []string{"limit", "window"}, times: []bool{false, true},
		build: func(n [3]int64, _ int64) (engines.Limiter, error) { return engines.NewFWC(n[0], n[1]) }}
	famSWL = &family{kind: store.KindSWL, params: []string{"limit", "window"}, times: []bool{false, true},
		build: func(n [3]int64, _ int64) (engines.Limiter, error) { return engines.NewSWL(n[0], n[1]) }}
	famSWC = &family{kind: store.KindSWC, params: []string{"limit", "window"}, times: []bool{false, true}, subwindows: true,
		build: func(n [3]int64, sub int64) (engines.Limiter, error) { return engines.NewSWC(n[0], n[1], sub) }}
	famTB = &family{kind: store.KindTB, params: []string{"capacity", "refill_count", "refill_period"}, times: []bool{false, false, true},
		build: func(n [3]int64, _ int64) (engines.Limiter, error) { return engines.NewTB(n[0], n[1], n[2]) }}
	famLB = &family{kind: store.KindLB, params: []string{"capacity", "leak_count", "leak_period"}, times: []bool{false, false, true}, delay: true,
		build: func(n [3]int64, _ int64) (engines.Limiter, error) { return engines.NewLB(n[0], n[1], n[2]) }}
)

// familyOfKind finds the family whose keys hold kind.
func familyOfKind(k store.Kind) *family {
	for _, f := range []*family{famFWC, famSWL, famSWC, famTB, famLB} {
		if f.kind == k {
			return f
		}
	}
	return nil
}

// familyOfEngine finds the family of an engine's algorithm.
func familyOfEngine(k engines.Kind) *family {
	switch k {
	case engines.FWC:
		return famFWC
	case engines.SWL:
		return famSWL
	case engines.SWC:
		return famSWC
	case engines.TB:
		return famTB
	}
	return famLB
}

// limit is one parsed rate limit: a key, its algorithm and parameters.
type limit struct {
	key []byte
	fam *family // nil for GCRA (CL.THROTTLE's algorithm)
	eng engines.Limiter
	gp  gcra.Params
	qty int64
	ms  bool // times in the reply are milliseconds

	// Filled by check.
	exists bool
	state  []byte // the engine state the key holds (nil when missing)
	tat    int64  // GCRA: the stored TAT
	newTAT int64  // GCRA: the TAT to store on commit
	res    engines.Result
	// On a mesh node (mesh.go): what the mergeable state's Decide said.
	merged mstate.Decision
}

// parseEngineLimit parses "key p1 p2 [p3] [quantity] [SUBWINDOWS n] [MS]"
// for f. With inMulti (THROTTLE.ALL) there is no quantity, and parsing stops
// at the next LIMIT keyword; it returns how many arguments it used. An error
// is the reply text.
func parseEngineLimit(f *family, args [][]byte, inMulti bool) (l limit, used int, errText string) {
	if len(args) < 1+len(f.params) {
		return l, 0, errSyntax // only THROTTLE.ALL gets here: the table checks the arity
	}
	l = limit{key: args[0], fam: f, qty: 1}
	var nums [3]int64
	for i := range f.params {
		n, ok := parseInt(args[1+i])
		if !ok {
			return l, 0, errNotInt
		}
		if n <= 0 {
			return l, 0, "ERR " + f.params[i] + " must be a positive integer"
		}
		nums[i] = n
	}
	used = 1 + len(f.params)
	rest := args[used:]
	if !inMulti && len(rest) > 0 {
		if n, ok := parseInt(rest[0]); ok {
			if n < 0 {
				return l, 0, "ERR quantity must not be negative"
			}
			l.qty = n
			rest, used = rest[1:], used+1
		}
	}
	sub := int64(engines.DefaultSubwindows)
options:
	for len(rest) > 0 {
		switch a := rest[0]; {
		case inMulti && is(a, "LIMIT"):
			break options
		case is(a, "MS"):
			l.ms = true
			rest, used = rest[1:], used+1
		case f.subwindows && is(a, "SUBWINDOWS") && len(rest) > 1:
			n, ok := parseInt(rest[1])
			if !ok {
				return l, 0, errNotInt
			}
			if n < engines.MinSubwindows || n > engines.MaxSubwindows {
				return l, 0, "ERR SUBWINDOWS must be between " + strconv.Itoa(engines.MinSubwindows) + " and " + strconv.Itoa(engines.MaxSubwindows)
			}
			sub = n
			rest, used = rest[2:], used+2
		default:
			return l, 0, errSyntax
		}
	}
	unit := int64(1e9)
	if l.ms {
		unit = 1e6
	}
	for i, isTime := range f.times {
		if isTime {
			if nums[i] > math.MaxInt64/unit {
				return l, 0, "ERR " + f.params[i] + " is too large"
			}
			nums[i] *= unit
		}
	}
	eng, err := f.build(nums, sub)
	if err != nil {
		return l, 0, engineError(err)
	}
	l.eng = eng
	return l, used, ""
}

// engineError is the reply text for an engine's parameter or state error.
func engineError(err error) string {
	switch {
	case errors.Is(err, engines.ErrLimitTooLarge):
		return "ERR limit is above the sliding window log's maximum of " + strconv.Itoa(engines.MaxSWLLimit)
	case errors.Is(err, engines.ErrOverflow):
		return "ERR arithmetic overflow: the rate or window is too large"
	case errors.Is(err, engines.ErrCorruptState):
		return "ERR the key's rate-limit state is corrupt"
	case errors.Is(err, engines.ErrSubwindows):
		return "ERR window is too short for that many SUBWINDOWS"
	}
	return "ERR " + err.Error()
}

// load reads the key's current state; an error is the reply text.
func (l *limit) load(c *Ctx) string {
	if c.srv.mesh != nil {
		return l.loadMerged(c)
	}
	v, ok := c.Tx.GetIn(c.DB(), l.key, c.stateBuf())
	l.exists = ok
	if !ok {
		return ""
	}
	if l.fam == nil { // GCRA keeps its TAT as an integer string
		tat, ok := storedTAT(v)
		switch {
		case ok:
			l.tat = tat
			return ""
		case v.IsString():
			return errNotInt
		}
		return wrongKind(v.Kind, "cl")
	}
	if v.Kind != l.fam.kind {
		return wrongKind(v.Kind, l.fam.kind.TypeName())
	}
	l.state = v.Bytes
	return ""
}

// wrongKind is the WRONGTYPE reply for a key that holds another kind than
// the command's; for another engine's state it says which.
func wrongKind(have store.Kind, want string) string {
	if familyOfKind(have) == nil {
		return errWrongType
	}
	return errWrongType + " (the key holds " + have.TypeName() + " state, not " + want + ")"
}

// check decides the request without changing anything; an error is the
// reply text.
func (l *limit) check(c *Ctx) string {
	if c.srv.mesh != nil {
		return l.checkMerged(c)
	}
	now := c.Tx.Now()
	if l.fam == nil {
		newTAT, _, r, err := gcra.Decide(l.tat, l.gp, now, l.qty)
		if err != nil {
			return cellError(err)
		}
		l.newTAT = newTAT
		l.res = gcraResult(r)
		return ""
	}
	res, err := l.eng.Check(l.state, now, l.qty)
	if err != nil {
		return engineError(err)
	}
	l.res = res
	return ""
}

// commit records the admitted request. Only call it when check allowed it
// and the quantity is positive.
func (l *limit) commit(c *Ctx) string {
	if c.srv.mesh != nil {
		l.commitMerged(c)
		return ""
	}
	db, now := c.DB(), c.Tx.Now()
	if l.fam == nil {
		putTAT(c, db, l.key, l.newTAT, l.exists)
		return ""
	}
	next, fullAt, err := l.eng.Commit(l.state, now, l.qty)
	if err != nil {
		return engineError(err)
	}
	// The key lives through the millisecond that holds fullAt, even when
	// that is this one, and is gone after, by which time the state is full
	// and dropping it changes nothing.
	c.Tx.Put(db, l.key, store.Value{Kind: l.fam.kind, Bytes: next}, store.ExpiryAt(fullAt))
	return ""
}

// reply writes the limit's answer in its command's shape.
func (l *limit) reply(c *Ctx) {
	writeResult(c.W, l.res, l.ms, l.fam != nil && l.fam.delay)
}

// writeResult writes a throttle reply: [limited, limit, remaining,
// retry_after, reset_after] and, with delay, the delay. Durations are in
// seconds as CL.THROTTLE rounds them (up, at whole-millisecond resolution),
// or with ms in milliseconds rounded up; -1 stays -1.
func writeResult(w *resp.Writer, r engines.Result, ms, delay bool) {
	duration := func(ns int64) int64 {
		if ms {
			return ceilMs(ns)
		}
		return gcra.Seconds(ns)
	}
	if delay {
		w.Array(6)
	} else {
		w.Array(5)
	}
	if r.Limited {
		w.Int(1)
	} else {
		w.Int(0)
	}
	w.Int(r.Limit)
	w.Int(r.Remaining)
	w.Int(duration(r.RetryAfter))
	w.Int(duration(r.ResetAfter))
	if delay {
		w.Int(duration(r.Delay))
	}
}

// ceilMs is a duration in ns as whole milliseconds, rounded up; -1 (and
// any negative) stays -1.
func ceilMs(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return ns/1e6 + min(ns%1e6, 1)
}

// gcraResult is a GCRA decision in the engines' terms.
func gcraResult(r gcra.Result) engines.Result {
	return engines.Result{Limited: r.Limited, Limit: r.Limit, Remaining: r.Remaining, RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter}
}

// engineThrottle runs one engine command.
func engineThrottle(f *family) func(c *Ctx) {
	return func(c *Ctx) {
		l, _, errText := parseEngineLimit(f, c.Args[1:], false)
		if errText != "" {
			c.W.Error(errText)
			return
		}
		l.run(c)
	}
}

// run decides one limit and replies.
func (l *limit) run(c *Ctx) {
	errText := l.load(c)
	if errText == "" {
		errText = l.check(c)
	}
	if errText == "" && !l.res.Limited && l.qty > 0 {
		errText = l.commit(c)
	}
	if errText != "" {
		c.W.Error(errText)
		return
	}
	c.decide(l.qty, l.res.Limited)
	l.reply(c)
}
