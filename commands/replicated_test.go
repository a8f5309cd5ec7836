package commands

import (
	"reflect"
	"testing"
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
