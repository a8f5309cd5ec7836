//go:build linux

package resp

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// On Linux connections are served by event loops, as redis-server serves
// them: one goroutine per loop (Config.Loops of them, GOMAXPROCS by
// default) asks epoll which sockets have bytes, reads each of them once,
// runs the requests that are complete and, once the round is over, writes
// every connection's replies (after one BeforeReply wait that covers them
// all).
//
// A goroutine per connection costs more per request: after sending its reply
// the goroutine reads again, finds nothing (EAGAIN) and parks, and the
// scheduler must find it again when the next request comes. At one request
// per round trip (redis-benchmark -P 1) that is a second read system call
// and a park and wake-up per request; a loop reads only sockets epoll
// reported. The loop's epoll descriptor is itself registered with Go's
// poller, so a loop with nothing to do parks like any goroutine instead of
// holding a thread in epoll_wait.
//
// A handler call may block: on the shard locks a long Lua script holds, in a
// script that runs for seconds (the others must then get BUSY, and SCRIPT
// KILL must get through), or on the disk. A loop stuck in one call would
// stop every other connection it serves, so a watchdog looks at the loops
// every watchEvery: a loop that is in the same handler call as at the last
// look is handed to a new goroutine, which goes on serving the other
// connections, while the stuck goroutine keeps only the connection it is
// serving and gives it back to the loop once the call returns.
//
// A call that only waits for an answer (a Raft commit, the leader) defers
// its reply instead (Conn.Defer) and returns at once; the loop serves the
// connection's next requests, holding their replies behind the deferred
// one. Resolve, from any goroutine, puts the connection on the loop's
// resolved list and wakes it; the next round moves the resolved replies at
// the head of the connection's queue, and those held behind them, into its
// output and writes them. A connection whose requests must wait (behind a
// barrier, after QUIT, or with its held replies at their bound) is
// "stalled": epoll is asked for no events on it, since it would report the
// unread input every round, until a resolution lets it go on. One that is
// with a stuck goroutine ("away") when its replies resolve is settled when
// it comes back.

// watchEvery is how often the watchdog looks at the loops. A handler call
// that runs longer than this to twice this hands its loop over; calls take
// microseconds, so this only happens when one really waits.
const watchEvery = 10 * time.Millisecond

// loopEvents is how many ready sockets one epoll_wait returns at most.
const loopEvents = 256

// errWouldBlock is what a loop connection's socket source returns once it
// has been read in this round, or when it has nothing: the Reader keeps the
// partial request and the loop moves on.
var errWouldBlock = errors.New("resp: no more input this round")

// loopState is a connection's part of its loop's bookkeeping. Fields marked
// (owner) belong to whichever goroutine runs the loop, or to the stuck
// goroutine while the connection is away with it.
type loopState struct {
	lp *loop
	fd int
	// readOK lets the socket source read once more in this round (owner).
	readOK bool
	// wpos is how much of W the socket has taken; output is blocked while
	// it is not all written, and the connection's input is not read (owner).
	wpos    int
	blocked bool
	// stalled: its requests wait for deferred replies (Conn.mustWait), so
	// it is not read (owner).
	stalled bool
	watched uint32 // the events epoll reports for it (owner)
	queued  bool   // in lp.pending (owner)
	more    bool   // stopped with requests maybe left in its reader (owner)
	away    bool   // handed to a stuck goroutine (owner)
	gone    bool   // closed (owner)
	// killed: CLIENT KILL asked for it. Set with lp.mu held; the loop
	// reads it before serving, so a killed client gets no more replies.
	killed atomic.Bool
	// resolved: in lp.resolved; guarded by lp.mu.
	resolved bool
}

// events returns the epoll events c waits for: room in the socket while its
// output is blocked, none while its requests wait for deferred replies
// (epoll is level-triggered: it would report unread input every round),
// else input.
func (ls *loopState) events() uint32 {
	switch {
	case ls.blocked:
		return syscall.EPOLLOUT
	case ls.stalled:
		return 0
	}
	return syscall.EPOLLIN
}

