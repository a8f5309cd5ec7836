package commands

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/throttleddb/throttled/store"
)

func TestCommandEncoding(t *testing.T) {
	for _, cmd := range []Command{
		{DB: 0, Proto: 2, Args: [][]byte{[]byte("GET"), []byte("k")}},
		{DB: 15, Proto: 3, Args: [][]byte{[]byte("SET"), []byte("k"), {}}},
		{DB: 3, Proto: 2, Args: [][]byte{[]byte("WATCH"), []byte("a"), []byte("b")}, watch: true},
		{DB: 1, Proto: 3, Exec: [][][]byte{{[]byte("INCR"), []byte("n")}, {[]byte("GET"), []byte("n")}},
			watched: []*watchedKey{{db: 2, key: []byte("w"), fp: [20]byte{1, 2, 3}, ok: true}}},
		{DB: 0, Proto: 2, Exec: [][][]byte{}},
	} {
		b := cmd.AppendBinary([]byte("prefix"))
		got, rest, err := DecodeCommand(append(b[len("prefix"):], "next"...))
		if err != nil || string(rest) != "next" {
			t.Fatalf("%+v: %v, rest %q", cmd, err, rest)
		}
		if cmd.Exec != nil && len(cmd.Exec) == 0 {
			cmd.Exec = [][][]byte{} // decoded as an empty transaction, not nil
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("got %+v, want %+v", got, cmd)
		}
	}
}

// FuzzDecodeCommand: no input makes the decoder panic, and what decodes
// encodes to bytes that decode to the same command.
func FuzzDecodeCommand(f *testing.F) {
	f.Add((&Command{Proto: 2, Args: [][]byte{[]byte("PING")}}).AppendBinary(nil))
	f.Add((&Command{DB: 2, Proto: 3, Exec: [][][]byte{{[]byte("INCR"), []byte("n")}},
		watched: []*watchedKey{{key: []byte("k"), ok: true}}}).AppendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, _, err := DecodeCommand(b)
		if err != nil {
			return
		}
		again, _, err := DecodeCommand(cmd.AppendBinary(nil))
		if err != nil || !reflect.DeepEqual(again, cmd) {
			t.Fatalf("%x decodes to %+v, which encodes and decodes to %+v, %v", b, cmd, again, err)
		}
	})
}

// BenchmarkSnapshot measures what a Raft snapshot holds its replica's
// applies up for: encoding a million CL.THROTTLE keys and the script cache.
func BenchmarkSnapshot(b *testing.B) {
	s, m := newTestServer(b)
	tx := s.store.Tx(m.Now())
	for i := range 1_000_000 {
		tx.Put(0, []byte("user:"+strconv.Itoa(i)), store.IntValue(m.Now()+int64(i)), m.Now()/1e6+60_000)
	}
	var buf []byte
	b.ResetTimer()
	for range b.N {
		buf = s.AppendSnapshot(buf[:0], m.Now())
	}
	b.ReportMetric(float64(len(buf))/1e6, "MB")
}

// TestSnapshotRoundTrip: a snapshot restored into an empty server gives the
// same digest and script cache.
func TestSnapshotRoundTrip(t *testing.T) {
	s, m := newTestServer(t)
	tx := s.store.Tx(m.Now())
	tx.Put(0, []byte("a"), store.IntValue(7), 0)
	tx.Put(3, []byte("b"), store.StringValue([]byte("x")), m.Now()/1e6+5000)
	if _, err := s.scripts.Load([]byte("return 1")); err != nil {
		t.Fatal(err)
	}
	snap := s.AppendSnapshot(nil, m.Now())
	r, _ := newTestServer(t)
	r.store.Tx(m.Now()).Put(1, []byte("gone"), store.IntValue(1), 0)
	if err := r.RestoreSnapshot(snap, m.Now()); err != nil {
		t.Fatal(err)
	}
	if got, want := r.store.Tx(m.Now()).Digest(nil), s.store.Tx(m.Now()).Digest(nil); got != want {
		t.Fatalf("digest after restore %x, want %x", got, want)
	}
	if got, want := r.scripts.Sources(), s.scripts.Sources(); !reflect.DeepEqual(got, want) {
		t.Fatalf("scripts after restore %q, want %q", got, want)
	}
}
