package resp

import (
	"net"
	"sync/atomic"
	"time"
)

// ClientLimits are Redis' client settings: how many clients, how long one
// may idle, and how much of the server's memory one may hold. A Server's
// limits change at run time (SetClientLimits, from CONFIG SET); the new
// values apply to every connection from then on, as Redis applies them,
// except KeepAlive, which is set on a socket when it is accepted.
type ClientLimits struct {
	// MaxClients is maxclients: the connection accepted when this many are
	// open gets "-ERR max number of clients reached" and is closed.
	MaxClients int
	// Timeout is timeout: a connection that neither sends nor takes a
	// byte for this long is closed; 0 never closes one.
	Timeout time.Duration
	// KeepAlive is tcp-keepalive: the idle time before TCP keepalive
	// probes, and three times the time between them (Redis' rule); 0 sends
	// none.
	KeepAlive time.Duration
	// MaxQueryLen is client-query-buffer-limit: a connection whose
	// unfinished request holds more is closed without a reply.
	MaxQueryLen int
	// Output is client-output-buffer-limit for normal clients.
	Output OutputLimit
}

// OutputLimit bounds the replies a connection has not taken yet (made and
// not written to its socket, or held behind a deferred reply): past Hard
// it is closed at once, and past Soft when it stays there for SoftFor.
// Zero turns a bound off.
type OutputLimit struct {
	Hard, Soft int64
	SoftFor    time.Duration
}

// Default client limits. The output limit is not Redis' (0 0 0, none for
// normal clients): a client that pipelines requests and reads no reply
// could otherwise make the server hold replies without end. The event
// loops already stop reading such a client once its socket is full, so
// what it can pile up is one batch of replies; the limit bounds that batch
// (MGET of many big values, KEYS on a big keyspace). Rate-limit replies
// are tens of bytes and CLIENT LIST of 10,000 clients is about 3 MB, so
// 64 MB, or 16 MB for a minute, is far above any legitimate reply and far
// below what would hurt the other clients.
const (
	DefaultMaxClients    = 10000
	DefaultKeepAlive     = 300 * time.Second
	DefaultMaxQueryLen   = rdDefaultMaxQueryLen
	DefaultOutputHard    = 64 << 20
	DefaultOutputSoft    = 16 << 20
	DefaultOutputSoftFor = 60 * time.Second
)

// DefaultClientLimits returns the limits a Server starts with when its
// Config gives none.
func DefaultClientLimits() ClientLimits {
	return ClientLimits{
		MaxClients:  DefaultMaxClients,
		KeepAlive:   DefaultKeepAlive,
		MaxQueryLen: DefaultMaxQueryLen,
		Output:      OutputLimit{Hard: DefaultOutputHard, Soft: DefaultOutputSoft, SoftFor: DefaultOutputSoftFor},
	}
}

// ClientLimits returns the limits in force.
func (s *Server) ClientLimits() ClientLimits { return *s.limits.Load() }

// SetClientLimits changes the limits. The caller checks the values (CONFIG
// SET answers Redis' errors); MaxClients below 1 would refuse everyone.
func (s *Server) SetClientLimits(l ClientLimits) {
	s.limits.Store(&l)
	s.wakeCron() // a timeout may now be due
}

// NetStats are the connection counters INFO shows.
type NetStats struct {
	// Received counts the connections served since start
	// (total_connections_received).
	Received int64
	// Rejected counts the connections refused, for maxclients or in
	// protected mode (rejected_connections).
	Rejected int64
	// QueryLimit and OutputLimit count the connections closed for
	// client-query-buffer-limit and client-output-buffer-limit, as Redis
	// 7.4 counts them.
	QueryLimit, OutputLimit int64
	// Trimmed counts the bytes of buffer idle connections gave back.
	Trimmed int64
}

// Stats returns the connection counters.
func (s *Server) Stats() NetStats {
	return NetStats{Received: s.total.Load(), Rejected: s.rejected.Load(),
		QueryLimit: s.queryLimited.Load(), OutputLimit: s.outputLimited.Load(), Trimmed: s.trimmed.Load()}
}

