package persistence

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/throttleddb/throttled/store"
)

// TestCompaction_FolderShrinks: a million short-lived keys are written and
// then deleted, as expiry deletes them; the folder grows with them and then
// shrinks back to its floor, because deleted keys leave Pebble: the
// sstables, which hold the keys, go back to almost nothing, and what
// remains is the WAL files Pebble keeps for reuse, a fixed amount whatever
// the number of keys. (-short and -race write 300,000 keys.)
func TestCompaction_FolderShrinks(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 300_000
	}
	dir := t.TempDir()
	d := openT(t, dir, EverySec)
	empty := dirSize(t, dir)

	// Random values, so that the sstables do not compress the keys' cost
	// away: about 40 bytes of data per key.
	rng := rand.New(rand.NewPCG(1, 2))
	key := []byte("rl:user:00000000")
	val := store.Value{Kind: kindEngine, Bytes: make([]byte, 16)}
	setKey := func(i int) { binary.BigEndian.PutUint64(key[len(key)-8:], uint64(i)) }
	begin := time.Now()
	for i := range n {
		setKey(i)
		binary.LittleEndian.PutUint64(val.Bytes, rng.Uint64())
		binary.LittleEndian.PutUint64(val.Bytes[8:], rng.Uint64())
		d.Set(0, key, val, nowMs+60_000)
	}
	waitFor(t, 60*time.Second, "apply the writes", func() bool { return d.Stats().Pending == 0 })
	full := dirSize(t, dir)
	written := time.Since(begin)

	begin = time.Now()
	for i := range n {
		setKey(i)
		d.Delete(0, key)
	}
	// The floor: the WAL files Pebble keeps for reuse, at most
	// walFloorFiles of up to a memtable each, and a few KB of metadata.
	floor := empty + walFloorFiles*memTableSize + 64<<10
	var size, tables int64
	waitFor(t, 60*time.Second, "shrink", func() bool {
		size, tables = dirSize(t, dir), dirSize(t, dir, ".sst")
		return tables <= 64<<10 && size <= floor
	})
	t.Logf("%d keys: empty folder %d bytes; written in %v: %d bytes; deleted in %v: %d bytes, %d in sstables (%d compactions)",
		n, empty, written.Round(time.Millisecond), full, time.Since(begin).Round(time.Millisecond),
		size, tables, d.Stats().Compactions)
	if full < 30*int64(n) {
		t.Errorf("the folder held %d bytes with %d keys: the test did not write what it meant to", full, n)
	}
}

// walFloorFiles bounds the WAL files in the folder: Pebble keeps up to
// MemTableStopWritesThreshold+1 (3 by default) for reuse, besides the live one.
const walFloorFiles = 4
