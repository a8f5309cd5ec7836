package store

import (
	"errors"
	"math/rand/v2"
	"strings"
)

// Eviction keeps the keyspace under Config.MaxKeys and Config.MaxMemory.
//
// A write that takes the store over a bound evicts from its own shard at
// once: it already holds that shard's lock, so eviction costs no extra
// locking and cannot deadlock. It samples the shard's keys and removes the
// best victim until the store is back under its bounds:
//
//  1. a key whose expiry has passed (counted as expired, not evicted);
//  2. a key with an expiry, soonest first. A rate-limit key expires exactly
//     when its state is back to "full", so the one closest to full is the one
//     whose loss forgives the least; a flood of fresh keys (one request
//     each) is evicted before the keys of clients that have used their quota;
//  3. a key without expiry, least recently used first (approximate LRU, at
//     one-second resolution, as Redis' sampling LRU).
//
// When a shard has nothing else to give (its only key is the one being
// written), the background evictor (Sweep) frees space elsewhere, one shard
// at a time.
//
// That order is the default EvictionPolicy, VolatileTTL. AllKeysLRU skips
// step 2 (least recently used first, expiry or not); NoEviction evicts nothing:
// the store goes over its bounds and OutOfMemory tells the command layer
// to refuse the writes Redis refuses (its "OOM command not allowed").

// evictSample is how many keys of a shard one eviction round looks at.
const evictSample = 16

// over reports whether the store holds more than its bounds allow.
func (s *Store) over() bool {
	mk, mm := s.maxKeys.Load(), s.maxMemory.Load()
	return (mk > 0 && s.keys.Load() > mk) || (mm > 0 && s.memory.Load() > mm)
}

// EvictionPolicy is what a write that takes the store over its bounds does:
// the Redis maxmemory-policy it follows.
type EvictionPolicy uint32

const (
	// VolatileTTL evicts the key whose expiry is soonest, as Redis'
	// volatile-ttl; where Redis would then refuse the write because no key
	// has an expiry, the store evicts the least recently used key instead
	// (a rate limiter's keys all expire; the rest are few).
	VolatileTTL EvictionPolicy = iota
	// AllKeysLRU evicts the least recently used key, as Redis' allkeys-lru.
	AllKeysLRU
	// NoEviction evicts nothing: see OutOfMemory.
	NoEviction
)

// policyNames are the Redis names of the policies, in EvictionPolicy order.
var policyNames = []string{"volatile-ttl", "allkeys-lru", "noeviction"}

// String returns the policy's Redis name.
func (p EvictionPolicy) String() string { return policyNames[p] }

// Set sets p to the policy with the Redis name name (case-insensitive);
// with String it makes an EvictionPolicy a flag.Value. Its error is the end of
// Redis' CONFIG SET text for a value not in the list.
func (p *EvictionPolicy) Set(name string) error {
	for i, n := range policyNames {
		if strings.EqualFold(n, name) {
			*p = EvictionPolicy(i)
			return nil
		}
	}
	return errors.New("argument(s) must be one of the following: " + strings.Join(policyNames, ", "))
}

// SetEvictionPolicy changes the eviction policy; a store over its bounds
// under NoEviction starts evicting at once when given another one.
func (s *Store) SetEvictionPolicy(p EvictionPolicy) {
	s.policy.Store(uint32(p))
	s.wakeEvictor()
}

// EvictionPolicy returns the eviction policy in force.
func (s *Store) EvictionPolicy() EvictionPolicy { return EvictionPolicy(s.policy.Load()) }

// OutOfMemory reports whether the store is over its bounds and may not
// evict (NoEviction): Redis' condition for refusing a command with the OOM
// error.
func (s *Store) OutOfMemory() bool { return s.EvictionPolicy() == NoEviction && s.over() }

// evictSome evicts from sh, whose lock the caller holds, until the store is
// under its bounds or sh has no candidate left. The key (db, keep) is never
// chosen: it is the one being written.
func (s *Store) evictSome(sh *shard, nowMs int64, db int, keep []byte) {
	for s.EvictionPolicy() != NoEviction && s.over() {
		if !s.evictOne(sh, nowMs, db, keep) {
			s.wakeEvictor()
			return
		}
	}
}

// victim is the best candidate an eviction round has seen.
type victim struct {
	db int
	r  ref
	e  entry
	ok bool
}

// better reports whether e is a better victim than v under policy p.
func (v *victim) better(e entry, p EvictionPolicy) bool {
	switch {
	case !v.ok:
		return true
	case p == AllKeysLRU:
		return e.atime < v.e.atime
	case (e.expireMs != 0) != (v.e.expireMs != 0):
		return e.expireMs != 0
	case e.expireMs != 0:
		return e.expireMs < v.e.expireMs
	default:
		return e.atime < v.e.atime
	}
}

// evictOne removes one key of sh, chosen from a sample, and reports whether
// it found one. The caller holds sh's lock.
func (s *Store) evictOne(sh *shard, nowMs int64, keepDB int, keep []byte) bool {
	var best victim
	p := s.EvictionPolicy()
	seen, expired := 0, false
	for db := range sh.dbs[:s.dbs] { // never the system database
		// Starting at a random slot makes this a sample.
		sh.each(db, rand.Uint64(), func(k []byte, r ref) bool {
			if db == keepDB && string(k) == string(keep) {
				return true
			}
			e := r.get()
			if Expired(e.expireMs, nowMs) {
				s.expiredKeys.Add(1)
				s.remove(sh, db, k, r)
				expired = true
				return false
			}
			if best.better(e, p) {
				best = victim{db, r, e, true}
			}
			seen++
			return seen < evictSample
		})
		if expired {
			return true
		}
		if seen == evictSample {
			break
		}
	}
	if !best.ok {
		return false
	}
	s.evictedKeys.Add(1)
	s.remove(sh, best.db, best.r.tab.Key(best.r.p), best.r)
	return true
}

// evictAll frees space from every shard in turn, locking one at a time,
// until the store is under its bounds.
func (s *Store) evictAll(now int64) {
	nowMs := floorDiv(now, 1e6)
	for s.EvictionPolicy() != NoEviction && s.over() {
		progress := false
		for i := range s.shards {
			sh := &s.shards[i]
			sh.mu.Lock()
			if s.over() && s.evictOne(sh, nowMs, -1, nil) {
				progress = true
			}
			sh.mu.Unlock()
		}
		if !progress {
			return
		}
	}
}

// EvictedKeys returns how many keys have been evicted to stay under the bounds.
func (s *Store) EvictedKeys() int64 { return s.evictedKeys.Load() }

// Usage returns the number of keys and their accounted memory in bytes.
func (s *Store) Usage() (keys, memory int64) { return s.keys.Load(), s.memory.Load() }

// Limits returns the bounds in force (0: none).
func (s *Store) Limits() (maxKeys, maxMemory int64) { return s.maxKeys.Load(), s.maxMemory.Load() }

// SetLimits changes the bounds (0: none; negative values are taken as 0). A
// lower bound takes effect at once: the background evictor is woken.
func (s *Store) SetLimits(maxKeys, maxMemory int64) {
	s.maxKeys.Store(max(maxKeys, 0))
	s.maxMemory.Store(max(maxMemory, 0))
	s.wakeEvictor()
}

// wakeEvictor asks the background evictor (Sweep) for a pass when the store
// is over its bounds.
func (s *Store) wakeEvictor() {
	if s.EvictionPolicy() == NoEviction || !s.over() {
		return
	}
	select {
	case s.evict <- struct{}{}:
	default:
	}
}
