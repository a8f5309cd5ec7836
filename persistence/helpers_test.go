package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/store"
)

func testLogger(t testing.TB) *slog.Logger { return testlog.Slog(t, slog.LevelInfo) }

// openT opens dir and closes it when the test ends (unless the test closed
// it itself).
func openT(t testing.TB, dir string, p FsyncPolicy) *DB {
	t.Helper()
	d, err := Open(Options{Dir: dir, Fsync: p, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func closeT(t testing.TB, d *DB) {
	t.Helper()
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// rec is one loaded key.
type rec struct {
	v        store.Value
	expireMs int64
}

func (r rec) String() string {
	return fmt.Sprintf("{kind %d int %d bytes %q exp %d}", r.v.Kind, r.v.Int, r.v.Bytes, r.expireMs)
}

func dbKeyName(db int, key []byte) string { return fmt.Sprintf("%d/%s", db, key) }

// newStoreT returns an empty store with every database a test may use.
func newStoreT(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.New(store.Config{Databases: store.WireSystemDB, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dump returns every key of s live at nowMs, keyed "db/key".
func dump(s *store.Store, nowMs int64) map[string]rec {
	got := map[string]rec{}
	tx := s.Tx(nowMs * 1e6)
	for db := range s.AllDatabases() {
		tx.ForEach(db, func(key string, v store.Value, exp int64) bool {
			v.Bytes = append([]byte(nil), v.Bytes...)
			got[dbKeyName(s.WireDB(db), []byte(key))] = rec{v, exp}
			return true
		})
	}
	return got
}

// loadStore loads d at nowMs into a new store, which d then checkpoints.
func loadStore(t testing.TB, d *DB, nowMs int64) *store.Store {
	t.Helper()
	return loadInto(t, d, newStoreT(t), nowMs)
}

// loadInto loads d at nowMs into s, which d then checkpoints.
func loadInto(t testing.TB, d *DB, s *store.Store, nowMs int64) *store.Store {
	t.Helper()
	n, err := d.Load(s, nowMs*1e6)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := len(dump(s, nowMs)); n != got {
		t.Errorf("Load reported %d keys, the store holds %d", n, got)
	}
	return s
}

// loadAll loads d at nowMs into a map keyed "db/key".
func loadAll(t testing.TB, d *DB, nowMs int64) map[string]rec {
	t.Helper()
	return dump(loadStore(t, d, nowMs), nowMs)
}

// reload closes d, opens its folder again and loads it at nowMs.
func reload(t testing.TB, d *DB, nowMs int64) map[string]rec {
	t.Helper()
	closeT(t, d)
	d2 := openT(t, d.dir, No)
	got := loadAll(t, d2, nowMs)
	closeT(t, d2)
	return got
}

func sameRec(a, b rec) bool {
	return a.v.Kind == b.v.Kind && a.v.Int == b.v.Int && string(a.v.Bytes) == string(b.v.Bytes) &&
		a.expireMs == b.expireMs
}

func compareRecs(t testing.TB, got, want map[string]rec) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("key %s missing, want %v", k, w)
		case !sameRec(g, w):
			t.Errorf("key %s = %v, want %v", k, g, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s = %v, want it absent", k, g)
		}
	}
}

// snapshotDir returns every file under dir with its contents.
func snapshotDir(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		files[strings.TrimPrefix(path, dir)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// dirSize is the total size of the files under dir whose names end with
// one of suffixes (all files without).
func dirSize(t testing.TB, dir string, suffixes ...string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if len(suffixes) > 0 && !slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(path, s) }) {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // an obsolete file removed while walking
		}
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// logRecords counts the records of d's log.
func logRecords(t testing.TB, d *DB) int {
	t.Helper()
	n := 0
	if _, err := readSegments(d.segs.dir, func([]byte, uint64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// locked runs fn on a Tx of s at nowMs holding every shard, as a command
// would hold its keys' shards (the checkpointer may be reading s).
func locked(s *store.Store, nowMs int64, fn func(tx store.Tx)) {
	var l store.LockSet
	l.AddAll()
	s.Lock(&l)
	defer s.Unlock(&l)
	fn(s.Tx(nowMs * 1e6))
}
