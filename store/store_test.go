package store

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const ms = int64(1e6)

// t0 is a fixed instant (Unix ns) on a whole millisecond.
const t0 = int64(1_700_000_000_000) * ms

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"12", 12, true}, {"-7", -7, true},
		{"9223372036854775807", 1<<63 - 1, true}, {"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"012", 0, false}, {"-0", 0, false}, {"+1", 0, false}, {" 1", 0, false},
		{"", 0, false}, {"-", 0, false}, {"1.5", 0, false}, {"99999999999999999999", 0, false},
	} {
		n, ok := ParseInt([]byte(tc.in))
		if n != tc.n || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

func TestStringValue_IntEncoding(t *testing.T) {
	if v := StringValue([]byte("123")); v.Kind != KindInt || v.Int != 123 {
		t.Errorf("StringValue(123) = %+v, want int 123", v)
	}
	if v := StringValue([]byte("0123")); v.Kind != KindString || string(v.Bytes) != "0123" {
		t.Errorf("StringValue(0123) = %+v, want the bytes kept", v)
	}
}

// TestExpiry_MillisecondBoundary: a key whose expiry is T ms is there at T
// and gone at T+1 ms, as in Redis.
func TestExpiry_MillisecondBoundary(t *testing.T) {
	s := newStore(t)
	key := []byte("k")
	s.Tx(t0).Put(0, key, StringValue([]byte("v")), t0/ms+1000)
	if !s.Tx(t0+1000*ms).Exists(0, key) {
		t.Fatal("key gone at its expiry millisecond")
	}
	if !s.Tx(t0+1000*ms+ms-1).Exists(0, key) {
		t.Fatal("key gone within its expiry millisecond")
	}
	if s.Tx(t0+1001*ms).Exists(0, key) {
		t.Fatal("key still there 1 ms after its expiry")
	}
	if got := s.ExpiredKeys(); got != 1 {
		t.Fatalf("ExpiredKeys = %d, want 1", got)
	}
	if keys, exp := s.Counts(0); keys != 0 || exp != 0 {
		t.Fatalf("Counts = %d, %d after expiry; want 0, 0", keys, exp)
	}
}

func TestPut_PastExpiryDeletes(t *testing.T) {
	s := newStore(t)
	tx := s.Tx(t0)
	tx.Put(0, []byte("k"), IntValue(1), 0)
	tx.Put(0, []byte("k"), IntValue(2), t0/ms-1)
	if tx.Exists(0, []byte("k")) {
		t.Fatal("Put with a past expiry left the key")
	}
}

// TestPut_CurrentMillisecondKeeps: a key written with the current
// millisecond as its expiry (a TTL that rounds down to 0 ms) is there for
// every later instant of that millisecond, to lazy expiry, the sweeper and
// eviction alike, and gone at the next one.
func TestPut_CurrentMillisecondKeeps(t *testing.T) {
	s := newStore(t)
	at := t0 + 400_000 // 0.4 ms into a millisecond
	tx := s.Tx(at)
	tx.Put(0, []byte("k"), IntValue(1), tx.ExpiryIn(0))
	tx.Put(0, []byte("fresh"), IntValue(1), ExpiryAt(at+500_000))
	for _, key := range []string{"k", "fresh"} {
		if exp, ok := tx.ExpireMs(0, []byte(key)); !ok || exp != t0/ms {
			t.Fatalf("%s: expiry %d, %v; want %d, true", key, exp, ok, t0/ms)
		}
	}
	end := t0 + ms - 1
	if n := s.SampleExpire(s.ShardOf([]byte("k")), end, 16); n != 0 {
		t.Fatalf("the sweeper removed %d keys within their expiry millisecond", n)
	}
	if !s.Tx(end).Exists(0, []byte("k")) || !s.Tx(end).Exists(0, []byte("fresh")) {
		t.Fatal("a key gone within its expiry millisecond")
	}
	if s.Tx(t0+ms).Exists(0, []byte("k")) {
		t.Fatal("key still there after its expiry millisecond")
	}
}

// TestExpiry_Helpers: ExpiryIn counts from the current whole millisecond,
// ExpiryAt floors (also before 1970), and neither gives 0, which means "no
// expiry".
func TestExpiry_Helpers(t *testing.T) {
	for _, tc := range []struct {
		now, ttlMs, want int64
	}{
		{t0 + 999_999, 0, t0 / ms},
		{t0 + 999_999, 2, t0/ms + 2},
		{-1, 0, -1},
		{-1, 1, 1}, // -1 + 1 is 0 ms: "no expiry" to the store
		{0, 0, 1},
	} {
		// A Tx of a store nobody uses: ExpiryIn is time arithmetic only.
		if got := (&Store{}).Tx(tc.now).ExpiryIn(tc.ttlMs); got != tc.want {
			t.Errorf("Tx(%d).ExpiryIn(%d) = %d, want %d", tc.now, tc.ttlMs, got, tc.want)
		}
	}
	for _, tc := range []struct{ at, want int64 }{
		{t0, t0 / ms}, {t0 + ms - 1, t0 / ms}, {-1, -1}, {-ms, -1}, {-ms - 1, -2}, {0, 1}, {ms - 1, 1}, {ms, 1},
	} {
		if got := ExpiryAt(tc.at); got != tc.want {
			t.Errorf("ExpiryAt(%d) = %d, want %d", tc.at, got, tc.want)
		}
	}
	for _, tc := range []struct {
		expireMs, nowMs int64
		want            bool
	}{
		{0, 1 << 62, false}, {5, 5, false}, {5, 4, false}, {5, 6, true}, {-1, -1, false}, {-2, -1, true},
	} {
		if got := Expired(tc.expireMs, tc.nowMs); got != tc.want {
			t.Errorf("Expired(%d, %d) = %v, want %v", tc.expireMs, tc.nowMs, got, tc.want)
		}
	}
}

func TestExpiresCount(t *testing.T) {
	s := newStore(t)
	tx := s.Tx(t0)
	tx.Put(0, []byte("a"), IntValue(1), t0/ms+10)
	tx.Put(0, []byte("b"), IntValue(1), 0)
	tx.SetExpire(0, []byte("b"), t0/ms+10)
	tx.PutKeepTTL(0, []byte("b"), IntValue(2))
	tx.SetExpire(0, []byte("a"), 0)
	if keys, exp := s.Counts(0); keys != 2 || exp != 1 {
		t.Fatalf("Counts = %d keys, %d expires; want 2, 1", keys, exp)
	}
	if e, _ := tx.ExpireMs(0, []byte("b")); e != t0/ms+10 {
		t.Fatalf("PutKeepTTL lost the TTL: %d", e)
	}
}

func TestSampleExpire_RemovesExpiredKeys(t *testing.T) {
	s, err := New(Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Tx(t0)
	for i := range 1000 {
		exp := t0/ms + 10
		if i%10 == 0 {
			exp = 0 // persistent keys must survive
		}
		tx.Put(0, fmt.Appendf(nil, "k%d", i), IntValue(1), exp)
	}
	later := t0 + 11*ms
	for s.SampleExpire(0, later, 16) > 0 {
	}
	// Sampling stops once few sampled keys are expired; what is left is
	// found lazily. Every persistent key must still be there.
	if keys, _ := s.Counts(0); keys < 100 {
		t.Fatalf("%d keys left, want at least the 100 persistent ones", keys)
	}
	n := 0
	s.Tx(later).ForEach(0, func(string, Value, int64) bool { n++; return true })
	if n != 100 {
		t.Fatalf("%d live keys, want 100", n)
	}
}

// TestScan_CompleteUnderWrites checks SCAN's guarantee: every key present for
// the whole iteration is returned, even while other keys come and go.
func TestScan_CompleteUnderWrites(t *testing.T) {
	s, err := New(Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	var all LockSet
	all.AddAll()
	tx := s.Tx(t0)
	for i := range 2000 {
		tx.Put(0, fmt.Appendf(nil, "stable%d", i), IntValue(1), 0)
	}
	seen := map[string]bool{}
	cursor := uint64(0)
	for i := 0; ; i++ {
		s.Lock(&all)
		cursor = tx.Scan(0, cursor, 7, func(k string, _ Value) { seen[k] = true })
		tx.Put(0, fmt.Appendf(nil, "churn%d", i), IntValue(1), 0)
		tx.Delete(0, fmt.Appendf(nil, "churn%d", i-3))
		s.Unlock(&all)
		if cursor == 0 {
			break
		}
	}
	for i := range 2000 {
		if k := fmt.Sprintf("stable%d", i); !seen[k] {
			t.Fatalf("SCAN missed %s", k)
		}
	}
}

func TestWatch_DirtyOnWrite(t *testing.T) {
	s := newStore(t)
	var w Watch
	var l LockSet
	l.Add(s, []byte("k"))
	s.Lock(&l)
	s.Tx(t0).Watch(&w, 0, []byte("k"))
	s.Unlock(&l)
	if w.Dirty() {
		t.Fatal("dirty before any write")
	}
	s.Lock(&l)
	s.Tx(t0).Put(1, []byte("k"), IntValue(1), 0) // other database: not watched
	s.Unlock(&l)
	if w.Dirty() {
		t.Fatal("a write to another database made the watch dirty")
	}
	s.Lock(&l)
	s.Tx(t0).Put(0, []byte("k"), IntValue(1), 0)
	s.Unlock(&l)
	if !w.Dirty() {
		t.Fatal("write to a watched key not seen")
	}
	s.Unwatch(&w)
	if w.Dirty() || len(w.keys) > 0 {
		t.Fatal("Unwatch did not reset the watch")
	}
}

func TestWatch_ExpiryCounts(t *testing.T) {
	s := newStore(t)
	var w Watch
	var l LockSet
	l.Add(s, []byte("k"))
	s.Lock(&l)
	defer s.Unlock(&l)
	s.Tx(t0).Put(0, []byte("k"), IntValue(1), t0/ms+5)
	s.Tx(t0).Watch(&w, 0, []byte("k"))
	if s.Tx(t0).WatchExpired(&w) {
		t.Fatal("expired before its time")
	}
	if !s.Tx(t0 + 6*ms).WatchExpired(&w) {
		t.Fatal("a watched key that expired was not reported")
	}
}

// TestConcurrentIncrements runs writers on overlapping keys through the lock
// protocol; with -race it also checks the locking itself.
func TestConcurrentIncrements(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l LockSet
			for i := range 1000 {
				a, b := fmt.Appendf(nil, "k%d", i%5), fmt.Appendf(nil, "k%d", (i+g)%5)
				l.Reset()
				l.Add(s, b)
				l.Add(s, a)
				s.Lock(&l)
				tx := s.Tx(t0)
				for _, k := range [][]byte{a, b} {
					v, _ := tx.Get(0, k)
					tx.PutKeepTTL(0, k, IntValue(v.Int+1))
				}
				s.Unlock(&l)
			}
		}()
	}
	wg.Wait()
	var sum int64
	s.Tx(t0).ForEach(0, func(_ string, v Value, _ int64) bool { sum += v.Int; return true })
	if sum != 8*1000*2 {
		t.Fatalf("sum = %d, want %d", sum, 8*1000*2)
	}
}

// TestScan_SmallKeyspaceOneCall: as in Redis, a COUNT larger than the
// keyspace returns every key in one call with cursor 0.
func TestScan_SmallKeyspaceOneCall(t *testing.T) {
	s := newStore(t)
	tx := s.Tx(t0)
	for i := range 10 {
		tx.Put(0, fmt.Appendf(nil, "k%d", i), IntValue(1), 0)
	}
	n := 0
	if next := tx.Scan(0, 0, 100, func(string, Value) { n++ }); next != 0 || n != 10 {
		t.Fatalf("Scan COUNT 100 over 10 keys: %d keys, cursor %d; want 10, 0", n, next)
	}
}

// recorder is a Journal that keeps what it heard as text.
type recorder struct{ log []string }

func (r *recorder) Set(db int, key []byte, v Value, expireMs int64) {
	r.log = append(r.log, fmt.Sprintf("set %d %s %d/%d/%s %d", db, key, v.Kind, v.Int, v.Bytes, expireMs))
}
func (r *recorder) Delete(db int, key []byte) {
	r.log = append(r.log, fmt.Sprintf("del %d %s", db, key))
}
func (r *recorder) FlushDB(db int) { r.log = append(r.log, fmt.Sprintf("flush %d", db)) }

// TestJournal: every change reaches the journal in order, reads and Restore
// do not, and expiry (lazy or swept) is reported as a delete.
func TestJournal(t *testing.T) {
	s := newStore(t)
	r := &recorder{}
	s.SetJournal(r)
	s.Restore(1, []byte("loaded"), IntValue(5), 0)
	tx := s.Tx(t0)
	tx.Put(0, []byte("a"), IntValue(1), 0)
	tx.PutKeepTTL(0, []byte("a"), StringValue([]byte("x")))
	tx.SetExpire(0, []byte("a"), t0/ms+10)
	tx.Get(0, []byte("a"))
	tx.SetExpire(0, []byte("missing"), t0/ms+10)
	tx.Put(0, []byte("b"), IntValue(2), t0/ms+5)
	tx.Delete(0, []byte("a"))
	tx.Put(0, []byte("c"), IntValue(3), t0/ms-1) // already expired: nothing stored
	s.Tx(t0+6*ms).Get(0, []byte("b"))            // lazily expired
	tx.Put(0, []byte("d"), IntValue(4), t0/ms+5)
	s.SampleExpire(s.ShardOf([]byte("d")), t0+6*ms, 1)
	tx.Flush(1)
	want := []string{
		"set 0 a 2/1/ 0",
		"set 0 a 1/0/x 0",
		fmt.Sprintf("set 0 a 1/0/x %d", t0/ms+10),
		fmt.Sprintf("set 0 b 2/2/ %d", t0/ms+5),
		"del 0 a",
		"del 0 b",
		fmt.Sprintf("set 0 d 2/4/ %d", t0/ms+5),
		"del 0 d",
		"flush 1",
	}
	if fmt.Sprint(r.log) != fmt.Sprint(want) {
		t.Errorf("journal heard\n%q\nwant\n%q", r.log, want)
	}
	if v, ok := s.Tx(t0).Get(1, []byte("loaded")); ok {
		t.Errorf("flushed db still holds loaded = %+v", v)
	}
}

// TestUsage: the key count and accounted memory follow inserts, growth,
// deletes, expiry and flushes back to zero.
func TestUsage(t *testing.T) {
	s := newStore(t)
	tx := s.Tx(t0)
	tx.Put(0, []byte("a"), StringValue(make([]byte, 100)), 0)
	tx.Put(1, []byte("bb"), IntValue(7), t0/ms+1)
	keys, mem := s.Usage()
	// Short names are in the slots; 100 bytes take 104 in the arena.
	if want := int64(2*EntryOverhead + 104); keys != 2 || mem != want {
		t.Fatalf("Usage = %d keys %d bytes, want 2 keys %d bytes", keys, mem, want)
	}
	tx.Put(0, []byte("a"), IntValue(1), 0)
	tx.Put(1, []byte("a name longer than 15"), IntValue(2), 0)
	if _, mem := s.Usage(); mem != 3*EntryOverhead+24 {
		t.Fatalf("with a long name: %d bytes", mem)
	}
	tx.Delete(1, []byte("a name longer than 15"))
	if _, mem := s.Usage(); mem != 2*EntryOverhead {
		t.Fatalf("after shrinking a: %d bytes", mem)
	}
	s.Tx(t0+2*ms).Get(1, []byte("bb"))
	tx.Flush(0)
	if keys, mem := s.Usage(); keys != 0 || mem != 0 {
		t.Fatalf("after expiry and flush: %d keys %d bytes", keys, mem)
	}
}

// TestEvict_MaxKeys: writes past MaxKeys evict so the count stays at the
// bound, and the evicted keys are reported to the journal.
func TestEvict_MaxKeys(t *testing.T) {
	s, err := New(Config{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	s.SetJournal(r)
	for i := range 5000 {
		s.Lock(&LockSet{idx: []int{s.ShardOf([]byte(fmt.Sprint(i)))}})
		s.Tx(t0).Put(0, []byte(fmt.Sprint(i)), IntValue(int64(i)), 0)
		s.Unlock(&LockSet{idx: []int{s.ShardOf([]byte(fmt.Sprint(i)))}})
		if keys, _ := s.Usage(); keys > 1000 {
			// A shard whose only key is the new one cannot evict locally;
			// the background evictor (Sweep) is then asked to.
			s.evictAll(t0)
			if keys, _ := s.Usage(); keys > 1000 {
				t.Fatalf("after %d writes: %d keys", i+1, keys)
			}
		}
	}
	dels := 0
	for _, l := range r.log {
		if l[:3] == "del" {
			dels++
		}
	}
	if got := s.EvictedKeys(); got != 4000 || dels != 4000 {
		t.Errorf("evicted %d keys, journal heard %d deletes; want 4000", got, dels)
	}
}

// TestEvict_Order: keys with an expiry go first, soonest first (a rate-limit
// key expires when it is back to full), then the least recently used.
func TestEvict_Order(t *testing.T) {
	s, err := New(Config{Shards: 1, MaxKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Tx(t0)
	tx.Put(0, []byte("old"), IntValue(1), 0)
	s.Tx(t0+5000*ms).Put(0, []byte("recent"), IntValue(1), 0)
	tx.Put(0, []byte("far"), IntValue(1), t0/ms+60_000)
	tx.Put(0, []byte("near"), IntValue(1), t0/ms+100)
	later := s.Tx(t0 + 10_000*ms)
	for i, want := range []string{"near", "far", "old", "recent"} {
		later.Put(0, []byte(fmt.Sprint("new", i)), IntValue(1), 0)
		if later.Exists(0, []byte(want)) {
			t.Fatalf("write %d: %q should have been evicted", i, want)
		}
	}
	if n := later.DBSize(0); n != 4 {
		t.Fatalf("DBSize = %d, want 4", n)
	}
}

// TestEvict_MaxMemory: the accounted memory stays under MaxMemory.
func TestEvict_MaxMemory(t *testing.T) {
	const bound = 1 << 20
	s, err := New(Config{Shards: 1, MaxMemory: bound})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20000 {
		s.Tx(t0).Put(0, []byte(fmt.Sprint("key", i)), StringValue(make([]byte, 64)), 0)
		if _, mem := s.Usage(); mem > bound {
			t.Fatalf("after %d writes: %d bytes", i+1, mem)
		}
	}
}

// TestExtend: a held set grows by blocking upward and trying downward, and
// Unlock releases everything it took.
func TestExtend(t *testing.T) {
	s, err := New(Config{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	keyOf := func(shard int) []byte {
		for i := 0; ; i++ {
			if k := []byte(fmt.Sprint(i)); s.ShardOf(k) == shard {
				return k
			}
		}
	}
	l := &LockSet{}
	l.Add(s, keyOf(2))
	s.Lock(l)
	if !s.Extend(l, keyOf(3)) || !s.Extend(l, keyOf(0)) || !s.Extend(l, keyOf(2)) {
		t.Fatal("Extend failed on free shards")
	}
	other := &LockSet{}
	other.Add(s, keyOf(1))
	s.Lock(other)
	if s.Extend(l, keyOf(1)) {
		t.Fatal("Extend took a lower shard another command holds")
	}
	if s.ExtendAll(l) {
		t.Fatal("ExtendAll succeeded while shard 1 is held")
	}
	s.Unlock(other)
	if !s.ExtendAll(l) {
		t.Fatal("ExtendAll failed on free shards")
	}
	s.Unlock(l)
	for i := range s.shards {
		if !s.shards[i].mu.TryLock() {
			t.Fatalf("shard %d still locked after Unlock", i)
		}
		s.shards[i].mu.Unlock()
	}
}

// TestRestore_NoEviction: keys restored past the bounds stay until the
// journal is set, and then the evictor is asked for a pass, so its
// evictions are journaled.
func TestRestore_NoEviction(t *testing.T) {
	s, err := New(Config{MaxKeys: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		s.Restore(0, []byte(fmt.Sprint(i)), IntValue(1), 0)
	}
	if keys, _ := s.Usage(); keys != 20 || s.EvictedKeys() != 0 {
		t.Fatalf("after Restore: %d keys, %d evicted; want 20 and 0", keys, s.EvictedKeys())
	}
	r := &recorder{}
	s.SetJournal(r)
	select {
	case <-s.evict:
	default:
		t.Fatal("SetJournal over the bounds did not wake the evictor")
	}
	s.evictAll(t0)
	if keys, _ := s.Usage(); keys != 10 || len(r.log) != 10 {
		t.Fatalf("after eviction: %d keys, journal heard %d changes; want 10 and 10", keys, len(r.log))
	}
}

// BenchmarkSampleExpire is one sweep (SampleExpire over every shard) of a
// store of 100,000 keys with an expiry, none of them due: the cost Redis'
// active expiry cycle adds ten times a second when nothing expires.
func BenchmarkSampleExpire(b *testing.B) {
	s := newStore(b)
	var ls LockSet
	ls.AddAll()
	s.Lock(&ls)
	tx := s.Tx(t0)
	for i := range 100_000 {
		tx.Put(0, fmt.Appendf(nil, "key:%d", i), Value{Kind: KindInt, Int: 1}, t0/ms+60_000)
	}
	s.Unlock(&ls)
	b.ReportAllocs()
	for b.Loop() {
		for i := range s.Shards() {
			s.SampleExpire(i, t0, 16)
		}
	}
}

// TestEvict_AllKeysLRU: under allkeys-lru an expiry does not matter: the
// least recently used key goes first.
func TestEvict_AllKeysLRU(t *testing.T) {
	s, err := New(Config{Shards: 1, MaxKeys: 3, EvictionPolicy: AllKeysLRU})
	if err != nil {
		t.Fatal(err)
	}
	s.Tx(t0).Put(0, []byte("old"), IntValue(1), 0)
	s.Tx(t0+5000*ms).Put(0, []byte("recent"), IntValue(1), t0/ms+60_000)
	s.Tx(t0+6000*ms).Put(0, []byte("newest"), IntValue(1), t0/ms+100_000)
	later := s.Tx(t0 + 10_000*ms)
	for i, want := range []string{"old", "recent", "newest"} {
		later.Put(0, []byte(fmt.Sprint("new", i)), IntValue(1), 0)
		if later.Exists(0, []byte(want)) {
			t.Fatalf("write %d: %q should have been evicted", i, want)
		}
	}
}

// TestEvict_NoEviction: under noeviction writes go past the bounds, nothing
// is evicted (not even by the background evictor) and OutOfMemory says so;
// another policy set afterwards evicts back under the bounds.
func TestEvict_NoEviction(t *testing.T) {
	s, err := New(Config{Shards: 4, MaxKeys: 10, EvictionPolicy: NoEviction})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		s.Tx(t0).Put(0, []byte(fmt.Sprint(i)), IntValue(1), 0)
	}
	if s.OutOfMemory() {
		t.Fatal("OutOfMemory at the bound, want only past it")
	}
	s.Tx(t0).Put(0, []byte("10"), IntValue(1), 0)
	s.evictAll(t0)
	if keys, _ := s.Usage(); keys != 11 || s.EvictedKeys() != 0 || !s.OutOfMemory() {
		t.Fatalf("past the bound: %d keys, %d evicted, OutOfMemory %v; want 11, 0, true", keys, s.EvictedKeys(), s.OutOfMemory())
	}
	select {
	case <-s.evict:
		t.Fatal("the background evictor was woken under noeviction")
	default:
	}
	s.SetEvictionPolicy(VolatileTTL)
	if s.OutOfMemory() || s.EvictionPolicy().String() != "volatile-ttl" {
		t.Fatalf("after SetEvictionPolicy(VolatileTTL): OutOfMemory %v, policy %s", s.OutOfMemory(), s.EvictionPolicy())
	}
	<-s.evict
	s.evictAll(t0)
	if keys, _ := s.Usage(); keys != 10 {
		t.Fatalf("after the evictor's pass: %d keys, want 10", keys)
	}
}

// TestEvictionPolicy_Set: the Redis names, in any case; the others are refused
// with the names in the text.
func TestEvictionPolicy_Set(t *testing.T) {
	for _, name := range policyNames {
		var p EvictionPolicy
		if err := p.Set(strings.ToUpper(name)); err != nil || p.String() != name {
			t.Errorf("Set(%q): %v, %v", name, p, err)
		}
	}
	for _, name := range []string{"allkeys-lfu", "volatile-lru", ""} {
		p := NoEviction
		err := p.Set(name)
		if err == nil || p != NoEviction || err.Error() != "argument(s) must be one of the following: volatile-ttl, allkeys-lru, noeviction" {
			t.Errorf("Set(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := New(Config{EvictionPolicy: EvictionPolicy(9)}); err == nil {
		t.Error("New accepted an unknown policy")
	}
}

// TestEvict_NeverSystem: eviction never takes a key of the system
// database, however full the store, and flushes of the clients' databases
// (FLUSHALL) leave it; the watch hears its writes and removal.
func TestEvict_NeverSystem(t *testing.T) {
	s, err := New(Config{Shards: 1, MaxKeys: 6})
	if err != nil {
		t.Fatal(err)
	}
	var heard []string
	s.SetSystemWatch(func(key []byte, v Value, present bool) {
		heard = append(heard, fmt.Sprintf("%s=%s,%v", key, v.Bytes, present))
	})
	all := &LockSet{}
	all.AddAll()
	write := func(fn func(tx Tx)) {
		s.Lock(all)
		defer s.Unlock(all)
		fn(s.Tx(t0))
	}
	write(func(tx Tx) {
		for i := range 5 {
			// With an expiry, which eviction would take first (a mesh
			// keeps a deleted policy's tombstone so).
			tx.Put(s.SystemDB(), []byte(fmt.Sprint("p", i)), Value{Kind: KindString, Bytes: []byte("x")}, t0/1e6+1e6)
		}
	})
	for i := range 100 {
		write(func(tx Tx) { tx.Put(0, []byte(fmt.Sprint(i)), IntValue(int64(i)), 0) })
		s.evictAll(t0)
	}
	write(func(tx Tx) {
		if got := tx.DBSize(s.SystemDB()); got != 5 {
			t.Errorf("system database holds %d keys after the flood, want 5", got)
		}
		if keys, _ := s.Usage(); keys > 6 {
			t.Errorf("%d keys, over MaxKeys 6", keys)
		}
		for db := range s.Databases() {
			tx.Flush(db)
		}
		if got := tx.DBSize(s.SystemDB()); got != 5 {
			t.Errorf("system database holds %d keys after FLUSHALL's flushes, want 5", got)
		}
		tx.Delete(s.SystemDB(), []byte("p0"))
	})
	if len(heard) != 6 || heard[0] != "p0=x,true" || heard[5] != "p0=,false" {
		t.Errorf("the watch heard %q", heard)
	}
}

// BenchmarkFillPause writes ten million CL.THROTTLE-like keys (an integer
// and an expiry, 15-byte names) into a store with the default shards, one
// Put at a time under its shard's lock as a command would, and reports the
// slowest Puts: a table's growth (new arrays, and the old ones' keys moved
// a few at a time) must never stall a command for long. `-benchtime 1x`.
func BenchmarkFillPause(b *testing.B) {
	const n = 10_000_000
	for b.Loop() {
		s, err := New(DefaultConfig())
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, n)
		key := []byte("rl:user:0000000")
		for i := range n {
			key = fmt.Appendf(key[:8], "%07d", i)
			var ls LockSet
			ls.Add(s, key)
			start := time.Now()
			s.Lock(&ls)
			s.Tx(t0).Put(0, key, IntValue(t0+int64(i)), t0/ms+3_600_000)
			s.Unlock(&ls)
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[n-1].Microseconds()), "worst-µs")
		b.ReportMetric(float64(lat[n-n/100_000].Microseconds()), "p99.999-µs")
		b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
	}
}

// TestReleased: the arrays a rehash leaves, once the sweeper's steps have
// moved every key out of them, count as released: garbage the server's
// idle release must hear of, since no allocation follows it.
func TestReleased(t *testing.T) {
	s, err := New(Config{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Tx(t0)
	tab := func() int64 { return s.shards[0].dbs[0].Memory() }
	tx.Put(0, []byte("k"), IntValue(1), 0)
	// Write until a rehash starts and the last write leaves it unfinished.
	for i := 0; ; i++ {
		before := tab()
		tx.Put(0, []byte(fmt.Sprint("k", i)), IntValue(1), 0)
		if i > 100 && tab() > before {
			break
		}
	}
	during := tab()
	for s.stepTables(0, t0) {
	}
	if got, want := s.Released(), during-tab(); want <= 0 || got != want {
		t.Fatalf("Released = %d, want %d (tables %d -> %d bytes)", got, want, during, tab())
	}
}
