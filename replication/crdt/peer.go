package crdt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// handshakeTimeout bounds a hello and its answer.
const handshakeTimeout = 2 * time.Second

// gapTimeout is how long a connection may wait for a missing frame (lost by
// the transport) before it is dropped, so that the sender reconnects and
// sends everything again.
const gapTimeout = 200 * time.Millisecond

// dialLoop keeps a link to p up until ctx ends: dial, hello, send; on any
// failure wait (backoff, capped at maxBackoff) and start again.
func (n *Node) dialLoop(ctx context.Context, p *peer) {
	defer n.wg.Done()
	backoff := minBackoff
	for ctx.Err() == nil {
		err := n.serveLink(ctx, p)
		if ctx.Err() != nil {
			return
		}
		n.problem(p, err)
		if err == nil {
			backoff = minBackoff // the link was up: try again soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// problem logs why p could not be reached, once per new reason.
func (n *Node) problem(p *peer, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	n.mu.Lock()
	changed := p.problem != msg
	p.problem = msg
	n.mu.Unlock()
	if changed && err != nil {
		n.log.Warn("peer unreachable", "peer", p.id, "addr", p.addr, "reason", msg)
	}
}

// serveLink dials p, says hello and sends the cut's frames until the
// connection fails. It returns nil when a link was up and then failed.
func (n *Node) serveLink(ctx context.Context, p *peer) error {
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	conn, err := n.cfg.Transport.Dial(dctx, p.addr)
	cancel()
	if err != nil {
		return err
	}
	if err := n.handshake(conn); err != nil {
		conn.Close()
		return err
	}
	l := &link{conn: conn, queue: make(chan []byte, queueFrames), fresh: true, closed: make(chan struct{})}
	n.mu.Lock()
	if p.link != nil {
		p.link.close()
	}
	p.link = l
	p.problem = ""
	n.wakeLocked() // for its full sync
	n.mu.Unlock()
	n.log.Info("peer connected", "peer", p.id, "addr", p.addr)
	defer func() {
		l.close()
		n.mu.Lock()
		if p.link == l {
			p.link = nil
		}
		n.mu.Unlock()
	}()
	// The peer sends nothing after its answer; a read returns when it
	// closes the connection (it missed a frame, or it stopped).
	go func() {
		for {
			if _, err := conn.Recv(); err != nil {
				l.close()
				return
			}
		}
	}()
	var seq uint64
	var out []byte // the frame numbered for this link
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.closed:
			return nil
		case f := <-l.queue:
			seq++
			out = append(out[:0], f...)
			putSeq(out, seq)
			if err := conn.Send(out); err != nil {
				return nil
			}
			if cap(out) > 2*batchBytes {
				out = nil // a frame of a large entry: not kept
			}
		}
	}
}

// handshake says hello on a dialed connection and checks the answer: the
// peer may refuse this node, and a peer whose clock is further off than
// MaxSkew is refused here (its stamps would break the bounds).
func (n *Node) handshake(conn Conn) error {
	timer := time.AfterFunc(handshakeTimeout, func() { conn.Close() })
	defer timer.Stop()
	t0 := n.cfg.Clock.Now()
	if err := conn.Send(hello{id: n.cfg.ID, incarnation: n.cfg.Incarnation, clock: t0, maxSkew: n.MaxSkew()}.encode()); err != nil {
		return err
	}
	f, err := conn.Recv()
	if err != nil {
		return err
	}
	t2 := n.cfg.Clock.Now()
	ack, err := decodeHelloAck(f)
	switch {
	case err != nil:
		return err
	case ack.refusal != "":
		return errors.New("refused: " + ack.refusal)
	}
	// The peer read its clock about halfway through the round trip.
	if skew := ack.clock - (t0/2 + t2/2); skew > n.MaxSkew() || -skew > n.MaxSkew() {
		return fmt.Errorf("its clock is %s off ours, more than --crdt-max-skew %s", time.Duration(skew), n.cfg.MaxSkew)
	}
	return nil
}

// accept serves the connections peers dial to this node.
func (n *Node) accept() {
	defer n.wg.Done()
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			if n.ctx.Err() == nil {
				n.log.Error("cluster listener failed", "err", err)
			}
			return
		}
		n.wg.Add(1)
		go n.receive(conn)
	}
}

