package arena

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// model drives an Arena with a sequence of operations read from ops and
// checks it against a map of what each live record should hold: every
// record keeps its bytes whatever is allocated, freed or retired around it,
// and the counts add up.
func model(t *testing.T, ops []byte) {
	var a Arena
	type rec struct {
		r    Ref
		data []byte
	}
	var live []rec
	pos := 0
	next := func() byte {
		if pos == len(ops) {
			return 0
		}
		pos++
		return ops[pos-1]
	}
	check := func() {
		var sum int64
		for _, x := range live {
			if got := a.Bytes(x.r, len(x.data)); !bytes.Equal(got, x.data) {
				t.Fatalf("record %#x holds %q, want %q", x.r, got, x.data)
			}
			_, size := class(len(x.data))
			sum += int64(size)
		}
		if a.Live() != sum {
			t.Fatalf("Live = %d, want %d", a.Live(), sum)
		}
		if want := int64(len(a.chunks)-nils(a.chunks)) * ChunkSize; a.Size() != want {
			t.Fatalf("Size = %d, chunks hold %d", a.Size(), want)
		}
		retiring := 0
		for i, c := range a.chunks {
			if c != nil && a.retired[i] {
				retiring++
			}
		}
		if a.retiring != retiring || a.Retiring() != (retiring > 0) {
			t.Fatalf("retiring = %d, chunks retired and held: %d", a.retiring, retiring)
		}
		if a.Live()+a.FreeBytes() > a.Size() {
			t.Fatalf("Live %d + FreeBytes %d > Size %d", a.Live(), a.FreeBytes(), a.Size())
		}
	}
	for pos < len(ops) {
		switch op := next(); {
		case op < 128 || len(live) == 0: // allocate
			n := 1 + int(next())%64
			if op%16 == 0 {
				n = 1 + int(next())*16%MaxRecord // now and then a large one
			}
			r := a.Alloc(n)
			if r == 0 {
				t.Fatal("Alloc returned the zero Ref")
			}
			d := bytes.Repeat([]byte{next()}, n)
			copy(a.Bytes(r, n), d)
			live = append(live, rec{r, d})
		case op < 224: // free one
			i := int(next()) % len(live)
			a.Free(live[i].r, len(live[i].data))
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		default: // compact: retire the sparsest chunk, move its records
			for _, c := range a.Sparsest(1 + int(op%2)) {
				a.Retire(c)
				for i, x := range live {
					if Chunk(x.r) != c {
						continue
					}
					r := a.Alloc(len(x.data))
					if Chunk(r) == c {
						t.Fatalf("Alloc put a record in retired chunk %d", c)
					}
					copy(a.Bytes(r, len(x.data)), x.data)
					a.Free(x.r, len(x.data))
					live[i].r = r
				}
				if a.chunks[c] != nil {
					t.Fatalf("chunk %d kept after its last record moved out", c)
				}
			}
		}
		if pos%64 < 3 || pos == len(ops) { // every few operations: check is O(records)
			check()
		}
	}
}

// TestModel runs long random sequences, seeded so a failure replays.
func TestModel(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		ops := make([]byte, 20000)
		for i := range ops {
			ops[i] = byte(rng.Uint32())
		}
		t.Run("", func(t *testing.T) { model(t, ops) })
	}
}

func FuzzArena(f *testing.F) {
	f.Add([]byte{0, 10, 1, 200, 0, 250})
	f.Add(bytes.Repeat([]byte{16, 255, 7, 130, 1}, 200))
	f.Fuzz(model)
}

// TestReuse checks that freed space is taken again before the arena grows:
// a keyspace whose fixed-size states come and go stays the same size.
func TestReuse(t *testing.T) {
	var a Arena
	refs := make([]Ref, 10000)
	for i := range refs {
		refs[i] = a.Alloc(26)
	}
	size := a.Size()
	for range 10 {
		for i := range refs {
			a.Free(refs[i], 26)
			refs[i] = a.Alloc(26)
		}
	}
	if a.Size() != size {
		t.Errorf("Size grew from %d to %d though every record was freed before the next", size, a.Size())
	}
	if a.Live() != 10000*32 || a.FreeBytes() != 0 {
		t.Errorf("Live %d, FreeBytes %d; want %d, 0", a.Live(), a.FreeBytes(), 10000*32)
	}
}

// TestChunkNumbersReused empties and refills an arena many times over,
// compacting it each time: the chunks let go give their numbers to new
// ones, so the 16 bits that name a chunk never run out.
func TestChunkNumbersReused(t *testing.T) {
	var a Arena
	var refs []Ref
	for round := range 200 {
		for range 20000 {
			refs = append(refs, a.Alloc(24))
		}
		// Keep one record in 64: every chunk is sparse.
		kept := refs[:0]
		for i, r := range refs {
			if i%64 == round%64 {
				kept = append(kept, r)
			} else {
				a.Free(r, 24)
			}
		}
		refs = kept
		a.Retire(a.Sparsest(1 << 16)...)
		for i, r := range refs {
			if a.Retired(r) {
				n := a.Alloc(24)
				copy(a.Bytes(n, 24), a.Bytes(r, 24))
				a.Free(r, 24)
				refs[i] = n
			}
		}
		if a.Retiring() {
			t.Fatalf("round %d: a retired chunk kept records after they all moved", round)
		}
	}
	if len(a.chunks) > 16 {
		t.Errorf("%d chunk numbers taken for at most %d live bytes", len(a.chunks), a.Live())
	}
}

func TestTooLarge(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Alloc(MaxRecord+1) did not panic")
		}
	}()
	var a Arena
	a.Alloc(MaxRecord + 1)
}

func BenchmarkAllocFree(b *testing.B) {
	var a Arena
	refs := make([]Ref, 1024)
	for i := range refs {
		refs[i] = a.Alloc(24)
	}
	b.ResetTimer()
	for i := range b.N {
		j := i & 1023
		a.Free(refs[j], 24)
		refs[j] = a.Alloc(24)
	}
}

// nils counts the chunks let go.
func nils(chunks [][]byte) int {
	n := 0
	for _, c := range chunks {
		if c == nil {
			n++
		}
	}
	return n
}
