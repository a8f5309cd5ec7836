package tcpproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes every connection back until the client half-closes,
// then closes. It counts the connections it accepted.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { e.close() })
	return e
}

func (e *echoServer) addr() string { return e.ln.Addr().String() }

func (e *echoServer) close() {
	e.ln.Close()
	e.wg.Wait()
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// roundTrip writes msg on c and reads it back.
func roundTrip(c net.Conn, msg string) error {
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

// cut reports whether c is dead: a read returns an error (EOF or a reset)
// without data. It waits up to 5 s.
func cut(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		return errors.New("read data from a connection that should be cut")
	case errors.As(err, &ne) && ne.Timeout():
		return errors.New("the connection is still open after 5 s")
	case err == nil:
		return errors.New("read returned no data and no error")
	}
	return nil
}

func TestProxy_Forwards(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.addr())
	if p.Target() != e.addr() {
		t.Errorf("Target() = %q, want %q", p.Target(), e.addr())
	}
	c := dial(t, p.Addr())
	for i := range 10 {
		if err := roundTrip(c, fmt.Sprintf("message %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A large write goes through whole.
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	go c.Write(big)
	got := make([]byte, len(big))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("1 MB echo: err %v, equal %v", err, bytes.Equal(got, big))
	}
}

// TestProxy_HalfClose: a client that half-closes still reads the rest of the
// answer, and then the end of stream.
func TestProxy_HalfClose(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.addr())
	c := dial(t, p.Addr())
	if _, err := io.WriteString(c, "last words"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after a half-close read %q, %v; want %q and EOF", got, err, "last words")
	}
}

// TestProxy_BlockHeal: Block cuts the open connections and every new one,
// which never reaches the target; Heal lets new connections through.
func TestProxy_BlockHeal(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.addr())
	open := dial(t, p.Addr())
	if err := roundTrip(open, "before"); err != nil {
		t.Fatal(err)
	}
	p.Block()
	if !p.Blocked() {
		t.Error("Blocked() = false after Block")
	}
	if err := cut(open); err != nil {
		t.Errorf("open connection after Block: %v", err)
	}
	before := e.accepted.Load()
	for range 3 {
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			continue // refused outright is a cut link too
		}
		io.WriteString(c, "during")
		if err := cut(c); err != nil {
			t.Errorf("new connection while blocked: %v", err)
		}
		c.Close()
	}
	if n := e.accepted.Load(); n != before {
		t.Errorf("the target accepted %d connections while blocked", n-before)
	}
	p.Heal()
	if p.Blocked() {
		t.Error("Blocked() = true after Heal")
	}
	if err := roundTrip(dial(t, p.Addr()), "after"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
	// Block and Heal again, as a test flapping a link does.
	p.Block()
	p.Block()
	p.Heal()
	if err := roundTrip(dial(t, p.Addr()), "again"); err != nil {
		t.Fatalf("after a second Heal: %v", err)
	}
}

// TestProxy_TargetDown: a connection whose target refuses is closed.
func TestProxy_TargetDown(t *testing.T) {
	e := newEcho(t)
	addr := e.addr()
	e.close()
	p := newProxy(t, addr)
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		return // reset before the dial returned: cut too
	}
	defer c.Close()
	if err := cut(c); err != nil {
		t.Errorf("connection to a dead target: %v", err)
	}
}

// TestProxy_Close: Close cuts the connections, stops listening and returns
// once its goroutines are gone; a second Close is harmless.
func TestProxy_Close(t *testing.T) {
	e := newEcho(t)
	p, err := New(e.addr())
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for i := range 5 {
		c := dial(t, p.Addr())
		if err := roundTrip(c, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for i, c := range conns {
		if err := cut(c); err != nil {
			t.Errorf("connection %d after Close: %v", i, err)
		}
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		err := cut(c)
		c.Close()
		if err != nil {
			t.Errorf("a connection after Close: %v", err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	p.Block()
	p.Heal()
}

// TestProxy_Concurrent: clients echo through the proxy while another
// goroutine flaps it; every exchange either succeeds or fails cleanly, and
// Close ends it all (run with -race).
func TestProxy_Concurrent(t *testing.T) {
	e := newEcho(t)
	p := newProxy(t, e.addr())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if roundTrip(c, fmt.Sprintf("w%d i%d", w, i)) == nil {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
				c.Close()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			p.Block()
			p.Blocked()
			p.Heal()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ok.Load() < 200 || failed.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("within 10 s: %d exchanges passed, %d failed; want at least 200 and 10", ok.Load(), failed.Load())
		}
		time.Sleep(time.Millisecond) // polling the clients' progress
	}
	close(stop)
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
