package resp

import (
	"bytes"
	"slices"
	"testing"
)

func TestAppendCommand(t *testing.T) {
	b := AppendCommand([]byte("+prefix kept\r\n"), "SET", "k", "", "a b\r\nc")
	want := "+prefix kept\r\n*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$6\r\na b\r\nc\r\n"
	if string(b) != want {
		t.Fatalf("AppendCommand = %q; want %q", b, want)
	}
	// What it writes, Reader reads back as the same arguments, strings or
	// bytes alike.
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("k:1"), {0, '\r', '\n'}, nil}
	var stream []byte
	stream = AppendCommand(stream, args...)
	stream = AppendCommand(stream, "PING")
	rd := NewReader(bytes.NewReader(stream), Limits{})
	for _, want := range [][][]byte{args, {[]byte("PING")}} {
		got, err := rd.Read()
		if err != nil || !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("Read = %q, %v; want %q", got, err, want)
		}
	}
}
