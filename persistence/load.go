package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/store"
)

// Load fills s, an empty store nobody uses yet, with the keyspace on disk
// as it was at the last change written: the saved copy first (store.Restore),
// keys whose expiry has passed at now (Unix ns) left out, then the log on top
// (store.Replay). It returns how many keys s holds. A key of a database s does
// not have stops it with an error.
//
// Call it once, before s is served and before s.SetJournal(d). From then on
// the DB checkpoints s in the background, and once at Close.
func (d *DB) Load(s *store.Store, now int64) (int, error) {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return 0, ErrClosed
	}
	if d.ks != nil {
		return 0, fmt.Errorf("persistence: Load called twice")
	}
	expired := d.pdb.NewBatch()
	defer func() { _ = expired.Close() }()
	// The store's own millisecond of now (a floor, also before 1970), so
	// that a key is dropped here exactly when the store would expire it.
	err := d.loadSaved(s, s.Tx(now).NowMs(), expired)
	if err == nil {
		err = d.replayLog(s, now)
	}
	if err != nil {
		return 0, err
	}
	// Expired keys leave the saved copy at once: they are not in the store,
	// so no checkpoint would remove them.
	if !expired.Empty() {
		if err := expired.Commit(pebble.NoSync); err != nil {
			return 0, fmt.Errorf("persistence: folder %q: removing expired keys: %w", d.dir, err)
		}
		d.compact.add(int64(expired.Count()))
	}
	keys := 0
	for db := range s.AllDatabases() {
		keys += s.Tx(now).DBSize(db)
	}
	d.ks = s
	ctx, cancel := context.WithCancel(context.Background())
	d.cpStop = cancel
	go d.checkpoints(ctx)
	return keys, nil
}

// loadSaved restores the saved copy into s, and adds the deletion of every
// key expired at nowMs to expired.
func (d *DB) loadSaved(s *store.Store, nowMs int64, expired *pebble.Batch) error {
	return d.scan(dataStart, dataEnd, func(k, raw []byte) error {
		wire, key, err := decodeKey(k)
		if err != nil {
			return err
		}
		db, err := localDB(s, wire)
		if err != nil {
			return err
		}
		v, expireMs, err := decodeValue(raw)
		if err != nil {
			return fmt.Errorf("key %q of db %d: %w", key, db, err)
		}
		if store.Expired(expireMs, nowMs) && !s.Held(db, key, v) {
			return expired.Delete(k, nil)
		}
		if v.Kind != store.KindInt {
			v.Bytes = bytes.Clone(v.Bytes)
		}
		s.Restore(db, key, v, expireMs)
		return nil
	})
}

// replayLog applies every change of the log to s, in order, and continues
// the numbering of changes after the last one.
func (d *DB) replayLog(s *store.Store, now int64) error {
	var last uint64
	var bytes int64
	var err error
	s.Replay(now, func(t store.Tx) {
		bytes, err = readSegments(d.segs.dir, func(rec []byte, seq uint64) error {
			last = seq
			for len(rec) > 0 {
				var c change
				var err error
				if c, rec, err = nextChange(rec); err != nil {
					return fmt.Errorf("log record %d: %w", seq, err)
				}
				if c.db, err = localDB(s, c.db); err != nil {
					return err
				}
				apply(t, c)
			}
			return nil
		})
	})
	switch {
	case errors.Is(err, ErrDatabases):
		return fmt.Errorf("%w (folder %q)", err, d.dir)
	case err != nil:
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
	}
	d.segs.bytes.Store(bytes)
	d.logBytes.Store(bytes)
	d.lastSeq.Store(last)
	d.applied.Store(last)
	d.synced.Store(last)
	return nil
}

// apply makes one change of the log in t.
func apply(t store.Tx, c change) {
	switch c.op {
	case opSet:
		if c.v.Kind != store.KindInt {
			c.v.Bytes = bytes.Clone(c.v.Bytes)
		}
		t.Put(c.db, c.key, c.v, c.expireMs)
	case opDelete:
		t.Delete(c.db, c.key)
	case opFlush:
		t.Flush(c.db)
	}
}

// localDB is the store's database numbered wire on disk.
func localDB(s *store.Store, wire int) (int, error) {
	db, ok := s.LocalDB(wire)
	if !ok {
		return 0, fmt.Errorf("%w: it holds keys of database %d but the server has %d databases (--databases)", ErrDatabases, wire, s.Databases())
	}
	return db, nil
}

// scan calls fn for every key in [start, end) in order; an error from fn or
// from Pebble stops it, reported as corruption unless it is ErrDatabases.
func (d *DB) scan(start, end []byte, fn func(k, v []byte) error) error {
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
	}
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var v []byte
		if v, err = it.ValueAndErr(); err == nil {
			err = fn(it.Key(), v)
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, ErrDatabases):
		return fmt.Errorf("%w (folder %q)", err, d.dir)
	case err != nil:
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
	}
	return nil
}
