package commands

import (
	"errors"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/replication/crdt/mstate"
	"github.com/throttleddb/throttled/store"
)

// How the string and generic key commands read and write a key. On a
// single node and a Raft member a string is the store's plain value; on a
// mesh node it is a mergeable state (mstate.Str), and every write is one of
// its operations (SET, INCRBY, DEL, EXPIRE), so that the other nodes can
// merge it: a counter sums every node's increments, SET is the last
// writer's, the longest of concurrent TTLs wins, a DEL keeps older writes
// from coming back.

// mergedString reports whether v is a mergeable string.
func mergedString(v store.Value) bool {
	k, err := mstate.KindOf(v.Bytes)
	return v.Kind == store.KindMerged && err == nil && k == mstate.Str
}

// value returns key's value as a client sees it: a mergeable string as its
// current value (missing when deleted or past its TTL), a mergeable GCRA
// state as its TAT, as redis-cell's key holds it. Other values are as
// stored.
func (c *Ctx) value(key []byte) (store.Value, bool) {
	v, ok := c.Tx.Get(c.DB(), key)
	if !ok || v.Kind != store.KindMerged || c.srv.mesh == nil {
		return v, ok
	}
	k, _ := mstate.KindOf(v.Bytes)
	if k == mstate.Marker {
		return store.Value{}, false // a reset's mark: no key
	}
	if exp, _ := c.Tx.ExpireMs(c.DB(), key); k != mstate.Str && store.Expired(exp, c.Tx.NowMs()) {
		// Held past its expiry until every node has it (a reset's mark,
		// or admissions the peers may not have yet): full, no key.
		return store.Value{}, false
	}
	switch k {
	case mstate.Str:
		s, err := mstate.StrGet(v.Bytes, c.Tx.Now())
		switch {
		case err != nil || !s.Exists:
			return store.Value{}, false
		case s.IsInt:
			return store.IntValue(s.Int), true
		}
		return store.Value{Kind: store.KindString, Bytes: s.Bytes}, true
	case mstate.GCRA:
		if tat, err := mstate.TAT(v.Bytes); err == nil {
			return store.IntValue(tat), true
		}
	}
	return v, true
}

// visible reports whether a stored value is a key a client sees: not a
// mesh string's tombstone, nor one past its TTL.
func (c *Ctx) visible(v store.Value) bool {
	if !mergedString(v) {
		return true
	}
	s, err := mstate.StrGet(v.Bytes, c.Tx.Now())
	return err == nil && s.Exists
}

// keyExists reports whether key exists as a client sees it.
func (c *Ctx) keyExists(key []byte) bool {
	_, ok := c.value(key)
	return ok
}

// keyExpiry returns key's expiry in Unix ms (0 for none) and whether it
// exists.
func (c *Ctx) keyExpiry(key []byte) (int64, bool) {
	v, ok := c.Tx.Get(c.DB(), key)
	if !ok || !mergedString(v) {
		return c.Tx.ExpireMs(c.DB(), key)
	}
	s, err := mstate.StrGet(v.Bytes, c.Tx.Now())
	if err != nil || !s.Exists {
		return 0, false
	}
	return s.ExpireMs, true
}

// meshString returns the mergeable string state at key (nil for none, or
// a reset's bare mark), or false when the key holds a rate-limit state.
func (c *Ctx) meshString(key []byte) ([]byte, bool) {
	v, ok := c.Tx.Get(c.DB(), key)
	if k, _ := mstate.KindOf(v.Bytes); !ok || k == mstate.Marker {
		return nil, true // a bare mark of a reset stands for no state
	}
	return v.Bytes, mergedString(v)
}

// putString is SET: key holds b from now on, with expiry exp (Unix ms, 0
// for none), or its current expiry with keepTTL.
func (c *Ctx) putString(key, b []byte, exp int64, keepTTL bool) {
	db := c.DB()
	if c.srv.mesh == nil {
		v := ownedValue(b)
		if keepTTL {
			c.Tx.PutKeepTTL(db, key, v)
		} else {
			c.Tx.Put(db, key, v, exp)
		}
		return
	}
	state, _ := c.meshString(key) // another kind is replaced, as SET does
	next, err := mstate.StrSet(state, c.srv.mesh.Origin(), c.Tx.Now(), b, exp, keepTTL)
	c.storeString(key, next, err)
}

