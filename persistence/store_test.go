package persistence

import (
	"testing"

	"github.com/throttleddb/throttled/store"
)

// TestWithStore_RestartKeepsKeyspace wires a DB to a real store as the
// server does: the store journals its changes, and after a restart Load
// restores the same keyspace into a new store, minus what expired meanwhile.
func TestWithStore_RestartKeepsKeyspace(t *testing.T) {
	const ms = int64(1e6)
	now := nowMs * ms
	newStore := func() *store.Store {
		s, err := store.New(store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dump := func(s *store.Store, at int64) map[string]rec {
		got := map[string]rec{}
		tx := s.Tx(at)
		for db := range s.Databases() {
			tx.ForEach(db, func(key string, v store.Value) bool {
				exp, _ := tx.ExpireMs(db, []byte(key))
				v.Bytes = append([]byte(nil), v.Bytes...)
				got[dbKeyName(db, []byte(key))] = rec{v, exp}
				return true
			})
		}
		return got
	}

	d := openT(t, t.TempDir(), Always)
	s := newStore()
	s.SetJournal(d)
	tx := s.Tx(now)
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
	if err := d.WaitDurable(d.LastSeq()); err != nil {
		t.Fatal(err)
	}
	// The restart happens one second later: "short" has expired.
	later := now + 1000*ms
	want := dump(s, later)
	closeT(t, d)

	d = openT(t, d.dir, Always)
	s2 := newStore()
	if err := d.Load(later/ms, s2.Restore); err != nil {
		t.Fatal(err)
	}
	s2.SetJournal(d)
	got := dump(s2, later)
	compareRecs(t, got, want)
	if _, ok := got["0/short"]; ok || len(want) != 4 {
		t.Errorf("want 4 keys without the expired one, got %v", got)
	}
}
