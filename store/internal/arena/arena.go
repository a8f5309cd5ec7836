// Package arena holds many small byte records (key names, rate-limit
// states) in a few large chunks instead of one Go allocation each: a record
// is named by a 32-bit Ref, not a pointer, so the garbage collector has
// nothing per record to scan, and a record costs its length rounded up to 8
// bytes and nothing else.
//
// Freed space is reused: a freed record goes on the free list of its size
// class (every size up to MaxRecord, in steps of 8 bytes), and the next
// record of that class takes it. Rate-limit states of one kind all have one
// size, so a keyspace whose keys come and go reuses its space without
// compaction. What the free lists hold is counted as Free; a caller that
// wants it back as well moves records out of the chunks with the most free
// space (Sparsest, Retire) into others and the emptied chunks go whole;
// their numbers are taken again by the chunks made later.
//
// An Arena is not safe for concurrent use.
package arena

import "slices"

// Ref names a record: its chunk (high 16 bits) and its offset in the chunk
// (low 16 bits). The zero Ref names no record.
type Ref uint32

const (
	chunkBits = 16
	// ChunkSize is the size of a chunk in bytes.
	ChunkSize = 1 << chunkBits
	// MaxRecord is the largest record an Arena holds; a caller keeps
	// longer ones elsewhere.
	MaxRecord = 4096
	align     = 8
	classes   = MaxRecord / align
)

// Arena is a set of records.
type Arena struct {
	chunks [][]byte
	// free[c] is the first free record of size class c (size (c+1)*8);
	// each free record holds the next one's Ref in its first 4 bytes.
	free [classes]Ref
	// used[i] is how many bytes of chunk i hold live records.
	used []int32
	// retired[i]: chunk i takes no new records (Retire); retiring counts
	// the retired chunks not let go yet.
	retired  []bool
	retiring int
	// gone lists the numbers of chunks let go, for new chunks to take.
	gone []int
	// last is the chunk new records fill; tail is the offset of its first
	// never-used byte.
	last, tail int
	// live and freeBytes count bytes of live records and of the free
	// lists, rounded to the size class; size is the chunks' bytes.
	live, freeBytes, size int64
}

// class returns the size class of an n-byte record and its rounded size.
func class(n int) (int, int) {
	size := (max(n, 1) + align - 1) &^ (align - 1)
	return size/align - 1, size
}

// Alloc returns a new record of n bytes, 0 < n <= MaxRecord, whose contents
// are unspecified.
func (a *Arena) Alloc(n int) Ref {
	if n > MaxRecord {
		panic("arena: record too large")
	}
	c, size := class(n)
	if r := a.free[c]; r != 0 {
		a.free[c] = a.next(r)
		a.freeBytes -= int64(size)
		a.take(r, size)
		return r
	}
	if len(a.chunks) == 0 || a.tail+size > ChunkSize {
		a.grow()
	}
	r := Ref(a.last)<<chunkBits | Ref(a.tail)
	a.tail += size
	a.take(r, size)
	return r
}

// grow makes a new chunk the one new records fill, under the number of a
// chunk let go if there is one.
func (a *Arena) grow() {
	if n := len(a.gone); n > 0 {
		a.last, a.gone = a.gone[n-1], a.gone[:n-1]
		a.chunks[a.last] = make([]byte, ChunkSize)
		a.retired[a.last] = false
	} else {
		if len(a.chunks) == 1<<(32-chunkBits) {
			panic("arena: full")
		}
		a.last = len(a.chunks)
		a.chunks = append(a.chunks, make([]byte, ChunkSize))
		a.used = append(a.used, 0)
		a.retired = append(a.retired, false)
	}
	a.size += ChunkSize
	a.tail = 0
	if a.last == 0 {
		a.tail = align // Ref 0 names no record
	}
}

func (a *Arena) take(r Ref, size int) {
	a.used[r>>chunkBits] += int32(size)
	a.live += int64(size)
}

