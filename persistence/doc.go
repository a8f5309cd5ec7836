// Package persistence keeps the keyspace on disk, in Pebble, for the
// single-node mode: the store reports every change to a DB (it implements
// store.Journal), and at start-up Load hands every live key back before the
// listener opens.
//
// # What is stored
//
// One Pebble record per key: every database, every kind of value, and its
// expiry. Keys are
//
//	[0x01][db uint16 big-endian][user key]
//
// so a database is one contiguous range (FLUSHDB is a single range
// deletion) and Load sees keys in database order. The first byte sets data
// apart from our own metadata, under 0x00: today only the key "\x00format",
// holding the folder's format version (1). Values are
//
//	[value version = 1][kind][expireMs int64 big-endian][payload]
//
// where expireMs is Unix milliseconds (0: no expiry) and the payload is the
// int64 big-endian for store.KindInt and the value's bytes for every other
// kind (strings, and the rate-limit engines' states, which carry their own
// versioned encodings). Kinds this package has never heard of go through
// unchanged.
//
// # Group commit and the fsync policies
//
// Journal calls arrive under the key's shard lock, so they must be cheap:
// each appends the change to an in-memory Pebble batch under a mutex and
// gives it the next sequence number (LastSeq). Appenders never wait for
// Pebble. A committer goroutine takes the batch (and any sealed ones: a
// batch is sealed at 256 KB) and applies them, in order; meanwhile the
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
//   - EverySec (the default): changes are applied within a millisecond and
//     the WAL is synced about once a second when something was written. A
//     crash of the process loses only what had not reached the kernel (a
//     few milliseconds); a crash of the machine loses about the last second.
//   - No: never synced but at Close; the kernel writes back when it likes.
//     A process crash loses a few milliseconds, a machine crash what the
//     kernel had not written (on Linux, up to about 30 seconds).
//
// Under EverySec and No, WaitDurable does not wait. If the disk falls far
// behind, changes queue in memory up to 64 sealed batches (16 MB), then the
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
// millions of short-lived keys would fill it. In Pebble a deletion is a
// tombstone: the value it hides goes when a compaction brings the two
// together, the tombstone itself only at the bottom level. Pebble's own
// compactions do that while writes flow, but nothing schedules the last
// ones once writes stop. So the DB counts deletions and, after 100,000 of
// them, compacts the data range in the background at the next quiet second
// (or within a minute under steady load), spending at most a tenth of the
// time on it. The folder then holds the live keys plus a fixed floor: the
// WAL files Pebble keeps for reuse (up to four files of about a memtable,
// 4 MB, each) and a few KB of metadata. The memtable is kept at Pebble's
// default size for that reason.
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
