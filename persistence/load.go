package persistence

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/store"
)

// Load calls fn for every stored key that is live at nowMs (Unix ms), in
// key order (database, then key bytes). Keys whose expiry has passed (expireMs
// != 0 && nowMs > expireMs, the store's rule) are not passed on; their
// deletion is journaled like any other, behind changes already appended.
//
// key is valid only during the call; v.Bytes is a fresh copy that the
// caller owns. Call Load at start-up, before the store is served, so that
// the store does not journal changes to keys Load has yet to reach.
func (d *DB) Load(nowMs int64, fn func(db int, key []byte, v store.Value, expireMs int64)) error {
	d.closeMu.RLock()
	defer d.closeMu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: dataStart, UpperBound: dataEnd})
	if err != nil {
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		db, key, err := decodeKey(it.Key())
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("%w: folder %q: key %q of db %d: %w", ErrCorrupt, d.dir, key, db, err)
		}
		v, expireMs, err := decodeValue(raw)
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("%w: folder %q: key %q of db %d: %w", ErrCorrupt, d.dir, key, db, err)
		}
		if expireMs != 0 && nowMs > expireMs {
			d.Delete(db, key)
			continue
		}
		if v.Kind != store.KindInt {
			v.Bytes = bytes.Clone(v.Bytes)
		}
		fn(db, key, v, expireMs)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, d.dir, err)
	}
	return nil
}
