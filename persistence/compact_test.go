package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/store"
)

// TestCompaction_FolderShrinks: a million keys are written and saved by a
// checkpoint, then deleted, as expiry deletes them; the folder grows with
// them and then shrinks back to its floor, because deleted keys leave Pebble
// (the checkpoint their removal makes due deletes them from the saved copy,
// and the log that recorded it): the sstables go back to almost nothing, and
// what remains is a few KB of metadata whatever the number of keys (Pebble
// has no WAL files to keep for reuse). (-short and -race write 300,000
// keys.)
func TestCompaction_FolderShrinks(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 300_000
	}
	dir := t.TempDir()
	d := openT(t, dir, EverySec)
	empty := dirSize(t, dir)
	// The server's shards, as the checkpoint writes them.
	s, err := store.New(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	loadInto(t, d, s, nowMs)
	s.SetJournal(d)

	// Random values, so that the sstables do not compress the keys' cost
	// away: about 40 bytes of data per key.
	rng := rand.New(rand.NewPCG(1, 2))
	key := []byte("rl:user:00000000")
	val := store.Value{Kind: kindEngine, Bytes: make([]byte, 16)}
	setKey := func(i int) { binary.BigEndian.PutUint64(key[len(key)-8:], uint64(i)) }
	begin := time.Now()
	locked(s, nowMs, func(tx store.Tx) {
		for i := range n {
			setKey(i)
			binary.LittleEndian.PutUint64(val.Bytes, rng.Uint64())
			binary.LittleEndian.PutUint64(val.Bytes[8:], rng.Uint64())
			tx.Put(0, key, store.Value{Kind: val.Kind, Bytes: bytes.Clone(val.Bytes)}, nowMs+60_000)
		}
	})
	testwait.For(t, 60*time.Second, "apply the writes", func() bool { return d.Stats().Pending == 0 })
	if err := d.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The checkpoint flushed the saved copy to sstables, so the folder
	// shows what was written.
	full := dirSize(t, dir)
	written := time.Since(begin)

	begin = time.Now()
	locked(s, nowMs, func(tx store.Tx) {
		for i := range n {
			setKey(i)
			tx.Delete(0, key)
		}
	})
	// The checkpointer would get to it within checkpointAge; this test is
	// about what comes after.
	testwait.For(t, 60*time.Second, "apply the deletions", func() bool { return d.Stats().Pending == 0 })
	if err := d.checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The floor: a few KB of metadata (the MANIFEST grows with every
	// flush and compaction until Pebble rotates it).
	floor := empty + 64<<10
	var size, tables int64
	defer func() {
		if t.Failed() {
			t.Logf("stats %+v; files:", d.Stats())
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if fi, err := e.Info(); err == nil {
					t.Logf("  %s %d", e.Name(), fi.Size())
				}
			}
		}
	}()
	// The compactor keeps to compactDuty of the time, so the race
	// detector, which slows a compaction several times, delays the next
	// one as much again.
	within := time.Minute
	if raceEnabled {
		within = 3 * time.Minute
	}
	testwait.For(t, within, "shrink", func() bool {
		size, tables = dirSize(t, dir), dirSize(t, dir, ".sst")
		return tables <= 64<<10 && size <= floor
	})
	t.Logf("%d keys: empty folder %d bytes; written in %v: %d bytes; deleted in %v: %d bytes, %d in sstables (%d compactions)",
		n, empty, written.Round(time.Millisecond), full, time.Since(begin).Round(time.Millisecond),
		size, tables, d.Stats().Compactions)
	if full < 20*int64(n) { // about 32 B a key once Pebble has compressed them
		t.Errorf("the folder held %d bytes with %d keys: the test did not write what it meant to", full, n)
	}
}
