package compat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// Shared helpers of the end-to-end tests (goredis_test.go, rediscli_test.go,
// fuzz_test.go): nodes on a loopback port with a pinned debug clock, a raw
// RESP connection, and a strict reader of RESP2/RESP3 replies.

const (
	// e2eClockStart is where every node's debug clock is set before a test
	// runs (2023-11-14T22:13:20Z), so TIME, TTLs and stored TATs are the same
	// on every run.
	e2eClockStart int64 = 1_700_000_000_000_000_000
	// e2eTimeout bounds a whole test's client calls and each child process.
	e2eTimeout = 60 * time.Second
	// e2eIOWait bounds one read or write on a raw connection.
	e2eIOWait = 10 * time.Second
)

// e2eNode starts a node with the debug clock, set to e2eClockStart over the
// wire, and closes it when the test ends.
func e2eNode(t testing.TB, cfg server.Config) *server.Node {
	t.Helper()
	cfg.DebugClock = true
	n := servertest.Start(t, cfg)
	e2eSetClock(t, n, cfg.RequirePass)
	return n
}

// e2eSetClock sets n's debug clock to e2eClockStart over the wire.
func e2eSetClock(t testing.TB, n *server.Node, pass string) {
	t.Helper()
	c := e2eDial(t, n.Addr())
	if pass != "" {
		e2eMustDo(t, c, "+OK\r\n", "AUTH", pass)
	}
	e2eMustDo(t, c, ":"+strconv.FormatInt(e2eClockStart, 10)+"\r\n", "DEBUG", "CLOCK", "SET", strconv.FormatInt(e2eClockStart, 10))
	c.Close()
}

// e2eStart starts a node for a test: e2eNode, or e2eFollower.
type e2eStart func(testing.TB, server.Config) *server.Node

// e2eModes runs fn against a single node and against a follower of a
// 3-member Raft cluster, which must serve a client unchanged: every command
// it forwards to the leader, DEBUG CLOCK moving the whole cluster's time.
func e2eModes(t *testing.T, fn func(t *testing.T, start e2eStart)) {
	t.Run("single", func(t *testing.T) { fn(t, e2eNode) })
	t.Run("raft", func(t *testing.T) { fn(t, e2eFollower) })
}

// e2eFollower starts a 3-member Raft cluster with cfg and returns one of
// its followers, its clock (the cluster's) set as e2eNode sets it.
func e2eFollower(t testing.TB, cfg server.Config) *server.Node {
	t.Helper()
	m := rafttest.New(t, 3, cfg).Follower()
	e2eSetClock(t, m.Node, cfg.RequirePass)
	// The harness's own client leaves, so that the test sees only its
	// own connections in CLIENT LIST.
	m.Client.Close()
	c := e2eDial(t, m.Node.Addr())
	if cfg.RequirePass != "" {
		e2eMustDo(t, c, "+OK\r\n", "AUTH", cfg.RequirePass)
	}
	testwait.For(t, 10*time.Second, "the harness's client gone", func() bool {
		list, err := c.Do("CLIENT", "LIST")
		return err == nil && strings.Count(list, " addr=") == 1
	})
	c.Close()
	return m.Node
}

// e2eConn is a raw client connection that reads whole replies.
type e2eConn struct {
	net.Conn
	rd *bufio.Reader
}

// e2eDial connects to addr; the connection is closed when the test ends.
func e2eDial(t testing.TB, addr string) *e2eConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, e2eIOWait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &e2eConn{Conn: nc, rd: bufio.NewReader(nc)}
}

// Do sends args as one multibulk request and returns the raw reply bytes.
func (c *e2eConn) Do(args ...string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(e2eIOWait)); err != nil {
		return "", err
	}
	if _, err := c.Write(e2eMultibulk(args...)); err != nil {
		return "", err
	}
	reply, err := e2eReadReply(c.rd)
	return string(reply), err
}

// e2eInfoField returns the value of name in an INFO reply, "" when absent.
func e2eInfoField(info, name string) string {
	for l := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), name+":"); ok {
			return v
		}
	}
	return ""
}

// e2eMustDo runs args on c and fails the test unless the reply is want.
func e2eMustDo(t testing.TB, c *e2eConn, want string, args ...string) {
	t.Helper()
	got, err := c.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	if got != want {
		t.Fatalf("%q: got %q, want %q", args, got, want)
	}
}

