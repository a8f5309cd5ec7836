package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/persistence/internal/pebbledir"
	"github.com/throttleddb/throttled/store"
)

// Errors returned by the package.
var (
	// ErrBadOptions is returned by Open and ParseFsync for unusable options.
	ErrBadOptions = errors.New("persistence: invalid options")
	// ErrForeign is returned by Open for a folder that holds something other
	// than a throttled database.
	ErrForeign = pebbledir.ErrForeign
	// ErrCorrupt is returned by Open and Load when the database cannot be
	// read (damaged files, a bad MANIFEST, a record this build cannot decode).
	ErrCorrupt = pebbledir.ErrCorrupt
	// ErrFormat is returned by Open for a database written in a format
	// version this build does not know (a newer throttled).
	ErrFormat = pebbledir.ErrFormat
	// ErrLocked is returned by Open when another process (or another DB
	// of this process) has the folder open.
	ErrLocked = pebbledir.ErrLocked
	// ErrClosed is returned by Close, Load and WaitDurable after Close.
	ErrClosed = errors.New("persistence: closed")
	// ErrDatabases is returned by Load when the folder holds keys of a
	// database the store does not have.
	ErrDatabases = errors.New("persistence: too few databases for this folder")
)

// memTableSize is Pebble's write buffer, a quarter of its default. Pebble
// keeps two allocated (the current one and one kept for reuse, in C memory
// when cgo is on) and flushes it when it is full. A checkpoint's chunks
// skip it (see checkpointChunk): it holds only small checkpoints and Load's
// deletions of expired keys, so a larger one gains nothing. 1 MB rather
// than 2 MB took 0.8 MB off throttled's RSS with a million keys (0.3 MB of
// C memory, 0.5 MB of Go heap, 5 runs each, bench/persist's fill) and did
// not slow BenchmarkCheckpoint (0.87-0.98 s with 2 MB, 0.78-0.94 s with
// 1 MB, within this machine's noise).
const memTableSize = 1 << 20

// cacheSize is Pebble's block cache. The keyspace lives in the store, so
// Pebble is read only by Load (once, front to back) and by its own
// compactions: a cache would hold blocks nobody reads again, as resident
// memory on top of the keys. Pebble's default is 8 MB.
const cacheSize = 1 << 20

// DB is the durable copy of the keyspace. It implements store.Journal. It is
// safe for concurrent use.
type DB struct {
	pdb    *pebble.DB
	lock   *pebble.Lock // held from Open to Close
	dir    string
	policy FsyncPolicy
	log    *slog.Logger

	mu sync.Mutex // guards the fields down to stopped; held to append or swap, never across I/O
	// rec collects the latest changes as a log record; it is sealed into
	// queue once it reaches sealAt, or when the committer comes for it.
	rec []byte
	// queue holds the sealed records the committer has yet to take,
	// oldest first.
	queue []sealed
	// free holds committed records for reuse, so the steady state does
	// not allocate.
	free [][]byte
	// room is signalled when the committer empties queue; appenders wait
	// on it only when maxQueue batches are waiting (Pebble is stalled).
	room sync.Cond
	// stopped drops appends: Close has begun or a write failed.
	stopped bool

	lastSeq  atomic.Uint64 // seq of the latest appended change; written under mu
	applied  atomic.Uint64 // every change up to this seq is written to the log
	synced   atomic.Uint64 // every change up to this seq is in a synced log segment; written under dmu
	lastSync atomic.Int64  // Unix seconds of the last successful sync
	commits  atomic.Int64  // group commits applied
	syncs    atomic.Int64  // log syncs, with a commit or alone
	logBytes atomic.Int64  // log written since the last checkpoint began

	// ks is the store Load filled, which checkpoints save; nil before.
	ks *store.Store
	// cpMu serializes checkpoints (the background ones and Close's).
	cpMu sync.Mutex
	// cpAborted is set, under cpMu, once a checkpoint was cancelled.
	cpAborted       bool
	checkpointCount atomic.Int64
	lastCheckpoint  atomic.Int64       // Unix seconds of the last checkpoint done; 0 before one
	cpStop          context.CancelFunc // stops the checkpointer; nil before Load
	cpDone          chan struct{}      // closed when it has stopped

	wake chan struct{} // buffered 1: there is work for the committer
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the committer has exited
	// work is the committer's own slice, swapped with queue so that
	// taking the queue does not allocate; recs and seqs are its buffers.
	work []sealed
	recs [][]byte
	seqs []uint64
	// segs holds the log (segments.go).
	segs segments

	dmu sync.Mutex // guards err and finished; the lock of durable
	// durable is broadcast when synced moves, an error happens, or the
	// committer exits.
	durable  sync.Cond
	err      error // the first write error; sticky
	finished bool  // the committer has exited
	hasErr   atomic.Bool

	compact compactor

	closeMu sync.RWMutex // Close holds it to close Pebble; Stats and Load hold it to read Pebble
	closed  bool         // guarded by closeMu
}

// sealed is a log record waiting for the committer.
type sealed struct {
	b   []byte
	seq uint64 // seq of its last change
}

// Open opens the database in opts.Dir, creating the folder and an empty
// database when the folder is missing or empty. A folder that holds anything
// else than a throttled database, or one that cannot be read, is refused with
// an error naming it; Open never removes or rewrites a file of such a folder.
func Open(opts Options) (*DB, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dir := opts.Dir
	pl := pebbledir.Logger{L: opts.Logger.With("component", "pebble", "dir", dir)}
	format := folderFormat
	format.Beside = opts.Beside
	pdb, lock, err := pebbledir.Open(dir, format, func(lock *pebble.Lock, readOnly bool) *pebble.Options {
		return pebbleOptions(pl, lock, readOnly)
	})
	if err != nil {
		return nil, err
	}
	d := &DB{
		pdb:    pdb,
		lock:   lock,
		dir:    dir,
		policy: opts.Fsync,
		log:    opts.Logger,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		cpDone: make(chan struct{}),
		rec:    make([]byte, 0, 64<<10),
		segs:   segments{dir: filepath.Join(dir, logDir)},
	}
	d.room.L = &d.mu
	d.durable.L = &d.dmu
	d.lastSync.Store(time.Now().Unix()) // nothing is unsynced yet
	d.compact.start(d)
	go d.run()
	return d, nil
}

