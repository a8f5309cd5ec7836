package engines_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/throttleddb/throttled/engines"
)

// fwcState builds an FWC state's bytes (version 1, kind, newest, count).
func fwcState(newest, count int64) []byte {
	b := []byte{1, byte(engines.FWC)}
	b = binary.LittleEndian.AppendUint64(b, uint64(newest))
	return binary.LittleEndian.AppendUint64(b, uint64(count))
}

func TestPackFWC(t *testing.T) {
	const sec = int64(1e9)
	now := int64(1_764_000_000) * sec
	for _, c := range []struct {
		name         string
		state        []byte
		ref          int64
		fits         bool
		wantWidthMax int
	}{
		{"an hour's window", fwcState(now, 10), now + 3600*sec, true, 42},
		{"an hour's window, a large count", fwcState(now, 1<<16-1), now + 3600*sec, true, 42},
		{"a day's window", fwcState(now, 2047), now + 86400*sec, true, 47},
		{"newest at ref", fwcState(now, 1), now, true, 0},
		{"zero count", fwcState(now, 0), now + sec, true, 30},
		{"the widest d", fwcState(now-1<<58+1, 0), now, true, 58},
		{"d too wide", fwcState(now-1<<58, 0), now, false, 0},
		{"count too wide for d", fwcState(now, 2048), now + 86400*sec, false, 0},
		{"newest after ref", fwcState(now+1, 1), now, false, 0},
		{"negative count", fwcState(now, -1), now + sec, false, 0},
		{"far past newest", fwcState(math.MinInt64, 1), math.MaxInt64, false, 0},
		{"wrong length", append(fwcState(now, 1), 0), now + sec, false, 0},
		{"wrong version", append([]byte{2}, fwcState(now, 1)[1:]...), now + sec, false, 0},
		{"wrong kind", append([]byte{1, byte(engines.TB)}, fwcState(now, 1)[2:]...), now + sec, false, 0},
	} {
		word, ok := engines.Pack(c.state, engines.FWC, c.ref)
		if ok != c.fits {
			t.Errorf("%s: Pack fits = %v, want %v", c.name, ok, c.fits)
			continue
		}
		if !ok {
			continue
		}
		if w := int(word >> 58); w > c.wantWidthMax {
			t.Errorf("%s: width %d, want at most %d", c.name, w, c.wantWidthMax)
		}
		if got := engines.AppendPacked(nil, engines.FWC, word, c.ref); !bytes.Equal(got, c.state) {
			t.Errorf("%s: unpacked %x, want %x", c.name, got, c.state)
		}
	}
}

// FuzzPackFWC: whatever bytes and reference, a state that packs unpacks to
// the same bytes, and a well-formed state whose numbers fit always packs.
func FuzzPackFWC(f *testing.F) {
	f.Add(fwcState(1e18, 5), int64(1e18+3600e9))
	f.Add(fwcState(-5, 1<<40), int64(1<<17))
	f.Add([]byte{1, 1, 0}, int64(0))
	f.Fuzz(func(t *testing.T, state []byte, ref int64) {
		word, ok := engines.Pack(state, engines.FWC, ref)
		if ok {
			if got := engines.AppendPacked(nil, engines.FWC, word, ref); !bytes.Equal(got, state) {
				t.Fatalf("Pack(%x, %d) = %#x unpacks to %x", state, ref, word, got)
			}
			return
		}
		if len(state) != 18 || state[0] != 1 || state[1] != byte(engines.FWC) {
			return
		}
		newest := int64(binary.LittleEndian.Uint64(state[2:]))
		count := int64(binary.LittleEndian.Uint64(state[10:]))
		if newest <= ref && count >= 0 && newest >= ref-1<<40 && count < 1<<18 && ref-newest >= 0 {
			t.Fatalf("Pack(newest %d, count %d, ref %d) did not pack", newest, count, ref)
		}
	})
}

