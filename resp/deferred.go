package resp

import "sync/atomic"

// A Deferred is the place of a reply that a handler left for later
// (Conn.Defer): the reply of a command that waits for a Raft commit or the
// leader's answer while the connection and its loop go on.
type Deferred struct {
	c       *Conn
	barrier bool
	done    atomic.Bool // reply is set
	reply   []byte
	// after holds the replies of the commands served after this one and
	// before the next deferred one (owner of c).
	after []byte
}

// notifier is told that one of c's deferred replies was resolved, or (for
// a goroutine per connection) that c was aborted. It never blocks.
type notifier interface {
	notify(c *Conn)
}

// Defer reserves the place of the reply to the command being served: the
// handler writes nothing to c.W for this command, and the Deferred's
// Resolve delivers the reply later, from any goroutine. The connection goes
// on being served meanwhile; the replies of its later commands wait behind
// the deferred one, so the client sees every reply in request order.
//
// A connection has at most 1024 deferred replies out (maxHeld), and at most
// 64 KiB of replies held behind them (maxPending): past that its further
// requests are not read until replies are resolved.
func (c *Conn) Defer() *Deferred { return c.deferReply(false) }

// DeferBarrier is Defer, and the connection's next requests are not served
// until this reply and every deferred one before it are resolved: for
// commands whose result changes the connection's state (WATCH, AUTH checked
// remotely), which the next commands depend on.
func (c *Conn) DeferBarrier() *Deferred { return c.deferReply(true) }

func (c *Conn) deferReply(barrier bool) *Deferred {
	d := &Deferred{c: c, barrier: barrier}
	if len(c.held) > 0 {
		c.holdTail()
	} else {
		c.hold = len(c.W.b)
	}
	c.held = append(c.held, d)
	return d
}

// Resolve delivers the reply: complete RESP bytes in the connection's
// protocol (c.W.Proto() when it was deferred). Resolve takes ownership of
// reply: the caller must not change it afterwards. It is safe from any
// goroutine, the handler's call included, and never blocks on the
// connection; it must be called exactly once (a second call panics). On a
// connection that is closed it does nothing: its held replies were dropped
// with it.
func (d *Deferred) Resolve(reply []byte) {
	if d.done.Load() {
		panic("resp: Deferred resolved twice")
	}
	d.reply = reply
	d.done.Store(true)
	d.c.wk.notify(d.c)
}

// holdTail moves what handlers wrote since the last deferred reply behind
// it. c.held must not be empty.
func (c *Conn) holdTail() {
	last := c.held[len(c.held)-1]
	last.after = append(last.after, c.W.b[c.hold:]...)
	c.heldBytes += len(c.W.b) - c.hold
	c.W.b = c.W.b[:c.hold]
}

// settle leaves in W only replies that may be sent: the resolved deferred
// replies at the head of the queue move into W, each followed by the replies
// held behind it, and what handlers wrote after the first unresolved one is
// held. It reports whether a deferred reply moved into W. Without deferred
// replies it costs a length check, inlined.
func (c *Conn) settle() bool { return len(c.held) > 0 && c.settleHeld() }

func (c *Conn) settleHeld() bool {
	c.holdTail()
	k := 0
	for ; k < len(c.held) && c.held[k].done.Load(); k++ {
		d := c.held[k]
		c.W.b = append(c.W.b, d.reply...)
		c.W.b = append(c.W.b, d.after...)
		c.heldBytes -= len(d.after)
	}
	// Shift the rest down rather than reslice, so the array is reused.
	n := copy(c.held, c.held[k:])
	clear(c.held[n:])
	c.held = c.held[:n]
	c.hold = len(c.W.b)
	return k > 0
}

// mustWait reports whether c's further requests must wait for deferred
// replies: after a barrier, after the connection's last reply (QUIT, a
// protocol error), or when the replies held are at their bound.
func (c *Conn) mustWait() bool { return len(c.held) > 0 && c.holdFull() }

func (c *Conn) holdFull() bool {
	return c.closing || c.held[len(c.held)-1].barrier || len(c.held) >= maxHeld ||
		c.heldBytes+len(c.W.b)-c.hold >= maxPending
}
