package commands

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// SLOWLOG, as Redis 7.0 keeps it.
//
// run times every command it runs, Spec.Run alone: not the wait for the
// shards' locks, nor reading the request or writing the reply, as Redis
// times a command's proc. A run that took at least slowlog-log-slower-than
// microseconds is added to the log, which keeps the newest slowlog-max-len
// entries. Like Redis: each command inside EXEC is logged, and EXEC itself
// is not (SkipSlowlog); a command a Lua script calls is logged too, as from
// a client without a connection ("?:0", no name), and so is the script; a
// command refused before it runs (unknown, wrong arity, NOAUTH, queued by
// MULTI) is not. Secrets are never kept: the arguments a Spec's Secrets
// names are shown as "(redacted)" (AUTH's, HELLO's AUTH pair and the values
// of CONFIG SET requirepass, as Redis 7 redacts them).
//
// On a Raft node the keyspace commands run where the log is applied, on
// every member, after the commit: so the SLOWLOG of each member lists the
// commands it applied that ran slowly, with the time their run took there,
// whichever member the client sent them to, and without a client (the log
// carries none), as "?:0". The wait for the commit is not counted: it is the
// network and the disk, not the command; INFO replication and the metrics
// show it. Commands that do not go through the log (PING, INFO, CONFIG...)
// are logged where they run, with their client.

// Redis' bounds on what one entry keeps (SLOWLOG_ENTRY_MAX_ARGC and
// SLOWLOG_ENTRY_MAX_STRING): the last argument kept tells how many more
// there were, and a longer argument is cut, saying how many bytes more.
const (
	slowlogMaxArgs  = 32
	slowlogMaxBytes = 128
)

// SlowlogConfig are the SLOWLOG's settings, with Redis' names and meanings.
type SlowlogConfig struct {
	// SlowerThan is slowlog-log-slower-than: runs of at least this many
	// microseconds are logged; 0 logs every command, -1 none.
	SlowerThan int64
	// MaxLen is slowlog-max-len: how many entries are kept, the oldest
	// dropped first.
	MaxLen int64
}

// DefaultSlowlog is Redis' default: commands of 10 ms or more, 128 kept.
var DefaultSlowlog = SlowlogConfig{SlowerThan: 10000, MaxLen: 128}

// The settings' lowest values, as Redis 7 bounds them.
const (
	minSlowerThan = -1
	minMaxLen     = 0
)

// Validate reports a setting out of Redis' range.
func (c SlowlogConfig) Validate() error {
	switch {
	case c.SlowerThan < minSlowerThan:
		return fmt.Errorf("slowlog-log-slower-than: must be -1 (off), 0 (every command) or more, got %d", c.SlowerThan)
	case c.MaxLen < minMaxLen:
		return fmt.Errorf("slowlog-max-len: must be 0 or more, got %d", c.MaxLen)
	}
	return nil
}

// slowlog is the log. It is safe for concurrent use.
type slowlog struct {
	slowerThan atomic.Int64 // µs; -1: off
	maxLen     atomic.Int64

	mu      sync.Mutex  // guards entries and nextID
	entries []slowEntry // oldest first
	nextID  int64
}

// slowEntry is one logged run, in the order SLOWLOG GET shows its fields.
type slowEntry struct {
	id     int64
	time   int64 // Unix seconds: the command's instant
	micros int64 // how long it ran
	args   []string
	addr   string
	name   string
}

// slow reports whether a run that took d is to be logged.
func (l *slowlog) slow(d time.Duration) bool {
	t := l.slowerThan.Load()
	return t >= 0 && d.Microseconds() >= t
}

// add logs e under the next id and drops the oldest entries beyond
// slowlog-max-len. As in Redis, a smaller slowlog-max-len takes effect at
// the next entry.
func (l *slowlog) add(e slowEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	if over := len(l.entries) - int(l.maxLen.Load()); over > 0 {
		clear(l.entries[:over]) // let the collector have their arguments
		l.entries = l.entries[over:]
	}
}