// e2eMultibulk encodes args as a RESP2 multibulk request.
func e2eMultibulk(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// e2eErrBadReply reports bytes that are not a well-formed reply.
var e2eErrBadReply = errors.New("malformed reply")

// e2eMaxReply bounds the lengths and counts e2eReadReply accepts, far above
// anything the tests provoke.
const e2eMaxReply = 1 << 26

// e2eReadReply reads exactly one RESP2 or RESP3 reply from rd and returns its
// bytes. It is strict: every line ends in CRLF, lengths and counts are
// decimal integers, a bulk is followed by CRLF and a simple string or error
// holds no CR or LF. A reply cut short by the end of the stream is
// io.ErrUnexpectedEOF; io.EOF means no reply started.
func e2eReadReply(rd *bufio.Reader) ([]byte, error) {
	var out []byte
	if err := e2eReadValue(rd, &out, 0); err != nil {
		if errors.Is(err, io.EOF) && len(out) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return out, err
	}
	return out, nil
}

func e2eReadValue(rd *bufio.Reader, out *[]byte, depth int) error {
	if depth > 64 {
		return fmt.Errorf("%w: nested too deep", e2eErrBadReply)
	}
	line, err := e2eReadLine(rd, out)
	if err != nil {
		return err
	}
	if len(line) == 0 {
		return fmt.Errorf("%w: empty line", e2eErrBadReply)
	}
	body := line[1:]
	switch line[0] {
	case '+', '-':
		return nil
	case ':':
		if _, err := strconv.ParseInt(string(body), 10, 64); err != nil {
			return fmt.Errorf("%w: integer %q", e2eErrBadReply, body)
		}
		return nil
	case '_':
		if len(body) != 0 {
			return fmt.Errorf("%w: null %q", e2eErrBadReply, line)
		}
		return nil
	case '#':
		if string(body) != "t" && string(body) != "f" {
			return fmt.Errorf("%w: boolean %q", e2eErrBadReply, line)
		}
		return nil
	case ',', '(':
		if len(body) == 0 {
			return fmt.Errorf("%w: number %q", e2eErrBadReply, line)
		}
		return nil
	case '$', '=', '!':
		n, err := e2eLen(body, line[0] == '$')
		if err != nil || n < 0 {
			return err // $-1: the RESP2 null
		}
		if line[0] == '=' && n < 4 {
			return fmt.Errorf("%w: verbatim of %d bytes", e2eErrBadReply, n)
		}
		buf := make([]byte, n+2)
		k, err := io.ReadFull(rd, buf)
		*out = append(*out, buf[:k]...)
		if err != nil {
			return err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return fmt.Errorf("%w: bulk of %d bytes not followed by CRLF", e2eErrBadReply, n)
		}
		return nil
	case '*', '~', '>', '%', '|':
		n, err := e2eLen(body, line[0] == '*')
		if err != nil || n < 0 {
			return err // *-1: the RESP2 null array
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		if line[0] == '|' {
			// An attribute precedes the value it describes.
			n++
		}
		for range n {
			if err := e2eReadValue(rd, out, depth+1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: unknown type byte %q", e2eErrBadReply, line[0])
}

// e2eReadLine reads one CRLF-terminated line, appends it to out and returns
// it without the CRLF. A lone CR or LF inside the line is an error.
func e2eReadLine(rd *bufio.Reader, out *[]byte) ([]byte, error) {
	line, err := rd.ReadSlice('\n')
	*out = append(*out, line...)
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("%w: line longer than %d bytes", e2eErrBadReply, rd.Size())
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: line %q not ended by CRLF", e2eErrBadReply, line)
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, fmt.Errorf("%w: CR inside line %q", e2eErrBadReply, line)
	}
	return line, nil
}

// e2eLen parses a length or count; -1 is allowed when nullable.
func e2eLen(b []byte, nullable bool) (int, error) {
	n, err := strconv.Atoi(string(b))
	switch {
	case err != nil, n < -1, n == -1 && !nullable, n > e2eMaxReply:
		return 0, fmt.Errorf("%w: length %q", e2eErrBadReply, b)
	}
	return n, nil
}

// e2eOutput collects what a child process writes to stdout and stderr, for
// failure messages; it is safe for the process's copy goroutines.
type e2eOutput = testlog.Buffer