// receive answers a peer's hello, then merges its batches in seq order
// (holding early ones, dropping repeats) until the connection ends. A frame
// that stays missing for gapTimeout ends it, so the peer sends everything
// again on a new one.
func (n *Node) receive(conn Conn) {
	defer n.wg.Done()
	defer conn.Close()
	stop := context.AfterFunc(n.ctx, func() { conn.Close() })
	defer stop()
	p := n.welcome(conn)
	if p == nil {
		return
	}
	defer func() {
		n.mu.Lock()
		delete(p.in, conn)
		n.mu.Unlock()
	}()
	next := uint64(1)
	early := map[uint64]batch{}
	var gapSince time.Time
	for {
		f, err := conn.Recv()
		if err != nil {
			return
		}
		if len(f) > 0 && f[0] == msgHello {
			continue // a repeat of the hello
		}
		m, err := decodeBatch(f, n.store.Databases())
		if err != nil {
			n.log.Error("malformed batch from peer, closing", "peer", p.id, "err", err)
			return
		}
		switch {
		case m.seq < next:
			continue // a repeat
		case m.seq > next:
			if m, err = decodeBatch(slices.Clone(f), n.store.Databases()); err != nil {
				return // the frame is Recv's until the next one
			}
			early[m.seq] = m
			if gapSince.IsZero() {
				gapSince = time.Now()
			}
			if len(early) > queueFrames || time.Since(gapSince) > gapTimeout {
				return
			}
			continue
		}
		if ahead := m.watermark - n.Now(); !m.partial && ahead > n.MaxSkew() {
			// Its clock has moved ahead of ours since the handshake:
			// refuse it, as the handshake would.
			n.log.Warn("peer refused", "peer", p.id, "reason", fmt.Sprintf("its clock is %s ahead of ours, more than --crdt-max-skew %s", time.Duration(ahead), n.cfg.MaxSkew))
			return
		}
		for {
			n.apply(p, m)
			next++
			var ok bool
			if m, ok = early[next]; !ok {
				break
			}
			delete(early, next)
		}
		gapSince = time.Time{}
		if len(early) > 0 {
			gapSince = time.Now()
		}
	}
}

// welcome reads a connection's hello and answers it: a member is accepted,
// anyone else refused. It returns the member, or nil.
func (n *Node) welcome(conn Conn) *peer {
	timer := time.AfterFunc(handshakeTimeout, func() { conn.Close() })
	f, err := conn.Recv()
	timer.Stop()
	if err != nil {
		return nil
	}
	h, err := decodeHello(f)
	if err != nil {
		return nil
	}
	n.mu.Lock()
	p := n.peers[h.id]
	if p != nil {
		p.in[conn] = struct{}{}
	}
	n.mu.Unlock()
	ack := helloAck{clock: n.cfg.Clock.Now()}
	switch {
	case p == nil:
		ack.refusal = fmt.Sprintf("node %q is not a peer of node %q (add it there with CRDT PEER ADD)", h.id, n.cfg.ID)
		n.log.Warn("refused a node that is not a peer", "node", h.id)
	case h.maxSkew != n.MaxSkew():
		// Each node trusts the others not to fold its events later than
		// its own margin allows (Bounds): the margins must agree.
		ack.refusal = fmt.Sprintf("node %q has --crdt-max-skew %s, node %q %s: every node needs the same", h.id, time.Duration(h.maxSkew), n.cfg.ID, n.cfg.MaxSkew)
		n.log.Warn("refused a peer", "node", h.id, "reason", ack.refusal)
		n.forget(p, conn)
		p = nil
	}
	if conn.Send(ack.encode()) != nil || p == nil {
		n.forget(p, conn)
		return nil
	}
	return p
}

// forget drops conn from p's open connections; p may be nil.
func (n *Node) forget(p *peer, conn Conn) {
	if p != nil {
		n.mu.Lock()
		delete(p.in, conn)
		n.mu.Unlock()
	}
}

// apply merges a batch's entries and, for a whole batch, takes its
// watermark.
func (n *Node) apply(p *peer, m batch) {
	for _, e := range m.entries {
		if !n.merge(e) {
			n.log.Error("cannot merge a peer's state of a key (another kind here, or malformed); kept ours", "peer", p.id, "db", e.db, "key", string(e.key))
		}
	}
	n.mu.Lock()
	if len(m.entries) > 0 {
		n.heard = true
		n.wakeLocked() // p folds them once our watermark passes them
	}
	if !m.partial {
		p.watermark = max(p.watermark, m.watermark)
		p.complete = max(p.complete, m.complete)
	}
	n.mu.Unlock()
}

// lagMs is how far p's watermark is behind this node's clock, in ms: the
// replication lag from p. -1 before its first watermark. The caller holds
// mu.
func (n *Node) lagMs(p *peer) int64 {
	if p.watermark == math.MinInt64 {
		return -1
	}
	return max(0, n.Now()-p.watermark) / 1e6
}
