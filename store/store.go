package store

import (
	"cmp"
	"context"
	"errors"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/internal/pace"
	"github.com/throttleddb/throttled/store/internal/table"
)

// Errors returned by the store.
var (
	// ErrBadConfig is returned by Config.Validate for an unusable configuration.
	ErrBadConfig = errors.New("store: invalid configuration")
)

// Config configures a Store. Zero fields mean the defaults.
type Config struct {
	// Databases is the number of logical databases (SELECT 0..Databases-1).
	Databases int
	// Shards is the number of hash shards, a power of two.
	Shards int
	// MaxKeys bounds the number of keys (0: no bound); see evict.go.
	MaxKeys int64
	// MaxMemory bounds the memory keys are accounted to use, in bytes (0: no
	// bound); see evict.go and EntryOverhead.
	MaxMemory int64
	// EvictionPolicy is what a write past the bounds does (default
	// VolatileTTL).
	EvictionPolicy EvictionPolicy
}

// DefaultConfig returns the default configuration: 16 databases, 256 shards.
func DefaultConfig() Config { return Config{Databases: 16, Shards: 256} }

// Validate fills zero fields with defaults and checks the rest.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.Databases == 0 {
		c.Databases = d.Databases
	}
	if c.Shards == 0 {
		c.Shards = d.Shards
	}
	if c.Databases < 1 || c.Databases > WireSystemDB {
		return errors.Join(ErrBadConfig, errors.New("databases must be between 1 and 65535"))
	}
	if c.Shards < 1 || c.Shards&(c.Shards-1) != 0 || c.Shards > 1<<16 {
		return errors.Join(ErrBadConfig, errors.New("shards must be a power of two up to 65536"))
	}
	if c.MaxKeys < 0 || c.MaxMemory < 0 {
		return errors.Join(ErrBadConfig, errors.New("maxkeys and maxmemory must not be negative"))
	}
	if int(c.EvictionPolicy) >= len(policyNames) {
		return errors.Join(ErrBadConfig, errors.New("unknown eviction policy"))
	}
	return nil
}

// Store is the keyspace. It is safe for concurrent use by commands that follow
// the locking rules of the package doc.
type Store struct {
	seed   maphash.Seed
	shards []shard
	mask   uint64
	dbs    int

	maxKeys, maxMemory atomic.Int64
	policy             atomic.Uint32 // an EvictionPolicy

	keys        atomic.Int64 // keys in every database, expired ones included until removed
	memory      atomic.Int64 // accounted bytes of every key (see EntryOverhead)
	expiredKeys atomic.Int64 // keys removed because their TTL passed
	released    atomic.Int64 // bytes the sweeper's table steps let go (Released)
	evictedKeys atomic.Int64 // keys removed to stay under MaxKeys/MaxMemory
	// evict wakes the background evictor when a write could not evict
	// enough from its own shard.
	evict chan struct{}

	// journal hears of every change; nil when nothing is persisted.
	journal Journal
	// mode says how changes are recorded for persistence (see saved.go).
	mode mode
	// flushed marks the databases flushed since the last Collect; guarded
	// by holding every shard (Flush) or shard 0 (Collect).
	flushed []bool
	// gone counts the keys of every shard's gone list.
	gone atomic.Int64
	// hold keeps merged states past their expiry (SetHold).
	hold func(db int, key []byte, v Value) bool
	// system hears every change of the system database (SetSystemWatch).
	system func(key []byte, v Value, present bool)
}

// Journal receives every change to the keyspace, for persistence. Calls for
// one key arrive in the order the changes happened: the store makes them
// while it holds the key's shard lock. key and v.Bytes are valid only during
// the call.
//
// The journal and Collect's Collector see databases as numbered outside
// the store (WireDB): the system database as WireSystemDB.
type Journal interface {
	// Set records that key now holds v with expiry expireMs (Unix ms, 0 for
	// none).
	Set(db int, key []byte, v Value, expireMs int64)
	// Delete records that key is gone (deleted or expired).
	Delete(db int, key []byte)
	// FlushDB records that every key of db is gone.
	FlushDB(db int)
}

// SetJournal makes the store report every later change to j, and keep the
// bookkeeping of Collect. Call it before the store is used concurrently. If
// restored keys left the store over its bounds, the background evictor is
// woken now, so that what it evicts reaches the journal too.
func (s *Store) SetJournal(j Journal) {
	s.journal, s.mode = j, modeTrack
	s.wakeEvictor()
}