// ConnMem is what a connection holds in the server's memory, as CLIENT
// LIST shows it. The goroutine serving the connection publishes it each
// time it has served or written it (publish), so a look from another
// goroutine sees the figures of its last round; Conn.InfoNow gives a
// handler the figures of its own connection as they are.
type ConnMem struct {
	// QueryBuf (qbuf) is the request bytes read and not yet parsed into
	// arguments; while a command runs, every request since the last read,
	// as Redis' query buffer holds them until it has run them all.
	QueryBuf int64
	// QueryBufFree (qbuf-free) is the room left after them in the read
	// buffer, whose size ReadBuf is.
	QueryBufFree, ReadBuf int64
	// ArgvMem (argv-mem) is the bytes of the arguments parsed: the running
	// command's, or those of a request not fully arrived. (Here they are
	// slices of the read buffer; Redis copies them out of its own.)
	ArgvMem int64
	// ReplyBuf (rbs) is the reply buffer's size, and ReplyPeak (rbp) the
	// most bytes it held at once in the last replyPeakWindow.
	ReplyBuf, ReplyPeak int64
	Output              int64 // omem: replies not yet taken by the client
	Held                int64 // oll: deferred replies the connection waits for
	Total               int64 // tot-mem: all of it, with the connection's own state
}

// connOverhead is what a connection costs besides its buffers: the Conn and
// the handler's state for it. It is an estimate for tot-mem; docs/operations.md
// ("Client limits") has the measured figure.
const connOverhead = 1 << 10

// replyPeakWindow is how long ReplyPeak remembers a peak, Redis'
// reply-buffer-peak-reset-time.
const replyPeakWindow = 5 * time.Second

// cronEvery is how often the server looks at its connections for the
// timeout and the soft output limit, Redis' hz 10.
const cronEvery = 100 * time.Millisecond

// trimAfter is how long a connection must idle before its empty buffers
// are given back, as Redis frees an idle client's query buffer after 2 s:
// an idle connection then costs its Conn and socket only.
const trimAfter = 2 * time.Second

// tlsHandshakeTimeout bounds a TLS handshake, so a client that connects
// and stops half way does not hold a goroutine for ever.
const tlsHandshakeTimeout = 10 * time.Second

// Redis' replies to the connections it refuses, as redis-server 7.0.15
// sends them (typo included: clients may match the text).
const (
	errMaxClients = "ERR max number of clients reached"
	errProtected  = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."
)

// isLoopback reports whether a is a loopback address (127.0.0.0/8, ::1),
// the clients protected mode lets in.
func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// setKeepAlive sets tcp-keepalive on an accepted socket, as Redis'
// anetKeepAlive does: probes after d idle, then every d/3, three of them.
func setKeepAlive(nc net.Conn, d time.Duration) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	if d <= 0 {
		tc.SetKeepAlive(false)
		return
	}
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: d, Interval: max(d/3, time.Second), Count: 3})
}

// cron looks at every connection each cronEvery until Close: it advances
// the coarse clock connections stamp their reads and writes with, closes
// the ones idle past Timeout or over the soft output limit for too long,
// and every trimAfter asks the loops to give back idle buffers. When it
// has nothing to look after (cronSleeps) it sleeps until a connection
// arrives or reads or writes, rather than wake 10 times a second on a
// server nobody talks to.
func (s *Server) cron() {
	t := time.NewTicker(cronEvery)
	defer t.Stop()
	var kill []*Conn
	lastTrim := time.Now()
	// trimmed is the last trim's bound: connections idle since before it
	// have had their buffers given back.
	trimmed := int64(0)
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.tick.Store(now.UnixNano())
			kill = s.expired(now.UnixNano(), kill[:0])
			for i, c := range kill {
				s.killConn(c)
				kill[i] = nil
			}
			if now.Sub(lastTrim) >= trimAfter {
				lastTrim = now
				s.mu.Lock()
				pl := s.pl
				s.mu.Unlock()
				trimmed = now.UnixNano() - int64(trimAfter)
				if pl != nil {
					pl.trim(trimmed)
				}
			}
			if s.cronSleeps(trimmed) {
				t.Stop()
				select {
				case <-s.stop:
					return
				case <-s.cronWake:
				}
				t.Reset(cronEvery)
			}
		}
	}
}

