package commands

import (
	"bytes"
	"math"

	"github.com/throttleddb/throttled/store"
)

// parseInt parses an integer argument with Redis' rules.
func parseInt(b []byte) (int64, bool) { return store.ParseInt(b) }

// is reports whether arg equals the keyword kw (upper case), ignoring ASCII
// case.
func is(arg []byte, kw string) bool { return bytes.EqualFold(arg, []byte(kw)) }

// parseSigned reads an optional '+' or '-' and then one or more decimal
// digits, nothing else, whose value fits in 64 bits. It is the common part of
// the looser number syntaxes other programs use: redis-cell's (Rust) integers
// and SCAN's strtoul cursor.
func parseSigned(b []byte) (neg bool, u uint64, ok bool) {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return false, 0, false
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return false, 0, false
		}
		d := uint64(ch - '0')
		if u > (math.MaxUint64-d)/10 {
			return false, 0, false
		}
		u = u*10 + d
	}
	return neg, u, true
}

// subArity checks the argument count of a container's subcommand in Redis'
// convention (n > 0: exactly n, n < 0: at least -n) and answers Redis' error
// when it is wrong; name is "cmd|sub".
func (c *Ctx) subArity(n int, name string) bool {
	if (n > 0 && len(c.Args) != n) || len(c.Args) < -n {
		c.W.Error(wrongArity(name))
		return false
	}
	return true
}

// help answers a container command's HELP subcommand (cmd is its lower-case
// name) with one status line per entry, as Redis does.
func (c *Ctx) help(cmd string, lines []string) {
	if len(c.Args) != 2 {
		c.W.Error(wrongArity(cmd + "|help"))
		return
	}
	c.W.Array(len(lines))
	for _, l := range lines {
		c.W.Status(l)
	}
}
