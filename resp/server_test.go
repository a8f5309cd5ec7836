package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// testHandler answers a few commands of its own:
//
//	PING            +PONG
//	ECHO s          $s
//	BIG n           a bulk of n bytes
//	BLOCK           waits until the test releases it, then +UNBLOCKED
//	QUIT            +OK and close
//	DEFER s         $s, deferred: the test resolves it (h.deferred)
//	BARRIER s       the same with DeferBarrier
type testHandler struct {
	release chan struct{}
	once    sync.Once
	blocked chan struct{} // gets a value when BLOCK starts waiting
	closed  atomic.Int64  // Closed calls
	syncs   atomic.Int64  // BeforeReply calls (syncHandler)
	failing atomic.Bool   // BeforeReply fails (syncHandler)
	served  atomic.Int64  // ServeRESP calls
	// early counts the calls made while the connection's requests had to
	// wait for deferred replies (a barrier, QUIT, the bound): never.
	early    atomic.Int64
	deferred pendingReplies
}

func newTestHandler() *testHandler {
	h := &testHandler{release: make(chan struct{}), blocked: make(chan struct{}, 16)}
	h.deferred.added = make(chan struct{}, 1)
	return h
}

func (h *testHandler) ServeRESP(c *Conn, args [][]byte) {
	h.served.Add(1)
	if c.mustWait() {
		h.early.Add(1)
	}
	switch strings.ToUpper(string(args[0])) {
	case "PING":
		c.W.Status("PONG")
	case "ECHO":
		c.W.Bulk(args[1])
	case "BIG":
		n, _ := strconv.Atoi(string(args[1]))
		c.W.Bulk(bytes.Repeat([]byte{'x'}, n))
	case "BLOCK":
		h.blocked <- struct{}{}
		<-h.release
		c.W.Status("UNBLOCKED")
	case "CLIENTINFO":
		i := c.InfoNow()
		c.W.Status(fmt.Sprintf("fd=%d qbuf=%d argv-mem=%d rbs=%d rbp=%d", i.FD, i.Mem.QueryBuf, i.Mem.ArgvMem, i.Mem.ReplyBuf, i.Mem.ReplyPeak))
	case "QUIT":
		c.W.OK()
		c.CloseAfterReply()
	case "DEFER":
		h.deferred.add(c.Defer(), c.W.Proto(), args[1])
	case "BARRIER":
		h.deferred.add(c.DeferBarrier(), c.W.Proto(), args[1])
	default:
		c.W.Error("ERR unknown command")
	}
}

// pendingReplies are the replies the test handler deferred, until the test
// resolves them.
type pendingReplies struct {
	mu    sync.Mutex
	list  []pendingReply
	most  int           // the most unresolved at once
	added chan struct{} // gets a value when list grows
}

type pendingReply struct {
	d     *Deferred
	reply []byte // a bulk of the command's argument
}

func (p *pendingReplies) add(d *Deferred, proto int, arg []byte) {
	w := Writer{proto: proto}
	w.Bulk(arg)
	p.mu.Lock()
	p.list = append(p.list, pendingReply{d, w.Bytes()})
	p.most = max(p.most, len(p.list))
	p.mu.Unlock()
	select {
	case p.added <- struct{}{}:
	default:
	}
}

func (p *pendingReplies) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.list)
}

// take removes and returns the unresolved replies, oldest first.
func (p *pendingReplies) take() []pendingReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.list
	p.list = nil
	return list
}

// waitFor waits until n replies are unresolved and takes them.
func (p *pendingReplies) waitFor(t *testing.T, n int) []pendingReply {
	t.Helper()
	testwait.For(t, 10*time.Second, fmt.Sprintf("%d deferred replies", n), func() bool { return p.len() == n })
	return p.take()
}

// resolveRandomly resolves the replies as they come, on n goroutines that
// each pick one at random among those waiting, until the test ends.
func (p *pendingReplies) resolveRandomly(t testing.TB, seed uint64, n int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
	})
	for g := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for {
				p.mu.Lock()
				if len(p.list) == 0 {
					p.mu.Unlock()
					select {
					case <-p.added:
						continue
					case <-stop:
						return
					}
				}
				i := rng.IntN(len(p.list))
				r := p.list[i]
				p.list = slices.Delete(p.list, i, i+1)
				p.mu.Unlock()
				r.d.Resolve(r.reply)
			}
		})
	}
}

// unblock lets every BLOCK return.
func (h *testHandler) unblock() { h.once.Do(func() { close(h.release) }) }

func (h *testHandler) Closed(*Conn) { h.closed.Add(1) }

// syncHandler is a testHandler that is also a Syncer.
type syncHandler struct{ *testHandler }