// entry is a copy of one key's state, read from its shard's table
// (package table), which holds every key of a database of a shard in
// pointer-free slots: the collector scans nothing per key. b aliases the
// table's memory and is valid while the shard is locked and the table
// unchanged.
type entry struct {
	kind     Kind
	flags    flags  // persistence bookkeeping (see saved.go)
	atime    int64  // last access in Unix seconds, for LRU eviction
	n        int64  // KindInt's integer
	expireMs int64  // Unix milliseconds; 0 means no expiry
	b        []byte // the bytes of every other kind; nil for KindInt
	// packed says the state is packed into n (packed.go); b is nil until
	// valueIn gives the bytes back.
	packed bool
}

func entryOf(e table.Entry) entry {
	en := entry{kind: Kind(e.Kind), flags: flags(e.Flags), atime: e.Atime, n: e.Int, expireMs: e.ExpireMs}
	if e.HasBytes {
		en.b = e.Bytes
	} else {
		en.packed = packable(en.kind)
	}
	return en
}

// value returns the entry's value; a packed state's bytes in a new slice.
func (e entry) value() Value { return e.valueIn(nil) }

// valueIn returns the entry's value, a packed state's bytes appended to
// buf[:0]: a buf with PackedLen bytes of room takes them without
// allocating.
func (e entry) valueIn(buf []byte) Value {
	if e.packed {
		return Value{Kind: e.kind, Bytes: unpack(buf[:0], e.kind, uint64(e.n), e.expireMs)}
	}
	return Value{Kind: e.kind, Int: e.n, Bytes: e.b}
}

// tableEntry is what the table holds for v with the rest of e.
func tableEntry(v Value, e entry) table.Entry {
	te := table.Entry{Kind: uint8(v.Kind), Flags: uint8(e.flags), Atime: e.atime, ExpireMs: e.expireMs}
	if v.Kind == KindInt {
		te.Int = v.Int
	} else if word, ok := pack(v, e.expireMs); ok {
		te.Int = int64(word)
	} else {
		te.HasBytes, te.Bytes = true, v.Bytes
	}
	return te
}

// ref is a key's place: its table and slot. It is valid until the table
// takes a new key (Insert) or moves some (Step).
type ref struct {
	tab *table.Table
	p   table.Pos
}

func (r ref) get() entry { return entryOf(r.tab.Get(r.p)) }

// EntryOverhead is what a key costs in memory besides its name and value
// in MaxMemory's accounting: its table slot, 32 bytes and a control byte,
// at the 78% load a table averages between growths. A name of up to 15
// bytes, an integer value and a packed state (packed.go) cost nothing more
// (they are in the slot); see recordCost for the rest. bench/memory
// measured RSS growth 2-10% above this count on idle CL.THROTTLE, TB and
// FWC keys; a table that is moving its keys to larger arrays holds both
// for a while (up to 80% more slots).
const EntryOverhead = 42

// inlineName is the longest name a slot holds itself.
const inlineName = 15

// recordCost is what n bytes held in a table's arena cost: n rounded up to
// 8 bytes.
func recordCost(n int) int64 { return int64((n + 7) &^ 7) }

// bytesCost is what the bytes of a value held as te cost: nothing for an
// integer or a packed state, which the slot holds.
func bytesCost(te table.Entry) int64 {
	if !te.HasBytes {
		return 0
	}
	return recordCost(len(te.Bytes))
}

func cost(key []byte, te table.Entry) int64 {
	c := EntryOverhead + bytesCost(te)
	if len(key) > inlineName {
		c += recordCost(len(key))
	}
	return c
}

type shard struct {
	mu sync.Mutex // guards everything below
	// dbs holds one table per database, created on first write.
	dbs []*table.Table
	// expires counts the keys with an expiry in each database.
	expires []int
	// memory is the accounted bytes of each database's keys.
	memory []int64
	// watchers lists the WATCHes on keys of this shard; nil when there are none,
	// which keeps the write path to one nil check.
	watchers map[dbKey][]watcher
	// gone lists the saved keys removed since the last Collect (saved.go).
	gone []dbKey
	// unpacked holds a packed state's bytes while the journal or a
	// Collector is handed them (saved.go).
	unpacked [PackedLen]byte
}