// socketSource is the Reader's source for a loop connection.
type socketSource struct{ c *Conn }

func (s socketSource) Read(p []byte) (int, error) {
	ls := &s.c.ls
	if !ls.readOK {
		return 0, errWouldBlock
	}
	ls.readOK = false
	n, err := rawRead(ls.fd, p)
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return 0, errWouldBlock // level-triggered: epoll reports it again
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	s.c.stamp()
	return n, nil
}

// loops is the set of event loops of a Server, and their watchdog.
type loops struct {
	all []*loop
	dog watchdog
	// next is the round robin over all for new connections, which the
	// accept goroutines of several listeners (bind addresses) share.
	next atomic.Uint32
	stop chan struct{}
}

func newPoller(s *Server) (poller, error) {
	ls := &loops{stop: make(chan struct{}), dog: watchdog{wake: make(chan struct{}, 1)}}
	n := s.cfg.Loops
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
	}
	for range n {
		l, err := newLoop(s)
		if err != nil {
			for _, l := range ls.all {
				l.release()
			}
			return nil, err
		}
		l.dog = &ls.dog
		ls.all = append(ls.all, l)
	}
	for _, l := range ls.all {
		s.wg.Add(1)
		go l.run(0)
	}
	go ls.watch()
	return ls, nil
}

// assign gives a new connection to the next loop, round robin.
func (ls *loops) assign(c *Conn) {
	l := ls.all[int((ls.next.Add(1)-1)%uint32(len(ls.all)))]
	c.ls.lp, c.wk = l, l
}

// add starts serving c on its loop. The loop serves a duplicate of its
// descriptor; c.nc itself is closed, which takes it out of Go's poller.
func (ls *loops) add(c *Conn) error {
	fd, err := dupSocket(c.nc)
	c.nc.Close()
	if err != nil {
		return err
	}
	l := c.ls.lp
	c.ls.fd = fd
	c.setFD(fd)
	c.setReader(socketSource{c})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		syscall.Close(fd)
		return ErrServerClosed
	}
	l.incoming = append(l.incoming, c)
	l.wakeLocked()
	return nil
}

func (ls *loops) kill(c *Conn) bool {
	l := c.ls.lp
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || c.ls.killed.Load() {
		return false
	}
	c.ls.killed.Store(true)
	l.kill = append(l.kill, c)
	l.wakeLocked()
	return true
}

func (ls *loops) trim(before int64) {
	for _, l := range ls.all {
		l.mu.Lock()
		l.trimBefore = before
		l.wakeLocked()
		l.mu.Unlock()
	}
}

func (ls *loops) close() {
	close(ls.stop)
	for _, l := range ls.all {
		l.mu.Lock()
		l.closed = true
		l.wakeLocked()
		// A loop in a handler call is handed over at once, so the other
		// connections close now rather than when the call returns.
		l.handOverLocked()
		l.mu.Unlock()
	}
}

// watch hands over the loops stuck in a handler call. When no loop is in
// one and none began one since its last look, it sleeps until a loop
// enters a call (enter wakes it), so that an idle server does not wake
// every watchEvery; a call is then handed over as late as before.
func (ls *loops) watch() {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-ls.stop:
			return
		case <-t.C:
		}
		if ls.check() {
			continue
		}
		// A call that begins after this store wakes the watchdog; one
		// that began before it has changed calls, which the look after
		// the store sees (enter reads asleep after its l.mu section).
		ls.dog.asleep.Store(true)
		if ls.check() {
			ls.dog.asleep.Store(false)
			continue
		}
		select {
		case <-ls.stop:
			return
		case <-ls.dog.wake:
		}
		t.Reset(watchEvery)
	}
}

