package commands

import (
	"bytes"
	"errors"
	"math"
	"strconv"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/lease"
	"github.com/throttleddb/throttled/store"
)

// Quota leases (docs/leases.md):
//
//	QUOTA.LEASE key alg params... want [MS] [SUBWINDOWS n] [HOLDER id] [TTL ms]
//	            [SHARE pct | SHARE DYNAMIC] [LAZY]
//	QUOTA.RETURN lease-id used
//
// A lease is a charge made now plus a credit later, both on the key's own
// state through the limit's engine (an eager lease), or a report charged
// later (a lazy one). The leases themselves are recorded in the key's lease
// table (package lease), a value of its own under leaseTableKey(key), so
// they persist, replicate and travel in snapshots as every value does. Both
// commands run at the command's instant and take lease ids from the table,
// so a Raft replica applying them makes the same leases.

// leaseTablePrefix names the key that holds a key's lease table.
const leaseTablePrefix = "quota:leases:"

// Lease defaults and bounds on the options.
const (
	defaultLeaseTTL = 10_000 * int64(1e6) // ns
	shareDynamic    = 0                   // leaseCall.share for SHARE DYNAMIC
)

func leaseTableKey(key []byte) []byte {
	return append([]byte(leaseTablePrefix), key...)
}

// leaseCall is a parsed QUOTA.LEASE.
type leaseCall struct {
	l      limit // qty is want
	holder string
	ttl    int64 // ns
	share  int64 // percent, or shareDynamic
	lazy   bool
}

// leaseParams is how many numbers each algorithm takes after the key.
func leaseParams(alg []byte) (int, bool) {
	switch {
	case is(alg, "CL"), is(alg, "TB"), is(alg, "LB"):
		return 3, true
	case is(alg, "FWC"), is(alg, "SWL"), is(alg, "SWC"):
		return 2, true
	}
	return 0, false
}

// parseLease parses QUOTA.LEASE's arguments; an error is the reply text.
func parseLease(args [][]byte) (lc leaseCall, errText string) {
	key, alg := args[1], args[2]
	np, ok := leaseParams(alg)
	if !ok {
		return lc, "ERR unknown algorithm '" + sanitize(string(alg), 32) + "' (use CL, FWC, SWL, SWC, TB or LB)"
	}
	rest := args[3:]
	if len(rest) < np+1 {
		return lc, errSyntax
	}
	want, ok := parseInt(rest[np])
	if !ok {
		return lc, errNotInt
	}
	if want < 1 {
		return lc, "ERR want must be a positive integer"
	}
	lc.ttl, lc.share = defaultLeaseTTL, 100
	// The lease's options; the limit's own (MS, SUBWINDOWS n) go to its
	// parser with the key, the numbers and want as its quantity.
	engineArgs := append([][]byte{key}, rest[:np+1]...)
	for opts := rest[np+1:]; len(opts) > 0; {
		used := 1 // the option's arguments, its keyword included
		switch a := opts[0]; {
		case is(a, "LAZY"):
			lc.lazy = true
		case is(a, "MS"):
			engineArgs = append(engineArgs, a)
		case len(opts) < 2:
			return lc, errSyntax
		case is(a, "SUBWINDOWS"):
			engineArgs, used = append(engineArgs, opts[:2]...), 2
		case is(a, "HOLDER"):
			if len(opts[1]) > lease.MaxHolderLen {
				return lc, "ERR HOLDER is longer than " + strconv.Itoa(lease.MaxHolderLen) + " bytes"
			}
			lc.holder, used = string(opts[1]), 2
		case is(a, "TTL"):
			ms, ok := parseInt(opts[1])
			if !ok {
				return lc, errNotInt
			}
			if ms < 1 || ms > lease.MaxTTL/1e6 {
				return lc, "ERR TTL must be between 1 and " + strconv.FormatInt(lease.MaxTTL/1e6, 10) + " milliseconds"
			}
			lc.ttl, used = ms*1e6, 2
		case is(a, "SHARE") && is(opts[1], "DYNAMIC"):
			lc.share, used = shareDynamic, 2
		case is(a, "SHARE"):
			pct, ok := parseInt(opts[1])
			if !ok || pct < 1 || pct > 100 {
				return lc, "ERR SHARE must be a percentage from 1 to 100, or DYNAMIC"
			}
			lc.share, used = pct, 2
		default:
			return lc, errSyntax
		}
		opts = opts[used:]
	}
	if lc.share == shareDynamic && lc.holder == "" {
		return lc, "ERR SHARE DYNAMIC needs a HOLDER"
	}
	if is(alg, "CL") {
		if len(engineArgs) != np+2 {
			return lc, errSyntax // CL takes no MS or SUBWINDOWS
		}
		l, _, errText := parseAllLimit(alg, engineArgs[:np+1])
		lc.l = l
		lc.l.qty = want
		return lc, errText
	}
	l, _, errText := parseEngineLimit(familyOfName(alg), engineArgs, false)
	if errText == "" && lc.lazy && !engines.CanForce(l.eng) {
		errText = "ERR LAZY leases are not supported by SWL: its log cannot hold units past its limit"
	}
	lc.l = l
	return lc, errText
}

