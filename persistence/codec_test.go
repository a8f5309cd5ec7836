package persistence

import (
	"bytes"
	"testing"

	"github.com/throttleddb/throttled/store"
)

func encodeKey(db int, key []byte) []byte { return appendKey(nil, db, key) }

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
		f.Add(appendValue(nil, v, 1234))
	}
	f.Add([]byte{valueVersion, byte(store.KindInt), 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, exp, err := decodeValue(b)
		if err != nil {
			return
		}
		again := appendValue(nil, v, exp)
		if len(again) != valueLen(v) || !bytes.Equal(again, b) {
			t.Errorf("%x decodes to %+v exp %d, which encodes to %x", b, v, exp, again)
		}
	})
}

// FuzzLogRecord: decoding a log record never panics, and every change that
// decodes encodes to bytes that decode to the same change.
func FuzzLogRecord(f *testing.F) {
	var rec []byte
	rec = appendSet(rec, 0, []byte("k"), store.IntValue(-5), 0)
	rec = appendSet(rec, 65535, []byte{}, store.Value{Kind: kindEngine, Bytes: []byte{1, 2}}, 99)
	rec = appendDelete(rec, 3, []byte("gone\x00"))
	rec = appendFlush(rec, 7)
	f.Add(rec)
	f.Add([]byte{opSet, 200})
	f.Fuzz(func(t *testing.T, rec []byte) {
		for len(rec) > 0 {
			c, rest, err := nextChange(rec)
			if err != nil {
				return
			}
			var again []byte
			switch c.op {
			case opSet:
				again = appendSet(nil, c.db, c.key, c.v, c.expireMs)
			case opDelete:
				again = appendDelete(nil, c.db, c.key)
			case opFlush:
				again = appendFlush(nil, c.db)
			}
			c2, rest2, err := nextChange(again)
			if err != nil || len(rest2) != 0 || c2.op != c.op || c2.db != c.db || !bytes.Equal(c2.key, c.key) ||
				c2.v.Kind != c.v.Kind || c2.v.Int != c.v.Int || !bytes.Equal(c2.v.Bytes, c.v.Bytes) || c2.expireMs != c.expireMs {
				t.Fatalf("%x decodes to %+v, which encodes to %x, which decodes to %+v (%v)", rec[:len(rec)-len(rest)], c, again, c2, err)
			}
			rec = rest
		}
	})
}
