package engines_test

import (
	"bytes"
	"encoding/binary"
	"math"
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
		word, ok := engines.PackFWC(c.state, c.ref)
		if ok != c.fits {
			t.Errorf("%s: PackFWC fits = %v, want %v", c.name, ok, c.fits)
			continue
		}
		if !ok {
			continue
		}
		if w := int(word >> 58); w > c.wantWidthMax {
			t.Errorf("%s: width %d, want at most %d", c.name, w, c.wantWidthMax)
		}
		if got := engines.AppendFWC(nil, word, c.ref); !bytes.Equal(got, c.state) {
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
		word, ok := engines.PackFWC(state, ref)
		if ok {
			if got := engines.AppendFWC(nil, word, ref); !bytes.Equal(got, state) {
				t.Fatalf("PackFWC(%x, %d) = %#x unpacks to %x", state, ref, word, got)
			}
			return
		}
		if len(state) != 18 || state[0] != 1 || state[1] != byte(engines.FWC) {
			return
		}
		newest := int64(binary.LittleEndian.Uint64(state[2:]))
		count := int64(binary.LittleEndian.Uint64(state[10:]))
		if newest <= ref && count >= 0 && newest >= ref-1<<40 && count < 1<<18 && ref-newest >= 0 {
			t.Fatalf("PackFWC(newest %d, count %d, ref %d) did not pack", newest, count, ref)
		}
	})
}

// TestAppendFWC_NoAlloc: a buffer with the room takes the state after what
// it holds, without allocating.
func TestAppendFWC_NoAlloc(t *testing.T) {
	state := fwcState(1e18, 3)
	word, ok := engines.PackFWC(state, 1e18+60e9)
	if !ok {
		t.Fatal("does not pack")
	}
	buf := make([]byte, 0, 2+engines.FWCStateLen)
	buf = append(buf, "ab"...)
	if got := engines.AppendFWC(buf, word, 1e18+60e9); string(got[:2]) != "ab" || !bytes.Equal(got[2:], state) {
		t.Fatalf("AppendFWC = %x", got)
	}
	if n := testing.AllocsPerRun(100, func() { engines.AppendFWC(buf[:0], word, 1e18+60e9) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
