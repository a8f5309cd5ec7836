package store

// Persistence (package persistence) keeps two things on disk: a log of every
// change, which the Journal hears as it happens, and a saved copy of the
// keyspace, which it brings up to date now and then through Collect so that
// it can drop the log that copy covers. Writing only what changed since the
// last Collect, once, is what makes that cheap: a rate-limit key changes on
// every request, but is saved at most once per Collect, and a key that comes
// and goes between two Collects (most of them) is never saved at all.
//
// For that the store remembers, per key, whether it changed since the last
// Collect (flagDirty) and whether the saved copy may hold it (flagSaved), and
// lists the saved keys removed since (shard.gone) and the databases flushed
// (Store.flushed).

// flags is an entry's persistence bookkeeping.
type flags uint8

const (
	// flagDirty: the key changed since the last Collect.
	flagDirty flags = 1 << iota
	// flagSaved: the saved copy may hold the key, so its removal must
	// reach the saved copy too.
	flagSaved
)

// mode says how the store records changes for persistence.
type mode uint8

const (
	// modeOff: nothing is persisted, nothing is recorded.
	modeOff mode = iota
	// modeTrack: every change goes to the journal and is tracked for
	// Collect (SetJournal).
	modeTrack
	// modeRestore: the change puts back a key of the saved copy (Restore).
	modeRestore
	// modeReplay: the change is replayed from the log (Replay).
	modeReplay
)

// Restore puts a key of the saved copy back into the store at start-up,
// before the store is shared: nothing is journaled, the key counts as saved
// and clean, and nothing is evicted (an eviction that neither the log nor the
// saved copy heard of would come back at the next start). The caller has
// left out the keys expired at its start-up instant; the key goes in with
// its expiry, whatever that is.
func (s *Store) Restore(db int, key []byte, v Value, expireMs int64) {
	prev := s.mode
	s.mode = modeRestore
	t := s.Tx(0)
	sh, h := t.shardHash(key)
	r, ok := t.lookup(sh, db, key, h)
	t.put(sh, db, key, h, r, ok, v, expireMs)
	s.mode = prev
}

// Replay runs fn on a Tx at now whose changes come from the log, at start-up
// after Restore: they are not journaled again (the log holds them) but are
// tracked for the next Collect, which must cover them before the log that
// holds them can go. Nothing is evicted meanwhile.
func (s *Store) Replay(now int64, fn func(Tx)) {
	prev := s.mode
	s.mode = modeReplay
	fn(s.Tx(now))
	s.mode = prev
}

// evicting reports whether writes may evict: not while the saved copy and
// the log are being loaded.
func (s *Store) evicting() bool { return s.mode == modeOff || s.mode == modeTrack }

// written records that key, at r, was written.
func (s *Store) written(sh *shard, db int, key []byte, r ref) {
	switch s.mode {
	case modeTrack:
		e := r.get()
		r.tab.SetFlags(r.p, uint8(e.flags|flagDirty))
		s.journal.Set(s.WireDB(db), key, e.valueIn(sh.unpacked[:0]), e.expireMs)
	case modeRestore:
		r.tab.SetFlags(r.p, uint8(flagSaved))
	case modeReplay:
		// The saved copy may hold an older value; assuming it does costs
		// at most a needless deletion later.
		r.tab.SetFlags(r.p, uint8(flagSaved|flagDirty))
	}
}

// removed records that key, whose flags were f, left the store.
func (s *Store) removed(sh *shard, db int, key []byte, f flags) {
	if s.mode == modeOff {
		return
	}
	if f&flagSaved != 0 {
		sh.gone = append(sh.gone, dbKey{db, string(key)})
		s.gone.Add(1)
	}
	if s.mode == modeTrack {
		s.journal.Delete(s.WireDB(db), key)
	}
}

// flushedDB records that db was emptied; every shard is locked.
func (s *Store) flushedDB(db int) {
	if s.mode == modeOff {
		return
	}
	s.flushed[db] = true
	if s.mode == modeTrack {
		s.journal.FlushDB(s.WireDB(db))
	}
}

// Collector receives what changed since the last Collect.
type Collector interface {
	// Flushed: every key db held before is gone.
	Flushed(db int)
	// Removed: key, which the saved copy may hold, is gone.
	Removed(db int, key string)
	// Changed: key holds v, expiring at expireMs (Unix ms, 0 for never).
	// v.Bytes is valid only during the call.
	Changed(db int, key string, v Value, expireMs int64)
	// ShardDone is called after each shard, with no lock held: the
	// collector may write out what it gathered. An error stops Collect,
	// which leaves the shards not yet handed over as they were.
	ShardDone() error
}

// Collect hands c what changed since the last Collect and marks it saved
// (until ShardDone returns an error, which Collect returns):
// first the flushed databases, then, one shard at a time (each locked only
// while it is handed over), the removed keys and then the changed ones. A
// change made while Collect runs is handed over now or at the next Collect.
//
// Whoever saves what c receives, in that order and on top of the previous
// saved copy, holds every change made before Collect began; changes made
// during it may show partly. Replaying the log of the changes made since
// Collect began on top gives the current keyspace, since every change in the
// log carries a key's whole value.
func (s *Store) Collect(c Collector) error {
	sh0 := &s.shards[0]
	sh0.mu.Lock() // FLUSHDB holds every shard
	for db, f := range s.flushed {
		if f {
			c.Flushed(s.WireDB(db))
			s.flushed[db] = false
		}
	}
	sh0.mu.Unlock()
	for i := range s.shards {
		s.collectShard(&s.shards[i], c)
		if err := c.ShardDone(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) collectShard(sh *shard, c Collector) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, g := range sh.gone {
		c.Removed(s.WireDB(g.db), g.key)
	}
	s.gone.Add(-int64(len(sh.gone)))
	if cap(sh.gone) > 1024 {
		sh.gone = nil // let a burst's list go
	} else {
		clear(sh.gone)
		sh.gone = sh.gone[:0]
	}
	for db := range sh.dbs {
		if s.flushed[db] {
			// db was flushed since this Collect began: the next
			// Collect deletes its whole range from the saved copy
			// first, so its keys stay dirty for that one to save.
			continue
		}
		sh.each(db, 0, func(k []byte, r ref) bool {
			if e := r.get(); e.flags&flagDirty != 0 {
				c.Changed(s.WireDB(db), string(k), e.valueIn(sh.unpacked[:0]), e.expireMs)
				r.tab.SetFlags(r.p, uint8(flagSaved))
			}
			return true
		})
	}
}

// Gone returns how many removed saved keys wait for the next Collect: the
// memory that list takes is one reason to Collect.
func (s *Store) Gone() int64 { return s.gone.Load() }
