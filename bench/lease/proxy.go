package main

import (
	"io"
	"net"
	"sync"
	"time"
)

// delayProxy forwards TCP connections to a target and holds every byte for
// a fixed one-way delay in each direction, as a link between regions
// would (this machine has no netem). Bytes keep their order; a chunk read
// at t is written at t + delay, so the delay adds to the round trip twice
// and does not limit the throughput (the link is a pipe, not a queue).
type delayProxy struct {
	target string
	delay  time.Duration
	ln     net.Listener

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of every forwarded connection; mu
	closed bool                  // mu
	wg     sync.WaitGroup
}

// newDelayProxy listens on a free loopback port and forwards to target
// with delay each way.
func newDelayProxy(target string, delay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{target: target, delay: delay, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is where the gateways connect.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every connection and waits for the pumps.
func (p *delayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Add(2)
		go p.pump(up, c)
		go p.pump(c, up)
	}
}

// track registers a connection's two ends; false (both closed) once the
// proxy is closing.
func (p *delayProxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		a.Close()
		b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

// chunk is bytes read at some instant, due out at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst, each chunk delay after it was read. When either
// side ends, both connections are closed (a proxy for request/reply
// traffic needs no half-close).
func (p *delayProxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
	}()
	if p.delay <= 0 {
		_, _ = io.Copy(dst, src)
		return
	}
	q := make(chan chunk, 4096)
	done := make(chan struct{})
	go func() { // the writer: each chunk at its due time, in order
		defer close(done)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				src.Close() // makes the reader stop
				for range q {
				}
				return
			}
		}
	}()
	for {
		buf := make([]byte, 16<<10)
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{buf[:n], time.Now().Add(p.delay)}
		}
		if err != nil { // EOF, a reset or Close: the connection ends
			break
		}
	}
	close(q)
	<-done
}
