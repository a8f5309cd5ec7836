// Package table is a compact hash table of keys for the store: one per
// database of a shard, built so that an idle rate-limit key costs a few
// dozen bytes and the garbage collector has nothing per key to scan.
//
// # Layout
//
// Keys live in open-addressing slots of 32 bytes, with a control byte each,
// in two pointer-free arrays (linear probing; a deleted slot becomes a
// tombstone that later inserts reuse). A slot holds
//
//   - the name, inline when it has at most 15 bytes, else in the arena;
//   - one 64-bit word: an integer value (a counter, a GCRA TAT) held as
//     is, or the handle of a byte value (a rate-limit state, a string) in
//     the arena;
//   - the expiry in 32 bits, milliseconds after a per-table base; an
//     expiry too far from the base (rare: an EXPIREAT years ahead) is kept
//     in a side map;
//   - the kind (8 bits), the persistence flags (2) and the last access
//     time (24 bits of seconds after a per-table base, 194 days, as Redis'
//     LRU clock).
//
// Byte records of up to arena.MaxRecord bytes live in the table's arena
// (package arena), longer ones in a side list of Go slices. A freed
// record's space goes to the next record of its size; when a quarter of the
// arena is free all the same (the keys were many, then fewer), Step
// retires its sparsest chunks and moves their records out a few slots at a
// time, and the emptied chunks go back to the Go heap.
//
// # Growth
//
// A table that passes 7/8 of its slots (tombstones included) starts a
// rehash into arrays sized for its keys at 70% load, and moves the old
// arrays' keys over a few dozen slots per write (and per Step, which an
// idle owner calls), so no single call pays for the whole table. Lookups
// meanwhile look in both arrays; a key found in the old ones moves on the
// spot. A rehash also moves the expiry and access time bases forward when
// many expiries no longer fit the old base, or the access times' 24 bits
// are about to run out (Step is told the time). An access past them all the
// same (the clock leapt, or Step was not called for days) moves the access
// time base at once, in one pass over the slots.
//
// A Table is not safe for concurrent use: the store calls it with the
// shard's lock held.
package table

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/throttleddb/throttled/store/internal/arena"
)

// Entry is a key's value and bookkeeping as the table takes and gives it.
type Entry struct {
	Kind  uint8
	Flags uint8 // 0..3
	// HasBytes says the value is Bytes; otherwise it is Int.
	HasBytes bool
	Int      int64
	// Bytes is the value when HasBytes. From Get it aliases the table's
	// memory, valid until the next change to the table; the caller may
	// change the bytes in place.
	Bytes []byte
	// ExpireMs is the expiry in Unix ms, 0 for none.
	ExpireMs int64
	// Atime is the last access in Unix seconds.
	Atime int64
}

// slot is one key. 32 bytes, no pointer.
type slot struct {
	name [15]byte
	// info: the name's length (4 bits) or infoLong (then name[:8] is its
	// handle), the flags (2 bits) and infoBytes.
	info uint8
	word uint64
	exp  uint32 // 0 none, farExp: in the side map, else expBase + exp
	meta uint32 // atime (24 bits) | kind (8)
}

func (s *slot) nlen() int        { return int(s.info & 0xf) }
func (s *slot) long() bool       { return s.info&infoLong != 0 }
func (s *slot) hasBytes() bool   { return s.info&infoBytes != 0 }
func (s *slot) flags() uint8     { return s.info >> infoFlagsShift & 3 }
func (s *slot) setFlags(f uint8) { s.info = s.info&^(3<<infoFlagsShift) | (f&3)<<infoFlagsShift }

const (
	infoLong       = 1 << 4
	infoFlagsShift = 5
	infoBytes      = 1 << 7
	farExp         = math.MaxUint32

	atimeBits = 24
	atimeMax  = 1<<atimeBits - 1
	// atimePast is how far back from the newest access a new base goes:
	// 182 days of the 194 the 24 bits hold are for the past, since accesses
	// are recorded at the current second. A key not touched for longer
	// reads as touched then (still the oldest, for LRU).
	atimePast = atimeMax - 1<<20

	ctrlEmpty = 0
	ctrlTomb  = 1
	// A used slot's control byte is a tag: 7 bits of the hash, top bit set.

	minSlots = 8
	// maxLoad: a rehash starts past 7/8 of the slots used or tombstones.
	maxLoadNum, maxLoadDen = 7, 8
	// targetLoad: a rehash sizes the new arrays for 70% of their slots.
	targetLoadNum, targetLoadDen = 7, 10
	// migrateStep is how many old slots each write moves.
	migrateStep = 32
)

