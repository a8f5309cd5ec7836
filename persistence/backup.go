package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Backups (the BACKUP command): a consistent copy of the keyspace, written
// as a new data folder that a node started with --dir on it loads as its
// own.
//
// The caller takes the copy with AppendSnapshot while it holds every shard,
// so it is the keyspace at one instant, whichever mode the node runs and
// whatever its checkpoints are doing; WriteBackup then writes it without
// any lock. The folder is this package's format with the whole keyspace in
// the saved copy and an empty log, built under a temporary name beside the
// target and renamed into place once flushed: a folder at the target path
// is always a whole backup, and a crash leaves only the temporary folder,
// which the next BACKUP to that path names in its refusal.

// ErrBackupPath is returned by WriteBackup for a target path it will not
// write to.
var ErrBackupPath = errors.New("persistence: backup path")

// partialSuffix names the folder a backup is built in before its rename.
const partialSuffix = ".partial"

// CheckBackupPath refuses a target a backup must not be written to: a
// relative path (it would depend on the server's working folder), one that
// exists, or one inside, or holding, the node's own data folder, own ("" for
// a node in memory). The parent folder must exist.
func CheckBackupPath(dir, own string) error {
	switch {
	case dir == "":
		return fmt.Errorf("%w: empty", ErrBackupPath)
	case !filepath.IsAbs(dir):
		return fmt.Errorf("%w: %q is not absolute", ErrBackupPath, dir)
	}
	dir = filepath.Clean(dir)
	if own != "" {
		if abs, err := filepath.Abs(own); err == nil && (within(dir, abs) || within(abs, dir)) {
			return fmt.Errorf("%w: %q overlaps the node's data folder %q", ErrBackupPath, dir, abs)
		}
	}
	for _, p := range []string{dir, dir + partialSuffix} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%w: %q already exists", ErrBackupPath, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %v", ErrBackupPath, err)
		}
	}
	if st, err := os.Stat(filepath.Dir(dir)); err != nil || !st.IsDir() {
		return fmt.Errorf("%w: the parent folder of %q does not exist", ErrBackupPath, dir)
	}
	return nil
}

// within reports whether path is dir or under it; both are clean.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// WriteBackup writes snap, an AppendSnapshot of a keyspace, as a new data
// folder at dir (see CheckBackupPath, which it runs again). It returns the
// number of keys written.
func WriteBackup(dir, own string, snap []byte, logger *slog.Logger) (int, error) {
	if err := CheckBackupPath(dir, own); err != nil {
		return 0, err
	}
	dir = filepath.Clean(dir)
	tmp := dir + partialSuffix
	keys, err := writeFolder(tmp, snap, logger)
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err == nil {
		err = syncDir(filepath.Dir(dir))
	}
	if err != nil {
		return 0, fmt.Errorf("persistence: backup to %q: %w", dir, err)
	}
	return keys, nil
}

// writeFolder creates a data folder at dir holding snap's keys in its
// saved copy, flushed to disk.
func writeFolder(dir string, snap []byte, logger *slog.Logger) (keys int, err error) {
	d, err := Open(Options{Dir: dir, Fsync: Always, Logger: logger})
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	b := d.pdb.NewBatch()
	defer func() { _ = b.Close() }()
	var key, value []byte
	for len(snap) > 0 {
		c, rest, err := nextChange(snap)
		if err != nil {
			return keys, err
		}
		if c.op != opSet {
			return keys, fmt.Errorf("%w: change %q in a snapshot", errBadRecord, c.op)
		}
		key = appendKey(key[:0], c.db, c.key)
		value = appendValue(value[:0], c.v, c.expireMs)
		if err := b.Set(key, value, nil); err != nil {
			return keys, err
		}
		keys++
		if b.Len() >= checkpointChunk {
			if err := b.Commit(pebble.NoSync); err != nil {
				return keys, err
			}
			b.Reset()
		}
		snap = rest
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return keys, err
	}
	// Pebble runs without its WAL: the flush is what makes the copy
	// durable (see checkpoint).
	return keys, d.pdb.Flush()
}
