package store

import (
	"bytes"
	"crypto/sha1"
	"testing"
)

// TestPackedFWC: an FWC state with an expiry is held in its slot (no arena
// record in the memory count), reads back as the bytes written, digests as
// those bytes, and moves to the arena and back as its expiry goes and
// comes.
func TestPackedFWC(t *testing.T) {
	s := newStore(t)
	tx := s.Tx(t0)
	key := []byte("rl:user:0000001")
	state := fwcState(t0+5*ms, 7)
	exp := t0/ms + 3_600_000 // an hour's window
	mem := func() int64 { _, m := s.Usage(); return m }
	check := func(what string, wantMem int64) {
		t.Helper()
		v, ok := tx.Get(0, key)
		if !ok || v.Kind != KindFWC || !bytes.Equal(v.Bytes, state) {
			t.Fatalf("%s: Get = %v %d %x, want %x", what, ok, v.Kind, v.Bytes, state)
		}
		if got := mem(); got != wantMem {
			t.Fatalf("%s: memory %d, want %d", what, got, wantMem)
		}
		if got, want := tx.DigestValue(0, key), sha1.Sum(append([]byte("fwc\x00"), state...)); got != want {
			t.Fatalf("%s: DigestValue %x, want %x", what, got, want)
		}
	}

	tx.Put(0, key, Value{Kind: KindFWC, Bytes: bytes.Clone(state)}, exp)
	check("packed", EntryOverhead)
	tx.SetExpire(0, key, 0) // PERSIST: nothing to count from
	check("persisted", EntryOverhead+24)
	tx.SetExpire(0, key, exp+10)
	check("expiring again", EntryOverhead)
	if got, _ := tx.ExpireMs(0, key); got != exp+10 {
		t.Fatalf("expiry %d, want %d", got, exp+10)
	}

	// A count too large for a day's width stays in the arena.
	state = fwcState(t0, 1<<20)
	tx.Put(0, key, Value{Kind: KindFWC, Bytes: bytes.Clone(state)}, t0/ms+86_400_000)
	check("unpackable", EntryOverhead+24)
	tx.Delete(0, key)
	if got := mem(); got != 0 {
		t.Fatalf("deleted: memory %d", got)
	}
}
