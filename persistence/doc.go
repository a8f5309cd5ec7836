// Package persistence keeps the keyspace on disk, in Pebble, for the
// single-node mode: the store reports every change to a DB (it implements
// store.Journal), and at start-up Load puts the keyspace back into the store
// before the listener opens.
//
// # A log and a saved copy
//
// The folder holds two things:
//
//   - the log: every change, in order, as the store reported it. Changes
//     are appended to an in-memory record, and each group commit appends
//     the records gathered since the last one, as checksummed frames, to a
//     segment file in the folder's log subfolder (segments.go).
//
//   - the saved copy, in Pebble: one Pebble key per key of the keyspace, as
//     it was at the last checkpoint:
//
//     [0x01][db uint16 big-endian][user key]
//
// A checkpoint (checkpoint.go) asks the store for what changed since the
// last one (store.Collect): the databases flushed, the saved keys removed,
// and the current value of every key written. It closes the current log
// segment, writes that into the saved copy, flushes it to sstables, and
// deletes the segments it covers, which hold every change made before it
// began. Pebble runs without its WAL: our log already holds every change,
// so a second log of the same keys would only double what a checkpoint
// writes; the flush is what makes the saved copy durable, and it comes
// before any segment goes. Load
// restores the saved copy, dropping expired keys, and then replays the log
// on top; a last frame cut short by a crash is dropped.
//
// Why not simply one Pebble key per change? A rate-limit key changes on
// every request, and an insert into Pebble (its memtable skiplist, then
// flushes and compactions) costs several times what the command itself
// does. Appending to a log costs a copy and, per group commit, a write; a
// checkpoint then writes each changed key once however often it changed,
// and a key that came and went between two checkpoints, as most rate-limit
// keys do, not at all. (The log went through Pebble too, one key per group
// commit, in a first version: its memtable flushes, compactions and write
// stalls still cost a quarter of the throughput.)
//
// Every change in the log carries its key's whole value (or its deletion,
// or a database's flush), never a delta, so replaying a change gives the
// same result whatever came before it. That is what lets a checkpoint run
// while commands keep changing the store, write the saved copy in several
// batches, and crash half-way: the log it has not yet deleted, replayed over
// a saved copy that is partly newer, still gives the keyspace.
//
// A checkpoint is due when 64 MB of log were written since the last one
// (which bounds the log on disk and what a start replays), when 100,000
// removed saved keys wait in the store's list (memory), or when anything
// was logged and the last one is 10 seconds old. Close runs a last one, so
// a clean restart replays nothing, but first stops one that is running (a
// burst of new keys can take seconds to save while commands compete for
// the CPU): then no segment may go, and the next start replays the log.
//
// Keys of the saved copy are laid out so that a database is one contiguous
// range (a flush is a single range deletion) and Load sees keys in database
// order. The first byte sets data apart from the log and from our own
// metadata, under 0x00: today only the key "\x00format", holding the
// folder's format version (2; a version 1 folder is a saved copy without a
// log, and is restamped when opened). Values are
//
//	[value version = 1][kind][expireMs int64 big-endian][payload]
//
// where expireMs is Unix milliseconds (0: no expiry) and the payload is the
// int64 big-endian for store.KindInt and the value's bytes for every other
// kind (strings, and the rate-limit engines' states, which carry their own
// versioned encodings). Kinds this package has never heard of go through
// unchanged. A log record is a sequence of changes in the same encodings
// (codec.go).
//
// # Group commit and the fsync policies
//
// Journal calls arrive under the key's shard lock, so they must be cheap:
// each appends the change to the in-memory log record under a mutex and
// gives it the next sequence number (LastSeq). Appenders never wait for
// Pebble. A committer goroutine takes the record (and any sealed ones: a
// record is sealed at 256 KB) and writes them, in order; meanwhile the
// appenders fill a new one. Every change made during one commit therefore
// goes to disk together in the next: one fsync covers the changes of every
// connection that wrote meanwhile.
//
// The policies have the meaning of Redis' appendfsync:
//
//   - Always: every commit is synced, and WaitDurable(seq) returns once the
//     changes up to seq are. The server calls WaitDurable(LastSeq()) before
//     it writes replies, so a client never sees the effect of a change that
//     a crash could undo. Nothing acknowledged is lost, even in a power
//     failure.
//   - EverySec (the default): changes are logged within a millisecond and
//     the log is synced about once a second when something was written, by
//     a goroutine of its own, so that logging goes on during the fsync (as
//     Redis fsyncs in a background thread). A
//     crash of the process loses only what had not reached the kernel (a
//     few milliseconds); a crash of the machine loses about the last second.
//   - No: never synced but at Close; the kernel writes back when it likes.
//     A process crash loses a few milliseconds, a machine crash what the
//     kernel had not written (on Linux, up to about 30 seconds).
//
// Under EverySec and No, WaitDurable does not wait. If the disk falls far
// behind, changes queue in memory up to 64 sealed records (16 MB), then the
// appenders wait, as Redis blocks writes when its fsync falls behind: memory
// stays bounded, and under EverySec the loss grows with the backlog.
//
// A write error from Pebble is sticky: the DB logs it, stops writing (later
// changes would leave a hole in what is on disk), and reports it through
// Err, Stats, WaitDurable and Close. Restarting reloads what was written
// before it.
//
// # Folder size
//
// Deleted and expired keys must leave the disk, or a rate limiter that sees
// millions of short-lived keys would fill it. A checkpoint deletes the log
// it covers and the saved keys that were removed; in Pebble a deletion is a
// tombstone: the value it hides goes when a compaction brings the two
// together, the tombstone itself only at the bottom level. Pebble's own
// compactions do that while writes flow, but nothing schedules the last
// ones once writes stop. So the DB counts the deletions its checkpoints
// write and, after 100,000 of them, compacts the saved copy in the
// background at the next quiet second (or within a minute under steady
// load), or after 10 quiet seconds for fewer,
// spending at most a tenth of the time on it. The folder then holds the live
// keys, the log written since the last checkpoint (at most 64 MB, none after
// a quiet 10 seconds), and a few KB of metadata (with Pebble's WAL off, no
// WAL files are kept for reuse).
//
// # The Raft mode's log: persistence/raftlog
//
// In the Raft mode the data folder also holds the Raft log and stable store,
// in <dir>/raft/log: a Pebble database of its own, written by package
// persistence/raftlog. It holds every entry raft appends, keyed by index,
// until raft deletes the prefix a snapshot covers, and raft's current term
// and vote. It is not the keyspace's database because it must be synced
// write by write: a follower acknowledges entries, and a leader counts its
// own copy towards a commit, as soon as they are stored, and a node must
// never forget a term or a vote it recorded. So every append (one fsync per
// batch of entries), deletion and term or vote is synced before raft goes
// on, with Pebble's WAL on, where the keyspace's database runs without it.
// Its format key differs from the keyspace's, so neither folder opens as
// the other.
//
// # A folder that is not ours is never touched
//
// Open refuses, with an error naming the folder and what is wrong with it
// (ErrForeign, ErrCorrupt, ErrFormat, ErrLocked), a folder that holds
// files but no Pebble database, a Pebble database without our format key,
// one with a format version this build does not know, or one Pebble cannot
// read (a damaged MANIFEST, a missing file). It checks all of this before
// writing anything: the listing first, then a read-only open. It never
// removes, recreates or rewrites such a folder: it may hold the only copy of
// someone's data, a newer throttled's database or a mistyped --dir, and an
// operator can move it aside in one command while a wipe cannot be undone.
package persistence
