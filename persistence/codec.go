package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/throttleddb/throttled/persistence/internal/pebbledir"
	"github.com/throttleddb/throttled/store"
)

// Key prefixes. The first byte of every Pebble key says what the key is, so
// metadata can never collide with a user key whatever bytes the user chose.
const (
	prefixMeta byte = 0x00 // our own bookkeeping (formatKey)
	prefixData byte = 0x01 // the saved copy: [prefixData][db uint16 BE][user key]
)

// formatVersion is the layout of the whole folder (key and value encodings
// below). It is stored under formatKey when the folder is created; a folder
// stamped with a version this build does not know is refused rather than
// misread. Version 1 had no log (a saved copy only); it reads as a version 2
// folder with an empty log, and is stamped 2 when opened for writing, so
// that a build that knows only version 1 never misses the log.
const (
	formatVersion   byte = 2
	formatVersionV1 byte = 1
)

// valueVersion is the first byte of every stored value, so one value layout
// can be replaced later without rewriting every key at once.
const valueVersion byte = 1

// formatKey holds formatVersion.
var formatKey = []byte{prefixMeta, 'f', 'o', 'r', 'm', 'a', 't'}

// folderFormat is how Open tells a keyspace folder (see pebbledir).
var folderFormat = pebbledir.Format{
	Key:   formatKey,
	Reads: []byte{formatVersion, formatVersionV1},
	Name:  "a throttled keyspace",
}

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

// appendKey appends the Pebble data key of (db, key) to dst.
func appendKey[K string | []byte](dst []byte, db int, key K) []byte {
	dst = append(dst, prefixData, byte(db>>8), byte(db))
	return append(dst, key...)
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

// appendValue appends the stored form of v to dst.
func appendValue(dst []byte, v store.Value, expireMs int64) []byte {
	dst = append(dst, valueVersion, byte(v.Kind))
	dst = binary.BigEndian.AppendUint64(dst, uint64(expireMs))
	if v.Kind == store.KindInt {
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int))
	}
	return append(dst, v.Bytes...)
}

// A log record is a sequence of changes, each
//
//	[op][uvarint length][Pebble data key]            for opDelete and opFlush
//	[op][uvarint length][Pebble data key][uvarint length][value]   for opSet
//
// with the key and value encodings of the saved copy; opFlush's key has no
// user key, only the database. Every change carries the key's whole value,
// so replaying a change is the same whatever came before it.
const (
	opSet    byte = 's'
	opDelete byte = 'd'
	opFlush  byte = 'f'
)

func appendSet(dst []byte, db int, key []byte, v store.Value, expireMs int64) []byte {
	dst = append(dst, opSet)
	dst = binary.AppendUvarint(dst, uint64(keyHeader+len(key)))
	dst = appendKey(dst, db, key)
	dst = binary.AppendUvarint(dst, uint64(valueLen(v)))
	return appendValue(dst, v, expireMs)
}

func appendDelete(dst []byte, db int, key []byte) []byte {
	dst = append(dst, opDelete)
	dst = binary.AppendUvarint(dst, uint64(keyHeader+len(key)))
	return appendKey(dst, db, key)
}

func appendFlush(dst []byte, db int) []byte {
	dst = append(dst, opFlush, keyHeader)
	return appendKey(dst, db, "")
}

// change is one decoded change of a log record; key and v.Bytes alias the
// record.
type change struct {
	op       byte
	db       int
	key      []byte
	v        store.Value
	expireMs int64
}

// nextChange decodes the change at the start of rec and returns the rest.
func nextChange(rec []byte) (c change, rest []byte, err error) {
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(rec)
		if w <= 0 || n > uint64(len(rec)-w) {
			return nil, false
		}
		f := rec[w : w+int(n)]
		rec = rec[w+int(n):]
		return f, true
	}
	c.op, rec = rec[0], rec[1:]
	k, ok := field()
	if !ok {
		return c, nil, fmt.Errorf("%w: truncated change", errBadRecord)
	}
	if c.db, c.key, err = decodeKey(k); err != nil {
		return c, nil, err
	}
	switch c.op {
	case opDelete:
	case opFlush:
		if len(c.key) != 0 {
			return c, nil, fmt.Errorf("%w: a flush of db %d names key %q", errBadRecord, c.db, c.key)
		}
	case opSet:
		raw, ok := field()
		if !ok {
			return c, nil, fmt.Errorf("%w: truncated value", errBadRecord)
		}
		if c.v, c.expireMs, err = decodeValue(raw); err != nil {
			return c, nil, err
		}
	default:
		return c, nil, fmt.Errorf("%w: unknown change %q", errBadRecord, c.op)
	}
	return c, rec, nil
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
