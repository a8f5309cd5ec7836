// Package tcpproxy is a TCP proxy for tests: it listens on a loopback port
// and forwards every connection to a target address, until Block cuts the
// link (a network partition) and Heal restores it. The multi-process tests
// put one between every pair of nodes.
package tcpproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target made for each client.
const dialTimeout = 2 * time.Second

// Proxy forwards the connections made to Addr to its target, both ways,
// half-closes included. Safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // ends with Close: cancels the dials in progress
	cancel context.CancelFunc

	mu      sync.Mutex // guards blocked, closed and conns
	blocked bool
	closed  bool
	// conns holds both ends of every forwarded connection, so that Block
	// and Close can cut them.
	conns map[net.Conn]struct{}

	wg sync.WaitGroup // the accept loop and every connection's goroutines
}

// New starts a proxy on a free loopback port that forwards to target
// (host:port). Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// Block partitions the link: every connection open through the proxy is
// reset (its data in flight dropped), and until Heal a new connection is
// reset as soon as it is accepted, without reaching the target. When Block
// returns, no byte passes any more.
func (p *Proxy) Block() {
	p.mu.Lock()
	p.blocked = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		reset(c)
	}
}

// Heal ends a Block: new connections are forwarded again. The connections
// Block cut stay cut; clients have to connect again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

// Blocked reports whether the link is cut.
func (p *Proxy) Blocked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked
}

// Close stops listening, resets every connection and waits until all the
// proxy's goroutines have ended. It may be called more than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	for c := range conns {
		reset(c)
	}
	p.wg.Wait()
	return err
}

// reset closes c at once with an RST, as a broken link would show it, and
// drops what it had not sent yet.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient failure (out of descriptors, an aborted
			// handshake): keep serving.
			time.Sleep(time.Millisecond)
			continue
		}
		if p.Blocked() {
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// track records a pair of connections, unless the proxy was blocked or
// closed meanwhile: then it reports false and the caller resets them.
func (p *Proxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked || p.closed {
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) untrack(a, b net.Conn) {
	p.mu.Lock()
	delete(p.conns, a)
	delete(p.conns, b)
	p.mu.Unlock()
}

// forward connects client to the target and copies both ways until both
// directions have ended.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		reset(client)
		return
	}
	if !p.track(client, server) {
		reset(client)
		reset(server)
		return
	}
	done := make(chan struct{})
	go func() {
		pipe(server, client)
		close(done)
	}()
	pipe(client, server)
	<-done
	p.untrack(client, server)
	client.Close()
	server.Close()
}

// pipe copies src to dst. At src's end of stream it half-closes dst, so the
// other direction goes on; on an error (a reset, or Block) it closes both,
// which ends the other direction too.
func pipe(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}
