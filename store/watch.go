package store

import "sync/atomic"

// Watch is one connection's WATCH state. Writes to a watched key mark it
// dirty; EXEC refuses to run when it is. It is safe for concurrent use.
type Watch struct {
	dirty atomic.Bool
	keys  []watched // guarded by the owning connection
}

// watcher is one WATCH of a key, in its shard's list.
type watcher struct {
	w *Watch
	// expired: the key was there but expired when watched. Its lazy
	// removal changes nothing a client saw, so it does not make the WATCH
	// dirty (Redis 7); the flag is cleared then, and any later change of
	// the key does.
	expired bool
}

type watched struct {
	db  int
	key string
	// live records that the key existed and had not expired when watched:
	// Redis 7 aborts EXEC if such a key has expired by then, even when no
	// command has touched it yet.
	live bool
}

// Dirty reports whether a watched key has changed.
func (w *Watch) Dirty() bool { return w.dirty.Load() }

// AddLocks adds the shards of the watched keys to l, so EXEC can check them
// under the same locks it runs under.
func (w *Watch) AddLocks(s *Store, l *LockSet) {
	for _, k := range w.keys {
		l.Add(s, []byte(k.key))
	}
}

// touch marks the watchers of key dirty; gone says the key was removed.
// The shard lock must be held.
func (sh *shard) touch(db int, key []byte, gone bool) {
	if sh.watchers == nil {
		return
	}
	list := sh.watchers[dbKey{db, string(key)}]
	for i := range list {
		if list[i].expired && gone {
			list[i].expired = false
			continue
		}
		list[i].w.dirty.Store(true)
	}
}

// Watch starts watching key in db for w. The key's shard must be locked.
func (t Tx) Watch(w *Watch, db int, key []byte) {
	sh := t.shard(key)
	k := dbKey{db, string(key)}
	for _, x := range sh.watchers[k] {
		if x.w == w {
			return
		}
	}
	if sh.watchers == nil {
		sh.watchers = make(map[dbKey][]watcher)
	}
	live, expired := false, false
	if e, ok := t.peek(db, key); ok {
		live, expired = !t.expired(e), t.expired(e)
	}
	sh.watchers[k] = append(sh.watchers[k], watcher{w: w, expired: expired})
	w.keys = append(w.keys, watched{db: db, key: k.key, live: live})
}

// Unwatch forgets every key w watches and clears its dirty flag. It takes the
// shard locks itself, so the caller must hold none.
func (s *Store) Unwatch(w *Watch) {
	for _, k := range w.keys {
		sh := &s.shards[s.ShardOf([]byte(k.key))]
		sh.mu.Lock()
		dk := dbKey{k.db, k.key}
		list := sh.watchers[dk]
		for i, x := range list {
			if x.w == w {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(sh.watchers, dk)
			if len(sh.watchers) == 0 {
				sh.watchers = nil
			}
		} else {
			sh.watchers[dk] = list
		}
		sh.mu.Unlock()
	}
	w.keys = w.keys[:0]
	w.dirty.Store(false)
}

// WatchExpired reports whether a key that was live when watched has expired
// by t's instant. The shards of the watched keys must be locked.
func (t Tx) WatchExpired(w *Watch) bool {
	for _, k := range w.keys {
		if !k.live {
			continue
		}
		if e, ok := t.peek(k.db, []byte(k.key)); ok && t.expired(e) {
			return true
		}
	}
	return false
}