// check looks at every loop and reports whether any is busy.
func (ls *loops) check() bool {
	busy := false
	for _, l := range ls.all {
		busy = l.check() || busy
	}
	return busy
}

// watchdog is the watch goroutine's sleep, shared by the loops.
type watchdog struct {
	asleep atomic.Bool
	wake   chan struct{}
}

// call wakes the watchdog if it sleeps: a loop begins a handler call.
func (d *watchdog) call() {
	if d.asleep.Load() && d.asleep.CompareAndSwap(true, false) {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// dupSocket returns a close-on-exec duplicate of nc's descriptor. It shares
// the socket and its flags (non-blocking, TCP_NODELAY) with nc.
func dupSocket(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, errors.New("resp: connection has no file descriptor")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = e
			return
		}
		fd = int(r)
	}); err != nil {
		return -1, err
	}
	return fd, derr
}

// A loop serves its connections on one goroutine at a time.
type loop struct {
	s    *Server
	epfd int
	ep   *os.File // epfd, registered with Go's poller
	rc   syscall.RawConn
	// wakeR and wakeW are a pipe: a byte in it makes the loop look at the
	// lists below.
	wakeR, wakeW int

	// The running goroutine's own.
	conns   map[int32]*Conn
	events  []syscall.EpollEvent
	pending []*Conn // have replies to write at the end of the round
	again   []*Conn // may have whole requests left in their reader
	ev      syscall.EpollEvent
	// spare is the other buffer of the resolved list: intake swaps them,
	// so that deferred replies cost the round no allocation.
	spare []*Conn
	// poll is pollEvents, bound once so that a round's wait allocates no
	// closure; block is its argument and ready its result.
	poll  func(uintptr) bool
	block bool
	ready int

	dog *watchdog // the loops' watchdog, woken by enter

	mu       sync.Mutex // guards the fields below
	owner    uint64     // generation of the goroutine running the loop
	cur      *Conn      // connection in a handler call; nil between calls
	calls    uint64     // handler calls begun
	seen     uint64     // calls at the watchdog's last look
	incoming []*Conn    // new connections
	stuck    []*Conn    // connections a stuck goroutine kept
	back     []*Conn    // connections given back by such goroutines
	kill     []*Conn
	resolved []*Conn // connections with deferred replies resolved
	// trimBefore, when not 0, asks for the buffers of the connections
	// idle since before it (Unix ns) to be given back.
	trimBefore int64
	woken      bool // a byte is in the pipe
	closed     bool
}

func newLoop(s *Server) (*loop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(epfd)
		return nil, os.NewSyscallError("pipe2", err)
	}
	l := &loop{s: s, epfd: epfd, wakeR: p[0], wakeW: p[1],
		conns: make(map[int32]*Conn), events: make([]syscall.EpollEvent, loopEvents)}
	l.poll = l.pollEvents
	fail := func(err error) (*loop, error) {
		l.release()
		return nil, err
	}
	if err := l.ctl(syscall.EPOLL_CTL_ADD, l.wakeR, syscall.EPOLLIN); err != nil {
		return fail(err)
	}
	// A non-blocking descriptor given to os.NewFile is registered with Go's
	// poller; RawConn.Read then parks the goroutine until epoll has events.
	if err := syscall.SetNonblock(epfd, true); err != nil {
		return fail(os.NewSyscallError("setnonblock", err))
	}
	l.ep = os.NewFile(uintptr(epfd), "epoll")
	if l.rc, err = l.ep.SyscallConn(); err != nil {
		return fail(err)
	}
	return l, nil
}

// release frees the loop's descriptors.
func (l *loop) release() {
	if l.ep != nil {
		l.ep.Close()
	} else {
		syscall.Close(l.epfd)
	}
	syscall.Close(l.wakeR)
	syscall.Close(l.wakeW)
}

func (l *loop) ctl(op, fd int, events uint32) error {
	l.ev = syscall.EpollEvent{Events: events, Fd: int32(fd)}
	return os.NewSyscallError("epoll_ctl", syscall.EpollCtl(l.epfd, op, fd, &l.ev))
}

