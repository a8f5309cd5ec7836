package persistence

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/store"
)

// closeWithoutCheckpoint closes d the way a crash leaves the saved copy: the
// last checkpoint is skipped, so the next Load must replay the log.
func closeWithoutCheckpoint(t testing.TB, d *DB) {
	t.Helper()
	d.cpStop()
	<-d.cpDone
	d.cpStop = nil
	closeT(t, d)
}

// savedCopy decodes the saved copy of d, keyed "db/key".
func savedCopy(t testing.TB, d *DB) map[string]rec {
	t.Helper()
	got := map[string]rec{}
	err := d.scan(dataStart, dataEnd, func(k, raw []byte) error {
		db, key, err := decodeKey(k)
		if err != nil {
			return err
		}
		v, exp, err := decodeValue(raw)
		v.Bytes = append([]byte(nil), v.Bytes...)
		got[dbKeyName(db, key)] = rec{v, exp}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWithStore_RestartKeepsKeyspace wires a DB to a real store as the
// server does: the store journals its changes, and after a restart Load
// restores the same keyspace into a new store, minus what expired meanwhile,
// whether the last checkpoint ran (a clean stop) or not (a crash).
func TestWithStore_RestartKeepsKeyspace(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			d := openT(t, t.TempDir(), Always)
			s := loadStore(t, d, nowMs)
			s.SetJournal(d)
			locked(s, nowMs, func(tx store.Tx) {
				tx.Put(0, []byte("counter"), store.IntValue(41), 0)
				tx.Put(0, []byte("counter"), store.IntValue(42), 0)
				tx.Put(0, []byte("name"), store.StringValue([]byte("throttled")), 0)
				tx.Put(0, []byte("gone"), store.IntValue(1), 0)
				tx.Delete(0, []byte("gone"))
				tx.Put(0, []byte("ttl"), store.IntValue(7), nowMs+60_000)
				tx.Put(0, []byte("short"), store.IntValue(8), nowMs+10)
				tx.SetExpire(0, []byte("name"), nowMs+120_000)
				tx.Put(1, []byte("flushed"), store.IntValue(1), 0)
				tx.Flush(1)
				tx.Put(15, []byte("last db"), store.StringValue([]byte("x")), 0)
			})
			if err := d.WaitDurable(d.LastSeq()); err != nil {
				t.Fatal(err)
			}
			// The restart happens one second later: "short" has expired.
			later := nowMs + 1000
			want := dump(s, later)
			if crash {
				closeWithoutCheckpoint(t, d)
			} else {
				closeT(t, d)
			}
			d = openT(t, d.dir, Always)
			got := loadAll(t, d, later)
			compareRecs(t, got, want)
			if _, ok := got["0/short"]; ok || len(want) != 4 {
				t.Errorf("want 4 keys without the expired one, got %v", got)
			}
		})
	}
}

