package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/persistence/internal/pebbledir"
	"github.com/throttleddb/throttled/store"
)

// nowMs is a fixed instant (Unix ms) for expiry arithmetic.
const nowMs = int64(1_700_000_000_000)

// kindEngine stands for a rate-limit engine kind: every kind but KindInt
// keeps its state in Bytes, and the codec must carry kinds it has never
// heard of.
const kindEngine = store.Kind(200)

// TestRoundTrip_EveryKind: every kind, expiry, database number and key
// shape comes back unchanged after Close and Open.
func TestRoundTrip_EveryKind(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	want := map[string]rec{}
	set := func(db int, key string, v store.Value, exp int64) {
		d.Set(db, []byte(key), v, exp)
		want[dbKeyName(db, []byte(key))] = rec{v, exp}
	}
	set(0, "str", store.Value{Kind: store.KindString, Bytes: []byte("hello")}, 0)
	set(0, "empty", store.Value{Kind: store.KindString, Bytes: []byte{}}, 0)
	set(0, "binary", store.Value{Kind: store.KindString, Bytes: []byte{0, 1, 0xff, '\n'}}, nowMs+1000)
	set(0, "int", store.IntValue(42), 0)
	set(0, "neg", store.IntValue(-7), nowMs+1)
	set(0, "max", store.IntValue(math.MaxInt64), 0)
	set(0, "min", store.IntValue(math.MinInt64), 0)
	set(0, "engine", store.Value{Kind: kindEngine, Bytes: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}}, math.MaxInt64)
	set(0, "", store.IntValue(1), 0) // Redis allows the empty key
	set(0, "\x00\xff key", store.IntValue(2), 0)
	set(1, "str", store.Value{Kind: store.KindString, Bytes: []byte("db1")}, 0)
	set(15, "int", store.IntValue(15), 0)
	set(65535, "last db", store.IntValue(65535), 0)

	got := reload(t, d, nowMs)
	compareRecs(t, got, want)
}

// TestLoad_DropsExpired: a key is loaded through its expiry millisecond and
// dropped after, as the store expires it; the dropped key is deleted from
// disk, so a later load at an earlier clock does not bring it back.
func TestLoad_DropsExpired(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	d.Set(0, []byte("forever"), store.IntValue(1), 0)
	d.Set(0, []byte("at now"), store.IntValue(2), nowMs)
	d.Set(0, []byte("past"), store.IntValue(3), nowMs-1)
	d.Set(3, []byte("long past"), store.Value{Kind: store.KindString, Bytes: []byte("x")}, 1)

	want := map[string]rec{
		"0/forever": {store.IntValue(1), 0},
		"0/at now":  {store.IntValue(2), nowMs},
	}
	got := reload(t, d, nowMs)
	compareRecs(t, got, want)

	// The first reload journaled the deletions; a load at time 0 would
	// keep every key that is still on disk.
	got = reload(t, openT(t, d.dir, EverySec), 0)
	compareRecs(t, got, want)
}

// TestLoad_KeepsHeld: a merged state past its expiry that the store holds
// (store.SetHold: a mesh node's reset mark, kept until every peer has it)
// is loaded from the log and from the saved copy alike; another merged
// state past its expiry is dropped.
func TestLoad_KeepsHeld(t *testing.T) {
	held := store.Value{Kind: store.KindMerged, Bytes: []byte("held")}
	other := store.Value{Kind: store.KindMerged, Bytes: []byte("other")}
	d := openT(t, t.TempDir(), EverySec)
	d.Set(0, []byte("held"), held, nowMs-1)
	d.Set(0, []byte("other"), other, nowMs-1)
	closeT(t, d)
	for _, from := range []string{"the log", "the saved copy"} {
		d = openT(t, d.dir, EverySec)
		s := newStoreT(t)
		s.SetHold(func(_ int, key []byte, _ store.Value) bool { return string(key) == "held" })
		if _, err := d.Load(s, nowMs*1e6); err != nil {
			t.Fatal(err)
		}
		tx := s.Tx(nowMs * 1e6)
		if v, ok := tx.Get(0, []byte("held")); !ok || string(v.Bytes) != "held" {
			t.Errorf("from %s: the held state is gone", from)
		}
		if tx.Exists(0, []byte("other")) {
			t.Errorf("from %s: an expired state nothing holds was loaded", from)
		}
		closeT(t, d)
	}
}