// each calls fn for every key of db in sh, expired or not, from the
// from-th slot on (a random from samples), until fn returns false. fn may
// remove the key it is given, nothing else.
func (sh *shard) each(db int, from uint64, fn func(key []byte, r ref) bool) {
	tab := sh.dbs[db]
	if tab == nil {
		return
	}
	tab.Range(from, func(p table.Pos) bool { return fn(tab.Key(p), ref{tab, p}) })
}

// len returns the number of keys of db in sh.
func (sh *shard) len(db int) int {
	if tab := sh.dbs[db]; tab != nil {
		return tab.Len()
	}
	return 0
}

type dbKey struct {
	db  int
	key string
}

// New returns an empty store.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		seed:   maphash.MakeSeed(),
		shards: make([]shard, cfg.Shards),
		mask:   uint64(cfg.Shards - 1),
		dbs:    cfg.Databases,

		evict:   make(chan struct{}, 1),
		flushed: make([]bool, cfg.Databases+1),
	}
	s.policy.Store(uint32(cfg.EvictionPolicy))
	s.SetLimits(cfg.MaxKeys, cfg.MaxMemory)
	for i := range s.shards {
		s.shards[i].dbs = make([]*table.Table, cfg.Databases+1)
		s.shards[i].expires = make([]int, cfg.Databases+1)
		s.shards[i].memory = make([]int64, cfg.Databases+1)
	}
	return s, nil
}

// Databases returns the number of databases clients can SELECT.
func (s *Store) Databases() int { return s.dbs }

// SystemDB is the index of the system database, which follows the ones
// clients can SELECT: the server keeps its own replicated state there (the
// rate-limit policies). It is saved, replicated, digested and restored as
// every database is, but no client command names it, FLUSHALL and
// INFO keyspace leave it alone, and eviction never takes its keys.
func (s *Store) SystemDB() int { return s.dbs }

// AllDatabases is the number of databases including the system database.
func (s *Store) AllDatabases() int { return s.dbs + 1 }

// WireSystemDB is the system database's number outside the store: on disk,
// in Raft snapshots and in mesh frames. It is fixed, above every database a
// client can SELECT, so a node restarted with another --databases still
// finds its system keys there.
const WireSystemDB = 1<<16 - 1

// WireDB is db's number outside the store (persistence, snapshots, frames).
func (s *Store) WireDB(db int) int {
	if db == s.dbs {
		return WireSystemDB
	}
	return db
}

// LocalDB is the store's database numbered wire outside it, and false when
// the store has no such database.
func (s *Store) LocalDB(wire int) (int, bool) {
	if wire == WireSystemDB {
		return s.dbs, true
	}
	return wire, wire >= 0 && wire < s.dbs
}

// SetSystemWatch makes fn hear every change of the system database: a
// key's new value (present) or its removal, and for a flush of the whole
// database a nil key. fn is called with the key's shard locked (every shard
// for a flush), and v is valid only during the call; it must not call the
// store. Set it before the store is used.
func (s *Store) SetSystemWatch(fn func(key []byte, v Value, present bool)) { s.system = fn }

// ExpiredKeys returns how many keys have been removed because they expired.
func (s *Store) ExpiredKeys() int64 { return s.expiredKeys.Load() }

func (s *Store) hash(key []byte) uint64 { return maphash.Bytes(s.seed, key) }

// ShardOf returns the index of the shard that holds key.
func (s *Store) ShardOf(key []byte) int { return int(s.hash(key) & s.mask) }

// LockSet is the set of shards a command needs. Reuse one per connection to
// avoid allocating.
type LockSet struct {
	idx []int
	all bool
}

// Reset empties the set.
func (l *LockSet) Reset() { l.idx, l.all = l.idx[:0], false }

// AddAll asks for every shard.
func (l *LockSet) AddAll() { l.all = true }

// Add asks for the shard of key.
func (l *LockSet) Add(s *Store, key []byte) { l.idx = append(l.idx, s.ShardOf(key)) }

// Lock locks the shards of l in ascending order.
func (s *Store) Lock(l *LockSet) {
	if l.all {
		for i := range s.shards {
			s.shards[i].mu.Lock()
		}
		return
	}
	if len(l.idx) > 1 {
		slices.Sort(l.idx)
		l.idx = slices.Compact(l.idx)
	}
	for _, i := range l.idx {
		s.shards[i].mu.Lock()
	}
}

