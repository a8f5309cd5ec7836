package compat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// FuzzServe writes random bytes to a real connection of an in-process node,
// then half-closes it. Whatever the bytes, the server must not crash (a
// panic in a connection goroutine kills the test binary), must answer with
// well-formed RESP replies only, must close the connection within a
// deadline once the input has ended, and must still serve a new connection:
// PING, then FLUSHALL, which takes every shard lock, so a leaked lock shows
// as a hang.
//
// One node serves all the inputs of a fuzzing process (a node per input
// would open a listener per input, and the ports those leave in TIME_WAIT
// slow the whole machine down). Between inputs it is reset to its starting
// state: FLUSHALL and DEBUG CLOCK SET, or a new node when the input shut it
// down or set a password.
//
// Run it with: go test -run XXX -fuzz FuzzServe -fuzztime 60s ./compat/
// Crashers land in testdata/fuzz/FuzzServe/ and then run with every go test.
func FuzzServe(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	var fn fuzzNode
	f.Cleanup(func() {
		if err := fn.stop(); err != nil {
			f.Error(err)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		n := fn.get(t)
		fuzzServeInput(t, n, data)
		if !fuzzReset(t, n, data) {
			if err := fn.stop(); err != nil {
				t.Fatalf("%v\ninput: %q", err, data)
			}
		}
	})
}

// fuzzNode is the node a fuzzing process shares between its inputs.
type fuzzNode struct {
	n    *server.Node
	port int // of the last node: a new one listens there again
	log  fuzzLog
}

// get returns the running node, starting one if needed, and sends its log
// to t.
func (fn *fuzzNode) get(t *testing.T) *server.Node {
	fn.log.set(t)
	t.Cleanup(func() { fn.log.set(nil) })
	if fn.n != nil {
		return fn.n
	}
	cfg := server.Config{
		Bind:       "127.0.0.1",
		Port:       fn.port,
		DebugClock: true,
		Logger:     slog.New(slog.NewTextHandler(&fn.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	var n *server.Node
	err := errors.New("no port yet")
	if cfg.Port != 0 {
		n, err = server.Start(cfg)
	}
	if err != nil {
		n, err = servertest.Open(cfg) // a free port: someone else took it, or there was none
	}
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	fn.n = n
	if _, port, err := net.SplitHostPort(n.Addr()); err == nil {
		fn.port, _ = strconv.Atoi(port)
	}
	nc, err := fuzzDial(n.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer fuzzClose(nc)
	e2eMustDo(t, &e2eConn{Conn: nc, rd: bufio.NewReader(nc)}, ":"+strconv.FormatInt(e2eClockStart, 10)+"\r\n",
		"DEBUG", "CLOCK", "SET", strconv.FormatInt(e2eClockStart, 10))
	return n
}

// stop closes the node, within a deadline.
func (fn *fuzzNode) stop() error {
	n := fn.n
	if n == nil {
		return nil
	}
	fn.n = nil
	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			return fmt.Errorf("close server: %w", err)
		}
		return nil
	case <-time.After(e2eIOWait):
		return fmt.Errorf("server did not stop within %v", e2eIOWait)
	}
}

// fuzzLog sends the node's log to the current input's test, or to stderr
// between inputs.
type fuzzLog struct {
	mu sync.Mutex
	t  *testing.T
}

func (l *fuzzLog) set(t *testing.T) {
	l.mu.Lock()
	l.t = t
	l.mu.Unlock()
}

func (l *fuzzLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.t == nil {
		return os.Stderr.Write(p)
	}
	l.t.Log(string(p))
	return len(p), nil
}

// fuzzServeInput sends data on a new connection, half-closes it and reads
// every reply until the server closes the connection.
func fuzzServeInput(t *testing.T, n *server.Node, data []byte) {
	nc, err := fuzzDial(n.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer fuzzClose(nc)
	deadline := time.Now().Add(e2eIOWait)
	if err := nc.SetDeadline(deadline); err != nil {
		t.Fatal(err)
	}
	// Write in the background: the server may answer (or close) before it
	// has read everything, and a reader that does not drain the replies
	// could block both sides.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := nc.Write(data); err == nil {
			nc.(*net.TCPConn).CloseWrite()
		}
	}()
	defer func() { <-wrote }()

	rd := bufio.NewReaderSize(nc, 64<<10)
	for i := 0; ; i++ {
		reply, err := e2eReadReply(rd)
		switch {
		case err == nil:
			if reply[0] == '-' && !fuzzGoodError(reply) {
				t.Fatalf("reply %d: malformed error %q\ninput: %q", i, reply, data)
			}
			continue
		case errors.Is(err, io.EOF):
			return // closed after the last reply
		case errors.Is(err, e2eErrBadReply):
			t.Fatalf("reply %d: %v: %q\ninput: %q", i, err, reply, data)
		case errors.Is(err, syscall.ECONNRESET):
			// The server closed with input left unread (after a protocol
			// error or QUIT), so the kernel reset the connection and may
			// have dropped replies still in flight: nothing more to check.
			return
		case errors.Is(err, io.ErrUnexpectedEOF):
			t.Fatalf("reply %d cut short by the close: %q\ninput: %q", i, reply, data)
		default:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the server neither answered nor closed within %v after the input ended (reply %d, partial %q)\ninput: %q", e2eIOWait, i, reply, data)
			}
			t.Fatalf("reply %d: %v\ninput: %q", i, err, data)
		}
	}
}

// fuzzGoodError checks an error reply: a code, then text, all printable
// or at least free of CR and LF (e2eReadReply saw to those).
func fuzzGoodError(reply []byte) bool {
	line := bytes.TrimSuffix(reply[1:], []byte("\r\n"))
	return len(line) > 0 && line[0] != ' '
}

// fuzzReset checks that the node still serves a new connection and puts it
// back in its starting state. It returns false when the node must be
// replaced: the input shut it down or set a password, as it may.
func fuzzReset(t *testing.T, n *server.Node, data []byte) bool {
	if fuzzMayDo(data, "shutdown") {
		// SHUTDOWN stops the node in the background, so it may still
		// answer here and be gone for the next input: start a new one.
		return false
	}
	nc, err := fuzzDial(n.Addr())
	if err != nil {
		fuzzStopped(t, n, data, "dial: "+err.Error())
		return false
	}
	defer fuzzClose(nc)
	c := &e2eConn{Conn: nc, rd: bufio.NewReader(nc)}
	got, err := c.Do("PING")
	switch {
	case err != nil:
		fuzzStopped(t, n, data, "PING: "+err.Error())
		return false
	case got == "-NOAUTH Authentication required.\r\n" && fuzzMayDo(data, "requirepass"):
		return false // the input set a password with CONFIG SET
	case fuzzMayDo(data, "acl"):
		return false // the input may have changed the users: start afresh
	case got != "+PONG\r\n":
		t.Fatalf("PING after the input: %q\ninput: %q", got, data)
	}
	for _, cmd := range [][]string{
		{"FLUSHALL"},
		{"DEBUG", "CLOCK", "SET", strconv.FormatInt(e2eClockStart, 10)},
	} {
		got, err := c.Do(cmd...)
		if err != nil {
			fuzzStopped(t, n, data, cmd[0]+": "+err.Error())
			return false
		}
		if got[0] == '-' {
			t.Fatalf("%s after the input: %q\ninput: %q", cmd, got, data)
		}
	}
	return true
}

// fuzzStopped accepts that a node stopped serving only when the input may
// have shut it down, and then waits for it to finish stopping.
func fuzzStopped(t *testing.T, n *server.Node, data []byte, why string) {
	if !fuzzMayDo(data, "shutdown") {
		t.Fatalf("the node stopped serving (%s), and the input holds no SHUTDOWN: %q", why, data)
	}
	select {
	case <-n.Done():
	case <-time.After(e2eIOWait):
		t.Fatalf("the node stopped serving (%s) but did not shut down\ninput: %q", why, data)
	}
}

// fuzzDialer dials with SO_REUSEADDR. The connection that carries an input
// is half-closed by the test, so it ends in TIME_WAIT, thousands a second
// while fuzzing; with the option set, those sockets do not keep listeners
// (ours, or any other test's on the machine) from binding their ports.
var fuzzDialer = net.Dialer{
	Timeout: e2eIOWait,
	Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
		}); cerr != nil {
			return cerr
		}
		return err
	},
}

