package crdt

import (
	"bytes"
	"testing"
)

// FuzzDecode: no bytes crash the frame decoders, and a batch that decodes
// encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(hello{id: "a", incarnation: 7, clock: 42}.encode())
	f.Add(helloAck{clock: 1, refusal: "no"}.encode())
	f.Add(batch{seq: 3, watermark: 5, complete: 4, partial: true, entries: []entry{{db: 1, key: []byte("k"), expireMs: 9, state: []byte{1, 6}}}}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeHello(b)
		decodeHelloAck(b)
		m, err := decodeBatch(b, 16)
		if err != nil {
			return
		}
		if got := m.encode(); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, want %x", got, b)
		}
	})
}

// TestFrames: a batch larger than batchBytes is cut into frames, all but
// the last partial, each carrying the watermark.
func TestFrames(t *testing.T) {
	var n Node
	var entries []entry
	for i := range 100 {
		entries = append(entries, entry{key: []byte{byte(i)}, state: make([]byte, 10<<10)})
	}
	frames := n.frames(entries, 5, 4)
	if len(frames) < 4 {
		t.Fatalf("%d frames for 1 MB", len(frames))
	}
	total := 0
	for i, f := range frames {
		m, err := decodeBatch(f, 16)
		if err != nil {
			t.Fatal(err)
		}
		if m.partial != (i < len(frames)-1) || m.watermark != 5 || m.complete != 4 {
			t.Fatalf("frame %d: partial %v watermark %d complete %d", i, m.partial, m.watermark, m.complete)
		}
		total += len(m.entries)
	}
	if total != 100 {
		t.Fatalf("%d entries in the frames, want 100", total)
	}
	if frames := n.frames(nil, 5, 4); len(frames) != 1 {
		t.Fatalf("no entries: %d frames, want one (the watermark)", len(frames))
	}
}