// Extend makes sure the shard of key is locked in l, which the caller holds
// (Lock), for a script that touches a key it did not declare. It waits only
// for a shard above every shard l holds, so it cannot deadlock with commands,
// which lock in ascending order; a lower shard it only tries, and it reports
// false when another command holds that one. Unlock releases what it took.
func (s *Store) Extend(l *LockSet, key []byte) bool {
	return l.all || s.extend(l, s.ShardOf(key))
}

// ExtendAll makes l hold every shard, as Extend does for each; on false it
// holds some of them more (Unlock releases them all).
func (s *Store) ExtendAll(l *LockSet) bool {
	if l.all {
		return true
	}
	for i := range s.shards {
		if !s.extend(l, i) {
			return false
		}
	}
	return true
}

// extend adds shard i to the held set l, keeping l.idx sorted.
func (s *Store) extend(l *LockSet, i int) bool {
	pos, held := slices.BinarySearch(l.idx, i)
	switch {
	case held:
		return true
	case pos == len(l.idx):
		s.shards[i].mu.Lock()
	case !s.shards[i].mu.TryLock():
		return false
	}
	l.idx = slices.Insert(l.idx, pos, i)
	return true
}

// Unlock releases what Lock took.
func (s *Store) Unlock(l *LockSet) {
	if l.all {
		for i := range s.shards {
			s.shards[i].mu.Unlock()
		}
		return
	}
	for _, i := range l.idx {
		s.shards[i].mu.Unlock()
	}
}

// Barrier waits until every command holding a shard lock has finished: it
// takes and releases each shard's lock in turn, never two at once, so
// commands hardly notice. The active-active mode uses it to know that every
// command that read the clock before some instant has written.
func (s *Store) Barrier() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
		s.shards[i].mu.Unlock() //nolint:staticcheck // an empty critical section is the point
	}
}

// Shards returns how many shards the store has.
func (s *Store) Shards() int { return len(s.shards) }

// EachInShard calls fn, with shard i locked, for every live key of shard i
// at instant now in every database, with its value and expiry (Unix ms, 0
// for none); a merged state held past its expiry (SetHold) counts as live.
// key and v are valid only during the call. It lets a caller walk the whole
// keyspace one shard at a time, holding up one shard's commands at a time.
func (s *Store) EachInShard(i int, now int64, fn func(db int, key string, v Value, expireMs int64)) {
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := s.Tx(now)
	buf := make([]byte, 0, PackedLen)
	for db := range sh.dbs {
		sh.each(db, 0, func(k []byte, r ref) bool {
			e := r.get()
			v := e.valueIn(buf)
			if !t.expired(e) || s.Held(db, k, v) {
				fn(db, string(k), v, e.expireMs)
			}
			return true
		})
	}
}

// Tx works on the keyspace at one instant. Its methods assume the caller holds
// the locks of the shards they touch (see Lock); the whole-keyspace methods
// assume every shard is locked.
type Tx struct {
	s     *Store
	now   int64
	nowMs int64
}

// Tx returns a view of the store at now (Unix nanoseconds).
func (s *Store) Tx(now int64) Tx {
	return Tx{s: s, now: now, nowMs: floorDiv(now, 1e6)}
}

// Now returns the instant of the transaction in Unix nanoseconds.
func (t Tx) Now() int64 { return t.now }

// NowMs returns the instant of the transaction in Unix milliseconds.
func (t Tx) NowMs() int64 { return t.nowMs }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (t Tx) shard(key []byte) *shard { sh, _ := t.shardHash(key); return sh }

// shardHash returns key's shard and hash, which the shard's tables use too.
func (t Tx) shardHash(key []byte) (*shard, uint64) {
	h := t.s.hash(key)
	return &t.s.shards[h&t.s.mask], h
}

// Expired reports whether a key whose expiry is expireMs (Unix ms, 0 for
// none) is gone at nowMs: the key is there through its expiry millisecond
// and gone after (the package doc's rule). Lazy expiry, the sweeper,
// eviction, Put and persistence's Load all decide with it.
func Expired(expireMs, nowMs int64) bool { return expireMs != 0 && nowMs > expireMs }

