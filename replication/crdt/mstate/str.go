package mstate

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/throttleddb/throttled/engines"
)

// Errors of the string kind (Str). A malformed state is
// engines.ErrCorruptState, a state of another kind engines.ErrWrongKind, and
// an increment whose result does not fit in an int64 engines.ErrOverflow
// (Redis: "ERR increment or decrement would overflow").
var (
	// ErrNotInteger reports an increment of a value that is not the
	// canonical decimal form of an int64 (Redis: "ERR value is not an
	// integer or out of range").
	ErrNotInteger = errors.New("mstate: value is not an integer")

	// ErrBadExpiry reports StrSet given both an expiry and keepTTL, or a
	// negative expiry.
	ErrBadExpiry = errors.New("mstate: bad expiry")

	// ErrReservedOrigin reports a string write by the zero Origin, which
	// names the expiry tombstones (see StrIncr).
	ErrReservedOrigin = errors.New("mstate: the zero origin is reserved")
)

// Persist is StrExpire's expiry for PERSIST: the key keeps no TTL, and wins
// over concurrent extensions.
const Persist = math.MaxInt64

// reg is the register of a string: the value of its last SET, or the
// tombstone of its last DEL. Registers are ordered by (stamp, origin), then,
// for the copies no two writers make (the zero origin is the expiry
// tombstones'), a tombstone before a value and values by their bytes: a
// total order, so the join keeps the greater whatever it is given.
type reg struct {
	stamp   int64
	o       Origin
	deleted bool
	value   []byte // empty when deleted
}

func (a reg) compare(b reg) int {
	return cmp.Or(cmp.Compare(a.stamp, b.stamp), a.o.Compare(b.o),
		cmp.Compare(b2i(!a.deleted), b2i(!b.deleted)), bytes.Compare(a.value, b.value))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zeroReg is the register of a key never written: every register written is
// greater. A state that holds it and nothing else is the empty state.
var zeroReg = reg{stamp: math.MinInt64, deleted: true}

// counter is one origin's increments (p) and decrements (n) on the register
// of its state. Both only grow, so copies merge by max. An entry (0, 0) is an
// INCRBY 0 that brought a missing key into existence; it is stored on
// tombstones only.
type counter struct {
	o    Origin
	p, n uint64
}

func compareCounter(a, b counter) int { return a.o.Compare(b.o) }

// join returns the larger of two copies of one origin's counter.
func (a counter) join(b counter) counter {
	return counter{o: a.o, p: max(a.p, b.p), n: max(a.n, b.n)}
}

// expiry is the TTL of a register: ms is a Unix ms time, 0 for none set
// and Persist for persisted (0 < any time < Persist). Copies are ordered by
// (epoch, ms): an extension keeps the epoch and raises ms, so the longest of
// concurrent extensions wins; a shortening starts a later epoch, so it wins
// over what its writer had seen.
type expiry struct{ epoch, ms int64 }

func (a expiry) compare(b expiry) int {
	return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.ms, b.ms))
}

// strState is the decoded state of a string (crdt-design.md 1.6): a
// register, the counters made on it and its expiry. Only the greater
// register's counters and expiry survive a join.
type strState struct {
	r reg
	c []counter // ascending by origin
	e expiry    // epoch >= r.stamp
}

func emptyStr() strState { return strState{r: zeroReg, e: expiry{epoch: math.MinInt64}} }

// Encoding, little-endian:
//
//	0   version, kind
//	2   stamp int64, origin (node uint64, inc uint64)
//	26  deleted uint8 (0 or 1)
//	27  value: length uint32, then its bytes
//	    epoch int64, expireMs int64
//	    counters: count uint32, then each, ascending by origin:
//	    node uint64, inc uint64, p uint64, n uint64
const (
	strFixed   = 51 // bytes of a state with an empty value and no counter
	counterLen = 32
)