// cronSleeps reports whether cron may sleep, and then marks it asleep: no
// timeout is set, and every connection has been idle since before the
// last trim (its buffers given back), with no output waiting. A server
// with no connection always may. Connections added (admit) or stamped
// after the mark wake cron.
func (s *Server) cronSleeps(trimmed int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.conns) > 0 && s.limits.Load().Timeout > 0 {
		return false
	}
	// Marked before the look: a read or write the look misses (stamp
	// stores lastIO, then loads cronAsleep) sees the mark and wakes cron.
	s.cronAsleep.Store(true)
	for c := range s.conns {
		if c.lastIO.Load() >= trimmed || c.softSince != 0 || c.mem.Output.Load()+c.mem.writing.Load() != 0 {
			s.cronAsleep.Store(false)
			return false
		}
	}
	return true
}

// wakeCron ends cron's sleep, if it sleeps.
func (s *Server) wakeCron() {
	if !s.cronAsleep.Load() {
		return
	}
	s.mu.Lock()
	if s.cronAsleep.Load() {
		s.wakeCronLocked()
	}
	s.mu.Unlock()
}

// wakeCronLocked ends cron's sleep, s.mu held: the coarse clock, which
// stood still, moves to now first.
func (s *Server) wakeCronLocked() {
	s.tick.Store(time.Now().UnixNano())
	s.cronAsleep.Store(false)
	select {
	case s.cronWake <- struct{}{}:
	default: // a wake is pending already
	}
}

// expired appends to kill the connections that idled past the timeout or
// stayed over the soft output limit, and logs why.
func (s *Server) expired(now int64, kill []*Conn) []*Conn {
	lim := s.limits.Load()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		// lastIO is the coarse clock, up to cronEvery behind the read or
		// write it stamps: the slack keeps a client from being closed
		// before its full timeout.
		if lim.Timeout > 0 && now-c.lastIO.Load() > int64(lim.Timeout+cronEvery) {
			s.log.Debug("closing idle client", "client", c.Addr, "timeout", lim.Timeout)
			kill = append(kill, c)
			continue
		}
		out := c.mem.Output.Load() + c.mem.writing.Load()
		switch {
		case lim.Output.Soft <= 0 || out <= lim.Output.Soft:
			c.softSince = 0
		case c.softSince == 0:
			c.softSince = now
		case now-c.softSince >= int64(lim.Output.SoftFor):
			s.outputLimited.Add(1)
			s.log.Warn("client closed for overcoming of output buffer limits", "client", c.Addr, "omem", out, "soft", lim.Output.Soft, "for", lim.Output.SoftFor)
			kill = append(kill, c)
		}
	}
	return kill
}

// connMem holds a connection's published ConnMem (atomic, read by any
// goroutine) and the copy its serving goroutine compares against, so that
// a round that changed nothing stores nothing.
type connMem struct {
	QueryBuf, QueryBufFree, ReadBuf, ArgvMem, ReplyBuf, ReplyPeak, Output, Held, Total atomic.Int64
	// writing is the bytes of a write in flight (goroutine per
	// connection), begun at writeSince (Server.tick): Output does not
	// count them, so that a look from another connection right after the
	// client got its reply does not see them as still waiting.
	writing, writeSince atomic.Int64

	last ConnMem // owner's
	// peak is the most bytes W held since peakSince (Server.tick), for
	// ReplyPeak (owner's).
	peak, peakSince int64
}

// Mem returns what c holds in memory, as of its last round. Safe from any
// goroutine.
func (c *Conn) Mem() ConnMem {
	m := &c.mem
	return ConnMem{QueryBuf: m.QueryBuf.Load(), QueryBufFree: m.QueryBufFree.Load(), ReadBuf: m.ReadBuf.Load(),
		ArgvMem: m.ArgvMem.Load(), ReplyBuf: m.ReplyBuf.Load(), ReplyPeak: m.ReplyPeak.Load(),
		Output: m.Output.Load() + c.blockedWrite(), Held: m.Held.Load(), Total: m.Total.Load()}
}

