package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/persistence/internal/pebbledir"
)

// Interfaces raft looks for, checked at compile time.
var (
	_ raft.LogStore          = (*Store)(nil)
	_ raft.StableStore       = (*Store)(nil)
	_ raft.MonotonicLogStore = (*Store)(nil)
)

// Errors returned by the package.
var (
	// ErrBadOptions is returned by Open for unusable options.
	ErrBadOptions = errors.New("raftlog: invalid options")
	// ErrForeign is returned by Open for a folder that holds something
	// other than a throttled Raft log (the keyspace's folder included).
	ErrForeign = pebbledir.ErrForeign
	// ErrCorrupt is returned when the folder or an entry cannot be read.
	ErrCorrupt = pebbledir.ErrCorrupt
	// ErrFormat is returned by Open for a folder written in a format
	// version this build does not know (a newer throttled).
	ErrFormat = pebbledir.ErrFormat
	// ErrLocked is returned by Open when another Store (or process) has
	// the folder open.
	ErrLocked = pebbledir.ErrLocked
	// ErrClosed is returned by every method but FirstIndex and LastIndex
	// after Close, and by Close called again.
	ErrClosed = errors.New("raftlog: closed")
	// ErrNotContiguous is returned by StoreLogs for entries that do not
	// follow the last index one by one, and by DeleteRange for a range
	// inside the log: the Store is a raft.MonotonicLogStore, whose log has
	// no gap (see the package doc).
	ErrNotContiguous = errors.New("raftlog: the log must stay contiguous")
	// ErrTooLarge is returned by StoreLogs for an entry whose Data or
	// Extensions is 4 GiB or more.
	ErrTooLarge = errors.New("raftlog: entry too large")
	// ErrKeyNotFound is returned by Get for a key never Set. Its text is
	// raft's and has no package prefix: raft compares err.Error() with
	// "not found" (NewRaft, HasExistingState, requestVote), as its own
	// stores return it. Compare with errors.Is.
	ErrKeyNotFound = errors.New("not found")
)

// Options configures Open. Zero fields mean the defaults.
type Options struct {
	// Dir is the folder of the log; it is created if missing. Required.
	Dir string
	// Logger receives Pebble's messages (at Debug, its errors at Warn) and
	// our warnings. Default slog.Default().
	Logger *slog.Logger
}

// Store is a raft.LogStore and raft.StableStore on a Pebble database of its
// own. It is safe for concurrent use: raft calls it from its main, snapshot
// and replication goroutines at once.
type Store struct {
	db   *pebble.DB
	lock *pebble.Lock // held from Open to Close
	dir  string
	log  *slog.Logger

	// wmu serializes the changes to the log, so that first and last move
	// in the order of the writes they describe.
	wmu sync.Mutex
	// first and last are the indexes of the first and last entries, both
	// 0 when the log is empty; written under wmu after the write they
	// describe, read without a lock (raft asks for them constantly).
	first, last atomic.Uint64

	closeMu sync.RWMutex // Close holds it to close Pebble; the other methods hold it to use Pebble
	closed  bool         // guarded by closeMu
}

// Open opens the log in opts.Dir, creating the folder and an empty log when
// the folder is missing or empty. A folder that holds anything else (a
// keyspace folder among others), or one that cannot be read, is refused with
// an error naming it, and nothing in it is changed.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: no folder given", ErrBadOptions)
	}
	logger := cmp.Or(opts.Logger, slog.Default())
	pl := pebbledir.Logger{L: logger.With("component", "pebble", "dir", opts.Dir)}
	pdb, lock, err := pebbledir.Open(opts.Dir, folderFormat, func(lock *pebble.Lock, readOnly bool) *pebble.Options {
		return &pebble.Options{
			FormatMajorVersion: pebbledir.FormatMajorVersion,
			Logger:             pl,
			EventListener:      pebbledir.EventListener(pl),
			ReadOnly:           readOnly,
			Lock:               lock,
		}
	})
	if err != nil {
		return nil, err
	}
	s := &Store{db: pdb, lock: lock, dir: opts.Dir, log: logger}
	if err := s.loadBounds(); err != nil {
		_ = pdb.Close()
		_ = lock.Close()
		return nil, err
	}
	return s, nil
}

// loadBounds reads the first and last indexes from the database: the first
// and last log keys, which Pebble finds without reading the entries in
// between (a range deletion is skipped over, not stepped through).
func (s *Store) loadBounds() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logStart, UpperBound: logEnd})
	if err != nil {
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, s.dir, err)
	}
	var first, last uint64
	if it.First() {
		first, err = keyIndex(it.Key())
		if err == nil && it.Last() {
			last, err = keyIndex(it.Key())
		}
	}
	if err = errors.Join(err, it.Close()); err != nil {
		return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, s.dir, err)
	}
	s.first.Store(first)
	s.last.Store(last)
	return nil
}

// Close closes the database. Calling it again returns ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	return errors.Join(s.db.Close(), s.lock.Close())
}

// acquire keeps Close from closing Pebble until the caller releases
// closeMu's read lock, or returns ErrClosed once it has.
func (s *Store) acquire() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// FirstIndex returns the index of the first entry, 0 when the log is empty.
// It reads memory only.
func (s *Store) FirstIndex() (uint64, error) { return s.first.Load(), nil }

