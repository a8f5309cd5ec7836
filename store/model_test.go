package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// fwcState is the state FWC's engine writes for count units (> 0)
// counted at newest.
func fwcState(newest, count int64) []byte {
	l, err := engines.NewFWC(math.MaxInt64, 1e9)
	if err != nil {
		panic(err)
	}
	state, _, err := l.Commit(nil, newest, count)
	if err != nil {
		panic(err)
	}
	return state
}

// bucketState is the state a TB or LB engine (capacity 10, 7 per period)
// writes for tokens taken one at a time a nanosecond apart from full, cut
// the first, and the instant it is full again. One token leaves a debt of
// whole tokens, which packs; more leave one drained in part, which does not.
func bucketState(k engines.Kind, cut, tokens, period int64) ([]byte, int64) {
	newBucket := engines.NewTB
	if k == engines.LB {
		newBucket = engines.NewLB
	}
	l, err := newBucket(10, 7, period)
	if err != nil {
		panic(err)
	}
	var state []byte
	var fullAt int64
	for i := range tokens {
		if state, fullAt, err = l.Commit(state, cut+i, 1); err != nil {
			panic(err)
		}
	}
	return state, fullAt
}

// modelKey is what the model holds for a key.
type modelKey struct {
	v   string // vtext of the value, with expiry 0
	exp int64
}

// TestModel_Keyspace drives the store with random writes, deletes, expiry
// changes, sweeps and a clock that moves, against a map, seeded so a
// failure replays: every read agrees with the map, and a SCAN done in
// pieces between the changes returns every key present all along (SCAN's
// guarantee), through the tables' growth, shrinking and rehashes. With a
// MaxKeys bound the store may hold fewer keys (evicted), never more, and
// those it holds agree with the map.
func TestModel_Keyspace(t *testing.T) {
	for seed := range uint64(4) {
		for _, bound := range []int64{0, 300} {
			t.Run(fmt.Sprint("seed", seed, "maxkeys", bound), func(t *testing.T) {
				runKeyspaceModel(t, seed, bound)
			})
		}
	}
}

