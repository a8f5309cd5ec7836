package resp

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Handler runs commands. ServeRESP is called for one command of a connection
// at a time, in order, and writes exactly one reply to c.W, or defers it
// (Conn.Defer) when the reply waits for something other than the CPU: a
// Raft commit, a forward to the leader. It may block (on a lock, a long
// script): an event loop then hands its other connections to a new
// goroutine, which costs far more than a deferral.
// args alias the reader's buffer and are valid only during the call. Closed is
// called once when the connection is gone, so the handler can release the
// state it keeps for it.
type Handler interface {
	ServeRESP(c *Conn, args [][]byte)
	Closed(c *Conn)
}

// A Syncer is a Handler whose replies may only leave once the changes behind
// them are durable (appendfsync always). BeforeReply is called before each
// write of buffered replies, so one wait covers a whole pipelined batch, and
// on an event loop the first wait of a round covers every connection's.
// When it fails the replies are dropped and the connection is closed: a
// client must never see an acknowledgement of a change that was not saved.
// Resolved deferred replies leave the same way, after a BeforeReply that
// also covers the replies held behind them.
type Syncer interface {
	BeforeReply(c *Conn) error
}

// Config configures a Server. Zero fields mean the defaults.
type Config struct {
	Limits Limits
	// Clients are the client limits the server starts with (nil:
	// DefaultClientLimits); SetClientLimits changes them.
	Clients *ClientLimits
	// RequireAuth, when set and true, makes a new connection start
	// unauthenticated. It is asked per connection, so a password set at run
	// time (CONFIG SET requirepass) applies to the connections that follow.
	RequireAuth func() bool
	// Protected, when set and true, refuses a connection that does not come
	// from a loopback address with Redis' DENIED reply: protected-mode on
	// and no password for the default user. It is asked per connection.
	Protected func() bool
	Logger    *slog.Logger
	// Loops is the number of event loops serving the connections where
	// there are event loops (Linux); 0 means GOMAXPROCS.
	Loops int
}

// Server accepts connections and serves them with a Handler. It is safe for
// concurrent use.
//
// Plain TCP connections are served by the event loops; TLS connections
// (ServeTLS) each by a goroutine of their own. crypto/tls reads and writes
// through a blocking net.Conn, and a loop serves raw non-blocking sockets:
// putting TLS on the loops would mean driving TLS records by hand over
// buffers. A TLS connection already pays for its encryption per request,
// which dwarfs the park and wake-up a goroutine costs over a loop, and the
// plain path stays as it is.
type Server struct {
	cfg           Config
	h             Handler
	log           *slog.Logger
	limits        atomic.Pointer[ClientLimits]
	nextID        atomic.Int64
	total         atomic.Int64 // connections served since start
	rejects       atomic.Int64 // protocol errors
	rejected      atomic.Int64 // connections refused
	queryLimited  atomic.Int64 // closed for client-query-buffer-limit
	outputLimited atomic.Int64 // closed for client-output-buffer-limit
	trimmed       atomic.Int64 // bytes of idle connections' buffers given back
	// tick is the coarse clock (Unix ns, cronEvery's resolution) that
	// connections stamp their reads and writes with for the timeout.
	tick atomic.Int64
	// cronAsleep is set, under mu, while cron sleeps with nothing to look
	// after (cronSleeps): the clock stands still until a new connection
	// (admit) or a read or write (stamp) wakes it (wakeCronLocked).
	cronAsleep atomic.Bool

	mu     sync.Mutex // guards the fields below
	lns    []net.Listener
	conns  map[*Conn]struct{}
	closed bool
	// refusing are TLS connections being told why they are refused: that
	// needs a handshake first, on a goroutine of its own.
	refusing map[net.Conn]struct{}
	// pl runs the event loops; nil when each connection has a goroutine.
	pl poller
	// perConn is for tests: it serves each connection on a goroutine of
	// its own where event loops exist.
	perConn bool
	// stop ends cron; cronOnce starts it with the first Serve.
	stop     chan struct{}
	cronWake chan struct{} // buffered 1
	cronOnce sync.Once
	wg       sync.WaitGroup // a count per open connection and per loop goroutine
}

// poller serves connections on event loops (loop_linux.go).
type poller interface {
	// assign picks the loop that will serve c, before c is known to
	// other goroutines (Kill, cron).
	assign(c *Conn)
	// add starts serving c, whose net.Conn it takes over.
	add(c *Conn) error
	// kill closes c (CLIENT KILL) before its loop serves it again; false
	// when it was killed already.
	kill(c *Conn) bool
	// trim gives back the empty buffers of the connections idle since
	// before (Unix ns).
	trim(before int64)
	// close closes every connection and stops the loops.
	close()
}