func (h syncHandler) BeforeReply(*Conn) error {
	h.syncs.Add(1)
	if h.failing.Load() {
		return errors.New("disk on fire")
	}
	return nil
}

// modes are the two ways a Server serves connections. With one loop every
// connection shares it, which is what the stuck-call tests need.
var modes = []struct {
	name string
	set  func(s *Server)
}{
	{"loop", func(s *Server) { s.cfg.Loops = 1 }},
	{"goroutines", func(s *Server) { s.perConn = true }},
}

func eachMode(t *testing.T, f func(t *testing.T, set func(*Server))) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { f(t, m.set) })
	}
}

// serve starts s on a free port and closes it when the test ends.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		if h, ok := s.h.(interface{ unblock() }); ok {
			h.unblock() // a test that failed may have left a call waiting
		}
		s.Close()
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

// start serves h on a free port, in the mode set chooses, until the test
// ends.
func start(t *testing.T, h Handler, set func(*Server)) (*Server, string) {
	t.Helper()
	s := NewServer(Config{}, h)
	set(s)
	return s, serve(t, s)
}

type client struct {
	t  *testing.T
	nc net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{t: t, nc: nc, rd: bufio.NewReaderSize(nc, 1<<16)}
}

func (c *client) send(cmds ...string) {
	c.t.Helper()
	var b []byte
	for _, cmd := range cmds {
		b = append(b, cmd...)
		b = append(b, "\r\n"...)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// reply reads one reply: a status, error or integer line, or a bulk.
func (c *client) reply() string {
	c.t.Helper()
	line, err := c.rd.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	if line[0] != '$' {
		return strings.TrimSuffix(line, "\r\n")
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		c.t.Fatalf("bad bulk header %q", line)
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.rd, b); err != nil {
		c.t.Fatalf("reading a bulk of %d: %v", n, err)
	}
	return string(b[:n])
}

func (c *client) expect(want ...string) {
	c.t.Helper()
	for _, w := range want {
		if got := c.reply(); got != w {
			c.t.Fatalf("got %.60q, want %.60q", got, w)
		}
	}
}

// expectBytes reads len(want) bytes and wants them to be want.
func (c *client) expectBytes(want []byte) {
	c.t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c.rd, got); err != nil {
		c.t.Fatalf("reading %d bytes of replies: %v", len(want), err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		c.t.Fatalf("replies differ at byte %d: got %.60q, want %.60q", i, got[i:], want[i:])
	}
}

// expectEOF waits for the server to close the connection.
func (c *client) expectEOF() {
	c.t.Helper()
	b, err := c.rd.ReadByte()
	if err == nil {
		c.t.Fatalf("read %q, want the connection closed", b)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatal("the connection is still open")
	}
}

func TestServe_PipelineInOrder(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		_, addr := start(t, newTestHandler(), set)
		var wg sync.WaitGroup
		for k := range 8 {
			wg.Go(func() {
				c := dial(t, addr)
				// 3000 replies of 40 bytes pass maxPending, so the loop
				// stops and comes back for the rest of what it read.
				var cmds, want []string
				for i := range 3000 {
					s := fmt.Sprintf("%d-%d-%032d", k, i, i)
					cmds = append(cmds, "ECHO "+s)
					want = append(want, s)
				}
				c.send(cmds...)
				c.expect(want...)
			})
		}
		wg.Wait()
	})
}

// TestServe_StuckCall: a handler call that waits does not hold up the
// other connections of its loop, and its own connection goes on afterwards
// with what it had pipelined behind the call.
func TestServe_StuckCall(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		a, b := dial(t, addr), dial(t, addr)
		a.send("BLOCK", "ECHO after")
		<-h.blocked
		for range 3 {
			b.send("PING")
			b.expect("+PONG")
		}
		h.unblock()
		a.expect("+UNBLOCKED", "after")
		a.send("PING")
		a.expect("+PONG")
		b.send("PING")
		b.expect("+PONG")
	})
}

// TestServe_BigReply: a reply the socket cannot take at once reaches a
// client that reads it late, whole, while the loop serves others.
func TestServe_BigReply(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		_, addr := start(t, newTestHandler(), set)
		a, b := dial(t, addr), dial(t, addr)
		const n = 16 << 20
		a.send("BIG "+strconv.Itoa(n), "PING")
		b.send("PING")
		b.expect("+PONG")
		if got := a.reply(); len(got) != n || strings.Trim(got, "x") != "" {
			t.Fatalf("big reply of %d bytes, want %d", len(got), n)
		}
		a.expect("+PONG")
	})
}

