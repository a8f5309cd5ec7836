package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/persistence/internal/pebbledir"
)

// Key prefixes. The first byte of every key says what it is; see the
// package doc for the layout.
const (
	prefixMeta   byte = 0x00 // our own bookkeeping (formatKey)
	prefixLog    byte = 0x01 // [prefixLog][index uint64 big-endian]
	prefixStable byte = 0x02 // [prefixStable][raft's key]
)

// formatVersion is the layout of the whole folder (keys and values). It
// is stored under formatKey when the folder is created; a folder stamped
// with a version this build does not know is refused rather than misread.
const formatVersion byte = 1

// formatKey holds formatVersion. It differs from the keyspace folder's
// ("\x00format"), so neither folder is ever taken for the other.
var formatKey = []byte("\x00raft-log-format")

// folderFormat is how Open tells a Raft log folder (see pebbledir).
var folderFormat = pebbledir.Format{
	Key:   formatKey,
	Reads: []byte{formatVersion},
	Name:  "a throttled Raft log",
}

// logStart and logEnd bound every log key: [logStart, logEnd).
var (
	logStart = []byte{prefixLog}
	logEnd   = []byte{prefixLog + 1}
)

const logKeyLen = 1 + 8

// putLogKey writes the key of the entry at index into dst[:logKeyLen].
// Big-endian, so that Pebble's order is the order of indexes.
func putLogKey(dst []byte, index uint64) {
	dst[0] = prefixLog
	binary.BigEndian.PutUint64(dst[1:], index)
}

func logKey(index uint64) []byte {
	k := make([]byte, logKeyLen)
	putLogKey(k, index)
	return k
}

// keyIndex returns the index of a log key.
func keyIndex(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != prefixLog {
		return 0, fmt.Errorf("%w: log key %x", errBadRecord, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func stableKey(key []byte) []byte {
	return append([]byte{prefixStable}, key...)
}

// entryVersion is the first byte of every stored entry, so that the entry
// layout can change later without rewriting the log at once. Version 1:
//
//	[1][index uint64][term uint64][type uint8][appendedAt int64]
//	[len(Data) uint32][len(Extensions) uint32][Data][Extensions]
//
// integers big-endian. appendedAt is Unix nanoseconds, 0 for the zero
// time. The index repeats the key's, so that a value found under the
// wrong key is caught as corruption rather than handed to raft.
const entryVersion byte = 1

const entryHeader = 1 + 8 + 8 + 1 + 8 + 4 + 4

// errBadRecord marks a key or an entry this build cannot decode.
var errBadRecord = errors.New("bad record")

// encodedLen is the length of l's encoding.
func encodedLen(l *raft.Log) (int, error) {
	const max = 1<<32 - 1
	if len(l.Data) > max || len(l.Extensions) > max {
		return 0, fmt.Errorf("%w: entry %d holds %d bytes of data and %d of extensions",
			ErrTooLarge, l.Index, len(l.Data), len(l.Extensions))
	}
	return entryHeader + len(l.Data) + len(l.Extensions), nil
}

// putLog encodes l into dst, which is encodedLen(l) long.
func putLog(dst []byte, l *raft.Log) {
	dst[0] = entryVersion
	binary.BigEndian.PutUint64(dst[1:], l.Index)
	binary.BigEndian.PutUint64(dst[9:], l.Term)
	dst[17] = byte(l.Type)
	var at int64
	if !l.AppendedAt.IsZero() {
		// raft stamps time.Now(), well inside UnixNano's range (1678 to
		// 2262); only the zero time needs saying apart.
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(dst[18:], uint64(at))
	binary.BigEndian.PutUint32(dst[26:], uint32(len(l.Data)))
	binary.BigEndian.PutUint32(dst[30:], uint32(len(l.Extensions)))
	n := copy(dst[entryHeader:], l.Data)
	copy(dst[entryHeader+n:], l.Extensions)
}

// decodeLog decodes the entry v, stored under index, into l. Data and
// Extensions are copied (v belongs to Pebble), into one allocation; an
// empty one comes back nil.
func decodeLog(v []byte, index uint64, l *raft.Log) error {
	if len(v) < entryHeader || v[0] != entryVersion {
		return fmt.Errorf("%w: entry of %d bytes, version %x", errBadRecord, len(v), v[:min(len(v), 1)])
	}
	dataLen := uint64(binary.BigEndian.Uint32(v[26:]))
	extLen := uint64(binary.BigEndian.Uint32(v[30:]))
	if uint64(len(v)) != entryHeader+dataLen+extLen {
		return fmt.Errorf("%w: entry of %d bytes, with %d of data and %d of extensions",
			errBadRecord, len(v), dataLen, extLen)
	}
	if got := binary.BigEndian.Uint64(v[1:]); got != index {
		return fmt.Errorf("%w: entry %d stored under index %d", errBadRecord, got, index)
	}
	*l = raft.Log{
		Index: index,
		Term:  binary.BigEndian.Uint64(v[9:]),
		Type:  raft.LogType(v[17]),
	}
	if at := int64(binary.BigEndian.Uint64(v[18:])); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	if dataLen+extLen == 0 {
		return nil
	}
	payload := append([]byte(nil), v[entryHeader:]...)
	// Full slice expressions, so that appending to Data cannot run over
	// Extensions.
	if dataLen > 0 {
		l.Data = payload[:dataLen:dataLen]
	}
	if extLen > 0 {
		l.Extensions = payload[dataLen:]
	}
	return nil
}