// blockedWrite returns the bytes of c's write in flight if it has been
// blocked for two cron periods or more (the client reads nothing), else
// 0: a write the socket takes at once is done before anyone could see it
// pending, however the goroutines interleave.
func (c *Conn) blockedWrite() int64 {
	m := &c.mem
	w := m.writing.Load()
	if w == 0 || c.srv == nil || c.srv.tick.Load()-m.writeSince.Load() < int64(2*cronEvery) {
		return 0
	}
	return w
}

// memNow returns what c holds now, with unsent bytes of W not yet taken by
// the socket; q is what its reader holds. Only the goroutine serving c
// calls it.
func (c *Conn) memNow(q queryMem, unsent int) ConnMem {
	return ConnMem{
		QueryBuf: int64(q.qbuf), QueryBufFree: int64(q.free), ReadBuf: int64(q.size), ArgvMem: int64(q.argvLen),
		ReplyBuf: int64(cap(c.W.b)), ReplyPeak: c.notePeak(),
		Output: int64(unsent + c.heldBytes), Held: int64(len(c.held)),
		Total: int64(q.size+q.argSlice+cap(c.W.b)+c.heldBytes) + connOverhead,
	}
}

// notePeak records how many bytes W holds now for ReplyPeak, and returns
// the peak of the window. Only the goroutine serving c calls it: before W
// is emptied, and when the figures are taken.
func (c *Conn) notePeak() int64 {
	m := &c.mem
	var now int64
	if c.srv != nil {
		now = c.srv.tick.Load()
	}
	if now-m.peakSince >= int64(replyPeakWindow) {
		m.peak, m.peakSince = 0, now
	}
	m.peak = max(m.peak, int64(len(c.W.b)))
	return m.peak
}

// publish records what c holds now, with unsent bytes of W not yet taken
// by the socket, for Mem and the soft output limit. Only the goroutine
// serving c calls it; a round that changed nothing stores nothing.
func (c *Conn) publish(unsent int) {
	var q queryMem
	if c.rd != nil {
		q = c.rd.mem()
	}
	now := c.memNow(q, unsent)
	if now == c.mem.last {
		return
	}
	c.mem.last = now
	m := &c.mem
	m.QueryBuf.Store(now.QueryBuf)
	m.QueryBufFree.Store(now.QueryBufFree)
	m.ReadBuf.Store(now.ReadBuf)
	m.ArgvMem.Store(now.ArgvMem)
	m.ReplyBuf.Store(now.ReplyBuf)
	m.ReplyPeak.Store(now.ReplyPeak)
	m.Output.Store(now.Output)
	m.Held.Store(now.Held)
	m.Total.Store(now.Total)
}

// overLimit reports whether c, with unsent bytes of W not yet taken, is
// past the hard output limit or had a reply dropped for it (Writer.max):
// it must then be closed without a write. It runs before each write, and
// passes the limit in force on to the Writer.
func (c *Conn) overLimit(unsent int) bool {
	hard := c.srv.limits.Load().Output.Hard
	c.W.max = int(hard)
	out := int64(unsent + c.heldBytes)
	if !c.W.over && (hard <= 0 || out <= hard) {
		return false
	}
	c.srv.outputLimited.Add(1)
	c.srv.log.Warn("client closed for overcoming of output buffer limits", "client", c.Addr, "omem", out, "hard", hard)
	return true
}

// stamp records a read or a write on c for the timeout, at the coarse
// clock's resolution; it stores only when the clock moved since. It wakes
// cron if it sleeps, and then stamps c again with the clock cron set.
func (c *Conn) stamp() {
	s := c.srv
	if t := s.tick.Load(); c.lastIO.Load() != t {
		c.lastIO.Store(t)
	}
	if s.cronAsleep.Load() {
		s.wakeCron()
		c.lastIO.Store(s.tick.Load())
	}
}
