package persistence

import (
	"bytes"
	"fmt"

	"github.com/throttleddb/throttled/store"
)

// Snapshots of the whole keyspace, for the Raft mode (package
// replication/raft): its snapshots hold the keyspace in the log's change
// encoding, one set change per live key, so a snapshot is a log record that
// fills an empty store.

// AppendSnapshot appends every live key of t's store, at t's instant, to dst
// and returns the extended slice. t must hold every shard.
func AppendSnapshot(dst []byte, s *store.Store, t store.Tx) []byte {
	for db := range s.AllDatabases() {
		wire := s.WireDB(db)
		t.ForEach(db, func(key string, v store.Value, expireMs int64) bool {
			dst = appendSet(dst, wire, []byte(key), v, expireMs)
			return true
		})
	}
	return dst
}

// RestoreSnapshot replaces every key of t's store with those of snap, an
// AppendSnapshot result. t must hold every shard. On an error the store holds
// part of the snapshot.
func RestoreSnapshot(s *store.Store, t store.Tx, snap []byte) error {
	for db := range s.AllDatabases() {
		t.Flush(db)
	}
	for len(snap) > 0 {
		c, rest, err := nextChange(snap)
		if err != nil {
			return fmt.Errorf("persistence: snapshot: %w", err)
		}
		db, ok := s.LocalDB(c.db)
		if c.op != opSet || !ok {
			return fmt.Errorf("persistence: snapshot: %w: change %q of db %d", errBadRecord, c.op, c.db)
		}
		c.db = db
		if c.v.Kind != store.KindInt {
			c.v.Bytes = bytes.Clone(c.v.Bytes)
		}
		t.Put(c.db, c.key, c.v, c.expireMs)
		snap = rest
	}
	return nil
}
