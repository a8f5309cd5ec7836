package store

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// These tests check the persistence bookkeeping of saved.go against what a
// Collector must end up with: applying what Collect hands over, in order, to
// the previous saved copy must give the keyspace, while a key that never
// reached the saved copy must cost nothing.

// event is one call a Collector received.
type event struct {
	op    string // "flushed", "removed" or "changed"
	shard int    // ShardDone calls before it: the shard it was handed with
	k     dbKey  // k.key is empty for "flushed"
	val   string // "changed": the value and expiry (vtext)
}

func (e event) String() string {
	switch e.op {
	case "flushed":
		return flushedText(e.k.db)
	case "removed":
		return removedText(e.k.db, e.k.key)
	}
	return fmt.Sprintf("changed %d %s %s", e.k.db, e.k.key, e.val)
}

// vtext is a value and its expiry as text, to compare them in one check.
func vtext(v Value, expireMs int64) string {
	return fmt.Sprintf("%d/%d/%s@%d", v.Kind, v.Int, v.Bytes, expireMs)
}

// The texts a test expects from Collect.
func flushedText(db int) string             { return fmt.Sprintf("flushed %d", db) }
func removedText(db int, key string) string { return fmt.Sprintf("removed %d %s", db, key) }
func changedText(db int, key string, v Value, expireMs int64) string {
	return event{op: "changed", k: dbKey{db, key}, val: vtext(v, expireMs)}.String()
}

// spy is a Collector that records what it is handed.
type spy struct {
	events []event
	done   int // ShardDone calls
	// onDone, when set, runs in each ShardDone with the index of the shard
	// just handed over.
	onDone func(shard int)
	// stopAfter, when set, makes that ShardDone call return errStop.
	stopAfter int
}

var errStop = errors.New("collector stops")

func (c *spy) Flushed(db int) {
	c.events = append(c.events, event{op: "flushed", shard: c.done, k: dbKey{db: db}})
}

func (c *spy) Removed(db int, key string) {
	c.events = append(c.events, event{op: "removed", shard: c.done, k: dbKey{db, key}})
}

func (c *spy) Changed(db int, key string, v Value, expireMs int64) {
	// v.Bytes is valid only now: vtext copies it into a string.
	c.events = append(c.events, event{op: "changed", shard: c.done, k: dbKey{db, key}, val: vtext(v, expireMs)})
}

func (c *spy) ShardDone() error {
	if c.onDone != nil {
		c.onDone(c.done)
	}
	c.done++
	if c.done == c.stopAfter {
		return errStop
	}
	return nil
}

// rig is a store under test with the journal it reports to (nil in modeOff)
// and the saved copy a Collector keeps from what Collect hands over.
type rig struct {
	t     *testing.T
	s     *Store
	j     *recorder
	saved map[dbKey]string // key -> vtext
}

// newRig returns a store with cfg; journal sets a recorder as its journal.
func newRig(t *testing.T, cfg Config, journal bool) *rig {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, s: s, saved: map[dbKey]string{}}
	if journal {
		r.setJournal()
	}
	return r
}

func (r *rig) setJournal() {
	r.j = &recorder{}
	r.s.SetJournal(r.j)
}

// restore puts a key back as Load does, and into the saved copy it comes from.
func (r *rig) restore(db int, key string, v Value, expireMs int64) {
	r.s.Restore(db, []byte(key), v, expireMs)
	r.saved[dbKey{db, key}] = vtext(v, expireMs)
}

// fillShards puts n keys into every shard of db 0.
func (r *rig) fillShards(n int) {
	tx := r.s.Tx(t0)
	for i := range r.s.shards {
		for _, k := range keysIn(r.s, i, n) {
			tx.Put(0, []byte(k), one, 0)
		}
	}
}

// collect runs Collect, checks the order of what it hands over, applies it to
// the saved copy and returns it as sorted text (the order across shards
// depends on the hash seed).
func (r *rig) collect() []string { return r.collectWith(nil) }

