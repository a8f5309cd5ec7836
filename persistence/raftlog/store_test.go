package raftlog

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/persistence"
	"github.com/throttleddb/throttled/store"
)

// TestReopen: everything written is there after Close and Open, the
// bounds read back from disk.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	logs := entries(1, 50, 1)
	logs[7].Extensions = []byte("ext")
	logs[8].Type = raft.LogConfiguration
	logs[9].Data = nil
	storeT(t, s, logs[:20])
	storeT(t, s, logs[20:])
	deleteT(t, s, 1, 10)
	deleteT(t, s, 46, 50)
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)

	s = openT(t, dir)
	checkBounds(t, s, 11, 45)
	checkLogs(t, s, logs[10:45])
	checkMissing(t, s, 1, 10)
	checkMissing(t, s, 46, 50)
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Errorf("Get(LastVoteCand) = %q, %v; want n2", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Errorf("GetUint64(CurrentTerm) = %d, %v; want 3", v, err)
	}
	storeT(t, s, entries(46, 46, 2)) // appends where the log ended

	deleteT(t, s, 11, 46)
	closeT(t, s)
	checkBounds(t, openT(t, dir), 0, 0)
}

// TestContiguous: entries must follow the last one without a gap or an
// overlap, and only a prefix or a suffix may be deleted; a refused call
// changes nothing.
func TestContiguous(t *testing.T) {
	s := openT(t, t.TempDir())
	logs := entries(1, 10, 1)
	storeT(t, s, logs)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"gap after the last", func() error { return s.StoreLogs(entries(12, 13, 1)) }},
		{"overlap with the last", func() error { return s.StoreLogs(entries(10, 11, 2)) }},
		{"rewrite from the start", func() error { return s.StoreLog(entries(1, 1, 2)[0]) }},
		{"gap inside the batch", func() error {
			return s.StoreLogs(append(entries(11, 12, 1), entries(14, 14, 1)...))
		}},
		{"middle of the log", func() error { return s.DeleteRange(3, 8) }},
	} {
		if err := tc.call(); !errors.Is(err, ErrNotContiguous) {
			t.Errorf("%s: %v, want ErrNotContiguous", tc.name, err)
		}
	}
	checkBounds(t, s, 1, 10)
	checkLogs(t, s, logs)
	checkMissing(t, s, 11, 14)

	// Ranges that miss the log, or are empty, do nothing.
	deleteT(t, s, 11, 20)
	deleteT(t, s, 5, 4)
	checkBounds(t, s, 1, 10)

	empty := openT(t, t.TempDir())
	if err := empty.StoreLogs(entries(0, 1, 1)); !errors.Is(err, ErrNotContiguous) {
		t.Errorf("StoreLogs from index 0: %v, want ErrNotContiguous", err)
	}
	deleteT(t, empty, 1, 5)
	checkBounds(t, empty, 0, 0)
}