// familyOfName finds the family of an algorithm's name (FWC...LB).
func familyOfName(alg []byte) *family {
	for _, f := range []*family{famFWC, famSWL, famSWC, famTB, famLB} {
		if is(alg, f.kind.TypeName()) {
			return f
		}
	}
	return nil
}

// record is the limit's parameters as a lease record keeps them.
func (l *limit) record() lease.Limit {
	if l.fam == nil {
		return lease.Limit{Nums: [3]int64{l.gp.Burst, l.gp.Interval}}
	}
	p := engines.ParamsOf(l.eng)
	r := lease.Limit{Alg: uint8(l.eng.Kind())}
	switch l.eng.Kind() {
	case engines.TB:
		r.Nums = [3]int64{p.Limit, p.Rate, p.Unit}
	case engines.LB:
		r.Nums = [3]int64{p.Limit - 1, p.Rate, p.Unit}
	default:
		r.Nums, r.Sub = [3]int64{p.Limit, p.Window}, p.Subwindows
	}
	return r
}

// limitOf rebuilds the limit a lease was taken from, on key.
func limitOf(key []byte, r lease.Limit) (limit, error) {
	if r.Alg == 0 {
		p := gcra.Params{Burst: r.Nums[0], Interval: r.Nums[1]}
		return limit{key: key, gp: p}, p.Validate()
	}
	f := familyOfEngine(engines.Kind(r.Alg))
	eng, err := f.build(r.Nums, r.Sub)
	return limit{key: key, fam: f, eng: eng}, err
}

// peek decides 0 units on the loaded state: what the limit has left.
func (l *limit) peek(c *Ctx) string {
	l.qty = 0
	return l.check(c)
}

// save writes an engine state, or deletes the key when next is nil (the
// state is full again).
func (l *limit) save(c *Ctx, next []byte, fullAt int64) {
	if next == nil {
		c.Tx.Delete(c.DB(), l.key)
		l.exists, l.state = false, nil
		return
	}
	// next may be the key's record in the store, written in place, which
	// Put frees when the state now packs into its slot (store/packed.go)
	// or needs a record of another size: the limit keeps a copy in the
	// command's room.
	l.exists, l.state = true, append(c.stateBuf(), next...)
	c.Tx.Put(c.DB(), l.key, store.Value{Kind: l.fam.kind, Bytes: next}, store.ExpiryAt(fullAt))
}

// credit gives back up to qty units of lease r's grant and returns how
// many it gave back (engines.Credit, gcra.Credit).
func (l *limit) credit(c *Ctx, r *lease.Lease, qty int64) (int64, error) {
	now := c.Tx.Now()
	if l.fam == nil {
		tat, credited, err := gcra.Credit(l.tat, r.MarkDebt, l.gp, now, qty)
		if err == nil && credited > 0 {
			putTAT(c, c.DB(), l.key, tat, l.exists)
			l.tat, l.exists = tat, tat > now
		}
		return credited, err
	}
	g := engines.Grant{At: r.MarkAt, Debt: r.MarkDebt, Unit: r.MarkUnit}
	next, fullAt, credited, err := engines.Credit(l.eng, l.state, now, g, qty)
	if err == nil && credited > 0 {
		l.save(c, next, fullAt)
	}
	return credited, err
}

// force charges qty > 0 units at the instant at, past the limit if need be
// (engines.Force, gcra.Force).
func (l *limit) force(c *Ctx, at, qty int64) error {
	if l.fam == nil {
		tat, err := gcra.Force(l.tat, l.gp, at, qty)
		if err == nil {
			putTAT(c, c.DB(), l.key, tat, l.exists)
			l.tat, l.exists = tat, tat > c.Tx.Now()
		}
		return err
	}
	next, fullAt, err := engines.Force(l.eng, l.state, at, qty)
	if err == nil {
		l.save(c, next, fullAt)
	}
	return err
}