// collectWith is collect with onDone run at each ShardDone.
func (r *rig) collectWith(onDone func(shard int)) []string {
	r.t.Helper()
	c := r.run(onDone)
	out := make([]string, 0, len(c.events))
	for _, e := range c.events {
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out
}

// run runs Collect, checks the order of what it hands over and applies it to
// the saved copy.
func (r *rig) run(onDone func(shard int)) *spy {
	r.t.Helper()
	c := &spy{onDone: onDone}
	if err := r.s.Collect(c); err != nil {
		r.t.Fatalf("Collect: %v", err)
	}
	checkOrder(r.t, r.s, c)
	r.apply(c)
	return c
}

// apply applies what c was handed to the saved copy.
func (r *rig) apply(c *spy) {
	for _, e := range c.events {
		switch e.op {
		case "flushed":
			maps.DeleteFunc(r.saved, func(k dbKey, _ string) bool { return k.db == e.k.db })
		case "removed":
			delete(r.saved, e.k)
		case "changed":
			r.saved[e.k] = e.val
		}
	}
}

// checkOrder checks the order Collect promises: one ShardDone per shard, the
// flushed databases first (a Flushed after a Changed of its db would wipe
// that change from the saved copy), each key handed with its own shard, and
// within a shard the removed keys before the changed ones (a key deleted and
// re-created must end up saved, not deleted). A key is Changed at most once.
func checkOrder(t *testing.T, s *Store, c *spy) {
	t.Helper()
	if c.done != len(s.shards) {
		t.Errorf("ShardDone called %d times, want once per shard (%d)", c.done, len(s.shards))
	}
	changed := map[dbKey]bool{}
	for i, e := range c.events {
		if e.op == "flushed" {
			if i > 0 && c.events[i-1].op != "flushed" {
				t.Errorf("%v handed after %v: flushed databases must come first", e, c.events[i-1])
			}
			continue
		}
		if want := s.ShardOf([]byte(e.k.key)); e.shard != want {
			t.Errorf("%v handed with shard %d, but the key is in shard %d", e, e.shard, want)
		}
		if e.op == "removed" && i > 0 && c.events[i-1].op == "changed" && c.events[i-1].shard == e.shard {
			t.Errorf("%v handed after %v of the same shard: removed keys must come first", e, c.events[i-1])
		}
		if e.op == "changed" {
			if changed[e.k] {
				t.Errorf("%v handed twice in one Collect", e)
			}
			changed[e.k] = true
		}
	}
}

// contents returns every key the store holds (expired ones not yet removed
// included, as Collect sees them). No other goroutine may use the store.
func contents(s *Store) map[dbKey]string {
	m := map[dbKey]string{}
	for i := range s.shards {
		sh := &s.shards[i]
		for db := range sh.dbs {
			sh.each(db, 0, func(k []byte, r ref) bool {
				e := r.get()
				m[dbKey{db, string(k)}] = vtext(e.value(), e.expireMs)
				return true
			})
		}
	}
	return m
}

// checkSaved checks that the saved copy holds exactly the keyspace, which it
// must after a Collect during which nothing changed.
func (r *rig) checkSaved() {
	r.t.Helper()
	have := contents(r.s)
	for k, v := range have {
		if sv, ok := r.saved[k]; !ok || sv != v {
			r.t.Errorf("store holds %d %s = %s, saved copy %q (present %v)", k.db, k.key, v, sv, ok)
		}
	}
	for k, sv := range r.saved {
		if _, ok := have[k]; !ok {
			r.t.Errorf("saved copy holds %d %s = %s, which the store does not", k.db, k.key, sv)
		}
	}
}

// checkGone checks Gone, the count of removed saved keys awaiting Collect.
func (r *rig) checkGone(want int64) {
	r.t.Helper()
	if got := r.s.Gone(); got != want {
		r.t.Errorf("Gone() = %d, want %d", got, want)
	}
}

// checkJournal checks what the journal heard; want fills a recorder through
// the Journal methods, so the expected log is in the recorder's own format.
func (r *rig) checkJournal(want func(j Journal)) {
	r.t.Helper()
	w := &recorder{}
	want(w)
	if fmt.Sprint(r.j.log) != fmt.Sprint(w.log) {
		r.t.Errorf("journal heard\n%q\nwant\n%q", r.j.log, w.log)
	}
}

// same checks a Collect's sorted texts against want (any order).
func same(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s handed over\n%q\nwant\n%q", what, got, want)
	}
}