// newest returns up to n entries, the newest first.
func (l *slowlog) newest(n int64) []slowEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]slowEntry, 0, min(n, int64(len(l.entries))))
	for i := len(l.entries) - 1; i >= 0 && int64(len(out)) < n; i-- {
		out = append(out, l.entries[i])
	}
	return out
}

func (l *slowlog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

func (l *slowlog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// logSlow adds the run of spec in c, which took d, to the SLOWLOG.
func (s *Server) logSlow(c *Ctx, spec *Spec, d time.Duration) {
	addr, name := "?:0", ""
	if c.Conn != nil && c != &c.st.script.ctx {
		addr, name = c.Conn.Addr, c.Conn.Name()
	}
	s.slow.add(slowEntry{
		time:   c.Tx.Now() / 1e9,
		micros: d.Microseconds(),
		args:   slowArgs(spec, c.Args),
		addr:   addr,
		name:   name,
	})
}

// slowArgs copies args as a SLOWLOG entry keeps them: at most slowlogMaxArgs,
// each cut to slowlogMaxBytes, secrets redacted.
func slowArgs(spec *Spec, args [][]byte) []string {
	n := min(len(args), slowlogMaxArgs)
	cut := n < len(args) // the last one kept says how many more there were
	out := make([]string, n)
	for i, a := range args[:n] {
		switch {
		case cut && i == n-1:
			out[i] = fmt.Sprintf("... (%d more arguments)", len(args)-n+1)
		case len(a) > slowlogMaxBytes:
			out[i] = fmt.Sprintf("%s... (%d more bytes)", a[:slowlogMaxBytes], len(a)-slowlogMaxBytes)
		default:
			out[i] = string(a)
		}
	}
	if spec.Secrets != nil {
		spec.Secrets(args, func(i int) {
			if i < n && !(cut && i == n-1) {
				out[i] = "(redacted)"
			}
		})
	}
	return out
}

var slowlogHelp = []string{
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
}

// SLOWLOG GET [count] | LEN | RESET | HELP
func slowlogCmd(c *Ctx) {
	l := &c.srv.slow
	sub := c.Args[1]
	switch {
	case is(sub, "GET"):
		if len(c.Args) > 3 {
			c.W.Error("ERR unknown subcommand or wrong number of arguments for '" + sanitize(string(sub), 128) + "'. Try SLOWLOG HELP.")
			return
		}
		count := int64(10)
		if len(c.Args) == 3 {
			n, ok := parseInt(c.Args[2])
			if !ok || n < -1 {
				c.W.Error("ERR count should be greater than or equal to -1")
				return
			}
			count = n
		}
		if count == -1 {
			count = math.MaxInt64
		}
		entries := l.newest(count)
		c.W.Array(len(entries))
		for _, e := range entries {
			c.W.Array(6)
			c.W.Int(e.id)
			c.W.Int(e.time)
			c.W.Int(e.micros)
			c.W.Array(len(e.args))
			for _, a := range e.args {
				c.W.BulkString(a)
			}
			c.W.BulkString(e.addr)
			c.W.BulkString(e.name)
		}
	case is(sub, "LEN"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("slowlog|len"))
			return
		}
		c.W.Int(int64(l.len()))
	case is(sub, "RESET"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("slowlog|reset"))
			return
		}
		l.reset()
		c.W.OK()
	case is(sub, "HELP"):
		c.help("slowlog", slowlogHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "SLOWLOG"))
	}
}

// slowlogSetting is a CONFIG parameter of the SLOWLOG, held in v: an
// integer of at least least, refused with Redis' texts.
func slowlogSetting(name string, v *atomic.Int64, least int64) setting {
	return setting{name: name, get: func() string {
		return strconv.FormatInt(v.Load(), 10)
	}, set: func(arg string) error {
		n, ok := parseInt([]byte(arg))
		switch {
		case !ok:
			return errors.New("argument couldn't be parsed into an integer")
		case n < least:
			return fmt.Errorf("argument must be between %d and %d inclusive", least, int64(math.MaxInt64))
		}
		v.Store(n)
		return nil
	}}
}