func decodeStr(b []byte) (strState, error) {
	s := emptyStr()
	if len(b) == 0 {
		return s, nil
	}
	if marked(b) {
		// A reset's mark: a bare mark holds no string (it joins with one
		// into the string), a marked rate-limit state is another kind.
		switch _, plain, err := unmark(b); {
		case err != nil:
			return s, err
		case plain != nil:
			return s, engines.ErrWrongKind
		}
		return s, nil
	}
	r := &reader{b: b}
	if err := header(r, Str); err != nil {
		return s, err
	}
	s.r.stamp, s.r.o = r.i64(), r.origin()
	flags, n := r.u8(), r.u32()
	if r.bad || flags > 1 || n > len(b)-r.off {
		return s, engines.ErrCorruptState
	}
	s.r.deleted, s.r.value = flags == 1, r.take(n)
	s.e = expiry{epoch: r.i64(), ms: r.i64()}
	n = r.u32()
	if r.bad || n > (len(b)-r.off)/counterLen {
		return s, engines.ErrCorruptState
	}
	s.c = make([]counter, 0, n)
	for range n {
		c := counter{o: r.origin(), p: r.u64(), n: r.u64()}
		if (len(s.c) > 0 && s.c[len(s.c)-1].o.Compare(c.o) >= 0) || (c.p == 0 && c.n == 0 && !s.r.deleted) {
			return s, engines.ErrCorruptState
		}
		s.c = append(s.c, c)
	}
	switch {
	case r.bad, !r.done(),
		s.r.deleted && len(s.r.value) > 0,
		s.r.stamp == math.MinInt64 && (s.r.o != Origin{} || !s.r.deleted || len(s.c) == 0), // the empty state is encoded empty
		s.e.epoch < s.r.stamp, s.e.ms < 0,
		s.r.deleted && len(s.c) == 0 && s.e != (expiry{epoch: s.r.stamp}), // a missing key has no TTL
		!s.r.deleted && len(s.c) > 0 && !isInteger(s.r.value):
		return s, engines.ErrCorruptState
	}
	return s, nil
}

func (s *strState) encode() ([]byte, error) {
	if s.r.stamp == math.MinInt64 && len(s.c) == 0 { // the register of a key never written, and nothing else
		return nil, nil
	}
	if uint64(len(s.r.value)) > math.MaxUint32 {
		return nil, engines.ErrOverflow
	}
	b := make([]byte, 0, strFixed+len(s.r.value)+counterLen*len(s.c))
	b = appendOrigin(appendI64(append(b, version, byte(Str)), s.r.stamp), s.r.o)
	b = append(appendU32(append(b, byte(b2i(s.r.deleted))), len(s.r.value)), s.r.value...)
	b = appendU32(appendI64(appendI64(b, s.e.epoch), s.e.ms), len(s.c))
	for _, c := range s.c {
		b = appendU64(appendU64(appendOrigin(b, c.o), c.p), c.n)
	}
	return b, nil
}

func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// join implements decoded: the greater register with its counters and
// expiry; on one register, each origin's larger counter and the larger
// expiry.
func (s *strState) join(o decoded) decoded {
	b := o.(*strState)
	switch c := s.r.compare(b.r); {
	case c > 0:
		return s
	case c < 0:
		return b
	}
	out := &strState{r: s.r, e: s.e}
	if b.e.compare(s.e) > 0 {
		out.e = b.e
	}
	out.c = union(nil, s.c, b.c, compareCounter, counter.join, func(counter) bool { return true })
	return out
}

// exists reports whether the state holds a value, expired or not: a
// register written by SET, or counters.
func (s *strState) exists() bool { return !s.r.deleted || len(s.c) > 0 }

// expiredAt reports whether the TTL has passed at nowMs: the key is there
// through its expiry millisecond and gone after, as store.Expired says.
func (s *strState) expiredAt(nowMs int64) bool {
	return s.e.ms != 0 && s.e.ms != Persist && nowMs > s.e.ms
}

func (s *strState) live(nowMs int64) bool { return s.exists() && !s.expiredAt(nowMs) }

// stampAt returns the stamp of a write at now: now, or one more than the
// newest stamp in the state (register or expiry epoch) when that is not
// earlier, so a write is ordered after every write it has seen.
func (s *strState) stampAt(now int64) (int64, error) {
	newest := max(s.r.stamp, s.e.epoch)
	if newest == math.MaxInt64 {
		return 0, engines.ErrOverflow
	}
	return max(now, newest+1), nil
}