// keysIn returns n keys that fall in shard.
func keysIn(s *Store, shard, n int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if k := fmt.Sprint("s", shard, "-", i); s.ShardOf([]byte(k)) == shard {
			keys = append(keys, k)
		}
	}
	return keys
}

var one, two = IntValue(1), IntValue(2)

func str(s string) Value { return StringValue([]byte(s)) }

// TestCollect_Off: with no journal nothing is recorded: Collect hands over
// nothing, no entry is flagged and no removed key is listed, whatever
// happens, so a store without persistence pays nothing for it.
func TestCollect_Off(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, false)
	s := r.s
	tx := s.Tx(t0)
	s.Restore(0, []byte("restored"), one, 0) // flagged saved
	tx.Put(0, []byte("a"), one, 0)
	tx.PutKeepTTL(0, []byte("a"), two)
	tx.SetExpire(0, []byte("a"), t0/ms+5)
	tx.Put(1, []byte("b"), str("x"), 0)
	tx.Delete(0, []byte("restored"))
	tx.Put(2, []byte("c"), one, 0)
	tx.Flush(2)
	s.Tx(t0+6*ms).Get(0, []byte("a")) // lazily expired
	r.checkGone(0)
	same(t, "Collect with no journal", r.collect())
	for i := range s.shards {
		if len(s.shards[i].gone) != 0 {
			t.Errorf("shard %d lists %d removed keys with no journal", i, len(s.shards[i].gone))
		}
		sh := &s.shards[i]
		for db := range sh.dbs {
			sh.each(db, 0, func(k []byte, r ref) bool {
				if r.get().flags&flagDirty != 0 {
					t.Errorf("%d %s flagged dirty with no journal", db, k)
				}
				return true
			})
		}
	}
}

// TestCollect_Track: every change reaches the journal in order, and Collect
// hands each changed key once, with its value and expiry at Collect time,
// however often it changed; then nothing until the next change.
func TestCollect_Track(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, true)
	tx := r.s.Tx(t0)
	exp := t0/ms + 10
	a, b, c := []byte("a"), []byte("b"), []byte("c")
	tx.Put(0, a, one, 0)
	tx.Put(0, a, two, 0)
	tx.PutKeepTTL(0, a, str("x"))
	tx.SetExpire(0, a, exp)
	tx.Get(0, a) // reads are neither journaled nor changes
	tx.Put(0, b, one, exp)
	tx.Delete(0, b)
	tx.Put(1, c, two, 0)
	tx.Put(1, c, one, 0)
	r.checkJournal(func(j Journal) {
		j.Set(0, a, one, 0)
		j.Set(0, a, two, 0)
		j.Set(0, a, str("x"), 0)
		j.Set(0, a, str("x"), exp)
		j.Set(0, b, one, exp)
		j.Delete(0, b)
		j.Set(1, c, two, 0)
		j.Set(1, c, one, 0)
	})
	r.checkGone(0) // b was never saved
	same(t, "first Collect", r.collect(),
		changedText(0, "a", str("x"), exp),
		changedText(1, "c", one, 0))
	r.checkSaved()
	same(t, "Collect with no change since", r.collect())
	r.checkSaved()
}

