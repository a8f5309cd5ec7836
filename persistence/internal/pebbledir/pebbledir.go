// Package pebbledir opens the Pebble folders of the persistence packages
// (the keyspace's, and the Raft log's) in one way, so that they all refuse
// a folder that is not theirs before writing a byte of it, and route
// Pebble's messages to slog.
//
// A folder is ours when its Pebble database holds a format key, whose value
// is the folder's format version; each kind of folder has its own key, so
// one kind is never taken for another. Open refuses (ErrForeign, ErrCorrupt,
// ErrFormat, ErrLocked) a folder that holds files but no Pebble database,
// a Pebble database without the format key, one with a version this build
// does not read, or one Pebble cannot read (a damaged MANIFEST, a missing
// file). It checks all of this before writing anything: the listing first,
// then a read-only open. It never removes, recreates or rewrites such a
// folder: it may hold the only copy of someone's data, a newer throttled's
// database or a mistyped --dir, and an operator can move it aside in one
// command while a wipe cannot be undone.
package pebbledir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Errors returned by Open. The persistence packages return them as their
// own, so that errors.Is works the same on all of them.
var (
	// ErrForeign is returned for a folder that holds something other than a
	// throttled database of the kind asked for.
	ErrForeign = errors.New("persistence: folder is not a throttled database")
	// ErrCorrupt is returned when the database cannot be read (damaged
	// files, a bad MANIFEST).
	ErrCorrupt = errors.New("persistence: database is corrupt or unreadable")
	// ErrFormat is returned for a database written in a format version this
	// build does not know (a newer throttled).
	ErrFormat = errors.New("persistence: unknown format version")
	// ErrLocked is returned when another process (or another DB of this
	// process) has the folder open.
	ErrLocked = errors.New("persistence: folder is in use")
)

// FormatMajorVersion is Pebble's on-disk format for every folder, pinned
// rather than FormatNewest, so that a Pebble upgrade never ratchets the
// on-disk format (a one-way change) without a review.
const FormatMajorVersion = pebble.FormatValueSeparation

// Format is how one kind of folder shows it is ours.
type Format struct {
	// Key holds the folder's version, one byte. It must differ between
	// kinds of folder, and lie outside their data.
	Key []byte
	// Reads lists the versions this build reads, the one it writes first.
	// A folder stamped with a later one of them is restamped with the first
	// when opened, so that a build that knows only an older version refuses
	// the folder instead of misreading it.
	Reads []byte
	// Name says in errors what kind of folder was expected ("a throttled
	// keyspace").
	Name string
	// Beside names the files the folder's owner may write there before
	// the database (a mesh node's incarnation): a folder that holds only
	// them is fresh.
	Beside []string
}

// Open opens the Pebble database in dir for writing, creating the folder and
// an empty database, stamped with f, when the folder is missing or empty. It
// refuses any other folder but one of f's kind (see the package doc), with
// an error naming it. options gives the Pebble options to open dir with,
// holding lock, read-only (to check it) or not. The caller closes the lock
// after the database.
func Open(dir string, f Format, options func(lock *pebble.Lock, readOnly bool) *pebble.Options) (*pebble.DB, *pebble.Lock, error) {
	fresh, err := inspect(dir, f.Beside)
	if err != nil {
		return nil, nil, err
	}
	if err := MakeDir(dir); err != nil {
		return nil, nil, fmt.Errorf("persistence: creating folder %q: %w", dir, err)
	}
	// One lock for the read-only check and the real open, so that no other
	// process can slip in between, and so that a folder in use says so
	// instead of looking unreadable.
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %q: %w", ErrLocked, dir, err)
	}
	pdb, err := open(dir, fresh, f, options, lock)
	if err != nil {
		_ = lock.Close()
		return nil, nil, err
	}
	return pdb, lock, nil
}

