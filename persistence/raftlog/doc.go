// Package raftlog is the Raft log and stable store of the Raft mode: a
// Store implements hashicorp/raft's LogStore, MonotonicLogStore and
// StableStore on a Pebble database of its own, in a folder of its own:
// <dir>/raft/log in the Raft mode's layout (see the persistence package
// doc).
//
// # Why a database of its own
//
// The keyspace's database runs without Pebble's WAL, because its own log
// already holds every change (see package persistence). Raft's log must be
// durable write by write instead: a follower acknowledges entries, and the
// leader counts its own copy towards a commit, as soon as StoreLogs
// returns, and a node must never forget a term or a vote it recorded. So
// every StoreLogs, DeleteRange and Set returns only once it is synced, and
// a batch of entries is one Pebble batch with one fsync. Pebble's commit
// pipeline shares a WAL sync among concurrent writers.
//
// # Layout
//
// The first byte of every key says what it is:
//
//	[0x00]"raft-log-format"          the folder's format version (1)
//	[0x01][index uint64 big-endian]  a log entry
//	[0x02][key]                      a stable-store key (raft's CurrentTerm,
//	                                 LastVoteTerm, LastVoteCand)
//
// Big-endian indexes make Pebble's order the order of the log, so the
// first and last entries are the first and last keys of the 0x01 range. An
// entry is a versioned fixed layout (see entryVersion in codec.go) holding
// every field of raft.Log, AppendedAt as Unix nanoseconds: raft uses it for
// metrics only, and nothing in throttled may take a decision on it (the
// leader's instant travels inside Data). A uint64 of the stable store is 8
// bytes big-endian.
//
// # What raft relies on
//
//   - FirstIndex and LastIndex are answered from memory: raft asks for
//     them constantly. Open reads them from the first and last keys, and
//     StoreLogs and DeleteRange keep them up to date.
//   - GetLog returns raft.ErrLogNotFound itself for a missing entry (raft
//     compares with ==, and sends a snapshot to a follower whose next entry
//     is gone); Get returns an error reading "not found" for a missing key
//     (raft compares the text), GetUint64 0.
//   - The log never has a gap: entries are appended right after the last
//     one, and only a prefix (compaction after a snapshot) or a suffix
//     (entries that conflict with the leader's) is deleted. Saying so
//     (IsMonotonic) makes raft delete the whole log after it installs a
//     snapshot instead of leaving a gap, which here costs one range
//     tombstone; in return first and last describe exactly what is stored.
//
// # Disk space
//
// raft deletes the log's prefix after each snapshot. The deletion is one
// range tombstone; the Store then flushes the memtable in the background,
// so that the tombstone reaches an sstable and Pebble's compactions drop the
// entries it covers from disk (whole files at once where it covers them).
//
// # A folder that is not ours is never touched
//
// Open refuses a folder that holds anything but a Raft log of this format,
// the keyspace's folder included (its format key is another), with the
// errors and the care of package persistence: nothing in such a folder is
// written, removed or rewritten.
package raftlog
