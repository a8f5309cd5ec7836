package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"

	"github.com/throttleddb/throttled/store"
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

var debugHelp = []string{
	"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CLOCK [SET <unix-ns> | ADVANCE <ns>]",
	"    Return the server clock in Unix nanoseconds, or set or advance it",
	"    (SET and ADVANCE only with --debug-clock).",
	"DIGEST",
	"    Output a hex signature representing the current DB content.",
	"DIGEST-VALUE <key> [<key> ...]",
	"    Output a hex signature of the values of all the specified keys.",
	"HELP",
	"    Prints this help.",
}

// DEBUG CLOCK [SET unix-ns | ADVANCE ns] | DIGEST | DIGEST-VALUE key... | HELP
func debug(c *Ctx) {
	sub := c.Args[1]
	switch {
	case is(sub, "CLOCK"):
		debugClock(c)
	case is(sub, "DIGEST"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("debug|digest"))
			return
		}
		writeDigest(c, c.replicaTx().Digest(func(v store.Value) bool { return !c.visible(v) }))
	case is(sub, "DIGEST-VALUE"):
		// No key is no error in Redis either: the reply is an empty array.
		c.W.Array(len(c.Args) - 2)
		for _, k := range c.Args[2:] {
			d := c.replicaTx().DigestValue(c.DB(), k)
			if v, ok := c.Tx.Get(c.DB(), k); ok && !c.visible(v) {
				d = [sha1.Size]byte{}
			}
			writeDigest(c, d)
		}
	case is(sub, "HELP"):
		c.help("debug", debugHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "DEBUG"))
	}
}

// debugKeys finds the keys of DEBUG DIGEST-VALUE key..., so only their
// shards are locked; DEBUG's other subcommands have no keys.
func debugKeys(args [][]byte, fn func(key []byte)) {
	if is(args[1], "DIGEST-VALUE") {
		for _, k := range args[2:] {
			fn(k)
		}
	}
}

// debugAllKeys: DEBUG DIGEST reads every shard at one instant.
func debugAllKeys(args [][]byte) bool { return is(args[1], "DIGEST") }

// replicaTx is c.Tx, but on a Raft node at the instant of the last entry
// applied rather than the node's clock: a replica's keyspace is at the log's
// time (a key expires on it when an entry's instant passes its expiry), so
// two replicas at the same applied index show the same digest.
func (c *Ctx) replicaTx() store.Tx {
	if cl := c.srv.cluster; cl != nil {
		return c.srv.store.Tx(cl.AppliedInstant())
	}
	return c.Tx
}

// writeDigest replies a digest as Redis does: 40 hex digits in a status.
func writeDigest(c *Ctx, d [sha1.Size]byte) { c.W.Status(hex.EncodeToString(d[:])) }

// DEBUG CLOCK [SET unix-ns | ADVANCE ns]
func debugClock(c *Ctx) {
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
		c.setClock(n)
		return
	}
	if n < 0 {
		c.W.Error("ERR DEBUG CLOCK ADVANCE takes a non-negative number of nanoseconds")
		return
	}
	if c.Conn == nil {
		// A Raft replica applies ADVANCE from the entry's instant, the
		// leader's clock, so that every member's clock lands on the
		// same time whatever its own said.
		if now := c.Tx.Now(); now <= math.MaxInt64-n {
			c.setClock(now + n)
			return
		}
	} else if t, err := m.Advance(n); err == nil {
		c.W.Int(t)
		return
	}
	c.W.Error("ERR DEBUG CLOCK ADVANCE would overflow the clock")
}

// setClock sets the debug clock to t and replies t. On a Raft replica
// (applying the command) the cluster's time moves to t with it; a mesh
// node's time goes to t even when that is back.
func (c *Ctx) setClock(t int64) {
	c.srv.cfg.Manual.Set(t)
	if cl := c.srv.cluster; cl != nil && c.Conn == nil {
		cl.SetInstant(t)
	}
	if m := c.srv.mesh; m != nil {
		m.SetInstant(t)
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