// bucketState builds a TB or LB state's bytes (version 1, kind, cut, debt,
// unit).
func bucketState(k engines.Kind, cut, debt, unit int64) []byte {
	b := []byte{1, byte(k)}
	b = binary.LittleEndian.AppendUint64(b, uint64(cut))
	b = binary.LittleEndian.AppendUint64(b, uint64(debt))
	return binary.LittleEndian.AppendUint64(b, uint64(unit))
}

// refAfter is the ref the store counts a state from when the engine said
// the key is full at fullAt: the first nanosecond after the millisecond
// that holds it (store.ExpiryAt).
func refAfter(fullAt int64) int64 { return (fullAt/1e6 + 1) * 1e6 }

func TestPackBucket(t *testing.T) {
	const sec = int64(1e9)
	now := int64(1_764_000_000)*sec + 123_456_789
	for _, c := range []struct {
		name  string
		state []byte
		ref   int64
		fits  bool
	}{
		{"one token of an hour's 10", bucketState(engines.TB, now, 3600*sec, 3600*sec), refAfter(now + 3600*sec), true},
		{"an LB request", bucketState(engines.LB, now, 60*sec, 60*sec), refAfter(now + 60*sec/5), true},
		{"five of 100 a second", bucketState(engines.TB, now, 5*sec, sec), refAfter(now + 5*sec/100), true},
		{"a period in ns", bucketState(engines.TB, now, 3*7919, 7919), refAfter(now + 3*7919), true},
		{"a full bucket", bucketState(engines.TB, now, 0, sec), now + 1, true},
		{"a full bucket, a millisecond on", bucketState(engines.TB, now, 0, sec), now + 1e6, true},
		{"a drained debt", bucketState(engines.TB, now, 3600*sec-1, 3600*sec), refAfter(now + 3600*sec), false},
		{"a debt that counts the cut a day back", bucketState(engines.TB, now, 3600*sec, 3600*sec), refAfter(now + 86400*sec), false},
		{"a cut at ref", bucketState(engines.TB, now, sec, sec), now, false},
		{"a cut after ref", bucketState(engines.TB, now+1, sec, sec), now, false},
		{"a cut just before ref", bucketState(engines.TB, now-1, sec, sec), now, false},
		{"a rate too fast to hold", bucketState(engines.TB, now, 1<<30*sec, sec), now + 2, false},
		{"a zero unit", bucketState(engines.TB, now, 0, 0), now + 1, false},
		{"a negative debt", bucketState(engines.TB, now, -sec, sec), now + 1, false},
		{"wrong length", append(bucketState(engines.TB, now, sec, sec), 0), refAfter(now + sec), false},
	} {
		k := engines.Kind(c.state[1])
		word, ok := engines.Pack(c.state, k, c.ref)
		if ok != c.fits {
			t.Errorf("%s: Pack fits = %v, want %v", c.name, ok, c.fits)
			continue
		}
		if ok {
			if got := engines.AppendPacked(nil, k, word, c.ref); !bytes.Equal(got, c.state) {
				t.Errorf("%s: unpacked %x, want %x", c.name, got, c.state)
			}
		}
	}
	// A state packs only as the kind it is.
	if _, ok := engines.Pack(bucketState(engines.LB, now, sec, sec), engines.TB, refAfter(now+sec)); ok {
		t.Error("an LB state packed as TB")
	}
}