// arrays are one generation of slots, with the bases its slots' times
// count from.
type arrays struct {
	ctrl  []uint8
	slots []slot
	used  int // live keys
	tombs int
	// expBase (Unix ms) and atimeBase (Unix seconds) are what a slot's 32
	// and 24 bits of time count from. expSet says expBase is set: arrays
	// made before any expiry was written take the first one's.
	expBase, atimeBase int64
	expSet             bool
}

// Table is a set of keys.
type Table struct {
	hash func([]byte) uint64
	cur  arrays
	// old is the previous generation while a rehash moves its keys; moved
	// is how many of its slots have been moved.
	old   *arrays
	moved int

	// far holds the expiries that do not fit in their slot's 32 bits.
	far map[string]int64
	// lastExp is the latest expiry written and lastAtime the newest
	// access: a rehash centres the new arrays' bases on them. haveTimes
	// says there are some.
	lastExp, lastAtime int64
	haveTimes          bool

	recs arena.Arena
	// compacting says records are being moved out of the arena's retired
	// chunks; compactAt is the next slot (a Pos) to look at.
	compacting bool
	compactAt  int
	// big holds byte records longer than arena.MaxRecord; bigFree lists
	// its unused indexes.
	big     [][]byte
	bigFree []uint32
	bigSize int64
}

// New returns an empty table that hashes keys with hash; it must be the
// hash the caller passes to the methods that take one.
func New(hash func([]byte) uint64) *Table { return &Table{hash: hash} }

// Len returns the number of keys.
func (t *Table) Len() int {
	n := t.cur.used
	if t.old != nil {
		n += t.old.used
	}
	return n
}

// slotCost is what one slot takes: the slot and its control byte.
const slotCost = 33

// Memory returns the bytes the table holds: its slot arrays (both while a
// rehash runs), its arena's chunks, its long records and its far expiries
// (an estimate of a Go map's entry).
func (t *Table) Memory() int64 {
	n := int64(len(t.cur.slots)) * slotCost
	if t.old != nil {
		n += int64(len(t.old.slots)) * slotCost
	}
	return n + t.recs.Size() + t.bigSize + int64(len(t.far))*64
}

// Pos names a key's slot. It stays valid until the next Insert or Step, or
// a Find that moves a key; Delete leaves the others' valid.
type Pos int

func (t *Table) at(p Pos) (*arrays, int) {
	if int(p) < len(t.cur.slots) {
		return &t.cur, int(p)
	}
	return t.old, int(p) - len(t.cur.slots)
}

func (t *Table) slotAt(p Pos) (*arrays, *slot) {
	a, i := t.at(p)
	return a, &a.slots[i]
}

// tag is the control byte of a key with hash h.
func tag(h uint64) uint8 { return uint8(h>>16) | 0x80 }

