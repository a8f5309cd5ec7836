package table

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// seededHash returns a hash of keys (FNV-1a, then a 64-bit finalizer)
// that depends on seed: with it the tests fix the order of the slots, which
// changes which keys a sample finds, so that a failure replays.
func seededHash(seed uint64) func([]byte) uint64 {
	return func(b []byte) uint64 {
		h := uint64(14695981039346656037) ^ seed
		for _, c := range b {
			h = (h ^ uint64(c)) * 1099511628211
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		return h
	}
}

var hash = seededHash(0)

// want is the model's view of one key.
type want struct {
	kind, flags uint8
	hasBytes    bool
	n           int64
	b           []byte
	exp, atime  int64
}

func (w want) entry() Entry {
	return Entry{Kind: w.kind, Flags: w.flags, HasBytes: w.hasBytes, Int: w.n, Bytes: w.b, ExpireMs: w.exp, Atime: w.atime}
}

// checkAll compares the table with the model: every key found with its
// entry, Range visiting each key once, Len.
func checkAll(t *testing.T, tb *Table, m map[string]want, nowMs int64) {
	t.Helper()
	if tb.Len() != len(m) {
		t.Fatalf("Len = %d, model has %d", tb.Len(), len(m))
	}
	seen := map[string]bool{}
	tb.Range(0, func(p Pos) bool {
		k := string(tb.Key(p))
		if seen[k] {
			t.Fatalf("Range visited %q twice", k)
		}
		seen[k] = true
		return true
	})
	if len(seen) != len(m) {
		t.Fatalf("Range visited %d keys, model has %d", len(seen), len(m))
	}
	for k, w := range m {
		p, ok := tb.Find([]byte(k), tb.hash([]byte(k)))
		if !ok {
			t.Fatalf("key %q missing", k)
		}
		got := tb.Get(p)
		// An access older than the 24 bits reach back from the newest
		// reads as the oldest they hold.
		if old := nowMs/1000 - 150*86400; w.atime < old && got.Atime > w.atime && got.Atime < old {
			w.atime = got.Atime
		}
		checkEntry(t, k, got, w)
	}
}

// show prints an entry with its bytes' length and first byte only.
func show(e Entry) string {
	first := -1
	if len(e.Bytes) > 0 {
		first = int(e.Bytes[0])
	}
	return fmt.Sprintf("{kind %d flags %d bytes %v int %d len %d first %d exp %d atime %d}",
		e.Kind, e.Flags, e.HasBytes, e.Int, len(e.Bytes), first, e.ExpireMs, e.Atime)
}

func checkEntry(t *testing.T, k string, got Entry, w want) {
	t.Helper()
	if got.Kind != w.kind || got.Flags != w.flags || got.HasBytes != w.hasBytes || got.ExpireMs != w.exp || got.Atime != w.atime ||
		(!w.hasBytes && got.Int != w.n) || (w.hasBytes && !bytes.Equal(got.Bytes, w.b)) {
		t.Fatalf("key %q: got %s, want %s", k, show(got), show(w.entry()))
	}
}

// run drives a table with n random operations from rng against a map, the
// model, checking everything every check operations. Times start at a 2026
// instant and move forward by up to step ms per operation, so a long run
// crosses the 32-bit expiry range and makes the table rebase.
func run(t *testing.T, rng *rand.Rand, hash func([]byte) uint64, n, check int, step int64) {
	tb := New(hash)
	m := map[string]want{}
	now := int64(1_795_000_000_000) // Unix ms
	keyOf := func() string {
		i := rng.IntN(3000)
		switch i % 10 {
		case 0:
			return fmt.Sprintf("a-long-key-name-that-needs-the-arena:%d", i)
		case 1:
			return ""[:0] + fmt.Sprint(i%7) // short, shared
		}
		return fmt.Sprintf("rl:user:%07d", i)
	}
	value := func() want {
		w := want{kind: uint8(rng.IntN(256)), flags: uint8(rng.IntN(4)), atime: now / 1000}
		switch rng.IntN(4) {
		case 0:
			w.n = rng.Int64() - rng.Int64()
		case 1:
			w.hasBytes, w.b = true, bytes.Repeat([]byte{byte(rng.IntN(256))}, 1+rng.IntN(40))
		case 2:
			w.hasBytes, w.b = true, []byte{}
		default:
			w.hasBytes, w.b = true, bytes.Repeat([]byte{'x'}, 4000+rng.IntN(200)) // some beyond MaxRecord
		}
		switch rng.IntN(8) {
		case 0:
			w.exp = 0
		case 1:
			w.exp = now + rng.Int64N(1<<40) // years ahead: far
		case 2:
			w.exp = now - rng.Int64N(1<<33) // past
		default:
			w.exp = now + rng.Int64N(3_600_000)
		}
		return w
	}
	for op := range n {
		if op == n/2 {
			// Most keys go at once: the table shrinks and the arena,
			// mostly free, compacts while the operations go on.
			for k := range m {
				if rng.IntN(10) != 0 {
					p, _ := tb.Find([]byte(k), hash([]byte(k)))
					tb.Delete(p)
					delete(m, k)
				}
			}
		}
		now += rng.Int64N(step + 1)
		k := keyOf()
		h := hash([]byte(k))
		p, ok := tb.Find([]byte(k), h)
		if _, in := m[k]; in != ok {
			t.Fatalf("op %d: Find(%q) = %v, model %v", op, k, ok, in)
		}
		switch r := rng.IntN(100); {
		case !ok && r < 60:
			w := value()
			tb.Insert([]byte(k), h, w.entry())
			m[k] = w
		case ok && r < 40:
			w := value()
			tb.Set(p, w.entry())
			m[k] = w
		case ok && r < 50: // an engine's update in place, keeping or cutting the length
			w := m[k]
			if w.hasBytes && len(w.b) > 0 {
				e := tb.Get(p)
				e.Bytes[0]++
				w.b = append([]byte(nil), w.b...)
				w.b[0]++
				if r%2 == 0 && len(w.b) > 8 {
					e.Bytes, w.b = e.Bytes[:1], w.b[:1] // another size class: the record moves
				}
				tb.Set(p, e)
				m[k] = w
			}
		case ok && r < 60:
			w := m[k]
			w.exp = now + rng.Int64N(1<<34)
			w.flags = uint8(rng.IntN(4))
			w.atime = now / 1000
			tb.SetExpire(p, w.exp)
			tb.SetFlags(p, w.flags)
			tb.Touch(p, w.atime)
			m[k] = w
		case ok && r < 80:
			tb.Delete(p)
			delete(m, k)
		case r < 85: // the sweeper: sample from a random place, delete the expired
			seen := 0
			tb.Range(rng.Uint64(), func(p Pos) bool {
				if e := tb.Get(p); e.ExpireMs != 0 && e.ExpireMs < now {
					delete(m, string(tb.Key(p)))
					tb.Delete(p)
				}
				seen++
				return seen < 20
			})
		case r < 90:
			tb.Step(rng.IntN(4096), now/1000) // the sweeper's tick
		}
		if op%check == 0 {
			checkAll(t, tb, m, now)
		}
	}
	checkAll(t, tb, m, now)
	// Emptied, the table shrinks back and its arena holds nothing live.
	for k := range m {
		p, _ := tb.Find([]byte(k), hash([]byte(k)))
		tb.Delete(p)
	}
	for range 100 {
		tb.Step(1<<20, now/1000)
	}
	if tb.Len() != 0 || tb.recs.Live() != 0 || len(tb.far) != 0 || tb.bigSize != 0 || tb.recs.Size() > compactMin {
		t.Errorf("emptied table: Len %d, arena live %d and size %d, far %d, big %d",
			tb.Len(), tb.recs.Live(), tb.recs.Size(), len(tb.far), tb.bigSize)
	}
	if len(tb.cur.slots) > 4*minSlots {
		t.Errorf("emptied table kept %d slots", len(tb.cur.slots))
	}
}

// TestModel drives the table with random inserts, updates, deletes,
// expiry samples and rehash steps against a map, seeded so a failure
// replays (the seed is in the subtest's name).
func TestModel(t *testing.T) {
	for s := uint64(1); s <= 4; s++ {
		t.Run(fmt.Sprint("seed", s), func(t *testing.T) {
			run(t, rand.New(rand.NewPCG(s, 0)), seededHash(s), 40000, 997, 100)
		})
	}
}

// TestRebase runs the clock forward by about an hour per operation, two
// years over the run: expiries and access times keep leaving the ranges
// around the bases, and rehashes must move them.
// Each seed seeds the operations and the hash. The sweeper's Step comes
// at random, so some runs go days without one and rely on an access moving
// the access times' base itself.
func TestRebase(t *testing.T) {
	for s := uint64(1); s <= 40; s++ {
		t.Run(fmt.Sprint("seed", s), func(t *testing.T) {
			run(t, rand.New(rand.NewPCG(s, 99)), seededHash(s), 20000, 101, 2*3600*1000)
		})
	}
}

// TestCompactSlots checks the layout the memory budget rests on.
func TestCompactSlots(t *testing.T) {
	tb := New(hash)
	for i := range 100000 {
		k := []byte(fmt.Sprintf("rl:user:%07d", i))
		tb.Insert(k, hash(k), Entry{Kind: 2, Int: 1_795_000_000_000_000_000, ExpireMs: 1_795_000_000_000 + 3600_000, Atime: 1_795_000_000})
	}
	tb.Step(1<<30, 1_795_000_000)
	// 15-byte names inline, the integer in the slot: only slots, at
	// 70-87.5% load.
	if per := float64(tb.Memory()) / 100000; per > slotCost/0.7+1 || tb.recs.Size() != 0 {
		t.Errorf("%.1f B per key, arena %d B; want at most %.1f and no arena", per, tb.recs.Size(), slotCost/0.7+1)
	}
}

// BenchmarkFindHit is a CL.THROTTLE's work on an existing key: find it,
// write its TAT and expiry. The hash is the caller's: the store computes it
// once for the shard and the table both.
func BenchmarkFindHit(b *testing.B) {
	tb := New(hash)
	keys := make([][]byte, 4096)
	hashes := make([]uint64, len(keys))
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rl:user:%07d", i))
		hashes[i] = hash(keys[i])
		tb.Insert(keys[i], hashes[i], Entry{Int: int64(i)})
	}
	b.ResetTimer()
	for i := range b.N {
		p, _ := tb.Find(keys[i&4095], hashes[i&4095])
		tb.Set(p, Entry{Kind: 2, Int: int64(i), ExpireMs: 1_795_000_000_000 + int64(i), Atime: 1_795_000_000})
	}
}

