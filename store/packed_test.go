package store

import (
	"bytes"
	"crypto/sha1"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// TestPackedStates: an FWC, TB or LB state with an expiry is held in its
// slot (no arena record in the memory count), reads back as the bytes
// written, digests as those bytes, and moves to the arena and back as its
// expiry goes and comes; a state that does not pack is held as bytes.
func TestPackedStates(t *testing.T) {
	const hour = 3600 * 1000 * ms
	type state struct {
		b   []byte
		exp int64
	}
	bucket := func(k engines.Kind, tokens, period, expAfter int64) state {
		b, fullAt := bucketState(k, t0, tokens, period)
		return state{b, ExpiryAt(fullAt + expAfter)}
	}
	for _, c := range []struct {
		kind               Kind
		name               string
		packed, unpackable state
	}{
		{KindFWC, "fwc",
			state{fwcState(t0+5*ms, 7), t0/ms + 3_600_000},  // an hour's window
			state{fwcState(t0, 1<<20), t0/ms + 86_400_000}}, // a count too large for a day's width
		{KindTB, "tb",
			bucket(engines.TB, 1, hour, 0),
			bucket(engines.TB, 2, hour, 0)}, // a debt drained in part
		{KindLB, "lb",
			bucket(engines.LB, 1, 1000*ms, 0),
			bucket(engines.LB, 1, 1000*ms, hour)}, // an expiry an hour on
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			tx := s.Tx(t0)
			key := []byte("rl:user:0000001")
			state := c.packed.b
			mem := func() int64 { _, m := s.Usage(); return m }
			check := func(what string, wantMem int64) {
				t.Helper()
				v, ok := tx.Get(0, key)
				if !ok || v.Kind != c.kind || !bytes.Equal(v.Bytes, state) {
					t.Fatalf("%s: Get = %v %d %x, want %x", what, ok, v.Kind, v.Bytes, state)
				}
				if got := mem(); got != wantMem {
					t.Fatalf("%s: memory %d, want %d", what, got, wantMem)
				}
				if got, want := tx.DigestValue(0, key), sha1.Sum(append([]byte(c.name+"\x00"), state...)); got != want {
					t.Fatalf("%s: DigestValue %x, want %x", what, got, want)
				}
			}
			record := recordCost(len(state))

			tx.Put(0, key, Value{Kind: c.kind, Bytes: bytes.Clone(state)}, c.packed.exp)
			check("packed", EntryOverhead)
			tx.SetExpire(0, key, 0) // PERSIST: nothing to count from
			check("persisted", EntryOverhead+record)
			tx.SetExpire(0, key, c.packed.exp)
			check("expiring again", EntryOverhead)
			if got, _ := tx.ExpireMs(0, key); got != c.packed.exp {
				t.Fatalf("expiry %d, want %d", got, c.packed.exp)
			}

			state = c.unpackable.b
			tx.Put(0, key, Value{Kind: c.kind, Bytes: bytes.Clone(state)}, c.unpackable.exp)
			check("unpackable", EntryOverhead+record)
			tx.Delete(0, key)
			if got := mem(); got != 0 {
				t.Fatalf("deleted: memory %d", got)
			}
		})
	}
}
