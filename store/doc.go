// Package store is the keyspace: numbered databases whose keys are spread over
// hash shards, each shard with its own mutex, holding values with an optional
// expiry.
//
// # Locking
//
// A command locks the shards of the keys it touches (Lock with a LockSet) and
// then works through a Tx, whose methods assume those locks are held. Shards
// are always locked in ascending order, so commands that touch several keys
// (MSET, DEL a b c, EXEC) cannot deadlock; keyspace-wide commands (FLUSHDB,
// KEYS, SCAN, DBSIZE) lock every shard. A shard holds the tables of every
// database, so a transaction that SELECTs another database still locks only
// the shards its keys hash to.
//
// # Time
//
// The store never reads a clock. Every Tx carries the instant its command was
// admitted; lazy expiry, TTL arithmetic and the active sweeper use the instant
// they are given. Expiry is kept in Unix milliseconds, as Redis keeps it, so
// TTL/PTTL replies and the moment a key disappears match Redis exactly: a key
// whose expiry is T ms is still there at T and gone at T+1 (Expired; 0 means
// no expiry).
//
// That rule holds for a key written with the current millisecond as its
// expiry too: Put keeps it to the end of the millisecond. Rate-limit state
// depends on it. A bucket that drains in under a millisecond (CL.THROTTLE at
// 10,000 per second with burst 5) has a TTL that rounds down to 0 ms, and if
// such a key were dropped, or not stored, every call in the same millisecond
// would find a full bucket and none would be limited; redis-cell keeps it,
// since Redis' module API adds a 0 ms TTL to its clock and the key lives
// through that millisecond. Writers therefore never skip or delete a key
// because its TTL rounds to 0: they turn a relative TTL into an expiry with
// Tx.ExpiryIn (redis-cell's PEXPIRE, counted from the current millisecond)
// and an instant the state must outlive with ExpiryAt (the millisecond that
// holds it). Persistence loads a key by the same rule, so a key saved in its
// last millisecond comes back if the restart is within it. Only the EXPIRE
// family differs, as in Redis: a new expiry not after now deletes the key
// (SetExpire).
//
// # Values
//
// Strings are held as bytes, or as an int64 when they are the canonical
// decimal form of one (Redis' "int" encoding): INCR and the GCRA theoretical
// arrival time of CL.THROTTLE live there without allocating, and GET shows
// them as decimal text. Each rate-limit engine's state (package engines) has
// its own Kind and is held as its encoded bytes, which the engine may update
// in place while the key's shard is locked; most FWC, TB and LB states with
// an expiry pack into the slot instead (packed.go), and reads give back
// their bytes.
//
// # Tables
//
// Each database of a shard is a table (package store/internal/table): open
// addressing over pointer-free 32-byte slots that hold a short name, an
// integer value, the expiry and the access time inline, and longer names
// and byte values in an arena of large chunks. The garbage collector has
// nothing per key to scan, and a table grows by moving its keys a few at a
// time on writes and on the sweeper's ticks, never all at once.
//
// # Digests
//
// Tx.Digest and Tx.DigestValue (digest.go) are SHA-1 digests of the live
// data, for DEBUG DIGEST and for replicas to compare themselves: they depend
// on what clients can see (keys, values, expiry), not on the shard layout,
// the hash seed or how a string is held.
//
// # Persistence and bounds
//
// A Journal (SetJournal) hears every change, in order per key, while the
// key's shard is locked: package persistence logs them to disk, and now and
// then saves what changed since the last time, which the store tracks for it
// (Collect, saved.go). MaxKeys and
// MaxMemory bound the keyspace; a write that goes over evicts from its own
// shard (see evict.go for the order), and the sweeper evicts elsewhere when
// that shard has nothing to give.
package store
