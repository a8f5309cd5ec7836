package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// rdTestResult is what a stream of requests yields: the commands in order
// and the protocol error that ended it ("" when the stream ended with EOF).
type rdTestResult struct {
	cmds [][]string
	err  string
}

func (r rdTestResult) String() string {
	var b strings.Builder
	for _, c := range r.cmds {
		fmt.Fprintf(&b, "%q\n", c)
	}
	fmt.Fprintf(&b, "err=%q", r.err)
	return b.String()
}

func rdTestEqual(a, b rdTestResult) bool {
	return a.err == b.err && slices.EqualFunc(a.cmds, b.cmds, slices.Equal[[]string])
}

// rdTestDrain reads commands until an error, copying the arguments (they
// are only valid until the next Read). It fails the test on errors other
// than io.EOF and *ProtocolError, and on a reader that keeps returning
// commands longer than its input allows (a hang).
func rdTestDrain(t testing.TB, rd *Reader, maxCmds int) rdTestResult {
	t.Helper()
	var res rdTestResult
	for i := 0; ; i++ {
		if i > maxCmds+1 {
			t.Fatalf("more than %d commands from the input: the reader loops", maxCmds)
		}
		args, err := rd.Read()
		if err != nil {
			var pe *ProtocolError
			switch {
			case errors.As(err, &pe):
				if err.Error() != "Protocol error: "+pe.Msg {
					t.Fatalf("Error() = %q for Msg %q", err.Error(), pe.Msg)
				}
				res.err = pe.Msg
				// Protocol errors are sticky.
				if _, err2 := rd.Read(); err2 != err {
					t.Fatalf("second Read after a protocol error: %v, want the same error", err2)
				}
			case err == io.EOF:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			return res
		}
		if len(args) == 0 {
			t.Fatal("Read returned an empty command")
		}
		cmd := make([]string, len(args))
		for j, a := range args {
			cmd[j] = string(a)
		}
		res.cmds = append(res.cmds, cmd)
	}
}

// rdTestChunks returns its data in chunks of random size between 1 and max.
type rdTestChunks struct {
	data []byte
	rng  *rand.Rand
	max  int
}

func (c *rdTestChunks) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(1+c.rng.IntN(c.max), len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// rdTestCycle repeats its data forever.
type rdTestCycle struct {
	data []byte
	off  int
}

func (c *rdTestCycle) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

// --- A reference model -------------------------------------------------
//
// rdRef is a literal port of Redis 7's processInputBuffer,
// processInlineBuffer, processMultibulkBuffer, string2ll and sdssplitargs,
// sharing no code with the Reader. It works on a growing query buffer the
// way Redis does (rescanning from qb_pos, strchr stopping at NUL) and runs
// after every byte, as if Redis read one byte at a time: that is the one
// chunking whose outcome the Reader promises for any chunking.

type rdRef struct {
	q            []byte
	pos          int
	reqtype      int // 0 unknown, 1 inline, 2 multibulk
	multibulklen int64
	bulklen      int64
	argv         []string
	lim          Limits
	auth         bool
	cmds         [][]string
}

func rdRefRun(data []byte, lim Limits, auth bool) rdTestResult {
	if lim.MaxBulkLen == 0 {
		lim.MaxBulkLen = 512 * 1024 * 1024
	}
	if lim.MaxInlineLen == 0 {
		lim.MaxInlineLen = 64 * 1024
	}
	c := &rdRef{lim: lim, auth: auth, bulklen: -1}
	for _, b := range data {
		c.q = append(c.q, b)
		if msg := c.processInputBuffer(); msg != "" {
			return rdTestResult{c.cmds, msg}
		}
	}
	return rdTestResult{c.cmds, ""}
}

func rdRefStrchr(s []byte, from int, ch byte) int {
	for i := from; i < len(s); i++ {
		if s[i] == 0 {
			return -1
		}
		if s[i] == ch {
			return i
		}
	}
	return -1
}

func (c *rdRef) processInputBuffer() string {
	for c.pos < len(c.q) {
		if c.reqtype == 0 {
			if c.q[c.pos] == '*' {
				c.reqtype = 2
			} else {
				c.reqtype = 1
			}
		}
		var ok bool
		var msg string
		if c.reqtype == 1 {
			ok, msg = c.processInlineBuffer()
		} else {
			ok, msg = c.processMultibulkBuffer()
		}
		if msg != "" {
			return msg
		}
		if !ok {
			break
		}
		if len(c.argv) > 0 {
			c.cmds = append(c.cmds, c.argv)
		}
		c.argv, c.reqtype, c.multibulklen, c.bulklen = nil, 0, 0, -1
	}
	return ""
}

func (c *rdRef) processInlineBuffer() (bool, string) {
	newline := rdRefStrchr(c.q, c.pos, '\n')
	if newline < 0 {
		if len(c.q)-c.pos > c.lim.MaxInlineLen {
			return false, "too big inline request"
		}
		return false, ""
	}
	end := newline
	if newline != c.pos && c.q[newline-1] == '\r' {
		end--
	}
	argv, ok := rdRefSplitArgs(string(c.q[c.pos:end]))
	if !ok {
		return false, "unbalanced quotes in request"
	}
	c.pos = newline + 1
	c.argv = argv
	return true, ""
}

func (c *rdRef) processMultibulkBuffer() (bool, string) {
	if c.multibulklen == 0 {
		newline := rdRefStrchr(c.q, c.pos, '\r')
		if newline < 0 {
			if len(c.q)-c.pos > c.lim.MaxInlineLen {
				return false, "too big mbulk count string"
			}
			return false, ""
		}
		if newline-c.pos > len(c.q)-c.pos-2 {
			return false, ""
		}
		ll, ok := rdRefString2ll(c.q[c.pos+1 : newline])
		if !ok || ll > 2147483647 {
			return false, "invalid multibulk length"
		} else if ll > 10 && !c.auth {
			return false, "unauthenticated multibulk length"
		}
		c.pos = newline + 2
		if ll <= 0 {
			return true, ""
		}
		c.multibulklen = ll
	}
	for c.multibulklen > 0 {
		if c.bulklen == -1 {
			newline := rdRefStrchr(c.q, c.pos, '\r')
			if newline < 0 {
				if len(c.q)-c.pos > c.lim.MaxInlineLen {
					return false, "too big bulk count string"
				}
				break
			}
			if newline-c.pos > len(c.q)-c.pos-2 {
				break
			}
			if c.q[c.pos] != '$' {
				got := c.q[c.pos]
				if got == '\r' || got == '\n' {
					got = ' '
				}
				return false, fmt.Sprintf("expected '$', got '%s'", []byte{got})
			}
			ll, ok := rdRefString2ll(c.q[c.pos+1 : newline])
			if !ok || ll < 0 || ll > c.lim.MaxBulkLen {
				return false, "invalid bulk length"
			} else if ll > 16384 && !c.auth {
				return false, "unauthenticated bulk length"
			}
			c.pos = newline + 2
			c.bulklen = ll
		}
		if int64(len(c.q)-c.pos) < c.bulklen+2 {
			break
		}
		c.argv = append(c.argv, string(c.q[c.pos:c.pos+int(c.bulklen)]))
		c.pos += int(c.bulklen) + 2
		c.bulklen = -1
		c.multibulklen--
	}
	return c.multibulklen == 0, ""
}

func rdRefString2ll(b []byte) (int64, bool) {
	s := string(b)
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	for _, ch := range digits {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func rdRefSplitArgs(line string) ([]string, bool) {
	s := append([]byte(line), 0) // a C string
	isspace := func(c byte) bool { return c == ' ' || ('\t' <= c && c <= '\r') }
	ishex := func(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 && c != 0 }
	out := []string{}
	p := 0
	for {
		for s[p] != 0 && isspace(s[p]) {
			p++
		}
		if s[p] == 0 {
			return out, true
		}
		var cur []byte
		inq, insq, done := false, false, false
		for !done {
			if inq {
				if s[p] == '\\' && s[p+1] == 'x' && ishex(s[p+2]) && ishex(s[p+3]) {
					v, _ := strconv.ParseUint(string(s[p+2:p+4]), 16, 8)
					cur = append(cur, byte(v))
					p += 3
				} else if s[p] == '\\' && s[p+1] != 0 {
					p++
					c := s[p]
					switch s[p] {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				} else if s[p] == '"' {
					if s[p+1] != 0 && !isspace(s[p+1]) {
						return nil, false
					}
					done = true
				} else if s[p] == 0 {
					return nil, false
				} else {
					cur = append(cur, s[p])
				}
			} else if insq {
				if s[p] == '\\' && s[p+1] == '\'' {
					p++
					cur = append(cur, '\'')
				} else if s[p] == '\'' {
					if s[p+1] != 0 && !isspace(s[p+1]) {
						return nil, false
					}
					done = true
				} else if s[p] == 0 {
					return nil, false
				} else {
					cur = append(cur, s[p])
				}
			} else {
				switch s[p] {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, s[p])
				}
			}
			if s[p] != 0 {
				p++
			}
		}
		out = append(out, string(cur))
	}
}

// --- Table tests ---------------------------------------------------------

type rdTestCase struct {
	name   string
	in     string
	lim    Limits
	unauth bool
	want   [][]string
	err    string // ProtocolError.Msg; "" means the input ends in io.EOF
}

func rdTestC(args ...string) []string { return args }

var rdTestSmall = Limits{MaxInlineLen: 16}

var rdTestCases = []rdTestCase{
	// The protocol rows of redis7-replies.md.
	{name: "row PING", in: "PING\r\n", want: [][]string{{"PING"}}},
	{name: "row PING hi there", in: "PING hi there\r\n", want: [][]string{{"PING", "hi", "there"}}},
	{name: "row huge bulk length", in: "*1\r\n$999999999999\r\n", err: "invalid bulk length"},
	{name: "row *abc", in: "*abc\r\n", err: "invalid multibulk length"},
	{name: "row *-1 ignored", in: "*-1\r\n"},
	{name: "row expected $", in: "*2\r\n$3\r\nGET\r\n:1\r\n", err: "expected '$', got ':'"},
	{name: "row unbalanced", in: "\"unbalanced\r\n", err: "unbalanced quotes in request"},
	{name: "row huge count waits", in: "*2000000000\r\n"},

	// Multibulk counts: string2ll, INT_MAX, counts <= 0 skipped.
	{name: "zero and negative counts skipped", in: "*0\r\n*-1\r\n*-9223372036854775808\r\nPING\r\n", want: [][]string{{"PING"}}},
	{name: "count -0", in: "*-0\r\n", err: "invalid multibulk length"},
	{name: "count leading zero", in: "*01\r\n$1\r\na\r\n", err: "invalid multibulk length"},
	{name: "count plus", in: "*+1\r\n", err: "invalid multibulk length"},
	{name: "count empty", in: "*\r\n", err: "invalid multibulk length"},
	{name: "count leading space", in: "* 1\r\n", err: "invalid multibulk length"},
	{name: "count trailing space", in: "*1 \r\n", err: "invalid multibulk length"},
	{name: "count INT_MAX waits", in: "*2147483647\r\n$1\r\na\r\n"},
	{name: "count INT_MAX+1", in: "*2147483648\r\n", err: "invalid multibulk length"},
	{name: "count below int64", in: "*-9223372036854775809\r\n", err: "invalid multibulk length"},
	{name: "count above uint64", in: "*99999999999999999999\r\n", err: "invalid multibulk length"},
	{name: "count header ends at \\r only", in: "*1\n$4\r\nPING\r\n", err: "invalid multibulk length"},

	// Bulk headers.
	{name: "bulk -1", in: "*1\r\n$-1\r\n", err: "invalid bulk length"},
	{name: "bulk leading zero", in: "*1\r\n$01\r\na\r\n", err: "invalid bulk length"},
	{name: "bulk -0", in: "*1\r\n$-0\r\n", err: "invalid bulk length"},
	{name: "bulk empty", in: "*1\r\n$\r\n", err: "invalid bulk length"},
	{name: "bulk junk", in: "*1\r\n$1x\r\n", err: "invalid bulk length"},
	{name: "bulk max waits", in: "*1\r\n$536870912\r\nabc"},
	{name: "bulk max+1", in: "*1\r\n$536870913\r\n", err: "invalid bulk length"},
	{name: "custom max bulk", in: "*1\r\n$10\r\n0123456789\r\n*2\r\n$10\r\n0123456789\r\n$11\r\n", lim: Limits{MaxBulkLen: 10},
		want: [][]string{{"0123456789"}}, err: "invalid bulk length"},
	{name: "expected $ got P", in: "*1\r\nPING\r\n", err: "expected '$', got 'P'"},
	{name: "expected $ got CR", in: "*1\r\n\r\n", err: "expected '$', got ' '"},
	{name: "expected $ got LF", in: "*1\r\n\n$1\r\na\r\n", err: "expected '$', got ' '"},
	{name: "expected $ got 0xff", in: "*1\r\n\xff\r\n", err: "expected '$', got '\xff'"},
	{name: "expected $ needs the line first", in: "*2\r\n$3\r\nGET\r\n:1"},
	{name: "two args", in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", want: [][]string{{"GET", "k"}}},
	{name: "empty arg", in: "*1\r\n$0\r\n\r\n", want: [][]string{{""}}},
	{name: "binary arg", in: "*1\r\n$5\r\nP\x00N\n\r\r\n", want: [][]string{{"P\x00N\n\r"}}},
	{name: "payload CRLF not checked", in: "*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n", want: [][]string{{"PING"}, {"PING"}}},
	{name: "header CR then any byte", in: "*1\rx$4\ryPINGzz", want: [][]string{{"PING"}}},
	{name: "partial at EOF", in: "*1\r\n$4\r\nPI"},

	// Unauthenticated limits.
	{name: "unauth count 11", in: "*11\r\n", unauth: true, err: "unauthenticated multibulk length"},
	{name: "unauth count 10", in: "*10\r\n", unauth: true},
	{name: "unauth count invalid first", in: "*2147483648\r\n", unauth: true, err: "invalid multibulk length"},
	{name: "unauth bulk 16385", in: "*1\r\n$16385\r\n", unauth: true, err: "unauthenticated bulk length"},
	{name: "unauth bulk 16384", in: "*1\r\n$16384\r\n", unauth: true},
	{name: "unauth bulk invalid first", in: "*1\r\n$536870913\r\n", unauth: true, err: "invalid bulk length"},
	{name: "unauth inline not limited", in: "a b c d e f g h i j k l\r\n", unauth: true,
		want: [][]string{{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}}},

	// Line limits (MaxInlineLen 16): the delimiter must be within the
	// first 17 bytes of the line.
	{name: "inline at limit", in: strings.Repeat("a", 16) + "\n", lim: rdTestSmall, want: [][]string{{strings.Repeat("a", 16)}}},
	{name: "inline CRLF at limit", in: strings.Repeat("a", 15) + "\r\n", lim: rdTestSmall, want: [][]string{{strings.Repeat("a", 15)}}},
	{name: "inline CRLF over limit", in: strings.Repeat("a", 16) + "\r\n", lim: rdTestSmall, err: "too big inline request"},
	{name: "inline over limit", in: strings.Repeat("a", 17) + "\n", lim: rdTestSmall, err: "too big inline request"},
	{name: "inline over limit without newline", in: strings.Repeat("a", 17), lim: rdTestSmall, err: "too big inline request"},
	{name: "inline within limit waits", in: strings.Repeat("a", 16), lim: rdTestSmall},
	{name: "default inline over limit", in: strings.Repeat("A", 100*1024) + "\r\n", err: "too big inline request"},
	{name: "default inline at limit", in: strings.Repeat("A", 65536) + "\n", want: [][]string{{strings.Repeat("A", 65536)}}},
	{name: "commands before too big", in: "PING\r\n" + strings.Repeat("a", 20), lim: rdTestSmall, want: [][]string{{"PING"}}, err: "too big inline request"},
	{name: "count line over limit", in: "*" + strings.Repeat("1", 16), lim: rdTestSmall, err: "too big mbulk count string"},
	{name: "count line at limit", in: "*111111111111111\r\n", lim: rdTestSmall, err: "invalid multibulk length"},
	{name: "bulk line at limit", in: "*1\r\n$100000000000000\r\n", lim: rdTestSmall, err: "invalid bulk length"},
	{name: "bulk line over limit", in: "*1\r\n$1000000000000000\r\n", lim: rdTestSmall, err: "too big bulk count string"},
	{name: "bulk line over limit no CR", in: "*1\r\n$" + strings.Repeat("9", 17), lim: rdTestSmall, err: "too big bulk count string"},

	// strchr stops at NUL: a NUL before the delimiter means no line yet.
	{name: "NUL in count line waits", in: "*\x001\r\n$4\r\nPING\r\n"},
	{name: "NUL in inline line waits", in: "PI\x00NG\r\nPING\r\n"},
	{name: "NUL in inline line too big", in: "PI\x00NG\r\nPING\r\nPING\r\n", lim: rdTestSmall, err: "too big inline request"},
	{name: "NUL in bulk line too big", in: "*1\r\n$1\x00\r\nabcdefghijklmnopqrstuvwxyz", lim: rdTestSmall, err: "too big bulk count string"},
	{name: "NUL in count line too big", in: "*1\x00\r\n$4\r\nPING\r\n$4\r\nPING\r\n", lim: rdTestSmall, err: "too big mbulk count string"},

	// Inline splitting (sdssplitargs).
	{name: "empty lines skipped", in: "\r\n\n   \r\n\t\r\nPING\r\n", want: [][]string{{"PING"}}},
	{name: "quotes", in: "set \"a b\" 'c d'\r\n", want: [][]string{{"set", "a b", "c d"}}},
	{name: "hex escapes", in: `"\x41\x4a\x4" "\n\r\t\b\a\"\\\z"` + "\r\n", want: [][]string{{"AJx4", "\n\r\t\b\a\"\\z"}}},
	{name: "hex escape bytes", in: `"\xff\x00\xAb"` + "\n", want: [][]string{{"\xff\x00\xab"}}},
	{name: "closing quote then text", in: "\"foo\"bar\r\n", err: "unbalanced quotes in request"},
	{name: "closing single quote then text", in: "'foo'bar\r\n", err: "unbalanced quotes in request"},
	{name: "single quote escapes", in: `'it\'s' 'a\b' 'x\y'` + "\r\n", want: [][]string{{"it's", `a\b`, `x\y`}}},
	{name: "single quote backslash before closing", in: `'x\\'` + "\r\n", err: "unbalanced quotes in request"},
	{name: "quote inside word", in: "a\"b c\"\r\n", want: [][]string{{"ab c"}}},
	{name: "quote inside word then text", in: "a\"b c\"d\r\n", err: "unbalanced quotes in request"},
	{name: "unterminated double", in: "\"abc\r\n", err: "unbalanced quotes in request"},
	{name: "unterminated single", in: "'abc\r\n", err: "unbalanced quotes in request"},
	{name: "escaped closing quote", in: "\"abc\\\"\r\n", err: "unbalanced quotes in request"},
	{name: "backslash at end in quotes", in: "\"abc\\\r\n", err: "unbalanced quotes in request"},
	{name: "tab separates", in: "a\tb\r\n", want: [][]string{{"a", "b"}}},
	{name: "vertical tab does not separate", in: "a\vb\f\r\n", want: [][]string{{"a\vb\f"}}},
	{name: "vertical tab skipped as blank", in: "\v\fa\r\n", want: [][]string{{"a"}}},
	{name: "vertical tab after quote", in: "\"a\"\vb\r\n", want: [][]string{{"a", "b"}}},
	{name: "CR inside line separates", in: "\"a\"\rb\n", want: [][]string{{"a", "b"}}},
	{name: "only one CR stripped", in: "PING\r\r\n", want: [][]string{{"PING"}}},
	{name: "raw CR inside quotes", in: "\"a\r\"\n", want: [][]string{{"a\r"}}},
	{name: "CR before LF is not in quotes", in: "\"a\r\n", err: "unbalanced quotes in request"},
	{name: "empty quoted args", in: "\"\" ''\r\n", want: [][]string{{"", ""}}},
	{name: "unquoted backslash quote", in: "a\\\"b\r\n", err: "unbalanced quotes in request"},
	{name: "inline without newline waits", in: "PING"},
	{name: "star after blank is inline", in: " *1\r\n", want: [][]string{{"*1"}}},

	// Pipelines.
	{name: "pipeline then error", in: "PING\r\n*1\r\n$4\r\nPING\r\n*abc\r\nPING\r\n", want: [][]string{{"PING"}, {"PING"}}, err: "invalid multibulk length"},
	{name: "pipeline mixed", in: "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nGET k\r\n*0\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		want: [][]string{{"SET", "k", "v"}, {"GET", "k"}, {"GET", "k"}}},
}

func TestReaderTable(t *testing.T) {
	for _, tc := range rdTestCases {
		t.Run(tc.name, func(t *testing.T) {
			want := rdTestResult{tc.want, tc.err}
			// The reference model must agree with the table, so it can be
			// trusted where the table has no row (the fuzz test). It is
			// quadratic in the line length: skip the 64 KiB rows.
			if len(tc.in) < 4096 {
				if got := rdRefRun([]byte(tc.in), tc.lim, !tc.unauth); !rdTestEqual(got, want) {
					t.Errorf("reference model:\n%v\nwant:\n%v", got, want)
				}
			}
			for _, mode := range []string{"whole", "bytes", "chunks"} {
				var src io.Reader = strings.NewReader(tc.in)
				switch mode {
				case "bytes":
					src = iotest.OneByteReader(src)
				case "chunks":
					src = &rdTestChunks{data: []byte(tc.in), rng: rand.New(rand.NewPCG(1, 2)), max: 7}
				}
				rd := NewReader(src, tc.lim)
				rd.SetAuthenticated(!tc.unauth)
				if got := rdTestDrain(t, rd, len(tc.in)); !rdTestEqual(got, want) {
					t.Errorf("%s:\n%v\nwant:\n%v", mode, got, want)
				}
			}
		})
	}
}

// The error values and texts the server writes after "-ERR ".
func TestReaderProtocolErrorText(t *testing.T) {
	rd := NewReader(strings.NewReader("*1\r\n$999999999999\r\n"), Limits{})
	_, err := rd.Read()
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("got %T %v, want *ProtocolError", err, err)
	}
	if got, want := "-ERR "+err.Error()+"\r\n", "-ERR Protocol error: invalid bulk length\r\n"; got != want {
		t.Fatalf("reply %q, want %q", got, want)
	}
}

func TestReaderSetAuthenticated(t *testing.T) {
	in := "*11\r\n" + strings.Repeat("$1\r\na\r\n", 11)
	rd := NewReader(strings.NewReader(in+in), Limits{})
	if args, err := rd.Read(); err != nil || len(args) != 11 {
		t.Fatalf("authenticated: %d args, %v", len(args), err)
	}
	rd.SetAuthenticated(false)
	if _, err := rd.Read(); err == nil || err.Error() != "Protocol error: unauthenticated multibulk length" {
		t.Fatalf("unauthenticated: %v", err)
	}

	// The limit applies to the headers parsed after the change, even in the
	// middle of a command, as authRequired() does in Redis.
	rd = NewReader(strings.NewReader("*2\r\n$1\r\na\r\n$20000\r\n"), Limits{})
	rd.SetAuthenticated(false)
	if _, err := rd.Read(); err == nil || err.Error() != "Protocol error: unauthenticated bulk length" {
		t.Fatalf("unauthenticated bulk: %v", err)
	}
}

// Arguments must not overlap: appending to one must not change the next.
func TestReaderArgsCapped(t *testing.T) {
	for _, in := range []string{"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "a b\r\n", "\"a\" \"b\"\r\n"} {
		rd := NewReader(strings.NewReader(in), Limits{})
		args, err := rd.Read()
		if err != nil {
			t.Fatal(err)
		}
		_ = append(args[0], 'X', 'X', 'X', 'X', 'X', 'X', 'X', 'X')
		if string(args[1]) != "b" {
			t.Fatalf("%q: appending to args[0] changed args[1] to %q", in, args[1])
		}
	}
}

// rdTestCountingReader hands out all its data in the first call and counts
// calls, to check that Read does not block while a command is buffered.
type rdTestCountingReader struct {
	data  []byte
	calls int
}

func (c *rdTestCountingReader) Read(p []byte) (int, error) {
	c.calls++
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

func TestReaderNoReadWhileBuffered(t *testing.T) {
	var in bytes.Buffer
	for i := range 100 {
		fmt.Fprintf(&in, "*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\nECHO %d\r\n", len(strconv.Itoa(i)), i, i)
	}
	src := &rdTestCountingReader{data: in.Bytes()}
	rd := NewReader(src, Limits{})
	for i := range 200 {
		args, err := rd.Read()
		if err != nil {
			t.Fatal(err)
		}
		if string(args[1]) != strconv.Itoa(i/2) {
			t.Fatalf("command %d: %q", i, args)
		}
		if src.calls != 1 {
			t.Fatalf("command %d: underlying reader called %d times, want 1", i, src.calls)
		}
	}
	if rd.Buffered() != 0 {
		t.Fatalf("Buffered() = %d after the last command", rd.Buffered())
	}
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestReaderBuffered(t *testing.T) {
	rd := NewReader(strings.NewReader("PING\r\n*1\r\n$4\r\nPI"), Limits{})
	if _, err := rd.Read(); err != nil {
		t.Fatal(err)
	}
	if got := rd.Buffered(); got != 10 {
		t.Fatalf("Buffered() = %d, want 10", got)
	}
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if got := rd.Buffered(); got != 10 {
		t.Fatalf("Buffered() after EOF inside a command = %d, want 10", got)
	}
}

var rdTestErrTimeout = errors.New("timeout")

// rdTestScript returns each step in turn: data, or an error.
type rdTestScript struct{ steps []any }

func (s *rdTestScript) Read(p []byte) (int, error) {
	if len(s.steps) == 0 {
		return 0, io.EOF
	}
	step := s.steps[0]
	s.steps = s.steps[1:]
	switch v := step.(type) {
	case string:
		return copy(p, v), nil
	case error:
		return 0, v
	}
	panic("bad step")
}

// Errors of the underlying reader are passed through and the reader stays
// usable, keeping the partial command.
func TestReaderSourceErrors(t *testing.T) {
	rd := NewReader(&rdTestScript{steps: []any{"*1\r\n$4\r\nPI", rdTestErrTimeout, "NG\r\n"}}, Limits{})
	if _, err := rd.Read(); err != rdTestErrTimeout {
		t.Fatalf("got %v, want the source's error", err)
	}
	if args, err := rd.Read(); err != nil || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("after retry: %q, %v", args, err)
	}
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}

	// Data and an error in the same call: the data first.
	rd = NewReader(iotest.DataErrReader(strings.NewReader("PING\r\nPING\r\n")), Limits{})
	if got := rdTestDrain(t, rd, 10); len(got.cmds) != 2 || got.err != "" {
		t.Fatalf("DataErrReader: %v", got)
	}

	// A reader that never makes progress.
	rd = NewReader(rdTestNoProgress{}, Limits{})
	if _, err := rd.Read(); err != io.ErrNoProgress {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}

type rdTestNoProgress struct{}

func (rdTestNoProgress) Read([]byte) (int, error) { return 0, nil }

// --- Pipelines and chunking ---------------------------------------------

var rdTestPipeline = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n" +
	"GET key\r\n" +
	"*0\r\n" +
	"\r\n" +
	"set \"a \\\"b\\\"\" 'c\\'d' \"\\x00\\xff\"\n" +
	"*-1\r\n" +
	"*1\r\n$0\r\n\r\n" +
	"   PING   \r\n" +
	"*4\r\n$11\r\nCL.THROTTLE\r\n$17\r\nuser:000000012345\r\n$2\r\n15\r\n$2\r\n30\r\n" +
	"*2\r\n$4\r\nECHO\r\n$9\r\n\r\n\x00\"' \t\r\n\r\n"

var rdTestPipelineWant = [][]string{
	{"SET", "key", "va\r\nl"},
	{"GET", "key"},
	{"set", `a "b"`, "c'd", "\x00\xff"},
	{""},
	{"PING"},
	{"CL.THROTTLE", "user:000000012345", "15", "30"},
	{"ECHO", "\r\n\x00\"' \t\r\n"},
}

func TestReaderPipelineSplits(t *testing.T) {
	data := []byte(rdTestPipeline)
	want := rdTestResult{cmds: rdTestPipelineWant}
	if got := rdRefRun(data, Limits{}, true); !rdTestEqual(got, want) {
		t.Fatalf("reference model:\n%v", got)
	}
	check := func(name string, src io.Reader) {
		t.Helper()
		if got := rdTestDrain(t, NewReader(src, Limits{}), len(data)); !rdTestEqual(got, want) {
			t.Fatalf("%s:\n%v\nwant:\n%v", name, got, want)
		}
	}
	check("whole", bytes.NewReader(data))
	check("one byte", iotest.OneByteReader(bytes.NewReader(data)))
	check("half", iotest.HalfReader(bytes.NewReader(data)))
	// Split in two at every byte boundary.
	for k := 0; k <= len(data); k++ {
		check(fmt.Sprintf("split at %d", k), io.MultiReader(bytes.NewReader(data[:k]), bytes.NewReader(data[k:])))
	}
	// Random chunks.
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		check(fmt.Sprintf("chunks %d", i), &rdTestChunks{data: data, rng: rng, max: 1 + i%40})
	}
	// Many copies in one buffer, so commands straddle the buffer's end.
	many := bytes.Repeat(data, 1000)
	rd := NewReader(bytes.NewReader(many), Limits{})
	for i := range 1000 {
		for j, w := range rdTestPipelineWant {
			args, err := rd.Read()
			if err != nil {
				t.Fatalf("copy %d command %d: %v", i, j, err)
			}
			if len(args) != len(w) {
				t.Fatalf("copy %d command %d: %q", i, j, args)
			}
			for k := range args {
				if string(args[k]) != w[k] {
					t.Fatalf("copy %d command %d: %q", i, j, args)
				}
			}
		}
	}
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// --- Random round trip ----------------------------------------------------

// rdTestEncodeInline writes args as an inline request the way a person (or
// redis-cli) might: plain words where possible, otherwise double or single
// quotes with escapes, with random blanks and line ends.
func rdTestEncodeInline(rng *rand.Rand, b *bytes.Buffer, args []string) {
	if rng.IntN(4) == 0 {
		b.WriteString(" \t"[:1+rng.IntN(2)])
	}
	for i, a := range args {
		if i > 0 {
			b.WriteString([]string{" ", "\t", "  ", " \t "}[rng.IntN(4)])
		}
		// A line starting with '*' would be a multibulk request.
		plain := a != "" && !strings.ContainsAny(a, " \t\r\n\v\f\"'") && (i > 0 || a[0] != '*')
		for j := 0; j < len(a); j++ {
			if a[j] < 0x20 || a[j] > 0x7e {
				plain = false
			}
		}
		switch {
		case plain && rng.IntN(4) != 0:
			b.WriteString(a)
		case !strings.ContainsAny(a, "\\") && !strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r > 0x7e }) && rng.IntN(2) == 0:
			b.WriteByte('\'')
			b.WriteString(strings.ReplaceAll(a, "'", `\'`))
			b.WriteByte('\'')
		default:
			b.WriteByte('"')
			for j := 0; j < len(a); j++ {
				c := a[j]
				switch {
				case c == '"' || c == '\\':
					b.WriteByte('\\')
					b.WriteByte(c)
				case c == '\n' && rng.IntN(2) == 0:
					b.WriteString(`\n`)
				case c == '\r' && rng.IntN(2) == 0:
					b.WriteString(`\r`)
				case c == '\t' && rng.IntN(2) == 0:
					b.WriteString(`\t`)
				case c < 0x20 || c > 0x7e || rng.IntN(10) == 0:
					fmt.Fprintf(b, []string{`\x%02x`, `\x%02X`}[rng.IntN(2)], c)
				default:
					b.WriteByte(c)
				}
			}
			b.WriteByte('"')
		}
	}
	if rng.IntN(4) == 0 {
		b.WriteString(" ")
	}
	if rng.IntN(2) == 0 {
		b.WriteString("\r\n")
	} else {
		b.WriteString("\n")
	}
}

func rdTestRandomStream(rng *rand.Rand, n int, big bool) ([]byte, [][]string) {
	var b bytes.Buffer
	want := make([][]string, 0, n)
	for range n {
		// Requests Redis ignores, now and then.
		switch rng.IntN(50) {
		case 0:
			b.WriteString("*0\r\n")
		case 1:
			b.WriteString("*-1\r\n")
		case 2:
			b.WriteString(" \r\n")
		}
		args := make([]string, 1+rng.IntN(6))
		if rng.IntN(3) == 0 {
			for i := range args {
				// Printable, with quotes, backslashes and blanks, and
				// sometimes control or high bytes (sent as escapes).
				p := make([]byte, rng.IntN(20))
				for j := range p {
					if rng.IntN(20) == 0 {
						p[j] = byte(rng.IntN(256))
					} else {
						p[j] = byte(0x20 + rng.IntN(0x5f))
					}
				}
				args[i] = string(p)
			}
			rdTestEncodeInline(rng, &b, args)
		} else {
			fmt.Fprintf(&b, "*%d\r\n", len(args))
			for i := range args {
				size := rng.IntN(32)
				switch {
				case rng.IntN(10) == 0:
					size = rng.IntN(1000)
				case big && rng.IntN(200) == 0:
					size = rng.IntN(100 << 10)
				}
				p := make([]byte, size)
				for j := range p {
					p[j] = byte(rng.IntN(256))
				}
				args[i] = string(p)
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", size, p)
			}
		}
		want = append(want, args)
	}
	return b.Bytes(), want
}

func TestReaderRandomRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data, want := rdTestRandomStream(rng, 10000, true)
	for _, chunk := range []int{1 << 20, 16 << 10, 1000, 10} {
		rd := NewReader(&rdTestChunks{data: data, rng: rng, max: chunk}, Limits{})
		got := rdTestDrain(t, rd, len(want))
		if got.err != "" || len(got.cmds) != len(want) {
			t.Fatalf("chunks up to %d: %d commands, err %q; want %d", chunk, len(got.cmds), got.err, len(want))
		}
		for i := range want {
			if !slices.Equal(got.cmds[i], want[i]) {
				t.Fatalf("chunks up to %d: command %d = %q, want %q", chunk, i, got.cmds[i], want[i])
			}
		}
	}
	// One byte at a time, on a stream without the big arguments.
	data, want = rdTestRandomStream(rng, 2000, false)
	got := rdTestDrain(t, NewReader(iotest.OneByteReader(bytes.NewReader(data)), Limits{}), len(want))
	if !rdTestEqual(got, rdTestResult{cmds: want}) {
		t.Fatalf("one byte at a time: %d commands, err %q", len(got.cmds), got.err)
	}
	// The reference model agrees on a shorter stream.
	data, want = rdTestRandomStream(rng, 300, false)
	if got := rdRefRun(data, Limits{}, true); !rdTestEqual(got, rdTestResult{cmds: want}) {
		t.Fatalf("reference model: %d commands, err %q", len(got.cmds), got.err)
	}
}

// rdTestPieces are fragments that, glued at random, make streams full of
// near misses: valid and broken headers, stray CR, LF and NUL, quotes and
// escapes, counts and lengths around the limits.
var rdTestPieces = []string{
	"*", "*1\r\n", "*2\r\n", "*3\r\n", "*0\r\n", "*-1\r\n", "*-0\r\n", "*01\r\n", "*11\r\n", "*2147483648\r\n",
	"$", "$0\r\n\r\n", "$1\r\na\r\n", "$3\r\nGET\r\n", "$4\r\nPI\r\n\r\n", "$-1\r\n", "$01\r\n", "$16385\r\n", "$41\r\n",
	"$2\r\n\x00\x00\r\n", "$5\r\nab", "\r", "\n", "\r\n", "\x00", " ", "\t", "\v", ":", "-", "0", "1", "9",
	"PING", "GET k", "\"", "'", "\\", "\\x", "\\x4", "\\x41", "\\'", "\\\"", "\"a b\"", "'c d'", "\"\" ", "\xff",
	"abcdefghijklmnopqrstuvwxyz",
}

// TestReaderRandomNearMisses compares the reader with the reference model
// on streams glued from rdTestPieces, with several chunkings and limits:
// unlike the fuzzer's byte flips, these reach deep into the state machine.
func TestReaderRandomNearMisses(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for iter := range 10000 {
		var b bytes.Buffer
		for range 1 + rng.IntN(30) {
			b.WriteString(rdTestPieces[rng.IntN(len(rdTestPieces))])
		}
		data := b.Bytes()
		lim := Limits{}
		if rng.IntN(2) == 0 {
			lim = Limits{MaxInlineLen: 1 + rng.IntN(30), MaxBulkLen: int64(rng.IntN(50))}
		}
		unauth := rng.IntN(4) == 0
		want := rdRefRun(data, lim, !unauth)
		for _, chunk := range []int{len(data) + 1, 1, 2 + rng.IntN(10)} {
			rd := NewReader(&rdTestChunks{data: data, rng: rng, max: chunk}, lim)
			rd.SetAuthenticated(!unauth)
			if got := rdTestDrain(t, rd, len(data)); !rdTestEqual(got, want) {
				t.Fatalf("iteration %d, input %q, limits %+v, unauth %v, chunks up to %d:\n%v\nreference:\n%v",
					iter, data, lim, unauth, chunk, got, want)
			}
		}
	}
}

// --- Memory ------------------------------------------------------------------

func TestReaderAnnouncedSizesAllocateNothing(t *testing.T) {
	// A huge announced bulk with nothing after it.
	rd := NewReader(strings.NewReader("*1\r\n$536870912\r\nabc"), Limits{})
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if c := cap(rd.buf); c > rdMinBuf {
		t.Fatalf("buffer grew to %d for an announced bulk", c)
	}
	// A huge count, then a few empty bulks.
	rd = NewReader(strings.NewReader("*2000000000\r\n"+strings.Repeat("$0\r\n\r\n", 1000)), Limits{})
	if _, err := rd.Read(); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
	if c := cap(rd.offs); c > 4096 {
		t.Fatalf("offsets grew to %d for 1000 bulks", c)
	}
}

func TestReaderBigBulk(t *testing.T) {
	const size = 1 << 20
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	in := fmt.Sprintf("*2\r\n$3\r\nSET\r\n$%d\r\n%s\r\nPING\r\n", size, payload)
	rng := rand.New(rand.NewPCG(7, 8))
	rd := NewReader(&rdTestChunks{data: []byte(in), rng: rng, max: 5000}, Limits{MaxBulkLen: size})
	args, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 2 || !bytes.Equal(args[1], payload) {
		t.Fatal("big bulk corrupted")
	}
	// The buffer grew to the command's size, not to twice the bulk.
	if c := cap(rd.buf); c > len(in) {
		t.Fatalf("buffer grew to %d for a command of %d bytes", c, len(in))
	}
	args, err = rd.Read()
	if err != nil || string(args[0]) != "PING" {
		t.Fatalf("%q, %v", args, err)
	}
	// Once drained, the big buffer is given back.
	if _, err := rd.Read(); err != io.EOF {
		t.Fatal(err)
	}
	if c := cap(rd.buf); c > rdMaxKeep {
		t.Fatalf("buffer of %d kept after the big command", c)
	}

	// Over the limit.
	rd = NewReader(strings.NewReader(in), Limits{MaxBulkLen: size - 1})
	if _, err := rd.Read(); err == nil || err.Error() != "Protocol error: invalid bulk length" {
		t.Fatalf("got %v", err)
	}
}

func TestReaderZeroAllocs(t *testing.T) {
	var b bytes.Buffer
	for range 100 {
		b.WriteString("*5\r\n$11\r\nCL.THROTTLE\r\n$17\r\nuser:000000012345\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n")
		b.WriteString("CL.THROTTLE user:000000012345 15 30 \"60\"\r\n")
	}
	rd := NewReader(&rdTestCycle{data: b.Bytes()}, Limits{})
	for range 1000 { // warm up: buffers reach their size
		if _, err := rd.Read(); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(10000, func() {
		args, err := rd.Read()
		if err != nil || len(args) != 5 {
			t.Fatalf("%q, %v", args, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per command, want 0", allocs)
	}
}

// --- Fuzzing ---------------------------------------------------------------

func FuzzReader(f *testing.F) {
	for _, tc := range rdTestCases {
		if len(tc.in) < 1000 {
			f.Add([]byte(tc.in), tc.lim == rdTestSmall, tc.unauth, uint64(1))
		}
	}
	f.Add([]byte(rdTestPipeline), false, false, uint64(2))
	f.Add([]byte(rdTestPipeline), true, false, uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, small, unauth bool, seed uint64) {
		if len(data) > 4096 {
			data = data[:4096] // keeps the quadratic reference model fast
		}
		lim := Limits{}
		if small {
			lim = Limits{MaxInlineLen: 24, MaxBulkLen: 40}
		}
		want := rdRefRun(data, lim, !unauth)
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		for _, chunk := range []int{len(data) + 1, 1, 1 + int(seed%17)} {
			rd := NewReader(&rdTestChunks{data: data, rng: rng, max: chunk}, lim)
			rd.SetAuthenticated(!unauth)
			got := rdTestDrain(t, rd, len(data))
			if !rdTestEqual(got, want) {
				t.Fatalf("chunks up to %d:\n%v\nreference:\n%v", chunk, got, want)
			}
			// Memory follows the input, not the announced sizes.
			if c := cap(rd.buf); c > max(rdMinBuf, 3*len(data)) {
				t.Fatalf("buffer of %d for %d bytes of input", c, len(data))
			}
			if c := cap(rd.offs) + cap(rd.args); c > 2*len(data)+64 {
				t.Fatalf("argument slices of %d for %d bytes of input", c, len(data))
			}
			if b := rd.Buffered(); b < 0 || b > len(data) {
				t.Fatalf("Buffered() = %d for %d bytes", b, len(data))
			}
		}
	})
}

// --- Benchmark ----------------------------------------------------------------

func BenchmarkReader(b *testing.B) {
	const cmd = "*5\r\n$11\r\nCL.THROTTLE\r\n$17\r\nuser:000000012345\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n"
	run := func(b *testing.B, one string) {
		data := []byte(strings.Repeat(one, 1000))
		rd := NewReader(&rdTestCycle{data: data}, Limits{})
		b.SetBytes(int64(len(one)))
		b.ReportAllocs()
		for b.Loop() {
			args, err := rd.Read()
			if err != nil || len(args) != 5 {
				b.Fatalf("%q, %v", args, err)
			}
		}
	}
	b.Run("multibulk", func(b *testing.B) { run(b, cmd) })
	b.Run("inline", func(b *testing.B) { run(b, "CL.THROTTLE user:000000012345 15 30 60\r\n") })
}

// TestReader_QueryTooBig: a request that keeps growing past MaxQueryLen ends
// the connection (Redis' client-query-buffer-limit) instead of memory.
func TestReader_QueryTooBig(t *testing.T) {
	big := strings.NewReader("*2\r\n$3\r\nSET\r\n$100000\r\n" + strings.Repeat("x", 100000))
	r := NewReader(big, Limits{MaxQueryLen: 64 << 10})
	if _, err := r.Read(); !errors.Is(err, ErrQueryTooBig) {
		t.Fatalf("Read = %v, want ErrQueryTooBig", err)
	}
}