// expiryTombstone returns what an expired state is to a write: the tombstone
// by the zero origin stamped when the key went, the first ns after its
// expiry millisecond (and after its register). It depends on the register
// and the expiry alone, so every node that increments an expired copy of a
// register counts on the same tombstone, and the increments add up. A DEL
// that removed the key while it was live is stamped before it went, so it
// cannot wipe increments made on the expired key by a node that had not
// seen that DEL yet: on a single node they would count from zero after it.
func (s *strState) expiryTombstone() (strState, error) {
	if s.r.stamp == math.MaxInt64 {
		return strState{}, engines.ErrOverflow
	}
	t := s.r.stamp + 1
	if ms := s.e.ms; ms > math.MinInt64/1_000_000 && ms < math.MaxInt64/1_000_000 { // an expired key's is below now
		t = max(t, (ms+1)*1e6)
	}
	return strState{r: reg{stamp: t, deleted: true}, e: expiry{epoch: t}}, nil
}

// tombstone returns the state of a DEL stamped w by self.
func tombstone(w int64, self Origin) strState {
	return strState{r: reg{stamp: w, o: self, deleted: true}, e: expiry{epoch: w}}
}

// integer returns the value of a state as an integer: its register's (0 for
// a tombstone) plus every origin's increments less its decrements.
// ErrNotInteger when the register holds something else, engines.ErrOverflow
// when the sum does not fit (increments made concurrently on several nodes
// can add up past what each checked).
func (s *strState) integer() (int64, error) {
	sum, err := s.sum()
	if err != nil {
		return 0, err
	}
	v, ok := sum.int64()
	if !ok {
		return 0, engines.ErrOverflow
	}
	return v, nil
}

// sum is integer in 128 bits, which hold it whatever the counters.
func (s *strState) sum() (int128, error) {
	var base int64
	if !s.r.deleted {
		var ok bool
		if base, ok = parseInteger(s.r.value); !ok {
			return int128{}, ErrNotInteger
		}
	}
	sum := int128Of(base)
	for _, c := range s.c {
		sum = sum.add(c.p).sub(c.n)
	}
	return sum, nil
}

// int128 is a signed 128-bit integer: hi*2^64 + lo. The sum of a state's
// counters fits, as it has fewer than 2^32 of them.
type int128 struct {
	hi int64
	lo uint64
}

func int128Of(v int64) int128 { return int128{hi: v >> 63, lo: uint64(v)} }

func (x int128) add(u uint64) int128 {
	lo, c := bits.Add64(x.lo, u, 0)
	return int128{x.hi + int64(c), lo}
}

func (x int128) sub(u uint64) int128 {
	lo, b := bits.Sub64(x.lo, u, 0)
	return int128{x.hi - int64(b), lo}
}

func (x int128) int64() (int64, bool) {
	v := int64(x.lo)
	return v, x.hi == v>>63
}

// parseInteger parses b when it is the canonical decimal form of an int64,
// what strconv.FormatInt prints: Redis' rules for INCR (string2ll), the same
// as store.ParseInt's.
func parseInteger(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	var buf [20]byte
	if !bytes.Equal(strconv.AppendInt(buf[:0], n, 10), b) {
		return 0, false
	}
	return n, true
}

func isInteger(b []byte) bool { _, ok := parseInteger(b); return ok }

// unixMs returns the Unix ms of now (Unix ns), rounded down, as store.Tx
// does.
func unixMs(now int64) int64 {
	ms := now / 1e6
	if now%1e6 < 0 {
		ms--
	}
	return ms
}

// StrValue is a string as a read finds it.
type StrValue struct {
	// Exists is false for a missing key: no state, a tombstone, or a TTL
	// that has passed. The other fields are then zero.
	Exists bool
	// Bytes is the value (the decimal form of Int when IsInt). It is the
	// caller's own.
	Bytes []byte
	// IsInt reports whether the value is the canonical decimal form of an
	// int64, Int. A value with increments always is.
	IsInt bool
	Int   int64
	// ExpireMs is the key's expiry in Unix ms, 0 for none (no TTL set, or
	// persisted): what TTL and PTTL report.
	ExpireMs int64
}

