package mstate

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/throttleddb/throttled/engines"
)

// version is the first byte of every encoding. A change of any layout bumps
// it, and decoders refuse versions they do not know.
const (
	version   = 1
	headerLen = 2 // version, kind
)

// maxTable is the most entries a table of origins (or of drains) can hold:
// its count is a uint16.
const maxTable = math.MaxUint16

// stackTable is how many entries the tables that decoders and encoders keep
// on their stacks hold (see tableOf): a key seldom has more origins.
const stackTable = 4

// reader decodes a state front to back. A read past the end returns zeros and
// marks the reader bad, so a decoder checks once, at the end of a section.
type reader struct {
	b   []byte
	off int
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || len(r.b)-r.off < n {
		r.bad = true
		return make([]byte, n)
	}
	r.off += n
	return r.b[r.off-n : r.off]
}

func (r *reader) u8() int        { return int(r.take(1)[0]) }
func (r *reader) u16() int       { return int(binary.LittleEndian.Uint16(r.take(2))) }
func (r *reader) u32() int       { return int(binary.LittleEndian.Uint32(r.take(4))) }
func (r *reader) u64() uint64    { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) i64() int64     { return int64(r.u64()) }
func (r *reader) done() bool     { return r.off == len(r.b) }
func (r *reader) origin() Origin { return Origin{Node: r.u64(), Inc: r.u64()} }

func appendU16(b []byte, v int) []byte   { return binary.LittleEndian.AppendUint16(b, uint16(v)) }
func appendU32(b []byte, v int) []byte   { return binary.LittleEndian.AppendUint32(b, uint32(v)) }
func appendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }
func appendOrigin(b []byte, o Origin) []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, o.Node), o.Inc)
}

// header checks the version and kind bytes of a non-empty state: another
// known kind is engines.ErrWrongKind, anything else engines.ErrCorruptState.
func header(r *reader, k Kind) error {
	v, got := r.u8(), Kind(r.u8())
	switch {
	case r.bad || v != version || got < FWC || got > Str:
		return engines.ErrCorruptState
	case got != k:
		return engines.ErrWrongKind
	}
	return nil
}

// A table lists the distinct values of some field of a state's entries
// (their origins, say) once, in ascending order, so that each entry refers
// to its value by a 2-byte index.

// tableOf appends to dst the distinct values of field over items,
// ascending. More than maxTable is engines.ErrOverflow.
//
// This and readTable and union take the slice they fill from the caller,
// which can have it on its stack: a mesh node decodes, joins and encodes
// states on every command and every key it receives, and these slices were
// most of its garbage.
//
// Each value is inserted in place, once: a state has many entries but few
// distinct values (a hot key's log, 64 events of one origin), so the table
// stays as small as its result rather than growing to one per entry.
func tableOf[E, T any](dst []T, items []E, field func(E) T, compare func(a, b T) int) ([]T, error) {
	t, last := dst[:0], 0
	for _, e := range items {
		v := field(e)
		if last < len(t) && compare(t[last], v) == 0 {
			continue // as the entry before, most of the time
		}
		i, found := slices.BinarySearchFunc(t, v, compare)
		if !found {
			if len(t) == maxTable {
				return nil, engines.ErrOverflow
			}
			t = slices.Insert(t, i, v)
		}
		last = i
	}
	return t, nil
}

// appendTable writes a table: its length, then each value.
func appendTable[T any](b []byte, t []T, put func([]byte, T) []byte) []byte {
	b = appendU16(b, len(t))
	for _, v := range t {
		b = put(b, v)
	}
	return b
}

// readTable reads a table, which must be strictly ascending, into dst.
func readTable[T any](dst []T, r *reader, get func(*reader) T, compare func(a, b T) int) ([]T, bool) {
	n := r.u16()
	t := slices.Grow(dst[:0], min(n, len(r.b)/8))
	for i := range n {
		v := get(r)
		if r.bad || (i > 0 && compare(t[i-1], v) >= 0) {
			return nil, false
		}
		t = append(t, v)
	}
	return t, true
}

// indexIn returns the index of v in the table t, which holds it.
func indexIn[T any](t []T, v T, compare func(a, b T) int) int {
	i, _ := slices.BinarySearchFunc(t, v, compare)
	return i
}

// refer returns the value at index i of table, read from r, marking it
// used; an index out of range marks the reader bad and returns the zero T.
func refer[T any](r *reader, table []T, used []bool, i int) T {
	var v T
	if i < len(table) {
		v, used[i] = table[i], true
	} else {
		r.bad = true
	}
	return v
}

// allUsed reports whether every value of a table is referred to: a
// canonical encoding lists no value that no entry uses.
func allUsed(used []bool) bool { return !slices.Contains(used, false) }

// union merges two lists sorted by compare into dst: the elements of equal
// keys are joined with join, and only those keep accepts stay. It is the
// join of every state: a key's copies only grow, and join takes the larger.
func union[E any](dst, a, b []E, compare func(x, y E) int, join func(x, y E) E, keep func(E) bool) []E {
	out := slices.Grow(dst[:0], len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		var e E
		switch {
		case len(b) == 0 || (len(a) > 0 && compare(a[0], b[0]) < 0):
			e, a = a[0], a[1:]
		case len(a) == 0 || compare(a[0], b[0]) > 0:
			e, b = b[0], b[1:]
		default:
			e, a, b = join(a[0], b[0]), a[1:], b[1:]
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// add returns a+b for b >= 0, or engines.ErrOverflow.
func add(a, b int64) (int64, error) {
	if a > math.MaxInt64-b {
		return 0, engines.ErrOverflow
	}
	return a + b, nil
}

// minus returns a-b, saturated to the range of int64.
func minus(a, b int64) int64 {
	if b > 0 && a < math.MinInt64+b {
		return math.MinInt64
	}
	if b < 0 && a > math.MaxInt64+b {
		return math.MaxInt64
	}
	return a - b
}