// wakeLocked makes the loop look at its lists. l.mu must be held.
func (l *loop) wakeLocked() {
	if !l.woken {
		l.woken = true
		syscall.Write(l.wakeW, []byte{0})
	}
}

// run is the loop, on the goroutine of generation gen. It returns when the
// server closes, or when the watchdog gave the loop to a new goroutine
// while this one was in a handler call.
func (l *loop) run(gen uint64) {
	defer l.s.wg.Done()
	for {
		if !l.intake() {
			return
		}
		n := l.wait(len(l.again) == 0 && len(l.pending) == 0)
		for _, ev := range l.events[:n] {
			if ev.Fd == int32(l.wakeR) {
				l.drainWake()
				continue
			}
			c := l.conns[ev.Fd]
			switch {
			case c == nil:
			case c.ls.killed.Load():
				l.close(c) // before another command of its is served
			case c.ls.blocked:
				l.write(c)
			case c.ls.stalled:
				// It asked for no events: this is EPOLLERR or EPOLLHUP,
				// the peer is gone and nothing can reach it.
				l.close(c)
			case l.serve(c, gen):
				return
			}
		}
		for len(l.again) > 0 {
			c := l.again[len(l.again)-1]
			l.again = l.again[:len(l.again)-1]
			if c.ls.gone || c.ls.away || c.ls.blocked || c.ls.stalled {
				continue
			}
			if c.ls.killed.Load() {
				l.close(c)
				continue
			}
			if l.serve(c, gen) {
				return
			}
		}
		l.flush()
	}
}

// intake takes what other goroutines left for the loop. It returns false
// once the server is closed; every connection is then closed.
func (l *loop) intake() bool {
	l.mu.Lock()
	stuck, back, kill, incoming, resolved, closed := l.stuck, l.back, l.kill, l.incoming, l.resolved, l.closed
	l.stuck, l.back, l.kill, l.incoming, l.resolved = nil, nil, nil, nil, l.spare
	trimBefore := l.trimBefore
	l.trimBefore = 0
	for _, c := range resolved {
		c.ls.resolved = false
	}
	l.woken = false
	l.mu.Unlock()
	for _, c := range stuck {
		// Its goroutine owns it, and closes it if it must.
		delete(l.conns, int32(c.ls.fd))
		syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.ls.fd, nil)
		c.ls.away = true
	}
	for _, c := range append(back, incoming...) {
		c.ls.away = false
		l.conns[int32(c.ls.fd)] = c
		c.ls.watched = c.ls.events()
		if err := l.ctl(syscall.EPOLL_CTL_ADD, c.ls.fd, c.ls.watched); err != nil {
			l.s.log.Warn("cannot watch connection", "client", c.Addr, "err", err)
			l.close(c)
			continue
		}
	}
	for _, c := range back {
		// Its replies are still to be written, and its reader may hold
		// whole requests.
		c.ls.more = true
		l.queue(c)
	}
	for _, c := range kill {
		if !c.ls.gone && l.conns[int32(c.ls.fd)] == c {
			l.close(c)
		}
	}
	for _, c := range resolved {
		// One that is away is settled when it comes back; one that is
		// closed has dropped its held replies.
		if l.conns[int32(c.ls.fd)] == c {
			l.queue(c)
		}
	}
	clear(resolved)
	l.spare = resolved[:0]
	if trimBefore != 0 {
		l.trim(trimBefore)
	}
	if !closed {
		return true
	}
	for _, c := range l.conns {
		l.close(c)
	}
	l.release()
	return false
}