// mark locates the units a Commit just charged, for a later credit.
func (l *limit) mark(c *Ctx, r *lease.Lease) error {
	if l.fam == nil {
		r.MarkDebt = l.newTAT
		return nil
	}
	v, _ := c.Tx.GetIn(c.DB(), l.key, c.stateBuf())
	g, err := engines.GrantOf(l.eng, v.Bytes)
	r.MarkAt, r.MarkDebt, r.MarkUnit = g.At, g.Debt, g.Unit
	l.state = v.Bytes
	return err
}

// leaseTable is a key's lease table as loaded.
type leaseTable struct {
	key    []byte // the table's own key
	t      lease.Table
	exists bool
}

// loadLeases reads key's lease table; an error is the reply text.
func loadLeases(c *Ctx, key []byte) (lt leaseTable, errText string) {
	lt.key = leaseTableKey(key)
	v, ok := c.Tx.Get(c.DB(), lt.key)
	if !ok {
		return lt, ""
	}
	if v.Kind != store.KindLeases {
		return lt, errWrongType + " (the lease table's key " + sanitize(string(lt.key), 128) + " holds another value)"
	}
	t, err := lease.Decode(v.Bytes)
	if err != nil {
		return lt, "ERR the key's lease table is corrupt"
	}
	lt.t, lt.exists = t, true
	return lt, ""
}

// save stores the table, or deletes it when it holds no lease.
func (lt *leaseTable) save(c *Ctx) {
	at, ok := lt.t.ExpireAt()
	if !ok {
		if lt.exists {
			c.Tx.Delete(c.DB(), lt.key)
		}
		return
	}
	c.Tx.Put(c.DB(), lt.key, store.Value{Kind: store.KindLeases, Bytes: lt.t.Encode(nil)}, store.ExpiryAt(at))
}

// expire ends the leases whose TTL has passed: an eager one's units stay
// spent; a lazy one is charged its whole grant at the instant it ended. A
// lazy lease whose key now holds another algorithm's state is not charged
// (there is nothing its units could be charged to).
func (lt *leaseTable) expire(c *Ctx, key []byte) {
	for _, r := range lt.t.Expire(c.Tx.Now()) {
		if !r.Lazy {
			continue
		}
		l, err := limitOf(key, r.Limit)
		if err != nil || l.load(c) != "" {
			continue
		}
		_ = l.force(c, r.Expires, r.Granted) // an overflow leaves the state as it was
	}
}

// leaseError is the reply text of a lease table's error.
func leaseError(err error) string {
	switch {
	case errors.Is(err, lease.ErrTooManyLive):
		return "ERR too many live leases on this key (at most " + strconv.Itoa(lease.MaxLive) + ")"
	case errors.Is(err, lease.ErrTooManyForHolder):
		return "ERR too many live leases for this holder on this key (at most " + strconv.Itoa(lease.MaxLivePerHolder) + ")"
	}
	return engineError(err)
}

// QUOTA.LEASE: see the top of the file.
func quotaLease(c *Ctx) {
	lc, errText := parseLease(c.Args)
	if errText != "" {
		c.W.Error(errText)
		return
	}
	key, now := c.Args[1], c.Tx.Now()
	if now > math.MaxInt64-2*lc.ttl { // the record's end and drop times
		c.W.Error("ERR arithmetic overflow: the lease would end past the year 2262")
		return
	}
	l := &lc.l
	want := l.qty
	lt, errText := loadLeases(c, key)
	if errText == "" {
		errText = l.load(c) // the key's kind, checked before any write
	}
	if errText != "" {
		c.W.Error(errText)
		return
	}
	lt.expire(c, key)
	defer lt.save(c)
	if errText = l.load(c); errText == "" { // expire may have charged it
		errText = l.peek(c)
	}
	if errText != "" {
		c.W.Error(errText)
		return
	}
	if err := lt.t.CanAdd(lc.holder); err != nil {
		c.W.Error(leaseError(err))
		return
	}
	remaining := l.res.Remaining
	share := lt.t.DynamicShare(lc.holder, remaining)
	if lc.share != shareDynamic {
		share = lease.StaticShare(remaining, lc.share)
	}
	granted := min(want, share, remaining)
	r := lease.Lease{Holder: lc.holder, Lazy: lc.lazy, Granted: granted, At: now, Expires: now + lc.ttl, Limit: l.record()}
	if granted > 0 && !lc.lazy {
		// granted <= remaining fits; commit re-checks it anyway.
		l.qty = granted
		if errText = l.check(c); errText == "" {
			errText = l.commit(c)
		}
		if errText == "" {
			if err := l.mark(c, &r); err != nil {
				errText = engineError(err)
			}
		}
	}
	if errText == "" && granted == 0 {
		l.qty = 1 // when one unit could be had
		errText = l.check(c)
	}
	if errText != "" {
		c.W.Error(errText)
		return
	}
	c.W.Array(7)
	if granted == 0 {
		c.W.Null()
	} else {
		r.Seq = lt.t.NextSeq(now)
		lt.t.Add(r)
		c.W.Bulk(leaseID(r.Seq, key))
	}
	c.W.Int(granted)
	c.W.Int(l.res.Limit)
	if granted > 0 {
		c.W.Int(l.res.Remaining)
		c.W.Int(-1)
	} else {
		c.W.Int(remaining)
		c.W.Int(ceilMs(l.res.RetryAfter))
	}
	c.W.Int(ceilMs(l.res.ResetAfter))
	if granted > 0 {
		c.W.Int(lc.ttl / 1e6)
	} else {
		c.W.Int(0)
	}
}