// Bytes returns the n bytes of record r, which Alloc returned for at least
// n bytes. They are valid until the record is freed.
func (a *Arena) Bytes(r Ref, n int) []byte {
	off := int(r & (ChunkSize - 1))
	return a.chunks[r>>chunkBits][off : off+n : off+n]
}

// Free gives back record r of n bytes (the n given to Alloc, or any n of
// the same size class).
func (a *Arena) Free(r Ref, n int) {
	c, size := class(n)
	i := int(r >> chunkBits)
	a.used[i] -= int32(size)
	a.live -= int64(size)
	if a.retired[i] {
		a.drop(i)
		return
	}
	a.setNext(r, a.free[c])
	a.free[c] = r
	a.freeBytes += int64(size)
}

// Live is the bytes of live records, each rounded up to 8.
func (a *Arena) Live() int64 { return a.live }

// FreeBytes is the bytes of freed records waiting for reuse.
func (a *Arena) FreeBytes() int64 { return a.freeBytes }

// Size is the memory the arena holds: its chunks.
func (a *Arena) Size() int64 { return a.size }

// Chunk returns the chunk that holds r.
func Chunk(r Ref) int { return int(r >> chunkBits) }

// Retired reports whether r is in a retired chunk: a record to move out.
func (a *Arena) Retired(r Ref) bool { return a.retired[r>>chunkBits] }

// Retiring reports whether a retired chunk still holds live records.
func (a *Arena) Retiring() bool { return a.retiring > 0 }

// Sparsest returns the chunks, at most n of them and not the one new
// records fill, whose live records take less than half of them, emptiest
// first: the ones worth emptying. A caller empties chunks with Retire and
// then moves each of their live records (Alloc, copy, Free); a chunk's
// memory goes when its last record does.
func (a *Arena) Sparsest(n int) []int {
	var out []int
	for i := range a.chunks {
		if i != a.last && a.chunks[i] != nil && !a.retired[i] && a.used[i] < ChunkSize/2 {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(x, y int) int { return int(a.used[x] - a.used[y]) })
	return out[:min(n, len(out))]
}

// Retire stops the chunks given (but the one new records fill) from
// taking new records: their free records leave the free lists, in one walk
// of the lists, and records freed in them later do not join them. Once its
// last live record is freed a chunk is let go, and its number is free for
// a new chunk.
func (a *Arena) Retire(chunks ...int) {
	n := 0
	for _, i := range chunks {
		if i != a.last && a.chunks[i] != nil && !a.retired[i] {
			a.retired[i] = true
			a.retiring++
			n++
		}
	}
	if n == 0 {
		return
	}
	for c := range a.free {
		var prev Ref
		for r := a.free[c]; r != 0; {
			next := a.next(r)
			switch {
			case !a.retired[r>>chunkBits]:
				prev = r
			case prev == 0:
				a.free[c] = next
			default:
				a.setNext(prev, next)
			}
			if a.retired[r>>chunkBits] {
				a.freeBytes -= int64((c + 1) * align)
			}
			r = next
		}
	}
	for _, i := range chunks {
		a.drop(i)
	}
}

// drop lets retired chunk i go once it holds no live record.
func (a *Arena) drop(i int) {
	if a.retired[i] && a.used[i] == 0 && a.chunks[i] != nil {
		a.chunks[i] = nil
		a.size -= ChunkSize
		a.retiring--
		a.gone = append(a.gone, i)
	}
}

// next reads the free-list link in free record r.
func (a *Arena) next(r Ref) Ref {
	b := a.chunks[r>>chunkBits][r&(ChunkSize-1):]
	return Ref(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
}

// setNext writes the free-list link of free record r.
func (a *Arena) setNext(r, next Ref) {
	b := a.chunks[r>>chunkBits][r&(ChunkSize-1):]
	b[0], b[1], b[2], b[3] = byte(next), byte(next>>8), byte(next>>16), byte(next>>24)
}