// BenchmarkMapHit is today's store for comparison: a map of pointers.
func BenchmarkMapHit(b *testing.B) {
	type entry struct {
		kind  uint8
		n     int64
		exp   int64
		bytes *[]byte
	}
	m := map[string]*entry{}
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rl:user:%07d", i))
		m[string(keys[i])] = &entry{n: int64(i)}
	}
	b.ResetTimer()
	for i := range b.N {
		e := m[string(keys[i&4095])]
		e.kind, e.n, e.exp = 2, int64(i), 1_795_000_000_000
	}
}

// BenchmarkInsert fills a table from empty, rehashing as it grows.
func BenchmarkInsert(b *testing.B) {
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rl:user:%07d", i))
	}
	b.ResetTimer()
	var tb *Table
	for i := range b.N {
		if i&(len(keys)-1) == 0 {
			tb = New(hash)
		}
		k := keys[i&(len(keys)-1)]
		tb.Insert(k, hash(k), Entry{Int: int64(i)})
	}
}

// TestAtimeLeap touches keys a year after the last Step (a debug clock
// leap, or a sweeper that never ran): the access is recorded exactly, and
// the keys not touched read as at the new base, the oldest time it holds.
func TestAtimeLeap(t *testing.T) {
	tb := New(hash)
	const t0 = 1_795_000_000
	for i := range 100 {
		k := []byte(fmt.Sprint("k", i))
		tb.Insert(k, hash(k), Entry{Int: 1, Atime: t0})
	}
	later := int64(t0 + 365*86400)
	p, _ := tb.Find([]byte("k7"), hash([]byte("k7")))
	tb.Touch(p, later)
	if got := tb.Get(p).Atime; got != later {
		t.Fatalf("touched a year later: atime %d, want %d", got, later)
	}
	p, _ = tb.Find([]byte("k8"), hash([]byte("k8")))
	if got, base := tb.Get(p).Atime, later-atimePast; got != base {
		t.Fatalf("untouched key: atime %d, want the new base %d", got, base)
	}
}

// TestCompactArena fills a table with TB-sized states, deletes nine keys in
// ten at random and lets Step run: the arena gives back most of its chunks
// while every remaining key keeps its state.
func TestCompactArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 0))
	tb := New(hash)
	m := map[string]want{}
	for i := range 200000 {
		k := fmt.Sprintf("rl:user:%07d", i)
		w := want{kind: 3, hasBytes: true, b: bytes.Repeat([]byte{byte(i)}, 26), atime: 1_795_000_000}
		tb.Insert([]byte(k), hash([]byte(k)), w.entry())
		m[k] = w
	}
	full := tb.recs.Size()
	for k := range m {
		if rng.IntN(10) != 0 {
			p, _ := tb.Find([]byte(k), hash([]byte(k)))
			tb.Delete(p)
			delete(m, k)
		}
	}
	for range 2000 {
		tb.Step(1024, 1_795_000_000)
	}
	checkAll(t, tb, m, 1_795_000_000_000)
	// Live records take a tenth; a chunk kept half full at worst.
	if got := tb.recs.Size(); got > full/4 || tb.recs.Retiring() {
		t.Errorf("arena: %d B after compaction, %d B full, still retiring %v", got, full, tb.recs.Retiring())
	}
}