// LastIndex returns the index of the last entry, 0 when the log is empty.
// It reads memory only.
func (s *Store) LastIndex() (uint64, error) { return s.last.Load(), nil }

// GetLog reads the entry at index into l, or returns raft.ErrLogNotFound
// itself (raft compares with ==) when there is none. l.Data and
// l.Extensions are the caller's own.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var k [logKeyLen]byte
	putLogKey(k[:], index)
	v, closer, err := s.db.Get(k[:])
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftlog: folder %q: reading entry %d: %w", s.dir, index, err)
	}
	defer closer.Close()
	if err := decodeLog(v, index, l); err != nil {
		return fmt.Errorf("%w: folder %q: entry %d: %w", ErrCorrupt, s.dir, index, err)
	}
	return nil
}

// StoreLog appends one entry; see StoreLogs.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs appends entries, which must follow the last index one by one
// (any index when the log is empty), and returns once they are synced to
// disk: raft acknowledges them, or counts them towards a commit, as soon
// as it returns. All of them go in one Pebble batch, with one fsync.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	last := s.last.Load()
	if start := logs[0].Index; start == 0 || (last != 0 && start != last+1) {
		return fmt.Errorf("%w: entries from index %d after %d", ErrNotContiguous, start, last)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for i, l := range logs {
		if want := logs[0].Index + uint64(i); l.Index != want {
			return fmt.Errorf("%w: entry %d where %d was due", ErrNotContiguous, l.Index, want)
		}
		n, err := encodedLen(l)
		if err != nil {
			return err
		}
		// Encoded in place in the batch, not copied into it.
		op := b.SetDeferred(logKeyLen, n)
		putLogKey(op.Key, l.Index)
		putLog(op.Value, l)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("raftlog: folder %q: batching entry %d: %w", s.dir, l.Index, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: folder %q: writing entries %d to %d: %w",
			s.dir, logs[0].Index, logs[len(logs)-1].Index, err)
	}
	if last == 0 {
		s.first.Store(logs[0].Index)
	}
	s.last.Store(logs[len(logs)-1].Index)
	return nil
}

// DeleteRange deletes the entries from min to max, both included, and
// returns once the deletion is synced. The range must reach the first or
// the last entry, as raft's deletions do (a prefix after a snapshot, a
// suffix that conflicts with the leader's log, or all of it); a range
// strictly inside the log is refused with ErrNotContiguous. Parts of the
// range beyond the log are ignored.
//
// The deletion is one Pebble range tombstone, whatever the number of
// entries. After a prefix deletion the memtable is flushed in the
// background, so that the tombstone reaches an sstable, where Pebble's
// compactions drop the entries it covers from disk; otherwise it could sit
// in the memtable, and the entries on disk, until enough new writes fill it.
func (s *Store) DeleteRange(min, max uint64) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	first, last := s.first.Load(), s.last.Load()
	if min > max || last == 0 || max < first || min > last {
		return nil
	}
	start, end := logStart, logEnd
	newFirst, newLast := first, last
	switch {
	case min <= first && max >= last:
		newFirst, newLast = 0, 0
	case min <= first:
		end = logKey(max + 1)
		newFirst = max + 1
	case max >= last:
		start = logKey(min)
		newLast = min - 1
	default:
		return fmt.Errorf("%w: deleting %d to %d from a log of %d to %d", ErrNotContiguous, min, max, first, last)
	}
	if err := s.db.DeleteRange(start, end, pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: folder %q: deleting entries %d to %d: %w", s.dir, min, max, err)
	}
	s.first.Store(newFirst)
	s.last.Store(newLast)
	if newFirst != first {
		if _, err := s.db.AsyncFlush(); err != nil {
			// Not fatal: the entries are deleted, only their space
			// waits for later flushes.
			s.log.Warn("raftlog: flush after a deletion failed", "dir", s.dir, "err", err)
		}
	}
	return nil
}

// IsMonotonic reports true: the Store keeps its log free of gaps (see
// ErrNotContiguous), so raft must delete the whole log, rather than leave a
// gap, after installing a snapshot. Deleting the whole log costs one range
// tombstone.
func (s *Store) IsMonotonic() bool { return true }

// Set stores val under key and returns once it is synced: raft records its
// term and vote here, and must never forget a vote it granted.
func (s *Store) Set(key, val []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if err := s.db.Set(stableKey(key), val, pebble.Sync); err != nil {
		return fmt.Errorf("raftlog: folder %q: setting %q: %w", s.dir, key, err)
	}
	return nil
}

// Get returns the value stored under key, the caller's own copy, or
// ErrKeyNotFound itself when there is none.
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: folder %q: reading %q: %w", s.dir, key, err)
	}
	defer closer.Close()
	return append([]byte{}, v...), nil
}

// SetUint64 stores val under key, as 8 bytes big-endian; see Set.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value SetUint64 stored under key, or 0 when there is
// none (as the raft.StableStore doc asks).
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if errors.Is(err, ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: folder %q: %q holds %d bytes, not a uint64", ErrCorrupt, s.dir, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