func runKeyspaceModel(t *testing.T, seed uint64, maxKeys int64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	s, err := New(Config{Databases: 2, Shards: 4, MaxKeys: maxKeys})
	if err != nil {
		t.Fatal(err)
	}
	m := map[dbKey]modelKey{}
	now := t0
	// A SCAN of db 0 in progress: the keys present since it began (and
	// still), and those it has returned.
	var cursor uint64
	scanning := false
	steady, returned := map[string]bool{}, map[string]bool{}
	live := func(k dbKey) (modelKey, bool) {
		mk, ok := m[k]
		return mk, ok && !Expired(mk.exp, now/ms)
	}
	packedBuckets := 0
	for step := range 12000 {
		now += int64(rng.IntN(3)) * ms
		tx := s.Tx(now)
		db := rng.IntN(2)
		name := fmt.Sprint("key:", rng.IntN(1500))
		if rng.IntN(10) == 0 {
			name = fmt.Sprint("a longer name than fifteen bytes:", rng.IntN(100))
		}
		k := dbKey{db, name}
		exp := int64(0)
		if rng.IntN(2) == 0 {
			exp = now/ms + int64(rng.IntN(2000))
		}
		changed := true
		switch n := rng.IntN(100); {
		case n < 40:
			var v Value
			switch rng.IntN(5) {
			case 0:
				v = IntValue(rng.Int64())
			case 1:
				v = Value{Kind: KindTB, Bytes: []byte(fmt.Sprint("state", rng.IntN(1e6)))}
			case 2: // packed in its slot when it fits (packed.go)
				v = Value{Kind: KindFWC, Bytes: fwcState(now-rng.Int64N(1<<rng.IntN(62)), 1+rng.Int64N(1<<rng.IntN(40)))}
			case 3: // packed when its debt is whole tokens and the expiry is its own
				k := []engines.Kind{engines.TB, engines.LB}[rng.IntN(2)]
				b, fullAt := bucketState(k, now-rng.Int64N(2000*ms), 1+rng.Int64N(2), ms*(1+rng.Int64N(1000)))
				v = Value{Kind: map[engines.Kind]Kind{engines.TB: KindTB, engines.LB: KindLB}[k], Bytes: b}
				if exp != 0 && rng.IntN(2) == 0 {
					exp = ExpiryAt(fullAt)
				}
				if _, ok := pack(v, exp); ok {
					packedBuckets++
				}
			default:
				v = str(fmt.Sprint("v", rng.IntN(1e9)))
			}
			tx.Put(db, []byte(name), v, exp)
			m[k] = modelKey{vtext(v, 0), exp}
		case n < 55:
			tx.Delete(db, []byte(name))
			delete(m, k)
		case n < 65:
			if _, ok := live(k); ok && tx.SetExpire(db, []byte(name), exp) {
				mk := m[k]
				mk.exp = exp
				m[k] = mk
			}
		case n < 70:
			s.SampleExpire(rng.IntN(s.Shards()), now, 4)
			changed = false
		case n < 75:
			s.stepTables(rng.IntN(s.Shards()), now)
			changed = false
		default:
			changed = false
			v, ok := tx.Get(db, []byte(name))
			mk, want := live(k)
			switch {
			case ok && !want:
				t.Fatalf("step %d: %v holds %s, model has none", step, k, vtext(v, 0))
			case !ok && want && maxKeys == 0:
				t.Fatalf("step %d: %v missing, model has %s", step, k, mk.v)
			case ok && vtext(v, 0) != mk.v:
				t.Fatalf("step %d: %v holds %s, model %s", step, k, vtext(v, 0), mk.v)
			}
		}
		if changed && db == 0 {
			delete(steady, name) // changed during the scan: no promise
		}
		if maxKeys > 0 {
			if keys, _ := s.Usage(); keys > maxKeys {
				t.Fatalf("step %d: %d keys over MaxKeys %d", step, keys, maxKeys)
			}
		}
		// Drive the SCAN of db 0 a few keys at a time.
		if !scanning {
			scanning, cursor = true, 0
			clear(steady)
			clear(returned)
			for k := range m {
				if _, ok := live(k); ok && k.db == 0 {
					steady[k.key] = true
				}
			}
		}
		cursor = tx.Scan(0, cursor, 1+rng.IntN(20), func(key string, _ Value) { returned[key] = true })
		if cursor == 0 {
			scanning = false
			for k := range steady {
				if _, ok := live(dbKey{0, k}); ok && !returned[k] && maxKeys == 0 {
					t.Fatalf("step %d: SCAN missed %q, present all along", step, k)
				}
			}
		}
	}
	if maxKeys > 0 {
		return
	}
	// At the end the store holds exactly the model's live keys.
	tx := s.Tx(now)
	for db := range 2 {
		n := 0
		tx.ForEach(db, func(key string, v Value, expireMs int64) bool {
			n++
			mk, ok := live(dbKey{db, key})
			if !ok || mk.v != vtext(v, 0) || mk.exp != expireMs {
				t.Errorf("db %d key %q = %s exp %d, model %+v (present %v)", db, key, vtext(v, 0), expireMs, mk, ok)
			}
			return true
		})
		want := 0
		for k := range m {
			if _, ok := live(k); ok && k.db == db {
				want++
			}
		}
		if n != want {
			t.Errorf("db %d: ForEach saw %d keys, model has %d", db, n, want)
		}
	}
	// The memory count went up and down by the same costs, however each
	// value was held (a packed state moves to the arena and back as its
	// expiry changes): with every key deleted, one at a time, it is zero.
	for k := range m {
		tx.Delete(k.db, []byte(k.key))
	}
	if packedBuckets < 100 {
		t.Errorf("only %d bucket states packed", packedBuckets)
	}
	if keys, mem := s.Usage(); keys != 0 || mem != 0 {
		t.Errorf("every key deleted: Usage = %d keys, %d bytes", keys, mem)
	}
}
