package raft

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/throttleddb/throttled/internal/tlsconf"
	"github.com/throttleddb/throttled/resp"
)

// A follower serves its clients by forwarding their commands to the leader
// over the RESP port, as RAFT FORWARD <encoded command>, and relaying the
// leader's reply bytes unchanged. Each target address gets one connection
// (a link): the link's writer sends everything queued in one write, so
// commands of many clients are pipelined, and its reader hands the replies
// back in order.
//
// A command is forwarded once and never retried: if the link breaks after it
// was written, nobody knows whether the leader applied it, and the client
// gets UNKNOWN; a command that could not be written gets CLUSTERDOWN. So a
// command applies at most once, whatever happens between the nodes.

// dialTimeout bounds connecting to another member.
const dialTimeout = time.Second

type forwarder struct {
	password string
	tls      *tls.Config // nil: plain TCP
	log      *slog.Logger

	mu     sync.Mutex // guards links and closed
	links  map[string]*link
	closed bool
}

func newForwarder(password string, tc *tls.Config, log *slog.Logger) *forwarder {
	return &forwarder{password: password, tls: tc, log: log, links: map[string]*link{}}
}

// request is one command for another member: args, and where its reply goes.
type request struct {
	args     [][]byte
	done     func([]byte)
	deadline time.Time
}

// forward sends p to the leader at addr.
func (f *forwarder) forward(addr string, p proposal) {
	f.send(addr, request{
		args:     [][]byte{[]byte("RAFT"), []byte("FORWARD"), p.cmd.AppendBinary(nil)},
		done:     p.done,
		deadline: p.deadline,
	})
}

// send queues r for the member at addr.
func (f *forwarder) send(addr string, r request) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		r.done(bytes.Clone(replyDown))
		return
	}
	l := f.links[addr]
	if l == nil {
		l = &link{f: f, addr: addr, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		f.links[addr] = l
		go l.run()
	}
	f.mu.Unlock()
	l.add(r)
}

// close stops every link; what they hold gets CLUSTERDOWN or UNKNOWN.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	links := f.links
	f.links = nil
	f.mu.Unlock()
	for _, l := range links {
		close(l.stop)
	}
}

// link is the connection to one member.
type link struct {
	f    *forwarder
	addr string
	wake chan struct{}
	stop chan struct{}

	mu       sync.Mutex // guards queue and inflight
	queue    []request  // not written yet
	inflight []request  // written, waiting for their replies, in order
}

func (l *link) add(r request) {
	l.mu.Lock()
	l.queue = append(l.queue, r)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take empties the queue; with sent it moves the requests to inflight
// first, so the reader finds them before their replies can arrive.
func (l *link) take(sent bool) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queue
	l.queue = nil
	if sent {
		l.inflight = append(l.inflight, q...)
	}
	return q
}

// run is the link's writer: it connects when there is something to send,
// and writes what queued since the last write.
func (l *link) run() {
	var conn net.Conn
	var dead chan struct{} // closed when conn's reader has stopped
	var buf []byte
	defer func() {
		if conn != nil {
			conn.Close()
		}
		failRequests(l.take(false), replyDown)
	}()
	for {
		select {
		case <-l.stop:
			return
		case <-l.wake:
		}
		if conn != nil {
			select {
			case <-dead:
				conn = nil
			default:
			}
		}
		if conn == nil {
			c, err := l.dial()
			if err != nil {
				l.f.log.Debug("raft: cannot reach member", "addr", l.addr, "err", err)
				failRequests(l.take(false), replyDown)
				continue
			}
			conn, dead = c, make(chan struct{})
			go l.read(conn, dead)
		}
		buf = buf[:0]
		for _, r := range l.take(true) {
			buf = resp.AppendCommand(buf, r.args...)
		}
		if len(buf) == 0 {
			continue
		}
		if _, err := conn.Write(buf); err != nil {
			// The reader fails what is in flight once the connection
			// is closed; what it took before these went in flight is
			// failed here.
			conn.Close()
			<-dead
			conn = nil
			failRequests(l.takeInflight(), replyUnknown)
		}
	}
}

// dial connects (over TLS under tls-replication, the handshake done) and
// authenticates when the cluster has a password.
func (l *link) dial() (net.Conn, error) {
	var conn net.Conn
	var err error
	if l.f.tls != nil {
		conn, err = tlsconf.Dial(l.addr, dialTimeout, l.f.tls)
	} else {
		conn, err = net.DialTimeout("tcp", l.addr, dialTimeout)
	}
	if err != nil || l.f.password == "" {
		return conn, err
	}
	conn.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := conn.Write(resp.AppendCommand(nil, "AUTH", l.f.password)); err != nil {
		conn.Close()
		return nil, err
	}
	var r replyReader
	reply, err := r.next(conn)
	if err == nil && reply[0] == '-' {
		err = errors.New(string(bytes.TrimSpace(reply[1:])))
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// read hands the replies that arrive on conn to the requests in flight, in
// order. When conn fails it closes it, answers UNKNOWN to every request in
// flight and closes dead, so the writer connects again for the next ones.
func (l *link) read(conn net.Conn, dead chan struct{}) {
	defer close(dead)
	var r replyReader
	for {
		l.mu.Lock()
		var deadline time.Time
		if len(l.inflight) > 0 {
			deadline = l.inflight[0].deadline.Add(dialTimeout)
		}
		l.mu.Unlock()
		conn.SetReadDeadline(deadline)
		reply, err := r.next(conn)
		l.mu.Lock()
		if err != nil || len(l.inflight) == 0 {
			l.mu.Unlock()
			// Closed first, so that the writer's next write fails
			// and it fails what it sends meanwhile.
			conn.Close()
			failRequests(l.takeInflight(), replyUnknown)
			return
		}
		req := l.inflight[0]
		l.inflight = l.inflight[1:]
		l.mu.Unlock()
		req.done(reply)
	}
}

func (l *link) takeInflight() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	inflight := l.inflight
	l.inflight = nil
	return inflight
}

func failRequests(reqs []request, reply []byte) {
	for _, r := range reqs {
		r.done(bytes.Clone(reply))
	}
}

// replyReader reads whole replies, as raw bytes, from a connection.
type replyReader struct {
	buf []byte // read but not returned yet
}

// next returns the next complete reply (its own copy).
func (r *replyReader) next(conn net.Conn) ([]byte, error) {
	for {
		if n, err := resp.ReplyLen(r.buf); err != nil {
			return nil, err
		} else if n > 0 {
			reply := bytes.Clone(r.buf[:n])
			r.buf = r.buf[n:]
			return reply, nil
		}
		if cap(r.buf)-len(r.buf) < 4096 {
			r.buf = append(make([]byte, 0, 2*cap(r.buf)+4096), r.buf...)
		}
		n, err := conn.Read(r.buf[len(r.buf):cap(r.buf)])
		r.buf = r.buf[:len(r.buf)+n]
		if err != nil {
			return nil, err
		}
	}
}
