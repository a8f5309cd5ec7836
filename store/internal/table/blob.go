package table

import "github.com/throttleddb/throttled/store/internal/arena"

// A blob is a byte record of the table: a long name or a byte value. Its
// 64-bit handle is, for a record in the arena, its length (high 32 bits)
// and its arena.Ref (low 32; 0 for an empty record), and for a longer one
// bigBit and its index in Table.big.
const bigBit = 1 << 63

// putBlob stores a copy of b and returns its handle.
func (t *Table) putBlob(b []byte) uint64 {
	switch {
	case len(b) == 0:
		return 0
	case len(b) <= arena.MaxRecord:
		r := t.recs.Alloc(len(b))
		copy(t.recs.Bytes(r, len(b)), b)
		return uint64(len(b))<<32 | uint64(r)
	}
	c := append([]byte(nil), b...)
	t.bigSize += int64(cap(c))
	if n := len(t.bigFree); n > 0 {
		i := t.bigFree[n-1]
		t.bigFree = t.bigFree[:n-1]
		t.big[i] = c
		return bigBit | uint64(i)
	}
	t.big = append(t.big, c)
	return bigBit | uint64(len(t.big)-1)
}

// blob returns the bytes of handle h, aliasing the table's memory.
func (t *Table) blob(h uint64) []byte {
	if h&bigBit != 0 {
		return t.big[uint32(h)]
	}
	n := int(h >> 32)
	if n == 0 {
		return []byte{}
	}
	return t.recs.Bytes(arena.Ref(h), n)
}

// freeBlob frees the record of handle h.
func (t *Table) freeBlob(h uint64) {
	if h&bigBit != 0 {
		i := uint32(h)
		t.bigSize -= int64(cap(t.big[i]))
		t.big[i] = nil
		t.bigFree = append(t.bigFree, i)
		return
	}
	if n := int(h >> 32); n > 0 {
		t.recs.Free(arena.Ref(h), n)
	}
}

// sameRecord reports whether n bytes fit in the arena record of handle h
// in place: both round to the same size, as a rate-limit state rewritten
// on every request does.
func sameRecord(h uint64, n int) bool {
	cur := int(h >> 32)
	return h&bigBit == 0 && cur > 0 && n > 0 && (cur+7)/8 == (n+7)/8
}

// resized is handle h with length n (sameRecord(h, n)).
func resized(h uint64, n int) uint64 { return uint64(n)<<32 | h&0xffffffff }