// TestCollect_RemovedKeys: a removed key reaches the saved copy only if the
// saved copy may hold it, once, and before its new value if it came back.
func TestCollect_RemovedKeys(t *testing.T) {
	const db = 3
	k := []byte("k")
	exp := t0/ms + 1
	for _, tc := range []struct {
		name string
		// before runs before a first Collect, after between it and the
		// second one, whose output is want.
		before, after func(s *Store)
		want          []string
		gone          int64 // Gone() before the second Collect
	}{
		{
			name:  "never saved: created and deleted",
			after: func(s *Store) { s.Tx(t0).Put(db, k, one, 0); s.Tx(t0).Delete(db, k) },
		},
		{
			name:  "never saved: created and expired",
			after: func(s *Store) { s.Tx(t0).Put(db, k, one, exp); s.Tx(t0+2*ms).Get(db, k) },
		},
		{
			name:   "saved, read",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Get(db, k) },
		},
		{
			name:   "saved, deleted",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Delete(db, k) },
			want:   []string{removedText(db, "k")},
			gone:   1,
		},
		{
			name:   "saved, overwritten",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Put(db, k, two, 0) },
			want:   []string{changedText(db, "k", two, 0)},
		},
		{
			name:   "saved, overwritten, deleted",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Put(db, k, two, 0); s.Tx(t0).Delete(db, k) },
			want:   []string{removedText(db, "k")},
			gone:   1,
		},
		{
			// checkOrder fails if Changed comes before Removed, which
			// would leave the key deleted in the saved copy.
			name:   "saved, deleted, re-created",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Delete(db, k); s.Tx(t0).Put(db, k, two, 0) },
			want:   []string{removedText(db, "k"), changedText(db, "k", two, 0)},
			gone:   1,
		},
		{
			// The re-created key was never saved: its deletion adds
			// nothing to the list.
			name:   "saved, deleted, re-created, deleted",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after: func(s *Store) {
				s.Tx(t0).Delete(db, k)
				s.Tx(t0).Put(db, k, two, 0)
				s.Tx(t0).Delete(db, k)
			},
			want: []string{removedText(db, "k")},
			gone: 1,
		},
		{
			name:   "saved, expiry set in the past",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).SetExpire(db, k, t0/ms) },
			want:   []string{removedText(db, "k")},
			gone:   1,
		},
		{
			name:   "saved, Put with a past expiry",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, 0) },
			after:  func(s *Store) { s.Tx(t0).Put(db, k, two, t0/ms-1) },
			want:   []string{removedText(db, "k")},
			gone:   1,
		},
		{
			name:   "saved, PutKeepTTL",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, exp) },
			after:  func(s *Store) { s.Tx(t0).PutKeepTTL(db, k, str("x")) },
			want:   []string{changedText(db, "k", str("x"), exp)},
		},
		{
			// The Put finds the key expired: the saved entry goes and a
			// new one comes.
			name:   "saved, written after its expiry",
			before: func(s *Store) { s.Tx(t0).Put(db, k, one, exp) },
			after:  func(s *Store) { s.Tx(t0+2*ms).Put(db, k, two, 0) },
			want:   []string{removedText(db, "k"), changedText(db, "k", two, 0)},
			gone:   1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Shards: 4}, true)
			if tc.before != nil {
				tc.before(r.s)
			}
			r.collect()
			tc.after(r.s)
			r.checkGone(tc.gone)
			same(t, "second Collect", r.collect(), tc.want...)
			r.checkGone(0)
			r.checkSaved()
			same(t, "third Collect", r.collect())
		})
	}
}

