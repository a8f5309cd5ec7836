package resp

import "testing"

func TestReplyLen(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // -1: malformed
	}{
		{"+OK\r\n", 5},
		{"+OK\r\n+PONG\r\n", 5},
		{"-ERR x\r\n", 8},
		{":12\r\n", 5},
		{"$3\r\nabc\r\n", 9},
		{"$-1\r\n", 5},
		{"$0\r\n\r\n", 6},
		{"*2\r\n:1\r\n$1\r\na\r\n", 15},
		{"*-1\r\n", 5},
		{"*0\r\n", 4},
		{"_\r\n", 3},
		{"#t\r\n", 4},
		{",1.5\r\n", 6},
		{"(123\r\n", 6},
		{"!3\r\nerr\r\n", 9},
		{"=7\r\ntxt:abc\r\n", 13},
		{"%1\r\n+k\r\n:1\r\n", 12},
		{"~1\r\n+a\r\n", 8},
		{">2\r\n+a\r\n+b\r\n", 12},
		{"|1\r\n+k\r\n+v\r\n:1\r\n", 16},
		{"*1\r\n*1\r\n*1\r\n:1\r\n", 16},
		// Incomplete: 0.
		{"", 0},
		{"+OK", 0},
		{"$3\r\nab", 0},
		{"$3\r\nabc\r", 0},
		{"*2\r\n:1\r\n", 0},
		{"%1\r\n+k\r\n", 0},
		// Malformed.
		{"\r\n", -1},
		{"?x\r\n", -1},
		{"$x\r\n", -1},
		{"$3\r\nabcde\r\n", -1},
		{"*-2\r\n", -1},
	} {
		got, err := ReplyLen([]byte(tc.in))
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%q: got %d, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// FuzzReplyLen: any bytes give a length within them, 0 or an error, never a
// panic; a length found stays the same with more bytes after it.
func FuzzReplyLen(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n$1\r\na\r\n:2\r\n", "%1\r\n+k\r\n_\r\n", "|1\r\n+a\r\n+b\r\n+c\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ReplyLen(b)
		if err != nil {
			return
		}
		if n < 0 || n > len(b) {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		if n > 0 {
			if m, err := ReplyLen(append(b[:n:n], "+x\r\n"...)); m != n || err != nil {
				t.Fatalf("length %d, then %d, %v with more bytes", n, m, err)
			}
		}
	})
}