// trim gives back the buffers of the connections idle since before that
// have nothing buffered: 16 KiB or more each, which thousands of idle
// connections would otherwise keep.
func (l *loop) trim(before int64) {
	for _, c := range l.conns {
		if c.lastIO.Load() < before && !c.ls.blocked && !c.ls.queued && len(c.W.b) == 0 && len(c.held) == 0 {
			if freed := c.rd.release() + cap(c.W.b); freed > 0 {
				c.W.b = nil
				c.publish(0)
				l.s.trimmed.Add(int64(freed))
			}
		}
	}
}

// wait returns the number of ready events in l.events; with block it parks
// the goroutine until there is one.
func (l *loop) wait(block bool) int {
	l.block = block
	if err := l.rc.Read(l.poll); err != nil {
		l.s.log.Error("epoll wait failed", "err", err)
	}
	return l.ready
}

// pollEvents is wait's look at epoll; Go's poller runs it again when epoll
// has events until it reports true.
func (l *loop) pollEvents(uintptr) bool {
	n, err := rawEpollWait(l.epfd, l.events)
	if err != nil {
		n = 0
	}
	l.ready = n
	return n > 0 || !l.block
}

func (l *loop) drainWake() {
	var b [64]byte
	for {
		if n, _ := syscall.Read(l.wakeR, b[:]); n < len(b) {
			return
		}
	}
}

// serve runs the requests c has sent: those its reader holds and those one
// read of the socket brings. It reports whether the loop was given to
// another goroutine during a handler call; c is then this goroutine's alone
// until it is given back.
func (l *loop) serve(c *Conn, gen uint64) (lost bool) {
	l.enter(c)
	c.ls.readOK = true
	for !c.mustWait() {
		args, err := c.rd.Read()
		if err == errWouldBlock {
			break
		}
		if err != nil {
			l.s.readFailed(c, err)
			c.closing = true
			break
		}
		l.s.h.ServeRESP(c, args)
		if c.closing {
			break
		}
		if c.W.Len() >= maxPending {
			c.ls.more = true
			break
		}
	}
	c.ls.stalled = c.mustWait()
	if l.leave(gen) {
		l.giveBack(c)
		return true
	}
	if c.ls.stalled && !l.watch(c) {
		return false
	}
	if l.queue(c); !c.ls.queued {
		c.publish(0) // write publishes the others
	}
	return false
}

func (l *loop) enter(c *Conn) {
	l.mu.Lock()
	l.cur = c
	l.calls++
	l.mu.Unlock()
	l.dog.call()
}

// leave ends a handler call and reports whether the loop was handed over
// meanwhile.
func (l *loop) leave(gen uint64) (lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.owner != gen {
		return true
	}
	l.cur = nil
	return false
}

// check is the watchdog's look: a loop in the same handler call as at the
// last look goes to a new goroutine. It reports whether the loop is busy:
// in a call, or it began one since the last look.
func (l *loop) check() (busy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == l.seen {
		l.handOverLocked()
	}
	busy = l.cur != nil || l.calls != l.seen
	l.seen = l.calls
	return busy
}

// handOverLocked gives the loop to a new goroutine if the running one is in
// a handler call; that one keeps the connection it serves. l.mu must be
// held.
func (l *loop) handOverLocked() {
	if l.cur == nil {
		return
	}
	l.stuck = append(l.stuck, l.cur)
	l.cur = nil
	l.owner++
	l.s.wg.Add(1)
	go l.run(l.owner)
}