// leaseID is "seq:key".
func leaseID(seq int64, key []byte) []byte {
	return append(append(strconv.AppendInt(nil, seq, 10), ':'), key...)
}

// parseLeaseID splits "seq:key"; ok is false when id is not one.
func parseLeaseID(id []byte) (seq int64, key []byte, ok bool) {
	i := bytes.IndexByte(id, ':')
	if i < 1 {
		return 0, nil, false
	}
	seq, ok = parseInt(id[:i])
	return seq, id[i+1:], ok && seq > 0 && id[0] != '+'
}

// quotaReturnKeys finds QUOTA.RETURN's key in its lease id.
func quotaReturnKeys(args [][]byte, fn func(key []byte)) {
	if _, key, ok := parseLeaseID(args[1]); ok {
		fn(key)
	}
}

// leaseTableLocks locks the lease table's key of the call's key.
func leaseTableLocks(s *Server, _ *connState, args [][]byte, l *store.LockSet) {
	if is(args[0], "quota.lease") {
		l.Add(s.store, leaseTableKey(args[1]))
		return
	}
	quotaReturnKeys(args, func(key []byte) { l.Add(s.store, leaseTableKey(key)) })
}

// QUOTA.RETURN: see the top of the file.
func quotaReturn(c *Ctx) {
	seq, key, ok := parseLeaseID(c.Args[1])
	if !ok {
		c.W.Error("ERR invalid lease id")
		return
	}
	used, ok := parseInt(c.Args[2])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	if used < 0 {
		c.W.Error("ERR used must not be negative")
		return
	}
	lt, errText := loadLeases(c, key)
	if errText != "" {
		c.W.Error(errText)
		return
	}
	now := c.Tx.Now()
	r := lt.t.Find(seq)
	switch {
	case r == nil:
		c.W.Error("ERR no such lease")
		return
	case r.Status == lease.Live && r.Expires > now && used > r.Granted:
		c.W.Error("ERR used is more than the lease granted (" + strconv.FormatInt(r.Granted, 10) + ")")
		return
	}
	l, err := limitOf(key, r.Limit)
	if err != nil {
		c.W.Error("ERR the key's lease table is corrupt")
		return
	}
	if errText = l.load(c); errText != "" {
		c.W.Error(errText)
		return
	}
	lt.expire(c, key)
	defer lt.save(c)
	if r = lt.t.Find(seq); r == nil { // its record's time was over
		c.W.Error("ERR no such lease")
		return
	}
	if errText = l.load(c); errText != "" { // expire may have charged it
		c.W.Error(errText)
		return
	}
	status, units := int64(1), int64(0)
	switch {
	case r.Status == lease.Returned:
		status, units = 0, r.Units
	case r.Status == lease.Expired:
		status = -1
	case r.Lazy:
		if used > 0 {
			err = l.force(c, now, used)
		}
		units = used
	default:
		units, err = l.credit(c, r, r.Granted-used)
	}
	if err != nil {
		c.W.Error(engineError(err))
		return
	}
	if status == 1 {
		lt.t.End(r, used, units, now)
	}
	if errText = l.peek(c); errText != "" {
		c.W.Error(errText)
		return
	}
	c.W.Array(5)
	c.W.Int(status)
	c.W.Int(units)
	c.W.Int(l.res.Limit)
	c.W.Int(l.res.Remaining)
	c.W.Int(ceilMs(l.res.ResetAfter))
}