// TestCheckpoint_RandomOpsAndRestarts drives a store through random
// changes, with checkpoints at random moments, and restarts it, cleanly or
// as after a crash: every restart must load exactly the keyspace the store
// held. After each checkpoint taken while nothing writes, the saved copy
// alone holds that keyspace and the log is empty.
func TestCheckpoint_RandomOpsAndRestarts(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	var want map[string]rec
	for round := range 8 {
		d := openT(t, dir, EverySec)
		s := loadStore(t, d, nowMs)
		if want != nil {
			compareRecs(t, dump(s, nowMs), want)
			if t.Failed() {
				t.Fatalf("round %d: the keyspace did not survive the restart", round)
			}
		}
		s.SetJournal(d)
		for i := range 3000 {
			db, key := rng.IntN(3), fmt.Appendf(nil, "k%d", rng.IntN(200))
			r := rng.IntN(1000)
			locked(s, nowMs, func(tx store.Tx) {
				switch {
				case r < 500:
					tx.Put(db, key, store.IntValue(int64(i)), 0)
				case r < 700:
					tx.Put(db, key, store.Value{Kind: kindEngine, Bytes: fmt.Appendf(nil, "state %d", i)}, nowMs+int64(rng.IntN(100_000)))
				case r < 800:
					tx.SetExpire(db, key, nowMs+int64(rng.IntN(100_000)))
				case r < 995:
					tx.Delete(db, key)
				default:
					tx.Flush(db)
				}
			})
			if rng.IntN(500) == 0 {
				if err := d.checkpoint(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		}
		want = dump(s, nowMs)
		if rng.IntN(2) == 0 {
			testwait.For(t, 5*time.Second, "the log written", func() bool { return d.Stats().Pending == 0 })
			if err := d.checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			compareRecs(t, savedCopy(t, d), want)
			if n := logRecords(t, d); n != 0 {
				t.Errorf("round %d: %d log records left after a checkpoint", round, n)
			}
		}
		if rng.IntN(2) == 0 {
			closeWithoutCheckpoint(t, d)
		} else {
			closeT(t, d)
		}
	}
}

// TestCheckpoint_RunsWhenRemovedKeysPileUp: the store's list of removed
// saved keys (memory) makes a checkpoint due, which empties it and the log.
func TestCheckpoint_RunsWhenRemovedKeysPileUp(t *testing.T) {
	d := openT(t, t.TempDir(), No)
	s := loadStore(t, d, nowMs)
	s.SetJournal(d)
	key := func(i int) []byte { return fmt.Appendf(nil, "k%d", i) }
	locked(s, nowMs, func(tx store.Tx) {
		for i := range checkpointGone {
			tx.Put(0, key(i), store.IntValue(1), 0)
		}
	})
	testwait.For(t, 5*time.Second, "the log written", func() bool { return d.Stats().Pending == 0 })
	before := time.Now().Unix()
	if err := d.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if last := d.Stats().LastCheckpoint; last < before || last > time.Now().Unix() {
		t.Errorf("LastCheckpoint %d, want the checkpoint's time (%d or later)", last, before)
	}
	locked(s, nowMs, func(tx store.Tx) {
		for i := range checkpointGone {
			tx.Delete(0, key(i))
		}
	})
	testwait.For(t, 5*time.Second, "a checkpoint", func() bool { return d.Stats().Checkpoints >= 2 })
	if n := s.Gone(); n != 0 {
		t.Errorf("%d removed keys still listed after the checkpoint", n)
	}
	if got := savedCopy(t, d); len(got) != 0 {
		t.Errorf("the saved copy holds %d keys after they were all deleted", len(got))
	}
}

// TestCheckpoint_SavedCopyDurableBeforeLogGoes: once a checkpoint returns,
// the log it covers is gone, so what it wrote must be on disk already, not
// only in Pebble's memtable: Pebble has no WAL (see pebbleOptions), so its
// Close, like a crash, drops what was not flushed. Too few keys to fill a
// memtable, so only the checkpoint's own flush puts them in an sstable.
func TestCheckpoint_SavedCopyDurableBeforeLogGoes(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	s := loadStore(t, d, nowMs)
	s.SetJournal(d)
	locked(s, nowMs, func(tx store.Tx) {
		for i := range 1000 {
			tx.Put(i%3, fmt.Appendf(nil, "key:%d", i), store.IntValue(int64(i)), nowMs+60_000)
		}
		tx.Delete(0, []byte("key:0"))
	})
	want := dump(s, nowMs)
	testwait.For(t, 5*time.Second, "the log written", func() bool { return d.Stats().Pending == 0 })
	if err := d.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := logRecords(t, d); n != 0 {
		t.Fatalf("%d log records left after the checkpoint", n)
	}
	closeWithoutCheckpoint(t, d)
	d = openT(t, d.dir, EverySec)
	compareRecs(t, loadAll(t, d, nowMs), want)
}

// TestCheckpoint_Aborted: a cancelled checkpoint stops after a shard, with
// part of its changes in the saved copy. The log keeps them all: no later
// checkpoint deletes a segment (Close skips its last one), and the next start
// replays the log over the partly updated copy to the same keyspace.
func TestCheckpoint_Aborted(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	s := loadStore(t, d, nowMs)
	s.SetJournal(d)
	// A quarter of these (one of newStoreT's 4 shards) is over
	// checkpointChunk, so the first shard is written before it stops.
	locked(s, nowMs, func(tx store.Tx) {
		for i := range 100_000 {
			tx.Put(0, fmt.Appendf(nil, "key:%d", i), store.IntValue(int64(i)), nowMs+60_000)
		}
	})
	testwait.For(t, 5*time.Second, "the log written", func() bool { return d.Stats().Pending == 0 })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.checkpoint(cancelled); !errors.Is(err, errAborted) {
		t.Fatalf("cancelled checkpoint returned %v, want errAborted", err)
	}
	if err := d.checkpoint(context.Background()); !errors.Is(err, errAborted) {
		t.Fatalf("checkpoint after an aborted one returned %v, want errAborted", err)
	}
	want := dump(s, nowMs)
	if n := len(savedCopy(t, d)); n == 0 || n >= len(want) {
		t.Fatalf("the saved copy holds %d of %d keys; the test needs a part of them", n, len(want))
	}
	compareRecs(t, reload(t, d, nowMs), want)
}

// TestOpen_UpgradesFormat1: a folder of the first format (a saved copy, no
// log) loads as it is and is stamped with the current format, so that a
// build that knows only format 1 refuses it rather than miss the log.
func TestOpen_UpgradesFormat1(t *testing.T) {
	d := openT(t, t.TempDir(), EverySec)
	closeT(t, d)
	writeRaw(t, d.dir, formatKey, []byte{formatVersionV1})
	writeRaw(t, d.dir, encodeKey(2, []byte("old")), appendValue(nil, store.IntValue(5), 0))
	d = openT(t, d.dir, EverySec)
	compareRecs(t, loadAll(t, d, nowMs), map[string]rec{"2/old": {store.IntValue(5), 0}})
	v, closer, err := d.pdb.Get(formatKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0] != formatVersion {
		t.Errorf("format stamp after opening = %x, want %d", v, formatVersion)
	}
	closer.Close()
}

// TestLoad_RefusesMissingDatabase: a folder holding keys of a database the
// store does not have (the server was restarted with fewer --databases) is
// refused with ErrDatabases, not loaded partly, whether the key is in the
// log or in the saved copy.
func TestLoad_RefusesMissingDatabase(t *testing.T) {
	for _, saved := range []bool{false, true} {
		t.Run(fmt.Sprintf("saved=%v", saved), func(t *testing.T) {
			d := openT(t, t.TempDir(), EverySec)
			if saved { // through a store, which Close checkpoints
				s := loadStore(t, d, nowMs)
				s.SetJournal(d)
				locked(s, nowMs, func(tx store.Tx) {
					tx.Put(0, []byte("fine"), store.IntValue(1), 0)
					tx.Put(20, []byte("far"), store.IntValue(2), 0)
				})
			} else { // the log alone
				d.Set(0, []byte("fine"), store.IntValue(1), 0)
				d.Set(20, []byte("far"), store.IntValue(2), 0)
			}
			closeT(t, d)
			d = openT(t, d.dir, EverySec)
			if n := logRecords(t, d); (n == 0) != saved {
				t.Fatalf("saved=%v but the log holds %d records", saved, n)
			}
			s, err := store.New(store.Config{Databases: 16})
			if err != nil {
				t.Fatal(err)
			}
			_, err = d.Load(s, nowMs*1e6)
			if !errors.Is(err, ErrDatabases) || !strings.Contains(err.Error(), "database 20") {
				t.Errorf("Load = %v, want ErrDatabases naming database 20", err)
			}
		})
	}
}