// giveBack returns c, after a handler call that outlasted the loop's
// patience, to the loop, or closes it if it was killed or the server is
// closing.
func (l *loop) giveBack(c *Conn) {
	l.mu.Lock()
	if !l.closed && !c.ls.killed.Load() {
		l.back = append(l.back, c)
		l.wakeLocked()
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	syscall.Close(c.ls.fd)
	c.ls.gone = true
	l.s.release(c)
}

// queue adds c to the connections whose replies the round writes.
func (l *loop) queue(c *Conn) {
	if !c.ls.queued && (c.W.Len() > 0 || c.closing || c.ls.more || len(c.held) > 0 || c.W.over) {
		c.ls.queued = true
		l.pending = append(l.pending, c)
	}
}

// flush writes the round's replies.
func (l *loop) flush() {
	for i, c := range l.pending {
		l.pending[i] = nil
		c.ls.queued = false
		if !c.ls.gone && !c.ls.away {
			l.write(c)
		}
	}
	l.pending = l.pending[:0]
}

// write sends c's replies, with the deferred ones resolved so far, until the
// socket takes no more; then the loop waits for it to drain (EPOLLOUT)
// before reading c again.
func (l *loop) write(c *Conn) {
	resolved := c.settle()
	if resolved && c.ls.stalled && !c.mustWait() {
		// Its reader may hold whole requests, which epoll does not report.
		c.ls.stalled = false
		c.ls.more = true
	}
	b := c.W.b
	if c.overLimit(len(b) - c.ls.wpos) {
		l.close(c)
		return
	}
	// BeforeReply covers what joins W: a blocked write's bytes were
	// covered when it began, but held replies may have joined them.
	if (resolved || !c.ls.blocked) && len(b) > c.ls.wpos {
		if sy, ok := l.s.h.(Syncer); ok {
			if err := sy.BeforeReply(c); err != nil {
				c.W.b = b[:0]
				l.close(c)
				return
			}
		}
	}
	for c.ls.wpos < len(b) {
		n, err := rawWrite(c.ls.fd, b[c.ls.wpos:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			c.ls.blocked = true
			c.publish(len(b) - c.ls.wpos)
			l.watch(c)
			return
		case err != nil:
			l.close(c)
			return
		}
		c.ls.wpos += n
		c.stamp()
	}
	c.ls.wpos = 0
	c.written()
	c.publish(0)
	c.ls.blocked = false
	if !l.watch(c) {
		return
	}
	if c.closing && len(c.held) == 0 {
		l.close(c)
		return
	}
	if c.ls.more {
		c.ls.more = false
		l.again = append(l.again, c)
	}
}

// watch makes epoll report the events c waits for now. It reports false
// when that failed and c was closed.
func (l *loop) watch(c *Conn) bool {
	ev := c.ls.events()
	if ev == c.ls.watched {
		return true
	}
	if err := l.ctl(syscall.EPOLL_CTL_MOD, c.ls.fd, ev); err != nil {
		l.close(c)
		return false
	}
	c.ls.watched = ev
	return true
}

// notify is told by Resolve that a deferred reply of c is resolved; the loop
// then writes what became ready in its next round.
func (l *loop) notify(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed && !c.ls.resolved {
		c.ls.resolved = true
		l.resolved = append(l.resolved, c)
		l.wakeLocked()
	}
}

// close closes c's socket (which also takes it out of the epoll set) and
// lets the handler release its state.
func (l *loop) close(c *Conn) {
	delete(l.conns, int32(c.ls.fd))
	syscall.Close(c.ls.fd)
	c.ls.gone = true
	l.s.release(c)
}

// The loop's reads, writes and epoll_waits never block: the sockets are
// non-blocking and epoll_wait gets a zero timeout (the loop parks in Go's
// poller instead). So they go to the kernel as raw system calls, without the
// runtime's entersyscall/exitsyscall around them. Besides that bookkeeping,
// this keeps Go's sysmon from finding the loop's thread "in a system call"
// at thousands of its looks a second: it then hands the processor to
// another thread (retake) and keeps waking every 20 µs instead of backing
// off, each wake-up a context switch on the CPU the loop runs on. At -P 1
// a loop makes two or three such calls per request.

func rawRead(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return rawResult(n, e)
}

func rawWrite(fd int, p []byte) (int, error) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	return rawResult(n, e)
}

// rawEpollWait returns the events ready now, without waiting.
func rawEpollWait(epfd int, events []syscall.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), 0, 0, 0)
	return rawResult(n, e)
}

func rawResult(n uintptr, e syscall.Errno) (int, error) {
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