// MakeDir creates dir and its missing parents durably, as Open does: for
// the files a caller keeps in a data folder (Options.Beside) and may write
// before the database.
func MakeDir(dir string) error { return pebbledir.MakeDir(dir) }

func pebbleOptions(pl pebbledir.Logger, lock *pebble.Lock, readOnly bool) *pebble.Options {
	return &pebble.Options{
		FormatMajorVersion: pebbledir.FormatMajorVersion,
		MemTableSize:       memTableSize,
		// Only checkpoints write, in bursts of up to a few hundred MB, and
		// only Load reads, once. A checkpoint's keys come in no order, so
		// every L0 file overlaps all of Lbase and each L0 compaction
		// rewrites it: fewer, larger ones, and no stall on the L0 file
		// count while they catch up, made a checkpoint of 500,000 new keys
		// 1.7x faster (BenchmarkCheckpoint: 2.6 s, now 1.5 s). Reads merge
		// more L0 files, which Load does not notice. Letting 4 memtables
		// wait for their flush instead of 2 gained another 1.5x but took
		// 20 MB more RSS under a key flood (e2e.TestFlood_MaxMemory).
		L0CompactionThreshold: 16,
		L0StopWritesThreshold: 64,
		// Pebble's WAL would be a second log of what our own log already
		// holds: a checkpoint writes the saved copy and then flushes it to
		// sstables before a segment of our log goes (checkpoint.go), so a
		// crash before the flush loses nothing the log does not replay.
		// Without it a checkpoint writes its keys to disk once instead of
		// twice, the folder no longer keeps WAL files of up to a memtable
		// each for reuse (2 to 4 of them, 1 to 8 MB), and the WAL writer's
		// 0.3 MB of buffers leave the heap (bench/persist's fill). A folder
		// written with the WAL on (an older build, or writeRaw in the
		// tests) still has it replayed, and flushed, when it is opened.
		DisableWAL: true,
		// Every checkpoint that writes ends with a flush, and so with a
		// MANIFEST record: about 70 bytes for a checkpoint of a few keys,
		// every 10 seconds under a light load. Pebble's default rotates the
		// MANIFEST at 128 MB, which would take months and then be replayed
		// at every start; at 1 MB the new one starts with a snapshot of a
		// few files.
		MaxManifestFileSize: 1 << 20,
		Cache:               pebble.NewCache(cacheSize),
		Logger:              pl,
		EventListener:       pebbledir.EventListener(pl),
		ReadOnly:            readOnly,
		Lock:                lock,
	}
}

// Close applies and syncs every appended change, whatever the policy, and
// closes the database. Journal calls made after Close has begun are dropped.
// It returns the first write error the DB met, if any. Calling it again
// returns ErrClosed.
func (d *DB) Close() error {
	d.mu.Lock()
	if isClosed(d.stop) {
		d.mu.Unlock()
		return ErrClosed
	}
	d.stopped = true
	close(d.stop)
	d.mu.Unlock()
	d.room.Broadcast() // appenders waiting for room drop their change
	<-d.done
	err := d.segs.close()
	if err != nil {
		d.fail(fmt.Errorf("closing the log: %w", err))
	}
	if d.cpStop != nil {
		// A running checkpoint stops after its current shard, so that
		// a shutdown does not wait for one that has millions of keys to
		// write (the log holds its changes).
		d.cpStop()
		<-d.cpDone
		// The last checkpoint empties the log, so the next start has
		// nothing to replay. Nothing runs beside it now, so it is
		// quick unless a burst of new keys came just before.
		if d.Err() == nil {
			start := time.Now()
			switch err := d.checkpoint(context.Background()); {
			case errors.Is(err, errAborted):
				d.log.Info("persistence: the next start replays the log (a checkpoint was stopped)")
			case err != nil:
				d.fail(err)
			default:
				d.log.Info("persistence: last checkpoint", "took", time.Since(start).Round(time.Millisecond))
			}
		}
	}
	start := time.Now()
	d.compact.close()
	d.closeMu.Lock()
	d.closed = true
	err = errors.Join(d.pdb.Close(), d.lock.Close())
	d.closeMu.Unlock()
	d.log.Info("persistence: closed Pebble", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(d.Err(), err)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Err returns the first error met writing to Pebble, or nil. After an error
// the DB stops writing (later changes would leave a hole in what is on
// disk): appends are dropped and WaitDurable returns the error. Restart
// the server to recover, which reloads what was written before the error.
func (d *DB) Err() error {
	if !d.hasErr.Load() {
		return nil
	}
	d.dmu.Lock()
	defer d.dmu.Unlock()
	return d.err
}

// fail records err as the DB's write error, stops appends and wakes every
// WaitDurable.
func (d *DB) fail(err error) {
	err = fmt.Errorf("persistence: folder %q: %w", d.dir, err)
	d.log.Error("persistence: write failed, changes are no longer saved", "err", err)
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.room.Broadcast()
	d.dmu.Lock()
	if d.err == nil {
		d.err = err
		d.hasErr.Store(true)
	}
	d.dmu.Unlock()
	d.durable.Broadcast()
}