// ExpiryIn returns the expiry of a key given a relative TTL of ttlMs >= 0 at
// t's instant, counted as Redis counts PEXPIRE: from the current whole
// millisecond. A TTL of 0 keeps the key through the rest of it.
func (t Tx) ExpiryIn(ttlMs int64) int64 { return keepable(t.nowMs + ttlMs) }

// ExpiryAt returns the expiry of a key that must still be there at the
// instant at (Unix ns, not before the writer's own): the millisecond that
// holds at, even when that is the current one.
func ExpiryAt(at int64) int64 { return keepable(floorDiv(at, 1e6)) }

// keepable returns expireMs, except that Unix ms 0, which the store reads as
// "no expiry", becomes 1: a key written on a clock set near the epoch then
// lives a millisecond longer rather than forever.
func keepable(expireMs int64) int64 {
	if expireMs == 0 {
		return 1
	}
	return expireMs
}

func (t Tx) expired(e entry) bool { return Expired(e.expireMs, t.nowMs) }

// SetHold has the store keep a merged state (KindMerged) past its expiry
// while hold says so: a mesh node keeps a key whose own admissions have not
// reached every peer yet, as they still count in the others' view of it.
// hold is called with the key's shard locked, and v valid only during the
// call. Set it before the store is used.
func (s *Store) SetHold(hold func(db int, key []byte, v Value) bool) { s.hold = hold }

// Held reports whether the store keeps v under key past its expiry (see
// SetHold). Loading a data folder keeps such a value too.
func (s *Store) Held(db int, key []byte, v Value) bool {
	return v.Kind == KindMerged && s.hold != nil && s.hold(db, key, v)
}

// expire removes e if it has expired and reports whether it did. A held
// merged state stays, its expiry unchanged, so that what the whole-keyspace
// reads (ForEach, Scan, Digest) see of it depends on its expiry alone,
// which every node derives alike from the same state, and not on what this
// node still holds.
func (t Tx) expire(sh *shard, db int, key []byte, r ref) bool {
	e := r.get()
	if !t.expired(e) {
		return false
	}
	if e.kind == KindMerged && t.s.Held(db, key, e.value()) {
		return false
	}
	t.s.remove(sh, db, key, r)
	return true
}

// lookup returns the place of key, whose hash is h, if it is live,
// removing it first if it has expired.
func (t Tx) lookup(sh *shard, db int, key []byte, h uint64) (ref, bool) {
	r, ok := sh.find(db, key, h)
	if !ok {
		return ref{}, false
	}
	if t.expire(sh, db, key, r) {
		t.s.expiredKeys.Add(1)
		return ref{}, false
	}
	r.tab.Touch(r.p, t.nowMs/1000)
	return r, true
}

// find returns the place of key, whose hash is h, in db, expired or not.
func (sh *shard) find(db int, key []byte, h uint64) (ref, bool) {
	tab := sh.dbs[db]
	if tab == nil {
		return ref{}, false
	}
	p, ok := tab.Find(key, h)
	return ref{tab, p}, ok
}

// remove deletes the key at r and tells watchers and the journal. key may
// be the table's own copy (Table.Key): it is copied before the slot goes.
func (s *Store) remove(sh *shard, db int, key []byte, r ref) {
	te := r.tab.Get(r.p)
	e := entryOf(te)
	if e.expireMs != 0 {
		sh.expires[db]--
	}
	s.account(sh, db, -1, -cost(key, te))
	if k := r.tab.Key(r.p); len(k) > 0 && len(key) > 0 && &k[0] == &key[0] {
		key = append([]byte(nil), key...) // the slot's copy goes with it
	}
	r.tab.Delete(r.p)
	sh.touch(db, key, true)
	s.removed(sh, db, key, e.flags)
	if db == s.dbs && s.system != nil {
		s.system(key, Value{}, false)
	}
}

// changed tells watchers and the journal that key, at r, was written.
func (s *Store) changed(sh *shard, db int, key []byte, r ref) {
	sh.touch(db, key, false)
	s.written(sh, db, key, r)
	if db == s.dbs && s.system != nil {
		s.system(key, r.get().value(), true)
	}
}

// account adds keys and bytes to db's counts in sh and the store's totals.
func (s *Store) account(sh *shard, db int, keys, bytes int64) {
	sh.memory[db] += bytes
	if keys != 0 {
		s.keys.Add(keys)
	}
	if bytes != 0 {
		s.memory.Add(bytes)
	}
}