// TestReturnsCopies: what GetLog and Get return is the caller's own.
func TestReturnsCopies(t *testing.T) {
	s := openT(t, t.TempDir())
	logs := entries(1, 1, 1)
	logs[0].Extensions = []byte("ext")
	storeT(t, s, logs)
	if err := s.Set([]byte("k"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	clear(l.Data)
	_ = append(l.Data, 'x') // must not run over Extensions
	clear(l.Extensions)
	v, err := s.Get([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	clear(v)
	checkLogs(t, s, logs)
	if v, err := s.Get([]byte("k")); err != nil || string(v) != "value" {
		t.Errorf("Get(k) = %q, %v after changing what it returned; want value", v, err)
	}
	var l2 raft.Log
	if err := s.GetLog(1, &l2); err != nil || string(l2.Extensions) != "ext" {
		t.Errorf("Extensions = %q, %v after appending to Data; want ext", l2.Extensions, err)
	}
}

// TestClosed: after Close the Store answers ErrClosed instead of reaching
// a closed Pebble (which panics).
func TestClosed(t *testing.T) {
	s := openT(t, t.TempDir())
	storeT(t, s, entries(1, 3, 1))
	closeT(t, s)
	var l raft.Log
	for name, err := range map[string]error{
		"Close":       s.Close(),
		"GetLog":      s.GetLog(1, &l),
		"StoreLogs":   s.StoreLogs(entries(4, 4, 1)),
		"DeleteRange": s.DeleteRange(1, 1),
		"Set":         s.Set([]byte("k"), nil),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := s.GetUint64([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("GetUint64 after Close: %v, want ErrClosed", err)
	}
}

// TestGetUint64_NotAUint64: a key Set to something else than 8 bytes is
// reported, not read as a wrong number.
func TestGetUint64_NotAUint64(t *testing.T) {
	s := openT(t, t.TempDir())
	if err := s.Set([]byte("CurrentTerm"), []byte("3")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("GetUint64 = %d, %v; want ErrCorrupt", v, err)
	}
}

// TestOpen_Refuses: a folder that is not a Raft log of ours is refused
// with an error naming it, and stays usable by its owner. The keyspace's
// folder and the log's are never taken for each other.
func TestOpen_Refuses(t *testing.T) {
	t.Run("keyspace folder", func(t *testing.T) {
		dir := t.TempDir()
		ks, err := persistence.Open(persistence.Options{Dir: dir, Fsync: persistence.Always, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ks.Set(0, []byte("k"), store.IntValue(7), 0)
		if err := ks.Close(); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrForeign)
		ks, err = persistence.Open(persistence.Options{Dir: dir, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("the keyspace no longer opens: %v", err)
		}
		st, err := store.New(store.Config{Databases: 1, Shards: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ks.Load(st, time.Now().UnixNano()); err != nil {
			t.Fatalf("the keyspace no longer loads: %v", err)
		}
		if err := ks.Close(); err != nil {
			t.Fatal(err)
		}
		if v, ok := st.Tx(time.Now().UnixNano()).Get(0, []byte("k")); !ok || v.Int != 7 {
			t.Errorf("keyspace key k = %+v, %v after the refusal; want 7", v, ok)
		}
	})
	t.Run("Raft log opened as a keyspace", func(t *testing.T) {
		dir := t.TempDir()
		s := openT(t, dir)
		storeT(t, s, entries(1, 3, 1))
		closeT(t, s)
		if ks, err := persistence.Open(persistence.Options{Dir: dir, Logger: testLogger(t)}); !errors.Is(err, persistence.ErrForeign) {
			if err == nil {
				_ = ks.Close()
			}
			t.Fatalf("persistence.Open of a Raft log: %v, want ErrForeign", err)
		}
		checkLogs(t, openT(t, dir), entries(1, 3, 1))
	})
	t.Run("unrelated files", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrForeign)
	})
	t.Run("future format", func(t *testing.T) {
		dir := t.TempDir()
		closeT(t, openT(t, dir))
		pdb, err := pebble.Open(dir, &pebble.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(pdb.Set(formatKey, []byte{formatVersion + 1}, pebble.Sync), pdb.Close()); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, ErrFormat)
	})
	t.Run("in use", func(t *testing.T) {
		dir := t.TempDir()
		openT(t, dir)
		refused(t, dir, ErrLocked)
	})
	t.Run("no folder", func(t *testing.T) {
		if s, err := Open(Options{}); !errors.Is(err, ErrBadOptions) {
			if err == nil {
				_ = s.Close()
			}
			t.Errorf("Open without a folder: %v, want ErrBadOptions", err)
		}
	})
}

// refused checks that Open(dir) fails with want, naming dir.
func refused(t *testing.T, dir string, want error) {
	t.Helper()
	s, err := Open(Options{Dir: dir, Logger: testLogger(t)})
	if err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded")
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open = %v, want %v naming %s", err, want, dir)
	}
}

// TestDeleteRange_FreesDisk: after raft deletes the prefix of a log that
// reached sstables, its entries leave the disk without any more writes.
func TestDeleteRange_FreesDisk(t *testing.T) {
	s := openT(t, t.TempDir())
	const n, size = 16 << 10, 1 << 10 // 16 MiB of entries, incompressible
	for i := uint64(1); i <= n; i += 256 {
		logs := entries(i, i+255, 1)
		for _, l := range logs {
			l.Data = make([]byte, size)
			_, _ = rand.Read(l.Data)
		}
		storeT(t, s, logs)
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	tables := func() int64 { return s.db.Metrics().Total().TablesSize }
	before := tables()
	if before < n*size/2 {
		t.Fatalf("only %d bytes of sstables to start with; want about %d", before, n*size)
	}
	deleteT(t, s, 1, n-100)
	testwait.For(t, 10*time.Second, "sstables under 1 MiB", func() bool { return tables() < 1<<20 })
	t.Logf("sstables: %d bytes before the deletion, %d after", before, tables())
	checkBounds(t, s, n-99, n)
	checkMissing(t, s, n-100, n-100)
	var l raft.Log
	if err := s.GetLog(n-99, &l); err != nil || len(l.Data) != size {
		t.Errorf("GetLog(%d) = %d bytes, %v; want %d", n-99, len(l.Data), err, size)
	}
}
