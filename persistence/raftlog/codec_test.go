package raftlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

func encode(t testing.TB, l *raft.Log) []byte {
	t.Helper()
	n, err := encodedLen(l)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	putLog(b, l)
	return b
}

// TestDecodeLog_Refuses: an entry this build cannot read is an error, never
// a wrong entry handed to raft.
func TestDecodeLog_Refuses(t *testing.T) {
	good := encode(t, &raft.Log{Index: 5, Term: 2, Data: []byte("data"), Extensions: []byte("ext")})
	for _, tc := range []struct {
		name  string
		v     []byte
		index uint64
	}{
		{"empty", nil, 5},
		{"cut inside the header", good[:entryHeader-1], 5},
		{"cut inside the payload", good[:len(good)-1], 5},
		{"longer than its lengths", append(bytes.Clone(good), 0), 5},
		{"unknown version", append([]byte{entryVersion + 1}, good[1:]...), 5},
		{"under another index", good, 6},
	} {
		var l raft.Log
		if err := decodeLog(tc.v, tc.index, &l); !errors.Is(err, errBadRecord) {
			t.Errorf("%s: %v, want errBadRecord", tc.name, err)
		}
	}
}

// FuzzDecodeLog: decoding never panics, and whatever decodes encodes back
// to the same bytes.
func FuzzDecodeLog(f *testing.F) {
	f.Add(encode(f, &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("x"), AppendedAt: t0}), uint64(1))
	f.Add(encode(f, &raft.Log{Index: 9}), uint64(9))
	f.Fuzz(func(t *testing.T, v []byte, index uint64) {
		var l raft.Log
		if err := decodeLog(v, index, &l); err != nil {
			return
		}
		if got := encode(t, &l); !bytes.Equal(got, v) {
			t.Errorf("decoded %+v, which encodes to %x, from %x", l, got, v)
		}
	})
}