// TestLoad_KeepsKeyThroughItsMillisecond: a key whose expiry is the
// millisecond a restart happens in comes back, from the log and from the
// saved copy alike, up to the last nanosecond of that millisecond, and not at
// the next one, as the store expires it (store.Expired). This is a
// CL.THROTTLE key with less than a millisecond left: dropping it would reset
// its bucket. Before 1970 too, where the millisecond of now is a floor.
func TestLoad_KeepsKeyThroughItsMillisecond(t *testing.T) {
	for _, exp := range []int64{nowMs, -1} {
		t.Run(fmt.Sprint(exp), func(t *testing.T) {
			d := openT(t, t.TempDir(), EverySec)
			d.Set(0, []byte("k"), store.IntValue(7), exp)
			want := map[string]rec{"0/k": {store.IntValue(7), exp}}
			last := exp*1e6 + 999_999
			closeT(t, d)
			for _, from := range []string{"the log", "the saved copy"} {
				d = openT(t, d.dir, EverySec)
				if n := logRecords(t, d); (n == 0) != (from == "the saved copy") {
					t.Fatalf("loading from %s, but the log holds %d records", from, n)
				}
				s := newStoreT(t)
				if _, err := d.Load(s, last); err != nil {
					t.Fatal(err)
				}
				got := map[string]rec{}
				tx := s.Tx(last)
				if v, ok := tx.Get(0, []byte("k")); ok {
					e, _ := tx.ExpireMs(0, []byte("k"))
					got["0/k"] = rec{v, e}
				}
				t.Logf("loaded from %s", from)
				compareRecs(t, got, want)
				closeT(t, d) // checkpoints: the next round reads the saved copy
			}
			d = openT(t, d.dir, EverySec)
			s := newStoreT(t)
			if n, err := d.Load(s, last+1); err != nil || n != 0 {
				t.Fatalf("Load 1 ns after the expiry millisecond: %d keys, %v; want 0, nil", n, err)
			}
		})
	}
}

// TestLoad_OwnsBytes: the values Load puts in the store are the store's,
// not Pebble's buffers that the next key would overwrite, whether they come
// from the log or from the saved copy.
func TestLoad_OwnsBytes(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	want := map[string]rec{}
	for i := range 100 {
		k, v := fmt.Appendf(nil, "k%03d", i), store.Value{Kind: store.KindString, Bytes: fmt.Appendf(nil, "v%03d", i)}
		d.Set(0, k, v, 0)
		want[dbKeyName(0, k)] = rec{v, 0}
	}
	closeT(t, d)
	for _, from := range []string{"the log", "the saved copy"} {
		d = openT(t, d.dir, EverySec)
		if n := logRecords(t, d); (n == 0) != (from == "the saved copy") {
			t.Fatalf("loading from %s, but the log holds %d records", from, n)
		}
		t.Logf("loading from %s", from)
		compareRecs(t, loadAll(t, d, nowMs), want)
		closeT(t, d) // checkpoints: the next round reads the saved copy
	}
}

// TestFlushDB: FlushDB removes every key of its database, and only those,
// including the highest database number; keys written after it survive.
func TestFlushDB(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	for _, db := range []int{0, 1, 2, 65534, 65535} {
		for _, k := range []string{"", "a", "b\xff"} {
			d.Set(db, []byte(k), store.IntValue(int64(db)), 0)
		}
	}
	d.FlushDB(1)
	d.FlushDB(65535)
	d.Set(1, []byte("after"), store.IntValue(9), 0)

	want := map[string]rec{}
	for _, db := range []int{0, 2, 65534} {
		for _, k := range []string{"", "a", "b\xff"} {
			want[dbKeyName(db, []byte(k))] = rec{store.IntValue(int64(db)), 0}
		}
	}
	want["1/after"] = rec{store.IntValue(9), 0}
	compareRecs(t, reload(t, d, nowMs), want)
}

