package store

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// item is one key of a test dataset.
type item struct {
	db       int
	key      string
	v        Value
	expireMs int64
}

// digestItems is a dataset with every kind of value, in three databases,
// with and without expiry.
func digestItems() []item {
	kinds := []Kind{KindFWC, KindSWL, KindSWC, KindTB, KindLB}
	var items []item
	for i := range 300 {
		it := item{db: i % 3, key: fmt.Sprintf("key:%d", i)}
		switch i % 4 {
		case 0:
			it.v = IntValue(int64(i) - 150)
		case 1:
			it.v = StringValue(fmt.Appendf(nil, "value %d", i))
		case 2:
			it.v = Value{Kind: kinds[i%len(kinds)], Bytes: fmt.Appendf(nil, "\x01state%d", i)}
		case 3:
			it.v = StringValue(nil)
		}
		if i%5 == 0 {
			it.expireMs = t0/ms + int64(i)
		}
		items = append(items, it)
	}
	return items
}

// fill returns a store with shards shards holding items, put in their order.
func fill(t *testing.T, shards int, items []item) *Store {
	t.Helper()
	s, err := New(Config{Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Tx(t0)
	for _, it := range items {
		// A copy: the store takes the bytes it is given.
		v := it.v
		v.Bytes = slices.Clone(v.Bytes)
		tx.Put(it.db, []byte(it.key), v, it.expireMs)
	}
	return s
}

func TestDigest_Empty(t *testing.T) {
	var zero [sha1.Size]byte
	if got := newStore(t).Tx(t0).Digest(nil); got != zero {
		t.Fatalf("empty store: got %x, want zeros", got)
	}
	s := fill(t, 4, []item{{db: 1, key: "k", v: IntValue(1), expireMs: t0/ms + 1}})
	if got := s.Tx(t0 + 2*ms).Digest(nil); got != zero {
		t.Fatalf("only an expired key: got %x, want zeros", got)
	}
}

// TestDigest_Encoding pins the documented encoding: a replica running
// another build must compute the same digest for the same data.
func TestDigest_Encoding(t *testing.T) {
	exp := t0/ms + 1234
	s := fill(t, 4, []item{{db: 2, key: "k", v: IntValue(12), expireMs: exp}})
	var in []byte
	in = binary.BigEndian.AppendUint64(in, 2)
	in = binary.BigEndian.AppendUint64(in, uint64(exp))
	in = binary.BigEndian.AppendUint64(in, 1)
	in = append(in, "k"+"string\x00"+"12"...)
	if got, want := s.Tx(t0).Digest(nil), sha1.Sum(in); got != want {
		t.Errorf("Digest: got %x, want %x", got, want)
	}
	if got, want := s.Tx(t0).DigestValue(2, []byte("k")), sha1.Sum([]byte("string\x0012")); got != want {
		t.Errorf("DigestValue: got %x, want %x", got, want)
	}
}

// TestDigest_SameData: the digest depends on the data only, not on the
// order it was written in, the shard count or the store's hash seed.
func TestDigest_SameData(t *testing.T) {
	items := digestItems()
	want := fill(t, 256, items).Tx(t0).Digest(nil)
	reversed := slices.Clone(items)
	slices.Reverse(reversed)
	shuffled := slices.Clone(items)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, tc := range []struct {
		name   string
		shards int
		items  []item
	}{
		{"same order, new seed", 256, items},
		{"reversed", 256, reversed},
		{"shuffled, one shard", 1, shuffled},
		{"shuffled, 16 shards", 16, shuffled},
	} {
		if got := fill(t, tc.shards, tc.items).Tx(t0).Digest(nil); got != want {
			t.Errorf("%s: got %x, want %x", tc.name, got, want)
		}
	}
}

// TestDigest_IntAsString: a string held as an int64 digests as its decimal
// text held as bytes; which one a replica holds can depend on its history.
func TestDigest_IntAsString(t *testing.T) {
	for _, n := range []int64{0, 12, -7, 1<<63 - 1, -1 << 63} {
		text := fmt.Appendf(nil, "%d", n)
		asInt := fill(t, 4, []item{{key: "a", v: IntValue(n), expireMs: t0/ms + 5}})
		asBytes := fill(t, 4, []item{{key: "a", v: Value{Kind: KindString, Bytes: text}, expireMs: t0/ms + 5}})
		if a, b := asInt.Tx(t0).Digest(nil), asBytes.Tx(t0).Digest(nil); a != b {
			t.Errorf("%d: Digest as int %x, as bytes %x", n, a, b)
		}
		if a, b := asInt.Tx(t0).DigestValue(0, []byte("a")), asBytes.Tx(t0).DigestValue(0, []byte("a")); a != b {
			t.Errorf("%d: DigestValue as int %x, as bytes %x", n, a, b)
		}
	}
}

// TestDigest_AnyChange: changing one key's value, kind, name, database or
// expiry, swapping two values, or adding or removing a key changes the
// digest.
func TestDigest_AnyChange(t *testing.T) {
	base := digestItems()
	want := fill(t, 16, base).Tx(t0).Digest(nil)
	// base[0] is an int, base[1] a string, base[2] an engine state, base[5]
	// has an expiry and base[1] none.
	for _, tc := range []struct {
		name   string
		change func(items []item) []item
	}{
		{"int value", func(it []item) []item { it[0].v = IntValue(it[0].v.Int + 1); return it }},
		{"int as other text", func(it []item) []item {
			it[0].v = Value{Kind: KindString, Bytes: fmt.Appendf(nil, "0%d", it[0].v.Int)}
			return it
		}},
		{"string byte", func(it []item) []item { it[1].v.Bytes = []byte("value 2"); return it }},
		{"engine state byte", func(it []item) []item { it[2].v.Bytes = []byte("\x01state3"); return it }},
		{"engine kind", func(it []item) []item { it[2].v.Kind = KindTB; return it }},
		{"engine state as string", func(it []item) []item { it[2].v.Kind = KindString; return it }},
		{"key", func(it []item) []item { it[1].key += "x"; return it }},
		{"db", func(it []item) []item { it[1].db = 15; return it }},
		{"expiry changed", func(it []item) []item { it[5].expireMs++; return it }},
		{"expiry removed", func(it []item) []item { it[5].expireMs = 0; return it }},
		{"expiry added", func(it []item) []item { it[1].expireMs = t0/ms + 1000; return it }},
		{"values swapped", func(it []item) []item { it[1].v, it[3].v = it[3].v, it[1].v; return it }},
		{"key removed", func(it []item) []item { return it[1:] }},
		{"key added", func(it []item) []item { return append(it, item{db: 0, key: "new", v: StringValue(nil)}) }},
	} {
		if got := fill(t, 16, tc.change(slices.Clone(base))).Tx(t0).Digest(nil); got == want {
			t.Errorf("%s: digest unchanged (%x)", tc.name, got)
		}
	}
}

// TestDigest_Expired: a key counts through its expiry millisecond and not
// after, whether or not it has been removed; computing a digest removes
// nothing.
func TestDigest_Expired(t *testing.T) {
	base := fill(t, 16, digestItems())
	s := fill(t, 16, append(digestItems(), item{db: 0, key: "dying", v: IntValue(1), expireMs: t0/ms + 1000}))
	if s.Tx(t0+1000*ms).Digest(nil) == base.Tx(t0+1000*ms).Digest(nil) {
		t.Error("a key at its expiry millisecond is not part of the digest")
	}
	// The keys of digestItems that expire are gone by then in both.
	want := base.Tx(t0 + 1001*ms).Digest(nil)
	before := s.Tx(t0).DBSize(0)
	if got := s.Tx(t0 + 1001*ms).Digest(nil); got != want {
		t.Errorf("with an expired key: got %x, want %x", got, want)
	}
	if after := s.Tx(t0).DBSize(0); after != before {
		t.Errorf("Digest removed keys: DBSize %d, was %d", after, before)
	}
}

func TestDigestValue(t *testing.T) {
	s := fill(t, 16, []item{
		{db: 0, key: "a", v: StringValue([]byte("v"))},
		{db: 3, key: "b", v: StringValue([]byte("v")), expireMs: t0/ms + 10},
		{db: 0, key: "fwc", v: Value{Kind: KindFWC, Bytes: []byte("v")}},
	})
	tx := s.Tx(t0)
	var zero [sha1.Size]byte
	a := tx.DigestValue(0, []byte("a"))
	if a == zero {
		t.Fatal("a: all zeros")
	}
	if b := tx.DigestValue(3, []byte("b")); b != a {
		t.Errorf("same value under another key, db and expiry: got %x, want %x", b, a)
	}
	if f := tx.DigestValue(0, []byte("fwc")); f == a {
		t.Error("an engine state digests as a string with the same bytes")
	}
	if got := tx.DigestValue(0, []byte("b")); got != zero {
		t.Errorf("missing key: got %x, want zeros", got)
	}
	if got := s.Tx(t0+11*ms).DigestValue(3, []byte("b")); got != zero {
		t.Errorf("expired key: got %x, want zeros", got)
	}
	if s.Tx(t0).DBSize(3) != 1 {
		t.Error("DigestValue removed the expired key")
	}
}
