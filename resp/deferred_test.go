package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// bulk is s as a RESP2 bulk string.
func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// noneEarly fails t if a command was served while its connection had to
// wait for deferred replies.
func noneEarly(t *testing.T, h *testHandler) {
	t.Helper()
	if n := h.early.Load(); n > 0 {
		t.Fatalf("%d commands served while their connection waited for deferred replies", n)
	}
}

// TestDefer_InOrder: connections pipeline deferred commands mixed with
// immediate ones and barriers; the deferred replies are resolved from other
// goroutines in random order, and each client gets every reply, in request
// order, byte for byte.
func TestDefer_InOrder(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	eachMode(t, func(t *testing.T, set func(*Server)) {
		// A Syncer, so BeforeReply runs on the deferred path too.
		h := syncHandler{newTestHandler()}
		_, addr := start(t, h, set)
		h.deferred.resolveRandomly(t, seed, 3)
		var wg sync.WaitGroup
		for k := range 8 {
			rng := rand.New(rand.NewPCG(seed, uint64(100+k)))
			wg.Go(func() {
				c := dial(t, addr)
				var cmds []string
				var want strings.Builder
				for i := range 3000 {
					arg := fmt.Sprintf("%d-%d", k, i)
					switch r := rng.IntN(100); {
					case r < 50:
						cmds = append(cmds, "DEFER "+arg)
					case r < 52:
						cmds = append(cmds, "BARRIER "+arg)
					case r < 80:
						cmds = append(cmds, "ECHO "+arg)
					default:
						cmds = append(cmds, "PING")
						want.WriteString("+PONG\r\n")
						continue
					}
					want.WriteString(bulk(arg))
				}
				c.send(cmds...)
				c.expectBytes([]byte(want.String()))
			})
		}
		wg.Wait()
		noneEarly(t, h.testHandler)
		if h.syncs.Load() == 0 {
			t.Fatal("BeforeReply was not called")
		}
	})
}

// TestDefer_Barrier: the requests after a DeferBarrier are not served until
// it and the deferred replies before it are resolved; other connections are
// served meanwhile.
func TestDefer_Barrier(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		a, b := dial(t, addr), dial(t, addr)
		a.send("DEFER one", "BARRIER two", "ECHO three", "DEFER four")
		first := h.deferred.waitFor(t, 2)
		first[1].d.Resolve(first[1].reply)
		// b's round trips give a's connection time to be served wrongly.
		for range 3 {
			b.send("PING")
			b.expect("+PONG")
		}
		if n := h.served.Load(); n != 5 {
			t.Fatalf("%d commands served, want the 2 before the barrier and b's 3", n)
		}
		first[0].d.Resolve(first[0].reply)
		last := h.deferred.waitFor(t, 1)
		last[0].d.Resolve(last[0].reply)
		a.expect("one", "two", "three", "four")
		noneEarly(t, h)
	})
}

// TestDefer_Closed: a reply resolved after its client disconnected, or
// after its connection was killed, goes nowhere and breaks nothing.
func TestDefer_Closed(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		s, addr := start(t, h, set)
		gone, killed := dial(t, addr), dial(t, addr)
		gone.send("DEFER x")
		h.deferred.waitFor(t, 1)[0].d.Resolve([]byte("+early\r\n"))
		gone.expect("+early")
		gone.send("DEFER y", "PING")
		killed.send("DEFER z")
		replies := h.deferred.waitFor(t, 2)
		gone.nc.Close()
		var ids []int64
		s.ForEachConn(func(c *Conn) { ids = append(ids, c.ID) })
		if !s.Kill(slices.Max(ids)) {
			t.Fatal("Kill found no connection")
		}
		killed.expectEOF()
		testwait.For(t, 10*time.Second, "the killed connection released", func() bool { return h.closed.Load() == 1 })
		for _, r := range replies {
			r.d.Resolve(r.reply)
		}
		testwait.For(t, 10*time.Second, "both connections released", func() bool { return h.closed.Load() == 2 })
		c := dial(t, addr)
		c.send("PING")
		c.expect("+PONG")
	})
}

// TestDefer_BlockedOutput: a reply resolved while the connection's output
// is blocked (a client that does not read) joins it in order.
func TestDefer_BlockedOutput(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := syncHandler{newTestHandler()}
		_, addr := start(t, h, set)
		a, b := dial(t, addr), dial(t, addr)
		a.send("DEFER x", "DEFER y", "PING")
		replies := h.deferred.waitFor(t, 2)
		const n = 16 << 20
		big := Writer{}
		big.Bulk(bytes.Repeat([]byte{'x'}, n))
		replies[0].d.Resolve(big.Bytes())
		// The second round trip of b starts after a round that took in x:
		// its 16 MiB are then in the socket, which a does not read.
		for range 2 {
			b.send("PING")
			b.expect("+PONG")
		}
		syncs := h.syncs.Load()
		replies[1].d.Resolve(replies[1].reply)
		if got := a.reply(); len(got) != n {
			t.Fatalf("big reply of %d bytes, want %d", len(got), n)
		}
		a.expect("y", "+PONG")
		if h.syncs.Load() == syncs {
			t.Fatal("BeforeReply was not called for the replies resolved while blocked")
		}
	})
}