// TestCollect_Flush: a flushed database is handed over before any key (the
// saved copy drops the whole database, then takes its new keys); keys
// written after the flush come as changed, those written before it do not.
func TestCollect_Flush(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, true)
	tx := r.s.Tx(t0)
	for _, k := range []string{"a", "b", "c"} {
		tx.Put(1, []byte(k), one, 0)
	}
	tx.Put(0, []byte("z"), one, 0)
	r.collect()
	tx.Delete(1, []byte("a"))          // saved: listed as removed
	tx.Put(1, []byte("early"), one, 0) // flushed before any Collect
	tx.Flush(1)
	tx.Put(1, []byte("b"), two, 0)
	tx.Put(0, []byte("z"), two, 0)
	tx.Flush(5) // an empty database still reaches the journal and the copy
	r.checkJournal(func(j Journal) {
		for _, k := range []string{"a", "b", "c"} {
			j.Set(1, []byte(k), one, 0)
		}
		j.Set(0, []byte("z"), one, 0)
		j.Delete(1, []byte("a"))
		j.Set(1, []byte("early"), one, 0)
		j.FlushDB(1)
		j.Set(1, []byte("b"), two, 0)
		j.Set(0, []byte("z"), two, 0)
		j.FlushDB(5)
	})
	got := r.collect()
	// "a" was listed before the flush; handing it over as well is harmless
	// (the flush already dropped it), so it may or may not come.
	got = slices.DeleteFunc(got, func(s string) bool { return s == removedText(1, "a") })
	same(t, "Collect after FLUSHDB", got,
		flushedText(1), flushedText(5),
		changedText(1, "b", two, 0), changedText(0, "z", two, 0))
	r.checkSaved()
	same(t, "Collect with no change since", r.collect())
}

// TestCollect_Expired: a saved key that expires is removed from the saved
// copy, however its expiry is found.
func TestCollect_Expired(t *testing.T) {
	k := []byte("k")
	later := t0 + 6*ms
	for _, tc := range []struct {
		name   string
		expire func(s *Store)
	}{
		{"lazily, on access", func(s *Store) { s.Tx(later).Get(0, k) }},
		{"by SampleExpire", func(s *Store) { s.SampleExpire(s.ShardOf(k), later, 16) }},
		{"by eviction", func(s *Store) {
			// An expired key is the first victim of an eviction.
			s.SetLimits(1, 0)
			s.evictAll(later)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Shards: 1}, true)
			r.s.Tx(t0).Put(0, k, one, t0/ms+5)
			r.s.Tx(t0).Put(0, []byte("kept"), one, 0)
			r.collect()
			tc.expire(r.s)
			if r.s.ExpiredKeys() != 1 {
				t.Fatalf("ExpiredKeys() = %d, want 1", r.s.ExpiredKeys())
			}
			r.checkGone(1)
			same(t, "Collect after the expiry", r.collect(), removedText(0, "k"))
			r.checkSaved()
		})
	}
}

// TestCollect_Restore: restored keys are the saved copy's: not journaled,
// not handed back, and their removal is handed over. Restore leaves the mode
// as it found it.
func TestCollect_Restore(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, false)
	exp := t0/ms + 1000
	r.restore(0, "a", one, 0)
	r.restore(0, "b", str("x"), exp)
	r.restore(1, "c", two, 0)
	if r.s.mode != modeOff {
		t.Fatalf("mode after Restore = %d, want modeOff", r.s.mode)
	}
	same(t, "Collect after Restore", r.collect())
	r.setJournal()
	r.restore(0, "d", one, 0) // after SetJournal: still not journaled
	if r.s.mode != modeTrack {
		t.Fatalf("mode after Restore = %d, want modeTrack", r.s.mode)
	}
	same(t, "Collect after Restore", r.collect())
	r.checkJournal(func(Journal) {})
	tx := r.s.Tx(t0)
	tx.Delete(0, []byte("a"))
	tx.PutKeepTTL(0, []byte("b"), str("y"))
	r.checkJournal(func(j Journal) {
		j.Delete(0, []byte("a"))
		j.Set(0, []byte("b"), str("y"), exp)
	})
	r.checkGone(1)
	same(t, "Collect after changing restored keys", r.collect(),
		removedText(0, "a"), changedText(0, "b", str("y"), exp))
	r.checkSaved()
}