// setValue replaces the value at r with v and its expiry with expireMs,
// keeping the memory accounting right.
func (s *Store) setValue(sh *shard, db int, r ref, v Value, expireMs int64) {
	cur := r.tab.Get(r.p)
	e := entryOf(cur)
	e.expireMs = expireMs
	te := tableEntry(v, e)
	r.tab.Set(r.p, te)
	if d := bytesCost(te) - bytesCost(cur); d != 0 {
		s.account(sh, db, 0, d)
	}
}

// peek returns key's entry, expired or not, without removing or touching
// it, and whether the table holds it.
func (t Tx) peek(db int, key []byte) (entry, bool) {
	sh, h := t.shardHash(key)
	r, ok := sh.find(db, key, h)
	if !ok {
		return entry{}, false
	}
	return r.get(), true
}

// Get returns the value of key and whether it exists.
func (t Tx) Get(db int, key []byte) (Value, bool) { return t.GetIn(db, key, nil) }

// GetIn is Get, with a packed state's bytes (packed.go) appended to buf[:0]
// rather than to a new slice: a hot path that owns a buffer of PackedLen
// bytes allocates nothing.
func (t Tx) GetIn(db int, key, buf []byte) (Value, bool) {
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	if !ok {
		return Value{}, false
	}
	return r.get().valueIn(buf), true
}

// Exists reports whether key exists.
func (t Tx) Exists(db int, key []byte) bool {
	sh, h := t.shardHash(key)
	_, ok := t.lookup(sh, db, key, h)
	return ok
}

// ExpireMs returns the key's expiry in Unix ms (0 when it has none) and
// whether the key exists.
func (t Tx) ExpireMs(db int, key []byte) (int64, bool) {
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	if !ok {
		return 0, false
	}
	return r.tab.ExpireMs(r.p), true
}

// Put stores v under key with expiry expireMs (Unix ms, 0 for none),
// replacing any previous value and expiry. The store takes ownership of
// v.Bytes and copies key only when the key is new. An expiry that has already
// passed (Expired) deletes the key, as Redis does for SET with a past EXAT;
// the current millisecond has not passed. A merged state the store holds
// past its expiry (SetHold) is stored all the same, as it would be kept.
func (t Tx) Put(db int, key []byte, v Value, expireMs int64) {
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	if Expired(expireMs, t.nowMs) && !t.s.Held(db, key, v) {
		if ok {
			t.s.remove(sh, db, key, r)
		}
		return
	}
	t.put(sh, db, key, h, r, ok, v, expireMs)
}

// put stores v under key, whose hash is h, with expiry expireMs, whatever
// that expiry; r is key's place when ok (it is live), else it is new. The
// table copies v.Bytes.
func (t Tx) put(sh *shard, db int, key []byte, h uint64, r ref, ok bool, v Value, expireMs int64) {
	if !ok {
		tab := sh.dbs[db]
		if tab == nil {
			tab = table.New(t.s.hash)
			sh.dbs[db] = tab
		}
		te := tableEntry(v, entry{atime: t.nowMs / 1000, expireMs: expireMs})
		r = ref{tab, tab.Insert(key, h, te)}
		t.s.account(sh, db, 1, cost(key, te))
		if expireMs != 0 {
			sh.expires[db]++
		}
	} else {
		if old := r.tab.ExpireMs(r.p); (old != 0) != (expireMs != 0) {
			if expireMs != 0 {
				sh.expires[db]++
			} else {
				sh.expires[db]--
			}
		}
		t.s.setValue(sh, db, r, v, expireMs)
	}
	t.s.changed(sh, db, key, r)
	if t.s.evicting() && t.s.over() {
		t.s.evictSome(sh, t.nowMs, db, key)
	}
}

// PutKeepTTL stores v under key keeping the key's current expiry (none for a
// new key). Like Put it takes ownership of v.Bytes.
func (t Tx) PutKeepTTL(db int, key []byte, v Value) {
	sh, h := t.shardHash(key)
	if r, ok := t.lookup(sh, db, key, h); ok {
		t.s.setValue(sh, db, r, v, r.tab.ExpireMs(r.p))
		t.s.changed(sh, db, key, r)
		return
	}
	t.Put(db, key, v, 0)
}

