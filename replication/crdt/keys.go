package crdt

import (
	"bytes"
	"cmp"
	"math"
	"slices"

	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/store"
)

// How the node reads and writes the store: under the key's shard lock,
// like a command, so a merge and a command on one key never interleave.

// withKey runs fn with key's shard locked, at the node's instant.
func (n *Node) withKey(key []byte, fn func(tx store.Tx)) {
	var ls store.LockSet
	ls.Add(n.store, key)
	n.store.Lock(&ls)
	defer n.store.Unlock(&ls)
	fn(n.store.Tx(n.Now()))
}

// latest appends to entries the last change of each key, in key order so
// that a batch's bytes do not depend on the order of the writes. A state
// that has expired since is shipped too: the peers drop it as this node
// did.
func (n *Node) latest(entries []entry, changes []change) []entry {
	for i := range changes {
		changes[i].order = i
	}
	slices.SortFunc(changes, func(a, b change) int {
		if a.db != b.db {
			return a.db - b.db
		}
		return cmp.Or(bytes.Compare(a.key, b.key), a.order-b.order)
	})
	for i, c := range changes {
		if i+1 < len(changes) && changes[i+1].db == c.db && bytes.Equal(changes[i+1].key, c.key) {
			continue // written again since
		}
		entries = append(entries, entry{db: n.store.WireDB(c.db), key: c.key, expireMs: c.expireMs, state: c.state})
	}
	return entries
}

// readAll returns every merged state in the store, one shard at a time: a
// full sync for a newly connected peer.
func (n *Node) readAll() []entry {
	var entries []entry
	now := n.Now()
	for i := range n.store.Shards() {
		n.store.EachInShard(i, now, func(db int, key string, v store.Value, expireMs int64) {
			if v.Kind == store.KindMerged {
				entries = append(entries, entry{db: n.store.WireDB(db), key: []byte(key), expireMs: expireMs, state: slices.Clone(v.Bytes)})
			}
		})
	}
	return entries
}

// merge joins a peer's state of a key into the store. It reports false
// when the state cannot be merged (malformed, or another kind than the
// key's here), which the caller logs.
func (n *Node) merge(e entry) bool {
	ok := true
	e.db, _ = n.store.LocalDB(e.db) // decodeBatch checked it
	n.withKey(e.key, func(tx store.Tx) {
		v, exists := tx.Get(e.db, e.key)
		var local []byte
		var localExp int64
		if exists {
			if v.Kind != store.KindMerged {
				ok = false
				return
			}
			local = v.Bytes
			localExp, _ = tx.ExpireMs(e.db, e.key)
		}
		j, err := mstate.Join(local, e.state)
		if err != nil {
			ok = false
			return
		}
		merged := j.State
		if exists && bytes.Equal(merged, local) {
			return
		}
		exp, err := n.expiryOf(j, localExp, e.expireMs, exists)
		if err != nil {
			ok = false
			return
		}
		if j.Kind != mstate.Str && store.Expired(exp, tx.NowMs()) && !n.hold(e.db, e.key, store.Value{Kind: store.KindMerged, Bytes: merged}) {
			// Full already: as good as no state (unless it must
			// stay, as a reset's mark does until every node has it).
			if exists {
				tx.Delete(e.db, e.key)
			}
			return
		}
		tx.Put(e.db, e.key, store.Value{Kind: store.KindMerged, Bytes: merged}, exp)
		if !bytes.Equal(merged, e.state) {
			// This node knew something the sender did not (its own
			// writes not yet shipped, or parts the sender dropped when
			// the key expired there): ship the join back, so that every
			// node ends with it.
			n.mu.Lock()
			n.record(e.db, e.key, merged, exp)
			n.mu.Unlock()
		}
	})
	return ok
}

// expiryOf is the expiry (Unix ms) of a merged state. A string's and a
// debt log's follow from the state alone (mstate.StrStoreExpiry,
// mstate.Expiry), so nodes that hold the same bytes drop them alike. Else it
// is the later of the two states' expiries: a window's part lives as long
// as it counts, whatever the others.
func (n *Node) expiryOf(j mstate.Joined, localExp, remoteExp int64, exists bool) (int64, error) {
	if j.Kind == mstate.Str {
		exp, err := mstate.StrStoreExpiry(j.State, n.MaxSkew())
		if exp != 0 {
			// Never already past: whether the state may go is then the
			// node's call (a tombstone stays until every node has it).
			exp = max(exp, store.ExpiryAt(n.Now())+1)
		}
		return exp, err
	}
	if at := j.Expiry; at != math.MinInt64 {
		return store.ExpiryAt(at), nil
	}
	// A side a reset forgave whole has nothing left that its expiry
	// was for; with nothing left at all, the key is fresh from the mark.
	exp := int64(math.MinInt64)
	if exists && !j.Forgot[0] {
		exp = localExp
	}
	if !j.Forgot[1] {
		exp = max(exp, remoteExp)
	}
	if exp == math.MinInt64 {
		return store.ExpiryAt(j.Mark), nil
	}
	return exp, nil
}