func fuzzDial(addr string) (net.Conn, error) { return fuzzDialer.Dial("tcp", addr) }

// fuzzClose closes a client connection with a reset instead of a FIN, so
// the connections the test closes first leave no socket in TIME_WAIT.
func fuzzClose(nc net.Conn) {
	nc.(*net.TCPConn).SetLinger(0)
	nc.Close()
}

// fuzzMayDo reports whether data could hold the word: literally (in any
// case), or through the escapes of inline requests.
func fuzzMayDo(data []byte, word string) bool {
	return bytes.Contains(bytes.ToLower(data), []byte(word)) || bytes.IndexByte(data, '\\') >= 0
}

// fuzzSeeds are protocol edge cases and one of each command family.
var fuzzSeeds = []string{
	// well-formed
	"*1\r\n$4\r\nPING\r\n",
	"PING\r\n",
	"PING\n",
	"ping hi\r\nPING \"a b\"\r\n",
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
	"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
	"*5\r\n$11\r\nCL.THROTTLE\r\n$4\r\nuser\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n",
	"cl.throttle k 0 1 1 9223372036854775807\r\n",
	"CL.THROTTLE k 9223372036854775807 1 9223372036854775807\r\n",
	"CL.THROTTLE k -1 -1 -1 -1\r\nCL.THROTTLE k +1 01 1\r\n",
	"SET k abc\r\nCL.THROTTLE k 1 1 1\r\nSET k 99999999999999999999\r\nCL.THROTTLE k 1 1 1\r\n",
	"MULTI\r\nSET a 1\r\nINCR a\r\nCL.THROTTLE a 1 1 1\r\nEXEC\r\n",
	"MULTI\r\nNOSUCH\r\nEXEC\r\nMULTI\r\nMULTI\r\nDISCARD\r\nDISCARD\r\n",
	"WATCH a b\r\nSET a 1\r\nMULTI\r\nGET a\r\nEXEC\r\nUNWATCH\r\n",
	"MULTI\r\nSELECT 3\r\nFLUSHALL\r\nKEYS *\r\nEXEC\r\n",
	"HELLO 3\r\nGET nokey\r\nCONFIG GET *\r\nINFO\r\nCLIENT LIST\r\nHELLO 2\r\nGET nokey\r\n",
	"HELLO 3 AUTH default x SETNAME n\r\nHELLO 4\r\nHELLO abc\r\n",
	"MSET a 1 b 2 c 3\r\nMGET a b c d\r\nDEL a b\r\nEXISTS a c\r\nSCAN 0 MATCH * COUNT 1 TYPE string\r\nKEYS [a-\r\n",
	"SET k v PX 1\r\nDEBUG CLOCK ADVANCE 2000000\r\nGET k\r\nTTL k\r\nPTTL k\r\n",
	"DEBUG CLOCK SET -9223372036854775808\r\nCL.THROTTLE k 1 1 1\r\nDEBUG CLOCK SET 9223372036854775807\r\nCL.THROTTLE k 1 1 1\r\nSET k v EX 1\r\n",
	"EXPIRE k 9223372036854775807\r\nSET k v\r\nEXPIRE k -9223372036854775808\r\nPEXPIREAT k 9223372036854775807 GT\r\nEXPIREAT k 1 NX XX\r\n",
	"INCRBY k 9223372036854775807\r\nINCR k\r\nDECRBY k -9223372036854775808\r\nDECRBY n 9223372036854775807\r\nDECR n\r\nDECR n\r\n",
	"SETEX k 9223372036854775807 v\r\nPSETEX k -1 v\r\nSET k v EXAT 0\r\nSET k v KEEPTTL EX 1\r\nSET k v GET NX\r\n",
	"CLIENT SETNAME a\r\nCLIENT GETNAME\r\nCLIENT INFO\r\nCLIENT KILL ID 1\r\nCLIENT KILL 127.0.0.1:1\r\nCLIENT SETINFO LIB-NAME x\r\nCLIENT HELP\r\n",
	"COMMAND\r\nCOMMAND COUNT\r\nCOMMAND INFO get nosuch\r\nCOMMAND DOCS\r\nCOMMAND LIST\r\n",
	"CONFIG SET requirepass pw\r\nPING\r\nRESET\r\nPING\r\nAUTH pw\r\nPING\r\n",
	"INFO everything\r\nTIME\r\nDBSIZE\r\nFLUSHDB ASYNC\r\nCLUSTER SLOTS\r\nREADONLY\r\n",
	"SHUTDOWN BOGUS\r\nQUIT\r\nPING\r\n",
	"AUTH a b c\r\nSELECT -1\r\nSELECT 15\r\nSELECT 16\r\n",
	"ACL SETUSER gw on >pw -@all +@ratelimit +ping ~rl:*\r\nAUTH gw pw\r\nCL.THROTTLE rl:1 1 1 1\r\nGET rl:1\r\nCL.THROTTLE x 1 1 1\r\nEVAL \"return redis.call('get','rl:1')\" 0\r\nMULTI\r\nEXEC\r\nRESET\r\nACL DELUSER gw\r\n",
	"ACL SETUSER u on nopass allkeys +@all -@dangerous +select|0 %R~r* &c\r\nACL GETUSER u\r\nACL LIST\r\nHELLO 3 AUTH u x\r\nACL WHOAMI\r\nACL CAT\r\nACL CAT ratelimit\r\nACL SETUSER u (+get) secret <nosuch #zz\r\nACL DELUSER u\r\nPING\r\n",
	"ACL SETUSER default off\r\nPING\r\nACL LOAD\r\nACL SAVE\r\nACL HELP\r\nACL USERS\r\n",
	// protocol errors from redis7-replies.md
	"*1\r\n$999999999999\r\n",
	"*abc\r\n",
	"*-1\r\n",
	"*0\r\n*1\r\n$4\r\nPING\r\n",
	"*2\r\n$3\r\nGET\r\n:1\r\n",
	"\"unbalanced\r\n",
	"'unbalanced\r\n",
	"\"closed\"x\r\n",
	"*2000000000\r\n",
	// huge and negative counts and lengths
	"*9223372036854775807\r\n",
	"*-9223372036854775808\r\n",
	"*99999999999999999999\r\n",
	"*2147483647\r\n$4\r\nPING\r\n",
	"*1\r\n$-1\r\n",
	"*1\r\n$-5\r\n",
	"*1\r\n$536870912\r\n",
	"*1\r\n$536870913\r\n",
	"*1\r\n$9223372036854775807\r\n",
	"*1\r\n$0\r\n\r\n",
	"*1\r\n$01\r\nx\r\n",
	"*+1\r\n$4\r\nPING\r\n",
	"*1\r\n$ 4\r\nPING\r\n",
	// NUL bytes
	"\x00",
	"\x00\x00\x00\r\n",
	"PI\x00NG\r\n",
	"*1\r\n$4\r\nPI\x00G\r\n",
	"*1\x00\r\n$4\r\nPING\r\n",
	"*1\r\n$4\x00\r\nPING\r\n",
	"SET \"a\\x00b\" \"\\x00\"\r\nGET \"a\\x00b\"\r\n",
	// partial commands, then the close
	"*3\r\n$3\r\nSET\r\n$1\r\nk",
	"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n",
	"*2\r\n$4\r\nECHO\r\n$5\r\nab",
	"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI",
	"PING",
	"*",
	"*1",
	"*1\r",
	"$",
	"\r",
	"\r\n\r\n\n\n",
	// the bytes after a bulk and after a count's CR are not checked
	"*1\r\n$4\r\nPINGxx*1\r\n$4\r\nPING\r\n",
	"*1\rX$4\r\nPING\r\n",
	// inline quirks
	"  PING  \r\n",
	"\tPING\t\r\n",
	"\"PING\"\r\n",
	"'PING'\r\n",
	"a\"b c\"d\r\n",
	"ECHO \"\\x41\\x4g\\n\\r\\t\\b\\a\\\\\\\"\"\r\n",
	"ECHO '\\'\\n'\r\n",
	"\x0bPING\x0c\r\n",
	"PING\rPING\r\n",
	// mixed and pipelined
	"PING\r\n*1\r\n$4\r\nPING\r\nPING\r\n",
	"QUIT\r\n*1\r\n$4\r\nPING\r\n",
	"MULTI\r\n*1\r\n$4\r\nEXEC",
	"HELLO 3\r\nMULTI\r\nGET a\r\nEXEC\r\nWATCH a\r\nEXEC\r\n",
	// glob patterns that are exponential for a naive matcher (CVE-2022-36021)
	"SET " + strings.Repeat("a", 50) + " 1\r\nKEYS " + strings.Repeat("*a", 20) + "*b\r\n",
	"MSET aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1 b 2\r\nSCAN 0 MATCH *a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*c COUNT 100\r\nCONFIG GET *a*a*a*a*a*a*a*a*a*a*a*a*a*a*x\r\n",
	"KEYS " + strings.Repeat("*", 2000) + "\r\nKEYS " + strings.Repeat("[", 100) + "\r\n",
	// long lines and many arguments
	strings.Repeat("a", 70000) + "\r\n",
	"*1\r\n$" + strings.Repeat("9", 70000) + "\r\n",
	"ECHO " + strings.Repeat("x", 65530) + "\r\n",
	"MSET" + strings.Repeat(" k v", 3000) + "\r\n",
	"DEL" + strings.Repeat(" k", 3000) + "\r\nKEYS *\r\n",
}
