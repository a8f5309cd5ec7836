// Package crdttest runs in-process active-active meshes for tests: each
// node a whole server on a loopback RESP port with the debug clock, its
// mesh traffic on an in-memory network (Net) that can lose, repeat, delay
// (and so reorder) frames and partition nodes, all from one seed.
package crdttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/throttleddb/throttled/replication/crdt"
)

// Faults are what Net does to each frame: drop it with probability Drop,
// deliver it twice with probability Dup, and delay each delivery by up to
// MaxDelay (uniformly), which reorders frames.
type Faults struct {
	Drop, Dup float64
	MaxDelay  time.Duration
}

// Net is an in-memory network between the nodes of a mesh. Addresses are
// names; a node's Transport listens on its own and dials the others'.
type Net struct {
	mu        sync.Mutex
	rng       *rand.Rand
	faults    Faults
	listeners map[string]*listener
	// side maps an address to its side of a partition; nodes on different
	// sides cannot connect. Empty: no partition.
	side  map[string]int
	conns []*conn
	// frames counts the frames sent on every connection (Frames).
	frames int
}

// NewNet returns a network whose faults draw from seed.
func NewNet(seed uint64) *Net {
	return &Net{rng: rand.New(rand.NewPCG(seed, 0)), listeners: map[string]*listener{}}
}

// Frames is how many frames the nodes have sent so far.
func (n *Net) Frames() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.frames
}

// SetFaults changes the faults of every frame sent from now on.
func (n *Net) SetFaults(f Faults) {
	n.mu.Lock()
	n.faults = f
	n.mu.Unlock()
}

// Partition splits the network into sides: a node reaches only the nodes
// on its side; connections across are closed. Addresses in no side are cut
// off from everyone.
func (n *Net) Partition(sides ...[]string) {
	n.mu.Lock()
	n.side = map[string]int{}
	for i, s := range sides {
		for _, a := range s {
			n.side[a] = i + 1
		}
	}
	var cut []*conn
	for _, c := range n.conns {
		if !n.reachable(c.from, c.to) {
			cut = append(cut, c)
		}
	}
	n.mu.Unlock()
	for _, c := range cut {
		c.Close()
	}
}

// Heal ends a partition.
func (n *Net) Heal() {
	n.mu.Lock()
	n.side = nil
	n.mu.Unlock()
}

// reachable reports whether a can reach b. The caller holds mu.
func (n *Net) reachable(a, b string) bool {
	if n.side == nil {
		return true
	}
	sa, sb := n.side[a], n.side[b]
	return sa != 0 && sa == sb
}

// Transport returns the transport of the node at addr.
func (n *Net) Transport(addr string) crdt.Transport { return transport{n, addr} }

type transport struct {
	n    *Net
	addr string
}

var errRefused = errors.New("crdttest: connection refused")

func (t transport) Listen() (crdt.Listener, error) {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	if t.n.listeners[t.addr] != nil {
		return nil, errors.New("crdttest: address in use")
	}
	l := &listener{n: t.n, addr: t.addr, accepted: make(chan *conn, 64), done: make(chan struct{})}
	t.n.listeners[t.addr] = l
	return l, nil
}

func (t transport) Dial(ctx context.Context, addr string) (crdt.Conn, error) {
	n := t.n
	n.mu.Lock()
	l := n.listeners[addr]
	if l == nil || !n.reachable(t.addr, addr) {
		n.mu.Unlock()
		return nil, errRefused
	}
	a := &conn{n: n, from: t.addr, to: addr, in: make(chan []byte, 4096), done: make(chan struct{})}
	b := &conn{n: n, from: addr, to: t.addr, in: make(chan []byte, 4096), done: make(chan struct{})}
	a.peer, b.peer = b, a
	n.conns = append(n.conns, a, b)
	n.mu.Unlock()
	select {
	case l.accepted <- b:
		return a, nil
	case <-l.done:
	case <-ctx.Done():
	}
	a.Close()
	return nil, errRefused
}

type listener struct {
	n        *Net
	addr     string
	accepted chan *conn
	done     chan struct{}
	once     sync.Once
}

func (l *listener) Accept() (crdt.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		return nil, errors.New("crdttest: listener closed")
	}
}

func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		delete(l.n.listeners, l.addr)
		l.n.mu.Unlock()
	})
	return nil
}

// conn is one end of a connection: frames sent on it arrive on peer's in.
type conn struct {
	n        *Net
	from, to string
	peer     *conn
	in       chan []byte
	done     chan struct{}
	once     sync.Once
	sent     int // frames sent, under n.mu
}

func (c *conn) Send(frame []byte) error {
	select {
	case <-c.done:
		return errors.New("crdttest: connection closed")
	default:
	}
	n := c.n
	n.mu.Lock()
	f := n.faults
	n.frames++
	if c.sent++; c.sent == 1 {
		// The hello and its answer go through, as a TCP handshake
		// either does or fails the connection.
		f = Faults{}
	}
	copies := 1
	switch r := n.rng.Float64(); {
	case r < f.Drop:
		copies = 0
	case r < f.Drop+f.Dup:
		copies = 2
	}
	delays := make([]time.Duration, copies)
	for i := range delays {
		if f.MaxDelay > 0 {
			delays[i] = time.Duration(n.rng.Int64N(int64(f.MaxDelay) + 1))
		}
	}
	n.mu.Unlock()
	frame = slices.Clone(frame)
	for _, d := range delays {
		if d == 0 {
			c.peer.deliver(frame)
			continue
		}
		time.AfterFunc(d, func() { c.peer.deliver(frame) })
	}
	return nil
}

// deliver hands a frame to this end's reader; a full queue loses it, as a
// congested network would.
func (c *conn) deliver(frame []byte) {
	select {
	case <-c.done:
	case c.in <- frame:
	default:
	}
}

func (c *conn) Recv() ([]byte, error) {
	select {
	case f := <-c.in:
		return f, nil
	case <-c.done:
		return nil, errors.New("crdttest: connection closed")
	}
}

// Close closes both ends.
func (c *conn) Close() error {
	for _, e := range []*conn{c, c.peer} {
		e.once.Do(func() { close(e.done) })
	}
	n := c.n
	n.mu.Lock()
	n.conns = slices.DeleteFunc(n.conns, func(x *conn) bool { return x == c || x == c.peer })
	n.mu.Unlock()
	return nil
}