// TestCollect_Replay: changes replayed from the log are not journaled again
// but are handed to the next Collect, which must cover them before the log
// can go. A key the replay created counts as saved: a checkpoint that
// crashed half-way may have saved it, so its removal is handed over too.
func TestCollect_Replay(t *testing.T) {
	for _, tc := range []struct {
		name string
		// journalFirst sets the journal before Replay, to show Replay does
		// not use it; Load's order is Restore, Replay, SetJournal.
		journalFirst bool
	}{{"journal set after", false}, {"journal set before", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{Shards: 4}, tc.journalFirst)
			before := r.s.mode
			r.restore(0, "a", one, 0)
			r.restore(0, "b", one, 0)
			r.restore(2, "f", one, 0)
			r.s.Replay(t0, func(tx Tx) {
				tx.Delete(0, []byte("a"))
				tx.PutKeepTTL(0, []byte("b"), two)
				tx.Flush(2)
				tx.Put(0, []byte("n"), one, 0)
				tx.Put(0, []byte("m"), one, 0)
				tx.Put(0, []byte("tmp"), one, 0)
				tx.Delete(0, []byte("tmp"))
			})
			if r.s.mode != before {
				t.Fatalf("mode after Replay = %d, want %d", r.s.mode, before)
			}
			if !tc.journalFirst {
				r.setJournal()
			}
			r.checkJournal(func(Journal) {})
			r.s.Tx(t0).Delete(0, []byte("m")) // replayed, deleted before any Collect
			r.checkJournal(func(j Journal) { j.Delete(0, []byte("m")) })
			r.checkGone(3) // a, tmp, m
			same(t, "Collect after Replay", r.collect(),
				flushedText(2),
				removedText(0, "a"), removedText(0, "tmp"), removedText(0, "m"),
				changedText(0, "b", two, 0), changedText(0, "n", one, 0))
			r.checkSaved()
			same(t, "Collect with no change since", r.collect())
		})
	}
}

// TestCollect_ShardDoneUnlocked: ShardDone comes once per shard, after that
// shard's keys, with no shard locked, since the collector may write to disk
// there. TryLock shows a held lock without the deadlock that Lock would
// hang the test on.
func TestCollect_ShardDoneUnlocked(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, true)
	r.fillShards(2)
	r.s.Tx(t0).Flush(1)
	for _, phase := range []string{"with changes", "with none"} {
		calls := 0
		r.collectWith(func(shard int) {
			if shard != calls {
				t.Errorf("%s: ShardDone for shard %d, want %d", phase, shard, calls)
			}
			calls++
			for i := range r.s.shards {
				if !r.s.shards[i].mu.TryLock() {
					t.Errorf("%s: shard %d locked during ShardDone after shard %d", phase, i, shard)
					continue
				}
				r.s.shards[i].mu.Unlock()
			}
		})
		if calls != len(r.s.shards) {
			t.Errorf("%s: ShardDone called %d times, want %d", phase, calls, len(r.s.shards))
		}
	}
	r.checkSaved()
}

// TestCollect_Stopped: an error from ShardDone stops Collect, which returns
// it; the shards not handed over keep their changes for the next Collect.
func TestCollect_Stopped(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, true)
	r.fillShards(2)
	c := &spy{stopAfter: 2}
	if err := r.s.Collect(c); err != errStop {
		t.Fatalf("Collect returned %v, want the collector's error", err)
	}
	if c.done != 2 {
		t.Errorf("ShardDone called %d times after it failed on the 2nd", c.done)
	}
	r.apply(c)
	if len(r.saved) != 4 {
		t.Errorf("the saved copy holds %d keys after two shards of two keys", len(r.saved))
	}
	got := r.collect()
	if len(got) != 4 {
		t.Errorf("the next Collect handed over %q, want the 4 keys of the last two shards", got)
	}
	r.checkSaved()
}