func TestServe_CloseAfterReply(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		c := dial(t, addr)
		c.send("PING", "QUIT", "PING")
		c.expect("+PONG", "+OK")
		c.expectEOF()
		testwait.For(t, 10*time.Second, "Closed", func() bool { return h.closed.Load() == 1 })
	})
}

// TestServe_ProtocolError: the requests before the bad one are answered,
// then the error, then the connection is closed.
func TestServe_ProtocolError(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		_, addr := start(t, newTestHandler(), set)
		c := dial(t, addr)
		c.send("PING", "*1\r\n$x", "PING")
		c.expect("+PONG", "-ERR Protocol error: invalid bulk length")
		c.expectEOF()
	})
}

func TestServe_Kill(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		s, addr := start(t, h, set)
		a, b, stuck := dial(t, addr), dial(t, addr), dial(t, addr)
		for _, c := range []*client{a, b} {
			c.send("PING")
			c.expect("+PONG")
		}
		stuck.send("BLOCK")
		<-h.blocked
		var ids []int64
		s.ForEachConn(func(c *Conn) { ids = append(ids, c.ID) })
		if len(ids) != 3 {
			t.Fatalf("%d connections, want 3", len(ids))
		}
		slices.Sort(ids)
		// IDs follow the order of the dials: kill a and the stuck one.
		if !s.Kill(ids[0]) || !s.Kill(ids[2]) || s.Kill(999) {
			t.Fatal("Kill found the wrong connections")
		}
		a.expectEOF()
		b.send("PING")
		b.expect("+PONG")
		h.unblock()
		// The stuck call's reply may or may not go out before the close.
		for {
			if _, err := stuck.rd.ReadString('\n'); err != nil {
				break
			}
		}
		testwait.For(t, 10*time.Second, "Closed twice", func() bool { return h.closed.Load() == 2 })
	})
}

// TestServe_CloseWaitsForCalls: Close closes every connection and returns
// once the stuck call has returned.
func TestServe_CloseWaitsForCalls(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		s := NewServer(Config{}, h)
		set(s)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve(ln)
		a, b := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
		b.send("PING")
		b.expect("+PONG")
		a.send("BLOCK")
		<-h.blocked
		closed := make(chan struct{})
		go func() {
			s.Close()
			close(closed)
		}()
		b.expectEOF()
		select {
		case <-closed:
			t.Fatal("Close returned while a call was running")
		case <-time.After(50 * time.Millisecond): // it must still be waiting
		}
		h.unblock()
		<-closed
		a.expectEOF()
		if n := h.closed.Load(); n != 2 {
			t.Fatalf("Closed called %d times, want 2", n)
		}
	})
}

// TestServe_BeforeReply: a Syncer is asked before replies leave; when it
// fails the replies are dropped and the connection closed.
func TestServe_BeforeReply(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := syncHandler{newTestHandler()}
		_, addr := start(t, h, set)
		c := dial(t, addr)
		c.send("PING", "PING")
		c.expect("+PONG", "+PONG")
		if h.syncs.Load() == 0 {
			t.Fatal("BeforeReply was not called")
		}
		h.failing.Store(true)
		c.send("PING")
		c.expectEOF()
	})
}

// BenchmarkServe measures a round trip through a real socket: one batch of
// p PINGs written at once and their replies read back, as redis-benchmark
// -P p does. It is what a change to the loops or the reply path must not
// slow down. The -deferred cases defer every reply and resolve it on
// another goroutine, as a Raft leader would once the entry commits.
func BenchmarkServe(b *testing.B) {
	cases := []struct{ name, req, reply string }{
		{"", "*1\r\n$4\r\nPING\r\n", "+PONG\r\n"},
		{"-deferred", "*2\r\n$5\r\nDEFER\r\n$1\r\nx\r\n", "$1\r\nx\r\n"},
	}
	for _, m := range modes {
		for _, bc := range cases {
			for _, p := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/P%d%s", m.name, p, bc.name), func(b *testing.B) {
					h := newTestHandler()
					h.deferred.resolveRandomly(b, 1, 1)
					s := NewServer(Config{}, h)
					m.set(s)
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						b.Fatal(err)
					}
					go s.Serve(ln)
					defer s.Close()
					nc, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					defer nc.Close()
					req := []byte(strings.Repeat(bc.req, p))
					want := []byte(strings.Repeat(bc.reply, p))
					got := make([]byte, len(want))
					b.ReportAllocs()
					for b.Loop() {
						if _, err := nc.Write(req); err != nil {
							b.Fatal(err)
						}
						if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, want) {
							b.Fatalf("read %q, %v", got, err)
						}
					}
				})
			}
		}
	}
}