// TestOrdering_SetDeleteSet: the last change to a key wins, whether the
// changes share a group commit or not.
func TestOrdering_SetDeleteSet(t *testing.T) {
	d := openT(t, t.TempDir(), Always)
	k := []byte("k")
	// One batch: appended back to back.
	d.Set(0, k, store.IntValue(1), 0)
	d.Delete(0, k)
	d.Set(0, k, store.IntValue(2), 0)
	d.Set(0, []byte("gone"), store.IntValue(1), 0)
	d.Delete(0, []byte("gone"))
	// Across batches: each change durable before the next.
	for i, change := range []func(){
		func() { d.Set(1, k, store.IntValue(1), 0) },
		func() { d.Delete(1, k) },
		func() { d.Set(1, k, store.IntValue(3), nowMs+5) },
	} {
		change()
		if err := d.WaitDurable(d.LastSeq()); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	compareRecs(t, reload(t, d, nowMs), map[string]rec{
		"0/k": {store.IntValue(2), 0},
		"1/k": {store.IntValue(3), nowMs + 5},
	})
}

// TestRandomOps_MatchModel: a random mix of sets, deletes and flushes,
// applied with and without waits, reloads exactly as a map model says.
func TestRandomOps_MatchModel(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	d := openT(t, t.TempDir(), Always)
	model := map[string]rec{}
	for i := range 5000 {
		db, key := rng.IntN(3), fmt.Appendf(nil, "k%d", rng.IntN(50))
		switch r := rng.IntN(100); {
		case r < 60:
			v := store.IntValue(int64(i))
			if r%2 == 0 {
				v = store.Value{Kind: kindEngine, Bytes: fmt.Appendf(nil, "state %d", i)}
			}
			d.Set(db, key, v, 0)
			model[dbKeyName(db, key)] = rec{v, 0}
		case r < 98:
			d.Delete(db, key)
			delete(model, dbKeyName(db, key))
		default:
			d.FlushDB(db)
			for k := range model {
				if strings.HasPrefix(k, fmt.Sprintf("%d/", db)) {
					delete(model, k)
				}
			}
		}
		if rng.IntN(50) == 0 {
			if err := d.WaitDurable(d.LastSeq()); err != nil {
				t.Fatal(err)
			}
		}
	}
	compareRecs(t, reload(t, d, nowMs), model)
}

// TestWaitDurable_Always: once WaitDurable returns, the change is in the
// WAL on disk: a copy of the folder taken right then (what a crash would
// leave) holds it.
func TestWaitDurable_Always(t *testing.T) {
	dir := t.TempDir()
	d := openT(t, dir, Always)
	d.Set(0, []byte("k"), store.IntValue(7), 0)
	seq := d.LastSeq()
	if seq != 1 {
		t.Fatalf("LastSeq = %d, want 1", seq)
	}
	if err := d.WaitDurable(seq); err != nil {
		t.Fatal(err)
	}
	if s := d.Stats(); s.Pending != 0 || s.Unsynced != 0 {
		t.Errorf("after WaitDurable: pending %d, unsynced %d; want 0, 0", s.Pending, s.Unsynced)
	}

	copyDir := t.TempDir()
	for name, data := range snapshotDir(t, dir) {
		path := filepath.Join(copyDir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := openT(t, copyDir, No)
	compareRecs(t, loadAll(t, c, nowMs), map[string]rec{"0/k": {store.IntValue(7), 0}})
}

// TestWaitDurable_GroupCommit: many connections waiting at once share
// fsyncs, so there are fewer syncs than changes.
func TestWaitDurable_GroupCommit(t *testing.T) {
	d := openT(t, t.TempDir(), Always)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				d.Set(0, fmt.Appendf(nil, "w%d-%d", w, i), store.IntValue(int64(i)), 0)
				if err := d.WaitDurable(d.LastSeq()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	s := d.Stats()
	if s.Syncs == 0 || s.Syncs >= writers*each {
		t.Errorf("%d syncs for %d changes, want fewer syncs than changes", s.Syncs, writers*each)
	}
	t.Logf("%d changes, %d group commits, %d syncs", writers*each, s.GroupCommits, s.Syncs)
}

// TestEverySec_SyncsWithinASecond: under EverySec nothing waits, and the
// WAL is synced about a second after a write.
func TestEverySec_SyncsWithinASecond(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	d.Set(0, []byte("k"), store.IntValue(1), 0)
	if err := d.WaitDurable(d.LastSeq()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 3*time.Second, "everysec sync", func() bool { return d.Stats().Unsynced == 0 })
}

// TestNo_DoesNotSync: under No the change is applied but never synced
// until Close, which syncs.
func TestNo_DoesNotSync(t *testing.T) {
	d := openT(t, t.TempDir(), No)
	syncs := d.Stats().Syncs
	d.Set(0, []byte("k"), store.IntValue(1), 0)
	testwait.For(t, 3*time.Second, "apply", func() bool { return d.Stats().Pending == 0 })
	if s := d.Stats(); s.Unsynced != 1 || s.Syncs != syncs {
		t.Errorf("unsynced %d, syncs %d; want 1, %d", s.Unsynced, s.Syncs, syncs)
	}
	compareRecs(t, reload(t, d, nowMs), map[string]rec{"0/k": {store.IntValue(1), 0}})
}

// TestConcurrentAppenders: appenders on many goroutines, each owning its
// keys, end with each key's last value on disk (run with -race).
func TestConcurrentAppenders(t *testing.T) {
	for _, p := range []FsyncPolicy{Always, EverySec} {
		t.Run(p.String(), func(t *testing.T) {
			d := openT(t, t.TempDir(), p)
			const writers, each = 8, 2000
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						key := fmt.Appendf(nil, "w%d-%d", w, i%100)
						switch i % 3 {
						case 0, 1:
							d.Set(w%2, key, store.IntValue(int64(i)), 0)
						case 2:
							d.Delete(w%2, key)
						}
						if i%100 == 0 {
							_ = d.Stats()
							if err := d.WaitDurable(d.LastSeq()); err != nil {
								t.Error(err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			if got, want := d.LastSeq(), uint64(writers*each); got != want {
				t.Errorf("LastSeq = %d, want %d", got, want)
			}
			want := map[string]rec{}
			for w := range writers {
				for i := range each {
					k := dbKeyName(w%2, fmt.Appendf(nil, "w%d-%d", w, i%100))
					if i%3 == 2 {
						delete(want, k)
					} else {
						want[k] = rec{store.IntValue(int64(i)), 0}
					}
				}
			}
			compareRecs(t, reload(t, d, nowMs), want)
		})
	}
}

// TestClose: Close applies and syncs what is pending; a second Close
// reports ErrClosed; Journal calls after Close are dropped without panic.
func TestClose(t *testing.T) {
	d := openT(t, t.TempDir(), No)
	d.Set(0, []byte("k"), store.IntValue(1), 0)
	seq := d.LastSeq()
	closeT(t, d)
	if err := d.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	d.Set(0, []byte("late"), store.IntValue(2), 0)
	d.Delete(0, []byte("k"))
	d.FlushDB(0)
	if got := d.LastSeq(); got != seq {
		t.Errorf("LastSeq after dropped calls = %d, want %d", got, seq)
	}
	if err := d.WaitDurable(seq); err != nil {
		t.Errorf("WaitDurable(%d) after Close = %v, want nil", seq, err)
	}
	if _, err := d.Load(newStoreT(t), nowMs*1e6); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close = %v, want ErrClosed", err)
	}
	if s := d.Stats(); s.Pending != 0 || s.Unsynced != 0 {
		t.Errorf("Stats after Close: pending %d, unsynced %d; want 0, 0", s.Pending, s.Unsynced)
	}
	d2 := openT(t, d.dir, No)
	compareRecs(t, loadAll(t, d2, nowMs), map[string]rec{"0/k": {store.IntValue(1), 0}})
}

// TestWriteError_IsSticky: after a write error the DB stops: the error is
// reported by Err, Stats, WaitDurable (for changes not yet durable) and
// Close, and later changes are dropped rather than written after a hole.
func TestWriteError_IsSticky(t *testing.T) {
	d := openT(t, t.TempDir(), Always)
	d.Set(0, []byte("before"), store.IntValue(1), 0)
	durable := d.LastSeq()
	if err := d.WaitDurable(durable); err != nil {
		t.Fatal(err)
	}
	errDisk := errors.New("disk on fire")
	d.fail(errDisk) // what commit and sync do when Pebble returns an error
	d.Set(0, []byte("after"), store.IntValue(2), 0)
	for _, got := range []error{d.Err(), d.Stats().Err, d.WaitDurable(durable + 1)} {
		if !errors.Is(got, errDisk) || !strings.Contains(got.Error(), d.dir) {
			t.Errorf("got %v, want the write error naming the folder", got)
		}
	}
	if err := d.WaitDurable(durable); err != nil {
		t.Errorf("WaitDurable of a change durable before the error = %v, want nil", err)
	}
	if d.LastSeq() != durable {
		t.Errorf("LastSeq = %d, want %d: a change after the error was appended", d.LastSeq(), durable)
	}
	if err := d.Close(); !errors.Is(err, errDisk) {
		t.Errorf("Close = %v, want the write error", err)
	}
	d2 := openT(t, d.dir, No)
	compareRecs(t, loadAll(t, d2, nowMs), map[string]rec{"0/before": {store.IntValue(1), 0}})
}

// TestWaitDurable_ReleasedByClose: a waiter for a change that will
// never come (a seq beyond the last) is released by Close.
func TestWaitDurable_ReleasedByClose(t *testing.T) {
	d := openT(t, t.TempDir(), Always)
	errc := make(chan error)
	go func() { errc <- d.WaitDurable(d.LastSeq() + 1) }()
	closeT(t, d)
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("WaitDurable = %v, want ErrClosed", err)
	}
}

// TestOpen_RefusesBadFolders: a folder that is not ours, is damaged, or was
// written by a newer format is refused with an error naming it, and not a
// byte of it changes.
func TestOpen_RefusesBadFolders(t *testing.T) {
	// ourDB returns a folder holding a closed database of ours with a key.
	ourDB := func(t *testing.T) string {
		dir := t.TempDir()
		d := openT(t, dir, Always)
		d.Set(0, []byte("k"), store.IntValue(1), 0)
		closeT(t, d)
		return dir
	}
	write := func(t *testing.T, path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onlyFile := func(t *testing.T, dir, glob string) string {
		m, err := filepath.Glob(filepath.Join(dir, glob))
		if err != nil || len(m) != 1 {
			t.Fatalf("%s in %s: %v, %v", glob, dir, m, err)
		}
		return m[0]
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T) string
		want error
	}{
		{"unrelated files", func(t *testing.T) string {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "notes.txt"), "my notes")
			return dir
		}, ErrForeign},
		{"files named like Pebble's", func(t *testing.T) string {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "MANIFEST-000001"), "garbage")
			write(t, filepath.Join(dir, "000002.log"), "garbage")
			write(t, filepath.Join(dir, "CURRENT"), "MANIFEST-000001\n")
			return dir
		}, ErrForeign},
		{"garbage MANIFEST", func(t *testing.T) string {
			dir := ourDB(t)
			write(t, onlyFile(t, dir, "MANIFEST-*"), strings.Repeat("garbage ", 100))
			return dir
		}, ErrCorrupt},
		{"marker names a missing MANIFEST", func(t *testing.T) string {
			dir := ourDB(t)
			m := onlyFile(t, dir, "marker.manifest.*")
			if err := os.Rename(m, filepath.Join(dir, "marker.manifest.000009.MANIFEST-999999")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrCorrupt},
		{"future format version", func(t *testing.T) string {
			dir := ourDB(t)
			pdb, err := pebble.Open(dir, &pebble.Options{Logger: pebbledir.Logger{L: testLogger(t)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := pdb.Set(formatKey, []byte{formatVersion + 1}, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := pdb.Close(); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrFormat},
		{"someone else's Pebble database", func(t *testing.T) string {
			dir := t.TempDir()
			pdb, err := pebble.Open(dir, &pebble.Options{Logger: pebbledir.Logger{L: testLogger(t)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := pdb.Set([]byte("their key"), []byte("their value"), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			if err := pdb.Close(); err != nil {
				t.Fatal(err)
			}
			return dir
		}, ErrForeign},
		{"a file, not a folder", func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "file")
			write(t, path, "data")
			return path
		}, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.make(t)
			before := snapshotDir(t, dir)
			d, err := Open(Options{Dir: dir, Logger: testLogger(t)})
			if err == nil {
				_ = d.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("error: %v", err)
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the folder %q", err, dir)
			}
			after := snapshotDir(t, dir)
			if len(after) != len(before) {
				t.Errorf("files before %v, after %v", keys(before), keys(after))
			}
			for name, data := range before {
				if after[name] != data {
					t.Errorf("file %s changed", name)
				}
			}
		})
	}
}

// TestOpen_Beside: a folder holding only the files named in Beside is taken
// as empty, and the files stay; without Beside it is someone else's.
func TestOpen_Beside(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	if err := os.WriteFile(marker, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, Logger: testLogger(t)}); !errors.Is(err, ErrForeign) {
		t.Fatalf("Open without Beside: %v, want ErrForeign", err)
	}
	d, err := Open(Options{Dir: dir, Logger: testLogger(t), Beside: []string{"marker"}})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, d)
	if b, err := os.ReadFile(marker); err != nil || string(b) != "mine" {
		t.Fatalf("the file beside the database: %q, %v", b, err)
	}
	closeT(t, openT(t, dir, Always)) // a database now: opened without Beside too
}

func keys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestOpen_RefusesFolderInUse: a folder another DB has open is refused as
// in use, not as damaged.
func TestOpen_RefusesFolderInUse(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	d2, err := Open(Options{Dir: d.dir, Logger: testLogger(t)})
	if err == nil {
		_ = d2.Close()
		t.Fatal("a second Open of the folder succeeded")
	}
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), d.dir) {
		t.Errorf("second Open = %v, want ErrLocked naming the folder", err)
	}
	closeT(t, d)
	closeT(t, openT(t, d.dir, EverySec)) // free again once closed
}

// TestOpen_AcceptsEmptyPebble: a Pebble folder with no key at all (our
// creation interrupted before the format marker was synced) is taken over
// and stamped.
func TestOpen_AcceptsEmptyPebble(t *testing.T) {
	dir := t.TempDir()
	pdb, err := pebble.Open(dir, &pebble.Options{Logger: pebbledir.Logger{L: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
	d := openT(t, dir, EverySec)
	d.Set(0, []byte("k"), store.IntValue(1), 0)
	compareRecs(t, reload(t, d, nowMs), map[string]rec{"0/k": {store.IntValue(1), 0}})
}

// TestOpen_CreatesMissingFolder: a missing folder (and its parents) is
// created.
func TestOpen_CreatesMissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	d := openT(t, dir, EverySec)
	closeT(t, d)
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestLoad_RefusesBadRecord: a value or a log record this build cannot
// decode stops Load with an error naming it, rather than loading a wrong
// value.
func TestLoad_RefusesBadRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		write  func(dir string)
		naming string // what the error must quote
	}{
		{"saved value of an unknown version", func(dir string) {
			writeRaw(t, dir, encodeKey(0, []byte("bad")), []byte{valueVersion + 1, 1, 0, 0, 0, 0, 0, 0, 0, 0})
		}, `"bad"`},
		{"log record cut short", func(dir string) {
			writeSegment(t, dir, 1, appendFrame(nil, appendSet(nil, 0, []byte("k"), store.IntValue(1), 0)[:6], 7))
		}, "log record 7"},
		{"log change of an unknown kind", func(dir string) {
			writeSegment(t, dir, 1, appendFrame(nil, []byte{'x', 3, prefixData, 0, 0}, 9))
		}, "log record 9"},
		{"torn frame before the last segment", func(dir string) {
			good := appendFrame(nil, appendSet(nil, 0, []byte("k"), store.IntValue(1), 0), 1)
			writeSegment(t, dir, 1, good[:len(good)-1])
			writeSegment(t, dir, 2, appendFrame(nil, appendDelete(nil, 0, []byte("k")), 2))
		}, "00000000000000000001.log"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := openT(t, t.TempDir(), EverySec)
			closeT(t, d)
			c.write(d.dir)
			d = openT(t, d.dir, EverySec)
			_, err := d.Load(newStoreT(t), nowMs*1e6)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.naming) {
				t.Errorf("Load = %v, want ErrCorrupt naming %s", err, c.naming)
			}
		})
	}
}

// TestLoad_TornTail: a crash in the middle of a write leaves the last
// segment ending inside a frame, or with a frame whose checksum fails. Load
// keeps every whole frame before it, cuts the file back to them, and the
// next changes are logged after them.
func TestLoad_TornTail(t *testing.T) {
	for _, tear := range []struct {
		name string
		cut  func(frame []byte) []byte
	}{
		{"cut inside the header", func(f []byte) []byte { return f[:5] }},
		{"cut inside the record", func(f []byte) []byte { return f[:len(f)-1] }},
		{"bad checksum", func(f []byte) []byte { f = bytes.Clone(f); f[len(f)-1] ^= 1; return f }},
	} {
		t.Run(tear.name, func(t *testing.T) {
			dir := t.TempDir()
			d := openT(t, dir, EverySec)
			closeT(t, d)
			whole := appendFrame(nil, appendSet(nil, 0, []byte("kept"), store.IntValue(1), 0), 1)
			torn := tear.cut(appendFrame(nil, appendSet(nil, 0, []byte("torn"), store.IntValue(2), 0), 2))
			writeSegment(t, dir, 1, append(whole, torn...))

			d = openT(t, dir, EverySec)
			s := loadStore(t, d, nowMs)
			compareRecs(t, dump(s, nowMs), map[string]rec{"0/kept": {store.IntValue(1), 0}})
			if fi, err := os.Stat(filepath.Join(dir, logDir, segmentName(1))); err != nil || fi.Size() != int64(len(whole)) {
				t.Errorf("the torn segment is %v bytes (%v), want it cut back to %d", fi.Size(), err, len(whole))
			}
			s.SetJournal(d)
			locked(s, nowMs, func(tx store.Tx) { tx.Put(0, []byte("after"), store.IntValue(3), 0) })
			closeWithoutCheckpoint(t, d)
			d = openT(t, dir, EverySec)
			compareRecs(t, loadAll(t, d, nowMs), map[string]rec{
				"0/kept":  {store.IntValue(1), 0},
				"0/after": {store.IntValue(3), 0},
			})
		})
	}
}

// writeSegment writes a log segment starting at change first into the data
// folder dir, behind our back.
func writeSegment(t *testing.T, dir string, first uint64, frames []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, logDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, logDir, segmentName(first)), frames, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeRaw sets key to val in the Pebble database of dir, behind our back.
func writeRaw(t *testing.T, dir string, key, val []byte) {
	t.Helper()
	pdb, err := pebble.Open(dir, &pebble.Options{Logger: pebbledir.Logger{L: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pdb.Set(key, val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := pdb.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestParseFsync: Redis' three names in any case, and nothing else.
func TestParseFsync(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want FsyncPolicy
		ok   bool
	}{
		{"always", Always, true}, {"everysec", EverySec, true}, {"no", No, true},
		{"ALWAYS", Always, true}, {"EverySec", EverySec, true},
		{"", 0, false}, {"yes", 0, false}, {"every", 0, false},
	} {
		got, err := ParseFsync(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseFsync(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != strings.ToLower(tc.in) {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), strings.ToLower(tc.in))
		}
	}
}

// TestPebbleLogsGoToSlog: Pebble's own messages reach the Logger (at Debug)
// instead of stderr.
func TestPebbleLogsGoToSlog(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	h := slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		lines = append(lines, string(p))
		mu.Unlock()
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug})
	d, err := Open(Options{Dir: t.TempDir(), Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	closeT(t, d)
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, "level=DEBUG") && strings.Contains(l, "component=pebble") {
			return
		}
	}
	t.Errorf("no Pebble debug message logged; got %q", lines)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestSystemDB_KeepsItsPlace: the system database's keys are saved under
// its fixed number (store.WireSystemDB) and come back in the system
// database of a store with another number of databases, never as a
// client's database.
func TestSystemDB_KeepsItsPlace(t *testing.T) {
	dir := t.TempDir()
	d := openT(t, dir, EverySec)
	s16, err := store.New(store.Config{Databases: 16, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	loadInto(t, d, s16, nowMs)
	s16.SetJournal(d)
	tx := s16.Tx(nowMs * 1e6)
	tx.Put(s16.SystemDB(), []byte("policy"), store.Value{Kind: store.KindString, Bytes: []byte("p")}, 0)
	tx.Put(15, []byte("user"), store.IntValue(1), 0)
	closeT(t, d)

	s32, err := store.New(store.Config{Databases: 32, Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	loadInto(t, openT(t, dir, EverySec), s32, nowMs)
	tx = s32.Tx(nowMs * 1e6)
	if v, ok := tx.Get(s32.SystemDB(), []byte("policy")); !ok || string(v.Bytes) != "p" {
		t.Errorf("system key: %v, %v; want it in the system database", v, ok)
	}
	if tx.DBSize(16) != 0 {
		t.Errorf("database 16 holds %d keys: the system key landed in a client's database", tx.DBSize(16))
	}
	if v, ok := tx.Get(15, []byte("user")); !ok || v.Int != 1 {
		t.Errorf("user key: %v, %v", v, ok)
	}
}