// addInt is INCRBY d: the key's integer plus d, kept with its TTL. An error
// is the reply text.
func (c *Ctx) addInt(key []byte, d int64) (int64, string) {
	if c.srv.mesh != nil {
		state, ok := c.meshString(key)
		if !ok {
			return 0, errWrongType
		}
		next, n, err := mstate.StrIncr(state, c.srv.mesh.Origin(), c.Tx.Now(), d)
		switch {
		case errors.Is(err, mstate.ErrNotInteger):
			return 0, errNotInt
		case errors.Is(err, engines.ErrOverflow):
			return 0, errOverflow
		case err != nil:
			return 0, engineError(err)
		}
		c.storeString(key, next, nil)
		return n, ""
	}
	v, exists := c.value(key)
	if exists && !v.IsString() {
		return 0, errWrongType
	}
	var cur int64
	if exists {
		var ok bool
		if cur, ok = v.Integer(); !ok {
			return 0, errNotInt
		}
	}
	if (d > 0 && cur > 1<<63-1-d) || (d < 0 && cur < -1<<63-d) {
		return 0, errOverflow
	}
	cur += d
	c.Tx.PutKeepTTL(c.DB(), key, store.IntValue(cur))
	return cur, ""
}

// deleteKey is DEL of one key; it reports whether the key existed. On a
// mesh node a string gets a tombstone; a rate-limit state goes only on a
// node alone (keyRefusal refuses it otherwise).
func (c *Ctx) deleteKey(key []byte) bool {
	if c.srv.mesh != nil {
		if state, ok := c.meshString(key); ok && state != nil {
			next, deleted, err := mstate.StrDel(state, c.srv.mesh.Origin(), c.Tx.Now())
			if deleted {
				c.storeString(key, next, err)
			}
			return deleted
		}
	}
	return c.Tx.Delete(c.DB(), key)
}

// setExpiry is EXPIRE's write: the key expires at when (Unix ms), or, with
// when 0, never (PERSIST). A time already passed deletes the key.
func (c *Ctx) setExpiry(key []byte, when int64) {
	db := c.DB()
	if c.srv.mesh != nil {
		if state, ok := c.meshString(key); ok && state != nil {
			if when == 0 {
				when = mstate.Persist
			}
			next, changed, err := mstate.StrExpire(state, c.srv.mesh.Origin(), c.Tx.Now(), when)
			if changed {
				c.storeString(key, next, err)
			}
			return
		}
	}
	if when != 0 && when <= c.Tx.NowMs() {
		c.Tx.Delete(db, key)
		return
	}
	c.Tx.SetExpire(db, key, when)
}

// keyRefusal is the error for a DEL or EXPIRE of a rate-limit key on a mesh
// node with peers, "" otherwise: the state cannot be deleted or cut short
// on one node, as the others' parts would bring it back.
func (c *Ctx) keyRefusal(keys ...[]byte) string {
	m := c.srv.mesh
	if m == nil || m.Alone() {
		return ""
	}
	for _, k := range keys {
		if v, ok := c.Tx.Get(c.DB(), k); ok && !mergedString(v) {
			return "ERR the key '" + sanitize(string(k), 128) + "' holds a rate-limit state, which cannot be deleted or expired on a node with CRDT peers (THROTTLE.RESET resets it on every node)"
		}
	}
	return ""
}

// storeString stores a string state a write made, and tells the mesh.
func (c *Ctx) storeString(key, next []byte, err error) {
	if err != nil || next == nil {
		return // the write was checked before; nothing to store
	}
	m := c.srv.mesh
	exp, err := mstate.StrStoreExpiry(next, m.MaxSkew())
	if err != nil {
		return
	}
	if exp != 0 {
		// Never already past: whether the state may go is then the
		// node's call (a tombstone stays until every node has it).
		exp = max(exp, c.Tx.NowMs()+1)
	}
	c.Tx.Put(c.DB(), key, store.Value{Kind: store.KindMerged, Bytes: next}, exp)
	m.Changed(c.DB(), key, next, exp)
}