// NewServer returns a server that runs commands with h.
func NewServer(cfg Config, h Handler) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, h: h, log: cfg.Logger, conns: make(map[*Conn]struct{}),
		refusing: make(map[net.Conn]struct{}), stop: make(chan struct{}), cronWake: make(chan struct{}, 1)}
	lim := DefaultClientLimits()
	if cfg.Clients != nil {
		lim = *cfg.Clients
	}
	s.SetClientLimits(lim)
	s.tick.Store(time.Now().UnixNano())
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("resp: server closed")

// Serve accepts plain TCP connections on ln until Close. It always returns
// a non-nil error; after Close it is ErrServerClosed. A server may serve
// several listeners at once (port and tls-port).
func (s *Server) Serve(ln net.Listener) error { return s.serve(ln, nil) }

// ServeTLS accepts connections on ln and serves them over TLS with cfg,
// each on a goroutine of its own (see Server), until Close. A nil cfg
// serves plain TCP, as Serve.
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error { return s.serve(ln, cfg) }

func (s *Server) serve(ln net.Listener, tlsCfg *tls.Config) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	if tlsCfg == nil && s.pl == nil && !s.perConn {
		pl, err := newPoller(s)
		if err != nil {
			s.log.Warn("no event loops, serving each connection on a goroutine of its own", "err", err)
		}
		s.pl = pl
	}
	s.mu.Unlock()
	s.cronOnce.Do(func() { go s.cron() })
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			if !acceptRetry(err) {
				return err
			}
			// Out of descriptors (more clients than the process may
			// hold) or a connection gone before it was taken: wait a
			// little, as net/http does, rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		setKeepAlive(nc, s.limits.Load().KeepAlive)
		if tlsCfg != nil {
			nc = tls.Server(nc, tlsCfg)
		}
		if err := s.admit(nc); err != nil {
			return err
		}
	}
}

// acceptRetry reports whether an Accept error passes: the listener is fine
// and a later Accept may succeed.
func acceptRetry(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, syscall.EMFILE) ||
		errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS)
}