// TestPackBucket_FromFull: the state a bucket's first Commit leaves packs
// against the expiry its fullAt gives, for any rate whose numbers fit, and
// a state whose debt has drained in part (not whole tokens) does not.
// Seeded: a failure names its seed.
func TestPackBucket_FromFull(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := range 5000 {
			k := []engines.Kind{engines.TB, engines.LB}[i%2]
			capacity, count := 1+rng.Int64N(1000), 1+rng.Int64N(1000)
			period := []int64{1, 1e3, 1e6, 1e9}[rng.IntN(4)] * (1 + rng.Int64N(100_000))
			newBucket := engines.NewTB
			if k == engines.LB {
				newBucket = engines.NewLB
			}
			l, err := newBucket(capacity, count, period)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			now := 1_764_000_000e9 + rng.Int64N(1e15)
			qty := 1 + rng.Int64N(capacity)
			state, fullAt, err := l.Commit(nil, now, qty)
			if err != nil {
				t.Fatalf("seed %d: Commit: %v", seed, err)
			}
			word, ok := engines.Pack(state, k, refAfter(fullAt))
			if ok {
				if got := engines.AppendPacked(nil, k, word, refAfter(fullAt)); !bytes.Equal(got, state) {
					t.Fatalf("seed %d: %x unpacked to %x", seed, state, got)
				}
			} else if bits.Len64(uint64(qty))+bits.Len64(uint64(count))+bits.Len64(uint64(mantissa(period))) <= 32 {
				t.Fatalf("seed %d: %v %d %d %d, qty %d: did not pack", seed, k, capacity, count, period, qty)
			}
			later := now + 1 + rng.Int64N(fullAt-now)
			if state, fullAt, err = l.Commit(state, later, 1); err != nil {
				continue // limited
			}
			debt := int64(binary.LittleEndian.Uint64(state[10:]))
			if _, ok := engines.Pack(state, k, refAfter(fullAt)); ok && debt%period != 0 {
				t.Fatalf("seed %d: a debt %d of unit %d packed", seed, debt, period)
			}
		}
	}
}

// mantissa is the period without its trailing thousands, up to three.
func mantissa(period int64) int64 {
	for range 3 {
		if period%1000 != 0 {
			break
		}
		period /= 1000
	}
	return period
}

// FuzzPackBucket: whatever bytes and reference, a state that packs unpacks
// to the same bytes.
func FuzzPackBucket(f *testing.F) {
	f.Add(bucketState(engines.TB, 1e18, 3600e9, 3600e9), int64(1e18+3600e9+1e6))
	f.Add(bucketState(engines.LB, -5, 0, 1), int64(1<<17))
	f.Add([]byte{1, 4, 0}, int64(0))
	f.Fuzz(func(t *testing.T, state []byte, ref int64) {
		for _, k := range []engines.Kind{engines.TB, engines.LB} {
			word, ok := engines.Pack(state, k, ref)
			if !ok {
				continue
			}
			if got := engines.AppendPacked(nil, k, word, ref); !bytes.Equal(got, state) {
				t.Fatalf("Pack(%x, %v, %d) = %#x unpacks to %x", state, k, ref, word, got)
			}
		}
	})
}

// TestAppendPacked_NoAlloc: a buffer with the room takes the state after
// what it holds, without allocating.
func TestAppendPacked_NoAlloc(t *testing.T) {
	for _, c := range []struct {
		k     engines.Kind
		state []byte
		ref   int64
	}{
		{engines.FWC, fwcState(1e18, 3), 1e18 + 60e9},
		{engines.TB, bucketState(engines.TB, 1e18, 60e9, 60e9), 1e18 + 60e9 + 1},
	} {
		word, ok := engines.Pack(c.state, c.k, c.ref)
		if !ok {
			t.Fatalf("%v: does not pack", c.k)
		}
		buf := make([]byte, 0, 2+engines.PackedLen)
		buf = append(buf, "ab"...)
		if got := engines.AppendPacked(buf, c.k, word, c.ref); string(got[:2]) != "ab" || !bytes.Equal(got[2:], c.state) {
			t.Fatalf("%v: AppendPacked = %x", c.k, got)
		}
		if n := testing.AllocsPerRun(100, func() { engines.AppendPacked(buf[:0], c.k, word, c.ref) }); n != 0 {
			t.Fatalf("%v: %v allocations", c.k, n)
		}
	}
}
