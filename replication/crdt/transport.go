package crdt

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
)

// A Transport carries frames between nodes. The node asks for nothing but
// what TCP gives: a Conn delivers a peer's frames in order, or fails. A
// transport may also lose, repeat, reorder or delay frames (the tests' fake
// one does); the node copes, at the cost of a new connection and a full
// sync when a frame it waits for does not come.
type Transport interface {
	// Listen starts accepting connections at the node's cluster address.
	Listen() (Listener, error)
	// Dial connects to a peer's cluster address.
	Dial(ctx context.Context, addr string) (Conn, error)
}

// A Listener accepts the connections of peers.
type Listener interface {
	Accept() (Conn, error)
	Close() error
}

// A Conn is one connection between two nodes, carrying whole frames. Send
// and Recv may be called from one goroutine each; Close unblocks both.
type Conn interface {
	// Send sends a frame; the caller may reuse it once Send returns.
	Send(frame []byte) error
	// Recv returns the next frame, valid until the next Recv.
	Recv() ([]byte, error)
	Close() error
}

// TCP is the transport of a real mesh: frames are a uint32 length and the
// bytes, over TCP, or over TLS when ServerTLS and ClientTLS are set.
type TCP struct {
	// Addr is the host:port to listen on.
	Addr string
	// ServerTLS and ClientTLS, when set, make every connection TLS: the
	// node accepts with ServerTLS and dials with ClientTLS.
	ServerTLS, ClientTLS *tls.Config
}

// Listen implements Transport.
func (t TCP) Listen() (Listener, error) {
	var l net.Listener
	var err error
	if t.ServerTLS != nil {
		l, err = tls.Listen("tcp", t.Addr, t.ServerTLS)
	} else {
		l, err = net.Listen("tcp", t.Addr)
	}
	if err != nil {
		return nil, err
	}
	return tcpListener{l}, nil
}

// Dial implements Transport.
func (t TCP) Dial(ctx context.Context, addr string) (Conn, error) {
	var c net.Conn
	var err error
	if t.ClientTLS != nil {
		d := tls.Dialer{Config: t.ClientTLS}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	return newTCPConn(c), nil
}

type tcpListener struct{ l net.Listener }

func (l tcpListener) Accept() (Conn, error) {
	c, err := l.l.Accept()
	if err != nil {
		return nil, err
	}
	return newTCPConn(c), nil
}

func (l tcpListener) Close() error { return l.l.Close() }

type tcpConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte // the last frame Recv returned
	wmu sync.Mutex
	w   *bufio.Writer
}

func newTCPConn(c net.Conn) *tcpConn {
	return &tcpConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
}

func (c *tcpConn) Send(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(frame)))
	if _, err := c.w.Write(n[:]); err != nil {
		return err
	}
	if _, err := c.w.Write(frame); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *tcpConn) Recv() ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(c.r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxFrame {
		return nil, fmt.Errorf("crdt: frame of %d bytes is above the %d limit", size, maxFrame)
	}
	if cap(c.buf) > 2*batchBytes {
		c.buf = nil // a frame of a large entry: not kept
	}
	c.buf = slices.Grow(c.buf[:0], int(size))[:size]
	if _, err := io.ReadFull(c.r, c.buf); err != nil {
		return nil, err
	}
	return c.buf, nil
}

func (c *tcpConn) Close() error { return c.c.Close() }