// StrGet reads a string state at now (Unix ns; its TTL is compared in Unix
// ms, rounded down, as store.Expired does). Expiry is judged at now alone,
// so now must not go back on a key (see the package doc). A value whose
// increments, made on several nodes, add up past the range of int64 is
// engines.ErrOverflow until a SET, a DEL or a decrement brings it back.
func StrGet(state []byte, now int64) (StrValue, error) {
	s, err := decodeStr(state)
	if err != nil || !s.live(unixMs(now)) {
		return StrValue{}, err
	}
	v := StrValue{Exists: true, ExpireMs: s.e.ms}
	if v.ExpireMs == Persist {
		v.ExpireMs = 0
	}
	if !s.r.deleted && len(s.c) == 0 {
		v.Bytes = bytes.Clone(s.r.value)
		v.Int, v.IsInt = parseInteger(s.r.value)
		if v.Bytes == nil {
			v.Bytes = []byte{}
		}
		return v, nil
	}
	if v.Int, err = s.integer(); err != nil {
		return StrValue{}, err
	}
	v.IsInt, v.Bytes = true, strconv.AppendInt(nil, v.Int, 10)
	return v, nil
}

// openStr decodes state for a write by self.
func openStr(state []byte, self Origin) (strState, error) {
	if self == (Origin{}) {
		return strState{}, ErrReservedOrigin
	}
	return decodeStr(state)
}

// StrSet is SET by self at now (Unix ns): value becomes the key's new
// register, stamped after everything in state, and the counters made on the
// old one are dropped. expireMs is the new expiry in Unix ms, 0 for none; an
// expiry already passed at now deletes the key, as Redis does for SET with a
// past EXAT. keepTTL keeps the key's current expiry instead (none for a
// missing key); it takes expireMs 0. A negative expireMs, or one with
// keepTTL, is ErrBadExpiry. next is a new slice; value is copied.
func StrSet(state []byte, self Origin, now int64, value []byte, expireMs int64, keepTTL bool) (next []byte, err error) {
	if expireMs < 0 || (keepTTL && expireMs != 0) {
		return nil, ErrBadExpiry
	}
	s, err := openStr(state, self)
	if err != nil {
		return nil, err
	}
	w, err := s.stampAt(now)
	if err != nil {
		return nil, err
	}
	nowMs := unixMs(now)
	if expireMs != 0 && nowMs > expireMs {
		t := tombstone(w, self)
		return t.encode()
	}
	if keepTTL && s.live(nowMs) {
		expireMs = s.e.ms
	}
	set := strState{r: reg{stamp: w, o: self, value: bytes.Clone(value)}, e: expiry{epoch: w, ms: expireMs}}
	return set.encode()
}

// StrIncr is INCRBY delta (DECRBY as -delta) by self at now: it adds to
// self's counter on the current register and returns the new value. The
// TTL is kept. A missing key counts from 0 on the register that is there: on
// no state, the register of a key never written, so nodes that increment a
// fresh key concurrently all count; after a DEL, its tombstone. A key whose
// TTL has passed counts from 0 on its expiry tombstone: the tombstone
// stamped when the key went, by the zero origin, which every node derives
// alike from that register and its expiry, so increments made after the
// expiry on several nodes add up too, merging an older copy never brings
// the expired value back, and a DEL of the live key that arrives later does
// not wipe them.
//
// A value that is not an integer is ErrNotInteger; a result outside int64,
// or a counter past 2^64-1, is engines.ErrOverflow. (A value that increments
// merged from several nodes carried out of int64 only takes those that
// bring it back.) On error nothing is
// written and next is nil. INCRBY 0 on an existing key changes nothing and
// next is state; on a missing key it creates the key with value 0. Otherwise
// next is a new slice.
func StrIncr(state []byte, self Origin, now int64, delta int64) (next []byte, result int64, err error) {
	s, err := openStr(state, self)
	if err != nil {
		return nil, 0, err
	}
	existed := s.exists()
	if existed && s.expiredAt(unixMs(now)) {
		if s, err = s.expiryTombstone(); err != nil {
			return nil, 0, err
		}
		existed = false
	}
	cur, err := s.sum()
	if err != nil {
		return nil, 0, err
	}
	if delta >= 0 {
		cur = cur.add(uint64(delta))
	} else {
		cur = cur.sub(uint64(-delta)) // uint64(-MinInt64) is 2^63
	}
	result, ok := cur.int64()
	switch {
	case !ok:
		return nil, 0, engines.ErrOverflow
	case delta == 0 && existed:
		return state, result, nil
	}
	i, found := slices.BinarySearchFunc(s.c, self, func(c counter, o Origin) int { return c.o.Compare(o) })
	c := counter{o: self}
	if found {
		c = s.c[i]
	}
	var carry uint64
	if delta >= 0 {
		c.p, carry = bits.Add64(c.p, uint64(delta), 0)
	} else {
		c.n, carry = bits.Add64(c.n, uint64(-delta), 0) // uint64(-MinInt64) is 2^63
	}
	if carry != 0 {
		return nil, 0, engines.ErrOverflow
	}
	if found {
		s.c[i] = c
	} else {
		s.c = slices.Insert(s.c, i, c)
	}
	if next, err = s.encode(); err != nil {
		return nil, 0, err
	}
	return next, result, nil
}

