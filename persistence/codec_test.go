package persistence

import (
	"bytes"
	"testing"

	"github.com/throttleddb/throttled/store"
)

func encodeKey(db int, key []byte) []byte {
	k := make([]byte, keyLen(key))
	putKey(k, db, key)
	return k
}

// TestDBBounds: a database's range holds every key of it, and no key of its
// neighbours or metadata, up to the last database.
func TestDBBounds(t *testing.T) {
	for _, db := range []int{0, 1, 255, 256, 65534, 65535} {
		start, end := dbBounds(db)
		in := func(k []byte) bool { return bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0 }
		for _, key := range [][]byte{{}, {0}, []byte("k"), bytes.Repeat([]byte{0xff}, 100)} {
			if k := encodeKey(db, key); !in(k) {
				t.Errorf("db %d: key %q (%x) outside [%x, %x)", db, key, k, start, end)
			}
			if db > 0 && in(encodeKey(db-1, key)) {
				t.Errorf("db %d: key %q of db %d inside its range", db, key, db-1)
			}
			if db < 65535 && in(encodeKey(db+1, key)) {
				t.Errorf("db %d: key %q of db %d inside its range", db, key, db+1)
			}
		}
		if in(formatKey) {
			t.Errorf("db %d: the format key is inside its range", db)
		}
		if bytes.Compare(start, dataStart) < 0 || bytes.Compare(end, dataEnd) > 0 {
			t.Errorf("db %d: [%x, %x) is not within the data range", db, start, end)
		}
	}
}

func TestDecodeKey(t *testing.T) {
	db, key, err := decodeKey(encodeKey(65535, []byte("k\x00")))
	if err != nil || db != 65535 || string(key) != "k\x00" {
		t.Errorf("decodeKey = %d, %q, %v; want 65535, \"k\\x00\", nil", db, key, err)
	}
	for _, bad := range [][]byte{nil, {prefixData, 0}, formatKey} {
		if _, _, err := decodeKey(bad); err == nil {
			t.Errorf("decodeKey(%x) succeeded", bad)
		}
	}
}

// FuzzDecodeValue: decoding never panics, and whatever decodes encodes back
// to the same bytes.
func FuzzDecodeValue(f *testing.F) {
	for _, v := range []store.Value{
		store.IntValue(-1),
		{Kind: store.KindString, Bytes: []byte("hello")},
		{Kind: kindEngine, Bytes: []byte{1, 2, 3}},
	} {
		b := make([]byte, valueLen(v))
		putValue(b, v, 1234)
		f.Add(b)
	}
	f.Add([]byte{valueVersion, byte(store.KindInt), 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, exp, err := decodeValue(b)
		if err != nil {
			return
		}
		again := make([]byte, valueLen(v))
		putValue(again, v, exp)
		if !bytes.Equal(again, b) {
			t.Errorf("%x decodes to %+v exp %d, which encodes to %x", b, v, exp, again)
		}
	})
}