// TestCollect_Evicted: an evicted saved key is removed from the saved copy,
// whether a write evicts it or the background evictor does.
func TestCollect_Evicted(t *testing.T) {
	t.Run("by a write", func(t *testing.T) {
		r := newRig(t, Config{Shards: 1, MaxKeys: 2}, true)
		r.s.Tx(t0).Put(0, []byte("a"), one, 0)
		r.s.Tx(t0).Put(0, []byte("b"), one, 0)
		r.collect()
		// A later access time keeps c: a or b is the least recently used.
		later := r.s.Tx(t0 + 5000*ms)
		later.Put(0, []byte("c"), one, 0)
		if r.s.EvictedKeys() != 1 {
			t.Fatalf("EvictedKeys() = %d, want 1", r.s.EvictedKeys())
		}
		victim := "a"
		if later.Exists(0, []byte("a")) {
			victim = "b"
		}
		r.checkGone(1)
		same(t, "Collect after the eviction", r.collect(),
			removedText(0, victim), changedText(0, "c", one, 0))
		r.checkSaved()
	})
	t.Run("in the background, of restored keys", func(t *testing.T) {
		r := newRig(t, Config{Shards: 4, MaxKeys: 3}, false)
		for i := range 6 {
			r.restore(0, fmt.Sprint("r", i), one, 0)
		}
		r.setJournal()
		r.s.evictAll(t0)
		var want []string
		for i := range 6 {
			if k := fmt.Sprint("r", i); !r.s.Tx(t0).Exists(0, []byte(k)) {
				want = append(want, removedText(0, k))
			}
		}
		if len(want) != 3 {
			t.Fatalf("%d keys evicted, want 3", len(want))
		}
		r.checkGone(3)
		same(t, "Collect after the eviction", r.collect(), want...)
		r.checkSaved()
	})
}

// TestCollect_FlushDuringCollect: Collect promises that the saved copy holds
// every change made before it began. A FLUSHDB that runs between two shards
// of a Collect is handed over at the next Collect, as a DeleteRange of the
// whole database; a key written after that FLUSHDB, in a shard this Collect
// has not reached yet, must then be handed over again after that
// DeleteRange, or the flush would wipe it from the saved copy for good.
func TestCollect_FlushDuringCollect(t *testing.T) {
	r := newRig(t, Config{Shards: 4}, true)
	tx := r.s.Tx(t0)
	k := keysIn(r.s, 3, 1)[0]
	tx.Put(1, []byte("old"), one, 0)
	r.collect()
	all := &LockSet{}
	all.AddAll()
	r.collectWith(func(shard int) {
		if shard != 0 {
			return
		}
		// What a client could do between shards 0 and 1 of the Collect.
		r.s.Lock(all)
		tx.Flush(1)
		tx.Put(1, []byte(k), two, 0)
		r.s.Unlock(all)
	})
	// Both changes were made before this Collect began, and nothing
	// changes during it: the saved copy must be the keyspace.
	r.collect()
	r.checkSaved()
}

