package commands

import (
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/store"
)

// THROTTLE.RESET key [key ...]
//
// resets rate limits: each key's history is forgotten, so that its next
// throttle call finds a fresh key (a full budget). It works on a key of any
// kind: a string (the INCR-and-EXPIRE pattern, or a CL.THROTTLE key, which
// is a string on a single node) is deleted as DEL deletes it. The reply is
// the number of keys that existed here, as DEL's.
//
// On a single node and on a Raft member (through the log, as every write)
// it is DEL. On a mesh node with peers a rate-limit key cannot simply be
// deleted, as the others would send its history back: the node writes a
// reset (mstate.Reset) instead, stamped now, which every node's join
// honours once it arrives, forgiving every admission stamped at or before
// it, wherever made; a node that held nothing of the key writes a bare mark
// all the same, since others may hold its history. See docs/replication.md
// for which concurrent admissions stay.
//
// The keys' quota leases (docs/leases.md) go with their history: a lease
// granted before the reset was charged to the history forgiven, so its
// return must not credit the fresh key (QUOTA.RETURN then answers "no such
// lease"). Leases are refused on a mesh, so only the DEL path holds any.
//
// It is in @keyspace and @write, like DEL, not in @ratelimit: a gateway's
// user, granted +@ratelimit, cannot reset the limits it enforces.
func throttleReset(c *Ctx) {
	keys := c.Args[1:]
	m := c.srv.mesh
	if m == nil || m.Alone() {
		n := int64(0)
		for _, k := range keys {
			if c.deleteKey(k) {
				n++
			}
			c.deleteKey(leaseTableKey(k))
		}
		c.W.Int(n)
		return
	}
	// Every key's reset is made before the first is stored: a corrupt
	// state refuses the whole command, which writes nothing.
	db := c.DB()
	resets := make([][]byte, len(keys))
	for i, k := range keys {
		v, ok := c.Tx.Get(db, k)
		if ok && (v.Kind != store.KindMerged || mergedString(v)) {
			continue // deleted as DEL deletes it
		}
		next, err := mstate.Reset(v.Bytes, c.Tx.Now())
		if err != nil {
			c.W.Error(engineError(err))
			return
		}
		resets[i] = next
	}
	n := int64(0)
	for i, k := range keys {
		if c.keyExists(k) {
			n++
		}
		next := resets[i]
		if next == nil {
			c.deleteKey(k) // a string: its tombstone, as DEL writes it
			continue
		}
		// The mark's stamp is not before now: the key stays through this
		// millisecond, and after it while the mesh holds the mark.
		mark, _ := mstate.Mark(next)
		exp := store.ExpiryAt(mark)
		c.Tx.Put(db, k, store.Value{Kind: store.KindMerged, Bytes: next}, exp)
		m.Changed(db, k, next, exp)
	}
	c.W.Int(n)
}

// resetLocks locks the lease tables THROTTLE.RESET deletes with its keys.
func resetLocks(s *Server, _ *connState, args [][]byte, l *store.LockSet) {
	for _, k := range args[1:] {
		l.Add(s.store, leaseTableKey(k))
	}
}