// Delete removes key and reports whether it existed.
func (t Tx) Delete(db int, key []byte) bool {
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	if !ok {
		return false
	}
	t.s.remove(sh, db, key, r)
	return true
}

// SetExpire sets the expiry of an existing key (Unix ms, 0 removes it) and
// reports whether the key existed. An expiry not after the current
// millisecond deletes the key, as Redis' EXPIRE family does (its
// checkAlreadyExpired); writers that must keep a key through the current
// millisecond use Put (see the package doc).
func (t Tx) SetExpire(db int, key []byte, expireMs int64) bool {
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	if !ok {
		return false
	}
	if expireMs != 0 && expireMs <= t.nowMs {
		t.s.remove(sh, db, key, r)
		return true
	}
	if old := r.tab.ExpireMs(r.p); (old != 0) != (expireMs != 0) {
		if expireMs != 0 {
			sh.expires[db]++
		} else {
			sh.expires[db]--
		}
	}
	if e := r.get(); packable(e.kind) {
		t.s.setValue(sh, db, r, e.value(), expireMs) // packed from the expiry
	} else {
		r.tab.SetExpire(r.p, expireMs)
	}
	t.s.changed(sh, db, key, r)
	return true
}

// DBSize returns the number of keys in db, counting keys that have expired but
// not been removed yet, as Redis does.
func (t Tx) DBSize(db int) int {
	n := 0
	for i := range t.s.shards {
		n += t.s.shards[i].len(db)
	}
	return n
}

// Counts returns the number of keys and of keys with an expiry in db, locking
// one shard at a time (for INFO: not a snapshot of one instant).
func (s *Store) Counts(db int) (keys, expires int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		keys += sh.len(db)
		expires += sh.expires[db]
		sh.mu.Unlock()
	}
	return keys, expires
}

// Flush removes every key of db.
func (t Tx) Flush(db int) {
	for i := range t.s.shards {
		sh := &t.s.shards[i]
		if sh.watchers != nil {
			sh.each(db, 0, func(k []byte, _ ref) bool {
				sh.touch(db, k, true)
				return true
			})
		}
		t.s.account(sh, db, -int64(sh.len(db)), -sh.memory[db])
		sh.dbs[db] = nil
		sh.expires[db] = 0
	}
	t.s.flushedDB(db)
	if db == t.s.dbs && t.s.system != nil {
		t.s.system(nil, Value{}, false)
	}
}

// ForEach calls fn for every live key of db, with its value and expiry (Unix
// ms, 0 for none), in no particular order, until fn returns false. key and v
// are valid only during the call.
func (t Tx) ForEach(db int, fn func(key string, v Value, expireMs int64) bool) {
	buf := make([]byte, 0, PackedLen)
	for i := range t.s.shards {
		more := true
		t.s.shards[i].each(db, 0, func(k []byte, r ref) bool {
			if e := r.get(); !t.expired(e) {
				more = fn(string(k), e.valueIn(buf), e.expireMs)
			}
			return more
		})
		if !more {
			return
		}
	}
}

// Scan returns up to about count live keys of db starting at cursor, and the
// cursor to continue from (0 when the scan is complete). A key present for the
// whole scan is returned at least once, as SCAN guarantees.
//
// The cursor names a shard (high 32 bits) and a position in that shard's keys
// ordered by a 32-bit hash (low 32 bits). Each call visits one shard's table,
// which keeps a call's cost bounded by the shard size rather than the keyspace.
func (t Tx) Scan(db int, cursor uint64, count int, fn func(key string, v Value)) uint64 {
	si := cursor >> 32
	from := uint32(cursor)
	if count < 1 {
		count = 10
	}
	type hk struct {
		h uint32
		k string
		e entry
	}
	var picked []hk
	buf := make([]byte, 0, PackedLen)
	// Visit shards until count keys are found, like Redis returning about
	// COUNT elements per call.
	for ; si < uint64(len(t.s.shards)) && count > 0; si, from = si+1, 0 {
		picked = picked[:0]
		t.s.shards[si].each(db, 0, func(k []byte, r ref) bool {
			if h := uint32(t.s.hash(k) >> 32); h >= from {
				picked = append(picked, hk{h, string(k), r.get()})
			}
			return true
		})
		slices.SortFunc(picked, func(a, b hk) int { return cmp.Compare(a.h, b.h) })
		// Take count keys, plus every key sharing the last taken hash, so the
		// next call can start strictly after that hash.
		n := min(count, len(picked))
		for n > 0 && n < len(picked) && picked[n].h == picked[n-1].h {
			n++
		}
		for _, p := range picked[:n] {
			if !t.expired(p.e) {
				fn(p.k, p.e.valueIn(buf))
			}
		}
		count -= n
		if n < len(picked) {
			// picked[n-1].h < picked[n].h <= MaxUint32, so +1 cannot wrap.
			return si<<32 | uint64(picked[n-1].h+1)
		}
	}
	if si < uint64(len(t.s.shards)) {
		return si << 32
	}
	return 0
}