// TestCollect_Model runs random changes with Collects in between against a
// model of what the store must record: after every Collect the saved copy is
// the keyspace, exactly the keys written since the last Collect come as
// changed, and Gone counts the removals of saved keys.
func TestCollect_Model(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	// Few keys over two databases, so keys come back after removal, and a
	// bound that evicts now and then.
	r := newRig(t, Config{Databases: 2, Shards: 4, MaxKeys: 12}, false)
	for i := range 4 {
		r.restore(rng.IntN(2), fmt.Sprint("k", i), one, 0)
	}
	r.setJournal()
	s := r.s
	// An entry is a key between two removals: its generation counts the
	// journal's deletes of the key and flushes of its database.
	gens, logged := map[dbKey]int{}, 0
	entries := func() map[dbKey]int {
		for _, l := range r.j.log[logged:] {
			var db int
			var k string
			if n, _ := fmt.Sscanf(l, "del %d %s", &db, &k); n == 2 {
				gens[dbKey{db, k}]++
			} else if n, _ := fmt.Sscanf(l, "flush %d", &db); n == 1 {
				gens[dbKey{db: db}]++
			}
		}
		logged = len(r.j.log)
		m := map[dbKey]int{}
		for i := range s.shards {
			sh := &s.shards[i]
			for db := range sh.dbs {
				sh.each(db, 0, func(k []byte, _ ref) bool {
					dk := dbKey{db, string(k)}
					m[dk] = gens[dk]<<20 | gens[dbKey{db: db}]
					return true
				})
			}
		}
		return m
	}
	// saved: the entries the saved copy holds (restored or collected and
	// not removed since); written: keys written since the last Collect.
	saved := entries()
	written := map[dbKey]bool{}
	var gone int64
	now := t0
	for step := range 2000 {
		now += int64(rng.IntN(3)) * ms
		tx := s.Tx(now)
		db := rng.IntN(2)
		key := []byte(fmt.Sprint("k", rng.IntN(10)))
		exp := int64(0)
		if rng.IntN(2) == 0 {
			exp = tx.NowMs() + int64(rng.IntN(8)) - 2 // past ones too
		}
		v := IntValue(int64(rng.IntN(100)))
		if rng.IntN(3) == 0 {
			v = str(fmt.Sprint("v", rng.IntN(100)))
		}
		prev := entries()
		write, flushed := false, -1
		var op string
		switch n := rng.IntN(100); {
		case n < 30:
			op, write = "Put", true
			tx.Put(db, key, v, exp)
		case n < 40:
			op, write = "PutKeepTTL", true
			tx.PutKeepTTL(db, key, v)
		case n < 50:
			op, write = "SetExpire", true
			tx.SetExpire(db, key, exp)
		case n < 65:
			op = "Delete"
			tx.Delete(db, key)
		case n < 80:
			op = "Get"
			tx.Get(db, key)
		case n < 88:
			op = "SampleExpire"
			s.SampleExpire(rng.IntN(len(s.shards)), now, 4)
		case n < 90:
			op, flushed = "Flush", db
			tx.Flush(db)
		default:
			op = "Collect"
		}
		cur := entries()
		if write {
			if _, ok := cur[dbKey{db, string(key)}]; ok {
				written[dbKey{db, string(key)}] = true
			}
		}
		// An entry gone or replaced was removed: if it was saved, it is
		// listed (a flush drops its database's entries unlisted).
		for k, e := range prev {
			if g, ok := cur[k]; ok && g == e {
				continue
			}
			if g, ok := saved[k]; ok && g == e {
				delete(saved, k)
				if k.db != flushed {
					gone++
				}
			}
		}
		if got := s.Gone(); got != gone {
			t.Fatalf("step %d (%s %d %s): Gone() = %d, want %d", step, op, db, key, got, gone)
		}
		if op != "Collect" {
			continue
		}
		var want []string
		for k := range written {
			if _, ok := cur[k]; ok {
				want = append(want, fmt.Sprint(k))
			}
		}
		c := r.run(nil)
		var got []string
		removed := int64(0)
		for _, e := range c.events {
			switch e.op {
			case "changed":
				got = append(got, fmt.Sprint(e.k))
			case "removed":
				removed++
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: Collect changed %v, want the keys written since the last one %v", step, got, want)
		}
		if removed != gone {
			t.Fatalf("step %d: Collect removed %d keys, want the %d saved keys removed since the last one", step, removed, gone)
		}
		r.checkSaved()
		if t.Failed() {
			t.FailNow()
		}
		saved, written, gone = cur, map[dbKey]bool{}, 0
		if s.Gone() != 0 {
			t.Fatalf("step %d: Gone() = %d after Collect", step, s.Gone())
		}
	}
}