// home is the first slot a key with hash h probes in n slots.
func home(h uint64, n int) int {
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

// lookup finds key in a, returning its index or -1.
func (t *Table) lookup(a *arrays, key []byte, h uint64) int {
	n := len(a.slots)
	if n == 0 {
		return -1
	}
	tg := tag(h)
	i := home(h, n)
	for range n {
		switch c := a.ctrl[i]; {
		case c == ctrlEmpty:
			return -1
		case c == tg && t.nameIs(&a.slots[i], key):
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
	return -1
}

// Find returns the slot of key, whose hash is h, and whether it is there. A
// key still in the old arrays of a rehash moves to the new ones first.
func (t *Table) Find(key []byte, h uint64) (Pos, bool) {
	if i := t.lookup(&t.cur, key, h); i >= 0 {
		return Pos(i), true
	}
	if t.old == nil {
		return 0, false
	}
	i := t.lookup(t.old, key, h)
	if i < 0 {
		return 0, false
	}
	return Pos(t.move(i, h)), true
}

// move moves slot i of the old arrays, whose key has hash h, to the new
// ones, converting its times to the new bases, and returns its index there.
func (t *Table) move(i int, h uint64) int {
	o := t.old
	s := o.slots[i]
	o.ctrl[i] = ctrlTomb
	o.slots[i] = slot{}
	o.used--
	o.tombs++
	j := t.place(h)
	d := &t.cur.slots[j]
	*d = s
	if s.exp != 0 && (s.exp == farExp || o.expBase != t.cur.expBase) {
		// A far expiry may fit the new base: it comes back in its slot.
		t.putExpire(&t.cur, d, t.expiry(o, &s))
	}
	t.cur.putAtime(d, o.atimeBase+int64(s.meta&atimeMax))
	return j
}

// place takes a free slot of the new arrays for a key with hash h, which
// must not be in the table, and returns its index.
func (t *Table) place(h uint64) int {
	a := &t.cur
	n := len(a.slots)
	i := home(h, n)
	for {
		if c := a.ctrl[i]; c == ctrlEmpty || c == ctrlTomb {
			if c == ctrlTomb {
				a.tombs--
			}
			a.ctrl[i] = tag(h)
			a.used++
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// Insert adds key, with hash h, which must not be in the table (Find said
// so), holding e, and returns its slot.
func (t *Table) Insert(key []byte, h uint64, e Entry) Pos {
	if !t.haveTimes {
		t.lastAtime, t.haveTimes = e.Atime, true
	}
	t.grow()
	t.step(migrateStep)
	i := t.place(h)
	s := &t.cur.slots[i]
	*s = slot{}
	if len(key) <= 15 {
		s.info = uint8(len(key))
		copy(s.name[:], key)
	} else {
		s.info = infoLong
		binary.LittleEndian.PutUint64(s.name[:8], t.putBlob(key))
	}
	p := Pos(i)
	t.Set(p, e)
	return p
}

// grow starts a rehash when the new arrays are too full, finishing the
// one under way first if it has not: its keys must all move before the
// arrays can be replaced again.
func (t *Table) grow() {
	a := &t.cur
	if (a.used+a.tombs+1)*maxLoadDen <= len(a.slots)*maxLoadNum {
		return
	}
	t.finish()
	t.rehash()
}

// rehash starts moving every key to arrays sized for them at targetLoad,
// whose bases are centred on the newest times written.
func (t *Table) rehash() {
	n := max(minSlots, (t.Len()+1)*targetLoadDen/targetLoadNum)
	n = (n + 7) &^ 7
	old := t.cur
	t.cur = arrays{ctrl: make([]uint8, n), slots: make([]slot, n),
		expBase: t.lastExp - 1<<31, expSet: t.lastExp != 0, atimeBase: t.lastAtime - atimePast}
	if old.used > 0 {
		t.old, t.moved = &old, 0
	}
}

// finish moves every key left in the old arrays.
func (t *Table) finish() { t.step(math.MaxInt) }

// Step moves up to n slots of a rehash under way; an owner calls it now and
// then, with the current Unix second, so that an idle table does not hold
// two generations for long. With no rehash under way it starts one when
// tombstones or a lost majority of keys waste the arrays, or when the
// access times' 24 bits are about to run out. It reports whether a rehash
// or a compaction is under way, for the owner to call again soon.
func (t *Table) Step(n int, sec int64) bool {
	t.lastAtime = max(t.lastAtime, sec)
	t.step(n)
	t.compact(n)
	if t.old == nil && t.wasteful() {
		t.rehash()
	}
	return t.old != nil || t.compacting
}

// wasteful reports whether the arrays call for a rehash: mostly empty or
// tombstones, or times that no longer fit their bases well.
func (t *Table) wasteful() bool {
	a := &t.cur
	if len(a.slots) == 0 {
		return false
	}
	sparse := len(a.slots) > 4*minSlots && t.Len()*4 < len(a.slots)
	tombs := a.tombs > max(a.used, minSlots)
	// Expiries have moved away from the base (weeks went by): a rehash
	// centres a new one, if that is far enough to change something.
	drift := len(t.far) > max(t.Len()/16, minSlots) && abs(t.lastExp-1<<31-a.expBase) > 1<<30
	drift = drift || t.lastAtime-a.atimeBase > atimeMax-1<<19 // 6 days left
	return sparse || tombs || drift
}

func (t *Table) step(n int) {
	o := t.old
	if o == nil {
		return
	}
	for ; n > 0 && t.moved < len(o.slots); n, t.moved = n-1, t.moved+1 {
		if o.ctrl[t.moved] >= 0x80 {
			t.move(t.moved, t.hash(t.nameOf(&o.slots[t.moved])))
		}
	}
	if t.moved == len(o.slots) {
		t.old = nil
	}
}

// Compaction starts when the arena's free records reach a quarter of it
// and at least compactMin bytes, and retires up to compactChunks chunks.
const (
	compactMin    = 4 * arena.ChunkSize
	compactChunks = 16
)

// compact looks at up to n slots for records in retired chunks and moves
// them, retiring the sparsest chunks first when the arena holds too much
// free space. A rehash that starts meanwhile may move slots behind the
// walk: a walk that ends with records left in retired chunks starts over.
func (t *Table) compact(n int) {
	if !t.compacting {
		if free := t.recs.FreeBytes(); free < compactMin || free < t.recs.Size()/4 {
			return
		}
		t.recs.Retire(t.recs.Sparsest(compactChunks)...)
		if t.compacting, t.compactAt = t.recs.Retiring(), 0; !t.compacting {
			return // the chunks retired were empty and went at once
		}
	}
	total := len(t.cur.slots)
	if t.old != nil {
		total += len(t.old.slots)
	}
	for ; n > 0 && t.compactAt < total; n, t.compactAt = n-1, t.compactAt+1 {
		a, i := t.at(Pos(t.compactAt))
		if a.ctrl[i] < 0x80 {
			continue
		}
		s := &a.slots[i]
		if s.hasBytes() {
			s.word = t.rehome(s.word)
		}
		if s.long() {
			binary.LittleEndian.PutUint64(s.name[:8], t.rehome(binary.LittleEndian.Uint64(s.name[:8])))
		}
	}
	if t.compactAt >= total {
		t.compacting, t.compactAt = t.recs.Retiring(), 0
	}
}

// rehome returns blob handle h, its record moved out of the arena's
// retired chunk if it is in one.
func (t *Table) rehome(h uint64) uint64 {
	if h&bigBit != 0 || h>>32 == 0 || !t.recs.Retired(arena.Ref(h)) {
		return h
	}
	moved := t.putBlob(t.blob(h)) // the old record stays until freed below
	t.freeBlob(h)
	return moved
}

// Delete removes the key at p, freeing its records.
func (t *Table) Delete(p Pos) {
	a, i := t.at(p)
	s := &a.slots[i]
	if s.exp == farExp {
		delete(t.far, string(t.nameOf(s)))
	}
	if s.hasBytes() {
		t.freeBlob(s.word)
	}
	if s.long() {
		t.freeBlob(binary.LittleEndian.Uint64(s.name[:8]))
	}
	*s = slot{}
	a.ctrl[i] = ctrlTomb
	a.used--
	a.tombs++
}

// Key returns the name of the key at p; it aliases the table's memory and
// is valid until the next change.
func (t *Table) Key(p Pos) []byte {
	_, s := t.slotAt(p)
	return t.nameOf(s)
}

func (t *Table) nameOf(s *slot) []byte {
	if s.long() {
		return t.blob(binary.LittleEndian.Uint64(s.name[:8]))
	}
	return s.name[:s.nlen()]
}

func (t *Table) nameIs(s *slot, key []byte) bool {
	if !s.long() {
		return s.nlen() == len(key) && string(s.name[:s.nlen()]) == string(key)
	}
	return string(t.blob(binary.LittleEndian.Uint64(s.name[:8]))) == string(key)
}

// Get returns the entry at p.
func (t *Table) Get(p Pos) Entry {
	a, s := t.slotAt(p)
	e := Entry{
		Kind:     uint8(s.meta >> atimeBits),
		Flags:    s.flags(),
		HasBytes: s.hasBytes(),
		ExpireMs: t.expiry(a, s),
		Atime:    a.atimeBase + int64(s.meta&atimeMax),
	}
	if e.HasBytes {
		e.Bytes = t.blob(s.word)
	} else {
		e.Int = int64(s.word)
	}
	return e
}

// ExpireMs returns the expiry of the key at p (Unix ms, 0 for none).
func (t *Table) ExpireMs(p Pos) int64 {
	a, s := t.slotAt(p)
	return t.expiry(a, s)
}

func (t *Table) expiry(a *arrays, s *slot) int64 {
	switch s.exp {
	case 0:
		return 0
	case farExp:
		return t.far[string(t.nameOf(s))]
	}
	return a.expBase + int64(s.exp)
}

// Set replaces the entry at p with e, copying e.Bytes (which may be the
// bytes Get returned, changed in place).
func (t *Table) Set(p Pos, e Entry) {
	a, s := t.slotAt(p)
	had := s.hasBytes()
	switch {
	case e.HasBytes && had && sameRecord(s.word, len(e.Bytes)):
		s.word = resized(s.word, len(e.Bytes))
		copy(t.blob(s.word), e.Bytes) // nothing moves when e.Bytes is the record itself
	case e.HasBytes:
		// Copy before freeing: e.Bytes may be the old record, which a
		// free overwrites with its free-list link.
		w := t.putBlob(e.Bytes)
		if had {
			t.freeBlob(s.word)
		}
		s.word = w
	default:
		if had {
			t.freeBlob(s.word)
		}
		s.word = uint64(e.Int)
	}
	t.SetExpire(p, e.ExpireMs)
	s.meta = uint32(e.Kind) << atimeBits
	s.info &^= infoBytes
	if e.HasBytes {
		s.info |= infoBytes
	}
	s.setFlags(e.Flags)
	t.touch(a, s, e.Atime)
}

// SetFlags changes the flags of the key at p.
func (t *Table) SetFlags(p Pos, f uint8) {
	_, s := t.slotAt(p)
	s.setFlags(f)
}

// Touch records an access to the key at p at Unix second sec.
func (t *Table) Touch(p Pos, sec int64) {
	a, s := t.slotAt(p)
	t.touch(a, s, sec)
}

func (t *Table) touch(a *arrays, s *slot, sec int64) {
	a.putAtime(s, sec)
	t.lastAtime = max(t.lastAtime, sec) // a Set may carry an older access back
}

// putAtime records access time sec in s, a slot of a.
func (a *arrays) putAtime(s *slot, sec int64) {
	if sec-a.atimeBase > atimeMax {
		// Step did not move the base in time (it was not called for days,
		// or the clock leapt): move it here, in place, so that no access
		// is recorded wrong.
		a.rebaseAtime(sec - atimePast)
	}
	s.meta = s.meta&^atimeMax | uint32(clamp(sec-a.atimeBase, atimeMax))
}

// rebaseAtime moves a's access time base to base, converting every slot's
// access time: a pass over all of a's slots, which a rehash otherwise does
// a few at a time. An access older than the new base reads as at the base.
func (a *arrays) rebaseAtime(base int64) {
	for i := range a.slots {
		if a.ctrl[i] >= 0x80 {
			s := &a.slots[i]
			at := a.atimeBase + int64(s.meta&atimeMax)
			s.meta = s.meta&^atimeMax | uint32(clamp(at-base, atimeMax))
		}
	}
	a.atimeBase = base
}

// SetExpire sets the expiry of the key at p (Unix ms, 0 for none).
func (t *Table) SetExpire(p Pos, ms int64) {
	a, s := t.slotAt(p)
	if ms != 0 {
		t.lastExp = ms
	}
	t.putExpire(a, s, ms)
}

// putExpire writes expiry ms into s, a slot of a: in its 32 bits when it
// fits after a's base, else in the far map.
func (t *Table) putExpire(a *arrays, s *slot, ms int64) {
	if s.exp == farExp {
		delete(t.far, string(t.nameOf(s)))
	}
	if ms != 0 && !a.expSet {
		a.expBase, a.expSet = ms-1<<31, true
	}
	switch d := ms - a.expBase; {
	case ms == 0:
		s.exp = 0
	case d > 0 && d < farExp:
		s.exp = uint32(d)
	default:
		if t.far == nil {
			t.far = make(map[string]int64)
		}
		t.far[string(t.nameOf(s))] = ms
		s.exp = farExp
	}
}

// Range calls fn for the keys of the table, walking every slot from the
// from-th (modulo their number, so a random from samples), until fn returns
// false. fn may Delete the key it is given, but not Insert, Find or Step.
func (t *Table) Range(from uint64, fn func(p Pos) bool) {
	n := len(t.cur.slots)
	total := n
	if t.old != nil {
		total += len(t.old.slots)
	}
	if total == 0 {
		return
	}
	i := int(from % uint64(total))
	for range total {
		a, j := t.at(Pos(i))
		if a.ctrl[j] >= 0x80 && !fn(Pos(i)) {
			return
		}
		if i++; i == total {
			i = 0
		}
	}
}

func abs(v int64) int64 { return max(v, -v) }

func clamp(v, hi int64) int64 { return min(max(v, 0), hi) }