// SampleExpire removes expired keys from one shard the way Redis' active
// expiry cycle does: it looks at up to 20 keys with an expiry per database and
// repeats while more than a quarter of them had expired, at most rounds times.
// The shard is locked here; the caller holds no lock. It returns how many keys
// it removed.
func (s *Store) SampleExpire(shardIdx int, now int64, rounds int) int {
	const sample = 20
	sh := &s.shards[shardIdx]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	t := s.Tx(now)
	removed := 0
	for db := range sh.dbs {
		for r := 0; r < rounds && sh.expires[db] > 0; r++ {
			seen, gone, visited := 0, 0, 0
			// Starting at a random slot makes this a sample.
			sh.each(db, rand.Uint64(), func(k []byte, at ref) bool {
				visited++
				if exp := at.tab.ExpireMs(at.p); exp != 0 {
					seen++
					if Expired(exp, t.nowMs) && t.expire(sh, db, k, at) {
						gone++
					}
				}
				return seen < sample && visited < 4*sample
			})
			removed += gone
			if gone*4 <= seen || seen == 0 {
				break
			}
		}
	}
	s.expiredKeys.Add(int64(removed))
	return removed
}

// SweepInterval is how often Sweep runs Redis' active expiry cycle (Redis'
// default hz of 10) while it finds keys to remove; sweepIdle is the longest
// it waits after rounds that found none.
const (
	SweepInterval = 100 * time.Millisecond
	sweepIdle     = time.Second
)

// Sweep removes expired keys in the background until ctx is done: every
// SweepInterval it samples each shard (SampleExpire) at the instant now
// returns. After a round that removed nothing the next comes twice as late,
// up to sweepIdle, so that an idle node does not wake ten times a second;
// a round that removes keys brings it back to SweepInterval. Lazy expiry on
// access does the rest, so keys nobody reads still leave memory. It is also
// the background evictor: a write that could not evict enough from its own
// shard wakes it (see evict.go).
func (s *Store) Sweep(ctx context.Context, now func() int64) {
	p := pace.Pace{Busy: SweepInterval, Idle: sweepIdle}
	t := time.NewTimer(SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.evict:
			s.evictAll(now())
		case <-t.C:
			at := now()
			removed := 0
			for i := range s.shards {
				removed += s.SampleExpire(i, at, 16)
				if s.stepTables(i, at) {
					removed++ // a rehash or compaction under way: come back soon
				}
			}
			t.Reset(p.Next(removed > 0))
		}
	}
}

// tableStep is how many slots each table of a shard moves per sweep while
// it rehashes (Table.Step): a few microseconds under the shard's lock,
// enough for a table whose owner writes little to finish soon.
const tableStep = 1024

// stepTables moves the rehashes of shard i's tables along, and starts the
// ones their deleted keys or the clock, at now (Unix ns), call for. It
// reports whether one has work left.
func (s *Store) stepTables(i int, now int64) (busy bool) {
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, tab := range sh.dbs {
		if tab == nil {
			continue
		}
		before := tab.Memory()
		if tab.Step(tableStep, floorDiv(now, 1e9)) {
			busy = true
		}
		if d := before - tab.Memory(); d > 0 {
			s.released.Add(d)
		}
	}
	return busy
}

// Released returns the bytes the sweeper's table steps have let go so far:
// the old arrays of a rehash they finished, the arena chunks a compaction
// emptied. It is garbage that no allocation shows: a burst of writes ends
// with rehashes under way, which the sweeper finishes once the node is
// idle, after the server's idle release may have run (server/idlemem.go).
func (s *Store) Released() int64 { return s.released.Load() }
