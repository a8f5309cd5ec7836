package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/throttleddb/throttled/store"
)

// Key prefixes. The first byte of every Pebble key says what the key is, so
// metadata can never collide with a user key whatever bytes the user chose.
const (
	prefixMeta byte = 0x00 // our own bookkeeping (formatKey)
	prefixData byte = 0x01 // [prefixData][db uint16 BE][user key]
)

// formatVersion is the layout of the whole folder (key and value encodings
// below). It is stored under formatKey when the folder is created; a folder
// stamped with another version is refused rather than misread.
const formatVersion byte = 1

// valueVersion is the first byte of every stored value, so one value layout
// can be replaced later without rewriting every key at once.
const valueVersion byte = 1

// formatKey holds formatVersion.
var formatKey = []byte{prefixMeta, 'f', 'o', 'r', 'm', 'a', 't'}

// dataStart and dataEnd bound every data key: [dataStart, dataEnd).
var (
	dataStart = []byte{prefixData}
	dataEnd   = []byte{prefixData + 1}
)

const (
	keyHeader   = 1 + 2     // prefix, db
	valueHeader = 1 + 1 + 8 // version, kind, expireMs
	intPayload  = 8
)

// errBadRecord marks a key or value this build cannot decode.
var errBadRecord = errors.New("bad record")

func keyLen(key []byte) int { return keyHeader + len(key) }

// putKey writes the Pebble key of (db, key) into dst, which is keyLen(key)
// long.
func putKey(dst []byte, db int, key []byte) {
	dst[0] = prefixData
	binary.BigEndian.PutUint16(dst[1:3], uint16(db))
	copy(dst[keyHeader:], key)
}

// dbBounds returns the range [start, end) holding every key of db. The end
// of the last database is the end of the data range.
func dbBounds(db int) (start, end []byte) {
	start = []byte{prefixData, byte(db >> 8), byte(db)}
	if db == 1<<16-1 {
		return start, dataEnd
	}
	return start, []byte{prefixData, byte((db + 1) >> 8), byte(db + 1)}
}

// decodeKey splits a Pebble data key into db and user key (aliasing k).
func decodeKey(k []byte) (db int, key []byte, err error) {
	if len(k) < keyHeader || k[0] != prefixData {
		return 0, nil, fmt.Errorf("%w: key %q is not a data key", errBadRecord, k)
	}
	return int(binary.BigEndian.Uint16(k[1:3])), k[keyHeader:], nil
}

func valueLen(v store.Value) int {
	if v.Kind == store.KindInt {
		return valueHeader + intPayload
	}
	return valueHeader + len(v.Bytes)
}

// putValue writes the stored form of v into dst, which is valueLen(v) long.
func putValue(dst []byte, v store.Value, expireMs int64) {
	dst[0] = valueVersion
	dst[1] = byte(v.Kind)
	binary.BigEndian.PutUint64(dst[2:10], uint64(expireMs))
	if v.Kind == store.KindInt {
		binary.BigEndian.PutUint64(dst[valueHeader:], uint64(v.Int))
		return
	}
	copy(dst[valueHeader:], v.Bytes)
}

// decodeValue reads a stored value. v.Bytes aliases b.
func decodeValue(b []byte) (v store.Value, expireMs int64, err error) {
	if len(b) < valueHeader {
		return v, 0, fmt.Errorf("%w: value of %d bytes is shorter than its header", errBadRecord, len(b))
	}
	if b[0] != valueVersion {
		return v, 0, fmt.Errorf("%w: value version %d, this build reads %d", errBadRecord, b[0], valueVersion)
	}
	v.Kind = store.Kind(b[1])
	expireMs = int64(binary.BigEndian.Uint64(b[2:10]))
	payload := b[valueHeader:]
	if v.Kind == store.KindInt {
		if len(payload) != intPayload {
			return v, 0, fmt.Errorf("%w: integer value of %d bytes", errBadRecord, len(payload))
		}
		v.Int = int64(binary.BigEndian.Uint64(payload))
		return v, expireMs, nil
	}
	v.Bytes = payload
	return v, expireMs, nil
}