// TestDefer_Quit: QUIT after a deferred command answers +OK after the
// deferred reply, then closes; what follows QUIT is never served.
func TestDefer_Quit(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		c := dial(t, addr)
		c.send("DEFER x", "QUIT", "PING")
		testwait.For(t, 10*time.Second, "QUIT served", func() bool { return h.served.Load() == 2 })
		r := h.deferred.take()
		r[0].d.Resolve(r[0].reply)
		c.expect("x", "+OK")
		c.expectEOF()
		testwait.For(t, 10*time.Second, "Closed", func() bool { return h.closed.Load() == 1 })
		if n := h.served.Load(); n != 2 {
			t.Fatalf("%d commands served, want 2", n)
		}
	})
}

// TestDefer_BeforeReplyFails: when BeforeReply fails for a resolved reply,
// the connection closes without it.
func TestDefer_BeforeReplyFails(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := syncHandler{newTestHandler()}
		_, addr := start(t, h, set)
		c := dial(t, addr)
		c.send("DEFER x", "PING")
		r := h.deferred.waitFor(t, 1)
		h.failing.Store(true)
		r[0].d.Resolve(r[0].reply)
		c.expectEOF()
	})
}

// TestDefer_StuckCall: replies resolved while their connection is with a
// goroutine stuck in a handler call are sent once it is back, in order.
func TestDefer_StuckCall(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		a, b := dial(t, addr), dial(t, addr)
		a.send("DEFER x", "BLOCK", "DEFER y", "ECHO z")
		<-h.blocked
		// With one loop, b is served once the loop has left a's call.
		b.send("PING")
		b.expect("+PONG")
		r := h.deferred.take()
		r[0].d.Resolve(r[0].reply)
		b.send("PING")
		b.expect("+PONG")
		h.unblock()
		r = h.deferred.waitFor(t, 1)
		r[0].d.Resolve(r[0].reply)
		a.expect("x", "+UNBLOCKED", "y", "z")
		a.send("PING")
		a.expect("+PONG")
	})
}

// TestDefer_Bound: a client that pipelines far more deferred commands than
// a connection may have out, or replies behind a deferred one past
// maxPending bytes, is not read further until replies are resolved; then
// everything completes.
func TestDefer_Bound(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		h := newTestHandler()
		_, addr := start(t, h, set)
		c := dial(t, addr)
		const n = 100_000
		const echo = "ECHO 0123456789012345678901234567890123456789"
		// The replies behind "DEFER last" reach maxPending at the
		// stallAt-th ECHO.
		reply := bulk(echo[len("ECHO "):])
		stallAt := (maxPending + len(reply) - 1) / len(reply)
		var req, want []byte
		for i := range n {
			req = fmt.Appendf(req, "DEFER %d\r\n", i)
			want = append(want, bulk(strconv.Itoa(i))...)
		}
		req = append(req, "DEFER last\r\n"...)
		want = append(want, bulk("last")...)
		for range stallAt + 100 {
			req = append(req, echo+"\r\n"...)
			want = append(want, reply...)
		}
		go c.nc.Write(req) // it blocks while the server does not read
		// Resolve only when the connection stopped: at its bound, so that
		// the bound is what is tested.
		var last pendingReply // of DEFER last, resolved once the ECHOes stall
		for served := 0; served < n; {
			stopped(t, "deferred replies at the bound", func() int { return h.deferred.len() }, min(maxHeld, n-served))
			for _, r := range h.deferred.take() {
				if string(r.reply) == bulk("last") {
					last = r
					continue
				}
				r.d.Resolve(r.reply)
				served++
			}
		}
		stopped(t, "replies held up to maxPending", func() int { return int(h.served.Load()) }, n+1+stallAt)
		if last.d == nil {
			last = h.deferred.take()[0]
		}
		last.d.Resolve(last.reply)
		c.expectBytes(want)
		noneEarly(t, h)
		if h.deferred.most != maxHeld {
			t.Fatalf("at most %d deferred replies out at once, want the bound, %d", h.deferred.most, maxHeld)
		}
	})
}

// stopped waits until count reaches at least bound, where the server stops
// serving a connection that pipelines deferred commands. Served on a
// goroutine of its own a connection may stop earlier, at the end of what it
// read: it waits for every deferred reply before it reads on. So a count
// that stays the same for 20 looks (20 ms or more) counts as stopped too.
func stopped(t *testing.T, what string, count func() int, bound int) {
	t.Helper()
	prev, same := -1, 0
	testwait.For(t, 20*time.Second, what, func() bool {
		k := count()
		if k != prev {
			prev, same = k, 0
		} else {
			same++
		}
		return k >= bound || same == 20
	})
}

// TestDefer_ServerClose: Close returns with deferred replies unresolved,
// every connection is released, no goroutine is left behind, and resolving
// them afterwards does nothing.
func TestDefer_ServerClose(t *testing.T) {
	eachMode(t, func(t *testing.T, set func(*Server)) {
		before := runtime.NumGoroutine()
		h := newTestHandler()
		s := NewServer(Config{}, h)
		set(s)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- s.Serve(ln) }()
		a, b := dial(t, ln.Addr().String()), dial(t, ln.Addr().String())
		a.send("DEFER x", "PING")
		b.send("BARRIER y", "PING")
		r := h.deferred.waitFor(t, 2)
		closed := make(chan struct{})
		go func() {
			s.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
		a.expectEOF()
		b.expectEOF()
		testwait.For(t, 10*time.Second, "both connections released", func() bool { return h.closed.Load() == 2 })
		for _, r := range r {
			r.d.Resolve(r.reply)
		}
		testwait.For(t, 10*time.Second, "the server's goroutines gone", func() bool {
			return runtime.NumGoroutine() <= before
		})
	})
}