// StrDel is DEL by self at now: it writes a tombstone stamped after
// everything in state, which wins over every write it has seen (and over
// concurrent ones stamped earlier), and drops the counters on the register
// it replaces. deleted is DEL's reply: false for a key already missing
// (no state, a tombstone, a TTL passed), which writes nothing: next is then
// state. Otherwise next is a new slice.
func StrDel(state []byte, self Origin, now int64) (next []byte, deleted bool, err error) {
	s, err := openStr(state, self)
	if err != nil {
		return nil, false, err
	}
	if !s.live(unixMs(now)) {
		return state, false, nil
	}
	w, err := s.stampAt(now)
	if err != nil {
		return nil, false, err
	}
	t := tombstone(w, self)
	next, err = t.encode()
	return next, err == nil, err
}

// StrExpire is EXPIRE (PEXPIRE, EXPIREAT, PEXPIREAT) by self at now with
// the absolute expiry expireMs (Unix ms), or PERSIST with Persist. ok is
// the command's reply.
//
// A missing key is not changed (ok false, next is state): EXPIRE and
// PERSIST reply 0. So is a key without TTL for PERSIST. An expiry already
// passed at now (expireMs <= now in ms, or <= 0) deletes the key, as Redis
// does, with a tombstone as StrDel writes. An expiry at or after the
// current one (no TTL counts as earliest, Persist as latest) extends it
// under the same epoch, so the longest of concurrent extensions wins and
// PERSIST wins over them all. An earlier one shortens it: it starts an epoch
// stamped as a write, which wins over every expiry its writer had seen,
// extensions included, and over concurrent ones stamped earlier.
// Otherwise next is a new slice; the options NX, XX, GT and LT are the
// caller's, from StrGet.
func StrExpire(state []byte, self Origin, now int64, expireMs int64) (next []byte, ok bool, err error) {
	s, err := openStr(state, self)
	if err != nil {
		return nil, false, err
	}
	nowMs := unixMs(now)
	switch {
	case !s.live(nowMs), expireMs == Persist && (s.e.ms == 0 || s.e.ms == Persist):
		return state, false, nil
	case expireMs <= 0 || expireMs <= nowMs:
		return StrDel(state, self, now)
	case expireMs >= s.e.ms:
		s.e.ms = expireMs
	default:
		w, err := s.stampAt(now)
		if err != nil {
			return nil, false, err
		}
		s.e = expiry{epoch: w, ms: expireMs}
	}
	next, err = s.encode()
	return next, err == nil, err
}

// StrTombstone reports whether a string state reads as missing at now
// however long it is kept, so that the node may drop it: a tombstone
// without counters, or a key whose TTL has passed. stamp is the stamp of
// the tombstone it stands for (an expired key's is its expiry tombstone's,
// see StrIncr). No state, or one with a value, is ok false.
//
// Dropping is the node's decision, and is safe only when no node can still
// hold or receive a register older than stamp (every node has merged the
// tombstone, or a later write, and nothing older is in flight), and no node
// will go on writing the key on a copy that has dropped it while another
// still holds it: a write on no state counts on the register of a fresh key,
// which loses to the tombstone wherever it is still kept. A mesh-wide bound
// under which every node treats such states as no state, before each merge
// and each write, gives both. An expired key must moreover have expired on
// every node's clock (its expiry plus the mesh's clock skew). Until then the
// state must be kept: the store must not drop it at its TTL.
func StrTombstone(state []byte, now int64) (stamp int64, ok bool, err error) {
	s, err := decodeStr(state)
	switch {
	case err != nil, len(state) == 0:
		return 0, false, err
	case !s.exists():
		return s.r.stamp, true, nil
	case !s.expiredAt(unixMs(now)):
		return 0, false, nil
	}
	t, err := s.expiryTombstone()
	if err != nil {
		return 0, false, err
	}
	return t.r.stamp, true, nil
}
