package commands

import (
	"strconv"
)

func dbsize(c *Ctx) { c.W.Int(int64(c.Tx.DBSize(c.DB()))) }

// flushMode checks FLUSHDB/FLUSHALL's optional ASYNC|SYNC argument. Both
// modes flush at once: there is no background freeing to hand the work to.
func flushMode(c *Ctx) bool {
	if len(c.Args) > 2 || (len(c.Args) == 2 && !is(c.Args[1], "ASYNC") && !is(c.Args[1], "SYNC")) {
		c.W.Error(errSyntax)
		return false
	}
	return true
}

func flushdb(c *Ctx) {
	if flushMode(c) {
		c.Tx.Flush(c.DB())
		c.W.OK()
	}
}

func flushall(c *Ctx) {
	if flushMode(c) {
		for db := range c.srv.store.Databases() {
			c.Tx.Flush(db)
		}
		c.W.OK()
	}
}

// TIME replies [seconds, microseconds] of the command's instant, so under
// --debug-clock it shows the debug clock.
func timeCmd(c *Ctx) {
	now := c.Tx.Now()
	c.W.Array(2)
	c.W.BulkString(strconv.FormatInt(now/1e9, 10))
	c.W.BulkString(strconv.FormatInt(now%1e9/1e3, 10))
}

func clusterOff(c *Ctx) { c.W.Error(errClusterOff) }

// DEBUG CLOCK [SET unix-ns | ADVANCE ns]
func debug(c *Ctx) {
	if !is(c.Args[1], "CLOCK") {
		c.W.Error(unknownSubcommand(c.Args[1], "DEBUG"))
		return
	}
	if len(c.Args) == 2 {
		c.W.Int(c.srv.clock.Now())
		return
	}
	if len(c.Args) != 4 {
		c.W.Error(wrongArity("debug|clock"))
		return
	}
	op := c.Args[2]
	if !is(op, "SET") && !is(op, "ADVANCE") {
		c.W.Error(errSyntax)
		return
	}
	n, ok := parseInt(c.Args[3])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	m := c.srv.cfg.Manual
	if m == nil {
		c.W.Error("ERR DEBUG CLOCK " + string(op) + " needs a server started with --debug-clock")
		return
	}
	if is(op, "SET") {
		m.Set(n)
		c.W.Int(n)
		return
	}
	if n < 0 {
		c.W.Error("ERR DEBUG CLOCK ADVANCE takes a non-negative number of nanoseconds")
		return
	}
	t, err := m.Advance(n)
	if err != nil {
		c.W.Error("ERR DEBUG CLOCK ADVANCE would overflow the clock")
		return
	}
	c.W.Int(t)
}

// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]
func shutdown(c *Ctx) {
	for _, a := range c.Args[1:] {
		if !is(a, "NOSAVE") && !is(a, "SAVE") && !is(a, "NOW") && !is(a, "FORCE") {
			c.W.Error(errSyntax)
			return
		}
	}
	if c.srv.cfg.Shutdown == nil {
		c.W.Error("ERR Errors trying to SHUTDOWN. Check logs.")
		return
	}
	// Redis sends no reply: the connection just closes.
	c.Conn.CloseAfterReply()
	go c.srv.cfg.Shutdown()
}