// open opens the database for writing, after checking a folder that is not
// fresh, and stamps the format if it is not stamped with f.Reads[0] yet.
func open(dir string, fresh bool, f Format, options func(*pebble.Lock, bool) *pebble.Options, lock *pebble.Lock) (*pebble.DB, error) {
	if !fresh {
		// Opening for writing rotates the MANIFEST and the WAL and writes
		// an OPTIONS file, so everything that could refuse the folder is
		// checked read-only first.
		if err := check(dir, f, options(lock, true)); err != nil {
			return nil, err
		}
	}
	opts := options(lock, false)
	// Pebble's default scheduler wakes 10 times a second for as long as
	// the database is open; ours only while a compaction waits.
	opts.Experimental.CompactionScheduler = newScheduler(grantEvery)
	pdb, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: folder %q: %w", ErrCorrupt, dir, err)
	}
	// A fresh database has no stamp yet, nor does one whose creation was
	// interrupted before the stamp was durable; check accepted the latter
	// only because it held no key at all. check accepted any other stamp
	// only if it is in f.Reads.
	v, closer, err := pdb.Get(f.Key)
	stamp := errors.Is(err, pebble.ErrNotFound)
	if err == nil {
		stamp = len(v) != 1 || v[0] != f.Reads[0]
		err = closer.Close()
	}
	switch {
	case err != nil && !stamp:
		err = fmt.Errorf("%w: folder %q: %w", ErrCorrupt, dir, err)
	case stamp:
		err = writeStamp(pdb, f, opts.DisableWAL)
		if err != nil {
			err = fmt.Errorf("persistence: folder %q: writing the format marker: %w", dir, err)
		}
	}
	if err != nil {
		_ = pdb.Close()
		return nil, err
	}
	return pdb, nil
}

// writeStamp writes f's current version, durably.
func writeStamp(pdb *pebble.DB, f Format, noWAL bool) error {
	if !noWAL {
		return pdb.Set(f.Key, f.Reads[:1], pebble.Sync)
	}
	// Without a WAL (the keyspace's DB) only a flush makes a write durable,
	// and Pebble refuses a synced one.
	if err := pdb.Set(f.Key, f.Reads[:1], pebble.NoSync); err != nil {
		return err
	}
	return pdb.Flush()
}

// MakeDir creates dir and its missing parents, syncing the folder that
// receives each new entry, so that a new database does not vanish with its
// folder's entry in a power loss.
func MakeDir(dir string) error {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range missing {
		f, err := os.Open(filepath.Dir(d))
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// inspect decides what dir is before anything touches it: fresh (missing,
// or empty but for a lock file and the files named in beside), or a Pebble
// database to check. Anything else is someone else's folder. Pebble itself
// would create a new database over files it does not recognise, overwriting
// any whose name it reuses, so this must come first.
func inspect(dir string, beside []string) (fresh bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: folder %q: %w", ErrCorrupt, dir, err)
	}
	var others []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "marker.manifest.") {
			return false, nil
		}
		if (name == "LOCK" || slices.Contains(beside, name)) && e.Type().IsRegular() {
			continue
		}
		others = append(others, name)
	}
	if len(others) == 0 {
		return true, nil
	}
	if len(others) > 3 {
		others = append(others[:3], "...")
	}
	return false, fmt.Errorf("%w: %q holds %s but no Pebble database; nothing was changed: "+
		"use an empty folder or one written by throttled", ErrForeign, dir, strings.Join(others, ", "))
}

// check opens a Pebble folder read-only (ro), which writes nothing, and
// verifies that it is of f's kind and in a format we read.
func check(dir string, f Format, ro *pebble.Options) error {
	rdb, err := pebble.Open(dir, ro)
	if err != nil {
		return fmt.Errorf("%w: folder %q: %w; nothing was changed: restore it from a backup "+
			"or move it away to start empty", ErrCorrupt, dir, err)
	}
	defer rdb.Close()
	v, closer, err := rdb.Get(f.Key)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := rdb.NewIter(nil)
		if err != nil {
			return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, dir, err)
		}
		empty := !it.First()
		if err := it.Close(); err != nil {
			return fmt.Errorf("%w: folder %q: %w", ErrCorrupt, dir, err)
		}
		if !empty {
			return fmt.Errorf("%w: %q holds a Pebble database, but not %s (no format marker %q); "+
				"nothing was changed", ErrForeign, dir, f.Name, f.Key)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: folder %q: reading the format marker: %w", ErrCorrupt, dir, err)
	}
	defer closer.Close()
	if len(v) != 1 || !slices.Contains(f.Reads, v[0]) {
		return fmt.Errorf("%w: %q holds %s in format %x, this build reads %d (written by a newer throttled?); "+
			"nothing was changed", ErrFormat, dir, f.Name, v, f.Reads[0])
	}
	return nil
}