// admit serves a new connection, or refuses it as Redis does: from a
// non-loopback address in protected mode, or over maxclients. It returns
// ErrServerClosed once the server is closed.
func (s *Server) admit(nc net.Conn) error {
	// Redis counts the connections it refuses as rejected, not received.
	if s.cfg.Protected != nil && !isLoopback(nc.RemoteAddr()) && s.cfg.Protected() {
		s.rejected.Add(1)
		s.refuse(nc, errProtected)
		return nil
	}
	_, perConn := nc.(*tls.Conn)
	perConn = perConn || s.pl == nil
	c := s.newConn(nc)
	if perConn {
		c.wk = make(connWake, 1)
	} else {
		s.pl.assign(c)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return ErrServerClosed
	}
	if len(s.conns) >= s.limits.Load().MaxClients {
		s.mu.Unlock()
		s.rejected.Add(1)
		s.refuse(nc, errMaxClients)
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	if s.cronAsleep.Load() {
		// c was stamped with the clock that stood still.
		s.wakeCronLocked()
		c.lastIO.Store(s.tick.Load())
	}
	s.mu.Unlock()
	s.total.Add(1)
	if perConn {
		go s.serveConn(c, c.wk.(connWake))
	} else if err := s.pl.add(c); err != nil {
		s.log.Warn("cannot serve connection", "client", c.Addr, "err", err)
		s.release(c)
	}
	return nil
}

// refuse sends msg to a connection that will not be served, and closes it.
// The write cannot block: nothing was sent on the socket yet. A TLS
// connection needs its handshake first, on a goroutine of its own that
// Close ends.
func (s *Server) refuse(nc net.Conn, msg string) {
	say := func() {
		nc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
		io.WriteString(nc, "-"+msg+"\r\n")
		nc.Close()
	}
	if _, ok := nc.(*tls.Conn); !ok {
		say()
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.refusing[nc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		say()
		s.mu.Lock()
		delete(s.refusing, nc)
		s.mu.Unlock()
	}()
}

// Close stops accepting, closes every connection and waits until every
// command has returned.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	var err error
	for _, ln := range s.lns {
		err = errors.Join(err, ln.Close())
	}
	if s.pl != nil {
		s.pl.close()
	}
	for c := range s.conns {
		if c.perConn() {
			c.abort()
		}
	}
	for nc := range s.refusing {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// ForEachConn calls fn for every open connection. fn must only use the
// methods of Conn documented as safe from other goroutines.
func (s *Server) ForEachConn(fn func(c *Conn)) {
	s.mu.Lock()
	list := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		list = append(list, c)
	}
	s.mu.Unlock()
	for _, c := range list {
		fn(c)
	}
}

// Kill closes the connection with the given id and reports whether it was
// found.
func (s *Server) Kill(id int64) bool {
	found := false
	s.ForEachConn(func(c *Conn) {
		if c.ID == id {
			found = s.killConn(c)
		}
	})
	return found
}

// killConn closes c from another goroutine than the one serving it, and
// reports whether it was not killed already.
func (s *Server) killConn(c *Conn) bool {
	if c.perConn() {
		return c.abort()
	}
	return s.pl.kill(c)
}

func (s *Server) newConn(nc net.Conn) *Conn {
	c := &Conn{
		ID:      s.nextID.Add(1),
		Addr:    nc.RemoteAddr().String(),
		LAddr:   nc.LocalAddr().String(),
		Created: time.Now(),
		nc:      nc,
		srv:     s,
	}
	c.W.proto = 2
	c.W.max = int(s.limits.Load().Output.Hard)
	c.lastIO.Store(s.tick.Load())
	c.info.Proto, c.info.Multi, c.info.User = 2, -1, "default"
	c.info.FD = fdOf(nc)
	c.unauthed = s.cfg.RequireAuth != nil && s.cfg.RequireAuth()
	return c
}

// setReader gives c its request reader, reading from src.
func (c *Conn) setReader(src io.Reader) {
	c.rd = NewReader(src, c.srv.cfg.Limits)
	c.rd.live = &c.srv.limits
	c.rd.SetAuthenticated(!c.unauthed)
}

// readFailed answers a protocol error as Redis does (the connection is
// closed after the reply) and logs the other read errors worth a look.
func (s *Server) readFailed(c *Conn, err error) {
	var pe *ProtocolError
	switch {
	case errors.As(err, &pe):
		s.rejects.Add(1)
		c.W.Error("ERR " + pe.Error())
		s.log.Debug("protocol error", "client", c.Addr, "err", pe.Msg)
	case errors.Is(err, ErrQueryTooBig):
		// Redis logs the client and the buffer's size; never its bytes.
		s.queryLimited.Add(1)
		s.log.Warn("closing client that reached max query buffer length", "client", c.Addr, "qbuf", c.rd.Buffered())
	case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
		s.log.Debug("read failed", "client", c.Addr, "err", err)
	}
}

// release lets the handler forget a closed connection. It runs on a
// goroutine of its own: Closed may wait for shard locks, and an event loop
// must not.
func (s *Server) release(c *Conn) {
	go func() {
		s.h.Closed(c)
		s.forget(c)
	}()
}

// forget drops a connection that is closed and released.
func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// flusher sends the pending replies before the connection blocks on a read,
// so a pipeline gets one write per batch and a lone request is never left
// waiting for its reply. With deferred replies it first waits for all of
// them: a goroutine of its own costs a connection little, so it need not
// read on while they are out, and a pipeline has all its commands deferred
// before the wait.
type flusher struct {
	c    *Conn
	wake connWake
}

func (f flusher) Read(p []byte) (int, error) {
	if err := f.c.drain(f.wake); err != nil {
		return 0, err
	}
	f.c.publish(0) // what it holds while it waits: a partial request
	n, err := f.c.nc.Read(p)
	if n > 0 {
		f.c.stamp()
	}
	return n, err
}

// maxPending bounds the reply bytes buffered for a long pipeline before they
// are written, so a client that pipelines many large GETs does not grow the
// buffer without bound. It also bounds the bytes held behind deferred
// replies.
const maxPending = 64 << 10

// maxHeld bounds the deferred replies a connection has out at once: past it
// its further requests wait, so a client pipelining deferred commands
// without end makes the server hold a bounded number of them.
const maxHeld = 1024

// serveConn serves c on a goroutine of its own, when there are no event
// loops. wake is c's notifier.
func (s *Server) serveConn(c *Conn, wake connWake) {
	defer func() {
		c.drain(wake)
		c.nc.Close()
		s.h.Closed(c)
		s.forget(c)
	}()
	if tc, ok := c.nc.(*tls.Conn); ok && !s.handshake(c, tc) {
		return
	}
	c.setReader(flusher{c, wake})
	for {
		args, err := c.rd.Read()
		if err != nil {
			s.readFailed(c, err)
			return
		}
		s.h.ServeRESP(c, args)
		if c.closing {
			return
		}
		if c.W.Len() >= maxPending || c.mustWait() {
			if c.drain(wake) != nil {
				return
			}
		}
	}
}

// handshake runs the TLS handshake of c, within tlsHandshakeTimeout, and
// reports whether it succeeded.
func (s *Server) handshake(c *Conn, tc *tls.Conn) bool {
	tc.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	err := tc.Handshake()
	tc.SetDeadline(time.Time{})
	if err != nil {
		s.log.Debug("TLS handshake failed", "client", c.Addr, "err", err)
		return false
	}
	c.stamp()
	return true
}

// drain writes c's replies, and while deferred ones are out waits for them
// and writes them as they come, until none is left or c is aborted.
func (c *Conn) drain(wake connWake) error {
	for {
		c.settle()
		if err := c.flush(); err != nil {
			return err
		}
		if len(c.held) == 0 {
			return nil
		}
		if c.aborted.Load() {
			return net.ErrClosed
		}
		<-wake
	}
}

// connWake is the notifier of a connection served on a goroutine of its
// own: drain waits on it.
type connWake chan struct{}

func (w connWake) notify(*Conn) {
	select {
	case w <- struct{}{}:
	default: // a wake-up is already waiting, and drain looks at everything
	}
}

// perConn reports whether c is served on a goroutine of its own: its
// notifier is its connWake, set before c is known to other goroutines.
func (c *Conn) perConn() bool {
	_, own := c.wk.(connWake)
	return own
}

// abort closes a connection served on a goroutine of its own (CLIENT KILL,
// Close), which may be waiting for deferred replies rather than reading.
func (c *Conn) abort() bool {
	if c.aborted.Swap(true) {
		return false
	}
	c.nc.Close()
	c.wk.notify(c)
	return true
}

// Conn is one client connection. Its exported fields and the methods not
// marked otherwise belong to the Handler's calls for it, which never overlap.
type Conn struct {
	ID      int64
	Addr    string // remote address
	LAddr   string // local address
	Created time.Time
	// W collects the replies of the current batch.
	W Writer
	// State is the handler's per-connection state (MULTI queue, WATCH...).
	State any

	nc  net.Conn
	srv *Server
	rd  *Reader
	ls  loopState // when served by an event loop
	// unauthed is true until AUTH succeeds when the server requires a
	// password; the zero Conn is authenticated, which suits handler tests.
	unauthed bool
	closing  bool

	// held are the deferred replies not yet written, oldest first. While
	// there are any, W.b[:hold] is ready to send and what handlers write
	// after it is held behind the last of them (settle). heldBytes counts
	// the bytes held in their after buffers.
	held      []*Deferred
	hold      int
	heldBytes int
	// wk is told when a deferred reply is resolved: the loop serving c, or
	// c's connWake.
	wk      notifier
	aborted atomic.Bool // abort was called (goroutine per connection)

	// lastIO is the coarse clock (Server.tick) at c's last read or write,
	// for the timeout.
	lastIO atomic.Int64
	// mem is what c holds, as its serving goroutine last published it.
	mem connMem
	// softSince is when the cron first saw c over the soft output limit,
	// 0 when it is not (the cron's own).
	softSince int64

	// info holds what CLIENT LIST shows, readable from other goroutines.
	info struct {
		sync.Mutex
		ClientInfo
	}
}

// Authenticated reports whether the connection has authenticated (always true
// when the server requires no password).
func (c *Conn) Authenticated() bool { return !c.unauthed }

// SetAuthenticated records the result of AUTH or HELLO AUTH.
func (c *Conn) SetAuthenticated(ok bool) {
	c.unauthed = !ok
	if c.rd != nil {
		c.rd.SetAuthenticated(ok)
	}
}

// SetProto switches the reply protocol (2 or 3).
func (c *Conn) SetProto(v int) {
	c.W.proto = v
	c.info.Lock()
	c.info.Proto = v
	c.info.Unlock()
}

// CloseAfterReply closes the connection once the current reply is written
// (QUIT).
func (c *Conn) CloseAfterReply() { c.closing = true }

// flush writes W (goroutine per connection). When BeforeReply or the write
// fails the replies are dropped and c is aborted, so that nothing waits for
// its deferred replies any more.
func (c *Conn) flush() error {
	if c.aborted.Load() {
		return net.ErrClosed
	}
	if len(c.W.b) == 0 && !c.W.over {
		return nil
	}
	var err error
	if c.overLimit(len(c.W.b)) {
		err = errOutputLimit
	}
	// The write blocks while the client reads nothing: the cron then sees
	// what waits (writing) and applies the soft limit.
	c.publish(0)
	c.mem.writeSince.Store(c.srv.tick.Load())
	c.mem.writing.Store(int64(len(c.W.b)))
	if sy, ok := c.srv.h.(Syncer); ok && err == nil {
		err = sy.BeforeReply(c)
	}
	if err == nil {
		_, err = c.nc.Write(c.W.b)
	}
	c.mem.writing.Store(0)
	c.written()
	if err != nil {
		c.abort()
		return err
	}
	c.stamp()
	return nil
}

// errOutputLimit closes a connection past its hard output limit.
var errOutputLimit = errors.New("resp: client output buffer limit reached")

// written empties W once the socket has taken it all.
func (c *Conn) written() {
	c.notePeak()
	c.W.reset()
	c.hold = 0
}

// ClientInfo is what CLIENT LIST and CLIENT INFO show for a connection.
type ClientInfo struct {
	ID                    int64
	Addr, LAddr           string
	Name, LibName, LibVer string
	User                  string
	DB                    int
	Proto                 int
	Created               time.Time
	LastActive            int64 // Unix ns of the last command
	LastCmd               string
	Multi                 int // queued commands, -1 outside MULTI
	// FD is the socket's file descriptor in this process (the one the
	// event loop reads), -1 when it has none.
	FD  int
	Mem ConnMem
}

// Info returns the connection's CLIENT LIST fields. Safe from any goroutine.
func (c *Conn) Info() ClientInfo {
	c.info.Lock()
	defer c.info.Unlock()
	i := c.info.ClientInfo
	i.ID, i.Addr, i.LAddr, i.Created, i.Mem = c.ID, c.Addr, c.LAddr, c.Created, c.Mem()
	return i
}

// InfoNow is Info with c's buffers as they are now, as Redis shows the
// client that runs CLIENT LIST or CLIENT INFO: qbuf holds the running
// command's request and what was read after it, argv-mem its arguments,
// rbp the replies built so far in this round. omem and oll stay those of
// the last round. Only the handler's calls for c may call it.
func (c *Conn) InfoNow() ClientInfo {
	i := c.Info()
	var q queryMem
	if c.rd != nil {
		q = c.rd.memRunning()
	}
	now := c.memNow(q, 0)
	now.Output, now.Held = i.Mem.Output, i.Mem.Held
	i.Mem = now
	return i
}

// setFD records fd as c's descriptor, for CLIENT LIST.
func (c *Conn) setFD(fd int) {
	c.info.Lock()
	c.info.FD = fd
	c.info.Unlock()
}

// fdOf returns the file descriptor of nc's socket (under TLS, of the
// connection it runs on), or -1.
func fdOf(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	rc.Control(func(s uintptr) { fd = int(s) })
	return fd
}

// Touch records the command being run and when, for CLIENT LIST.
func (c *Conn) Touch(cmd string, now int64) {
	c.info.Lock()
	c.info.LastCmd, c.info.LastActive = cmd, now
	c.info.Unlock()
}

// SetName records the connection name (CLIENT SETNAME, HELLO SETNAME).
func (c *Conn) SetName(name string) {
	c.info.Lock()
	c.info.Name = name
	c.info.Unlock()
}

// Name returns the connection name.
func (c *Conn) Name() string {
	c.info.Lock()
	defer c.info.Unlock()
	return c.info.Name
}

// SetLib records CLIENT SETINFO LIB-NAME (name true) or LIB-VER.
func (c *Conn) SetLib(name bool, v string) {
	c.info.Lock()
	if name {
		c.info.LibName = v
	} else {
		c.info.LibVer = v
	}
	c.info.Unlock()
}

// SetDB records the selected database for CLIENT LIST.
func (c *Conn) SetDB(db int) {
	c.info.Lock()
	c.info.DB = db
	c.info.Unlock()
}

// SetUser records the authenticated user for CLIENT LIST.
func (c *Conn) SetUser(u string) {
	c.info.Lock()
	c.info.User = u
	c.info.Unlock()
}

// SetMulti records the MULTI queue length (-1 outside MULTI).
func (c *Conn) SetMulti(n int) {
	c.info.Lock()
	c.info.Multi = n
	c.info.Unlock()
}
