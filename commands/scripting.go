package commands

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/scripting"
)

// Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.
//
// A script runs atomically. It locks the shards of its declared keys like
// any command, and when it touches a key it did not declare (Redis allows
// that outside cluster mode) it adds that key's shard to the held set with
// store.Extend: it waits only for shards above the ones it holds, so it
// cannot deadlock, and when a lower shard is held by another client at that
// moment the call fails with errUndeclaredBusy instead of breaking
// atomicity. Every command a script runs sees the script's instant, so its
// effect depends only on its inputs and the command's time, and a replica can
// replay it.

const (
	errNumKeysNeg = "ERR Number of keys can't be negative"
	errNumKeysBig = "ERR Number of keys can't be greater than number of args"
	// errUndeclaredBusy is ours: a script reached for a key outside KEYS
	// whose shard another client held (see above).
	errUndeclaredBusy = "ERR Script accessed a key not given in KEYS while another client held it; pass every key the script uses in KEYS"
)

// evalKeys finds the declared keys of EVAL-family commands for locking:
// EVAL script numkeys key... arg...
func evalKeys(args [][]byte, fn func(key []byte)) {
	if len(args) < 3 {
		return
	}
	n, ok := parseInt(args[2])
	if !ok || n < 0 || n > int64(len(args)-3) {
		return
	}
	for _, k := range args[3 : 3+n] {
		fn(k)
	}
}

// scriptCall is what a running script's redis.call and redis.pcall reach:
// it runs one command as the script's client, inside the script's locks and
// at its instant. It lives in the connection's state, so running a command
// from a script does not allocate one.
type scriptCall struct {
	outer    *Ctx        // the EVAL command's context
	readOnly bool        // EVAL_RO / EVALSHA_RO
	oom      bool        // the store was out of memory when the script began
	w        resp.Writer // the called command's reply, reused
	ctx      Ctx
}

// Call implements scripting.Caller.
func (sc *scriptCall) Call(x *scripting.Exec, args [][]byte) []byte {
	c := sc.outer
	s := c.srv
	sc.w.Reset(x.Proto())
	spec := s.cmds.lookup(args[0])
	if msg := sc.refusal(x, spec, args); msg != "" {
		sc.w.Error(msg)
	} else {
		sc.ctx = Ctx{srv: s, Conn: c.Conn, W: &sc.w, Args: args, Tx: c.Tx, st: c.st}
		s.run(&sc.ctx, spec, time.Now())
		sc.ctx.Args = nil
	}
	return sc.w.Bytes()
}

// refusal is the error a script's call of spec with args gets, in Redis'
// order of checks, or "" when it may run. The caller's ACL applies: scripts
// run with its permissions.
func (sc *scriptCall) refusal(x *scripting.Exec, spec *Spec, args [][]byte) string {
	switch {
	case spec == nil:
		return scripting.ReplyUnknownCommand
	case (spec.Arity > 0 && len(args) != spec.Arity) || len(args) < -spec.Arity:
		return scripting.ReplyWrongArity
	case spec.Flags&NoScript != 0:
		return scripting.ReplyNotAllowed
	}
	if d := sc.outer.st.user.rules.Load().check(spec, args); d != permitted {
		return d.scriptReply()
	}
	switch {
	case spec.Flags&Write != 0 && sc.readOnly:
		return scripting.ReplyReadOnly
	case spec.Flags&DenyOOM != 0 && sc.oom && !x.Wrote():
		// As Redis: a script that has not written yet may not start
		// to; one that has goes on, so it is not left half done.
		return errOOM
	case spec.Flags&Write != 0 && !x.MarkWrite():
		return "ERR Script killed by user with SCRIPT KILL..."
	case !sc.lock(spec, args):
		return errUndeclaredBusy
	}
	return ""
}

// lock makes sure the shards of the command's keys are held.
func (sc *scriptCall) lock(spec *Spec, args [][]byte) bool {
	s := sc.outer.srv
	locks := &sc.outer.st.locks
	if spec.allKeys(args) {
		return s.store.ExtendAll(locks)
	}
	ok := true
	extend := func(k []byte) { ok = ok && s.store.Extend(locks, k) }
	if spec.KeysFn != nil {
		spec.KeysFn(args, extend)
	} else {
		spec.keys(args, extend)
	}
	return ok
}

// EVAL script numkeys [key ...] [arg ...]
func eval(c *Ctx) { runScript(c, false, false) }

// EVALSHA sha1 numkeys [key ...] [arg ...]
func evalsha(c *Ctx) { runScript(c, true, false) }

// EVAL_RO script numkeys [key ...] [arg ...]
func evalRO(c *Ctx) { runScript(c, false, true) }

// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
func evalshaRO(c *Ctx) { runScript(c, true, true) }

func runScript(c *Ctx, bySHA, readOnly bool) {
	n, ok := parseInt(c.Args[2])
	switch {
	case !ok:
		c.W.Error(errNotInt)
		return
	case n < 0:
		c.W.Error(errNumKeysNeg)
		return
	case n > int64(len(c.Args)-3):
		c.W.Error(errNumKeysBig)
		return
	}
	eng := c.srv.scripts
	var sc *scripting.Script
	if bySHA {
		if sc, ok = eng.Lookup(c.Args[1]); !ok {
			c.W.Error(scripting.ReplyNoScript)
			return
		}
	} else {
		var err error
		if sc, err = eng.Load(c.Args[1]); err != nil {
			c.W.Error(replyOf(err))
			return
		}
	}
	// Under noeviction, a script declaring neither no-writes nor
	// allow-oom is refused whole when the store is over its bounds; one
	// without a shebang runs, and only its writes are refused (Call).
	oom := c.srv.store.OutOfMemory() && sc.Flags()&scripting.FlagAllowOOM == 0
	if oom && sc.Flags()&(scripting.FlagEvalCompat|scripting.FlagNoWrites) == 0 {
		c.W.Error(errOOM)
		return
	}
	// A no-writes script is read-only through EVAL too.
	ro, err := sc.ReadOnly(readOnly)
	if err != nil {
		c.W.Error(replyOf(err))
		return
	}
	call := &c.st.script
	call.outer, call.readOnly, call.oom = c, ro, oom
	// A script's SELECT lasts until the script ends, as in Redis 7.
	db := c.st.db
	eng.Run(context.Background(), sc, c.Args[3:3+n], c.Args[3+n:], call, c.W)
	if c.st.db != db {
		c.setDB(db)
	}
	call.outer = nil
}

// replyOf is the reply text of a scripting error.
func replyOf(err error) string {
	if re, ok := errors.AsType[*scripting.ReplyError](err); ok {
		return re.Reply
	}
	return "ERR " + err.Error()
}

var scriptHelp = []string{
	"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"EXISTS <sha1> [<sha1> ...]",
	"    Return information about the existence of the scripts in the script cache.",
	"FLUSH [ASYNC|SYNC]",
	"    Flush the Lua scripts cache. Very dangerous on replicas.",
	"    When called without the optional mode argument, the behavior is determined by the",
	"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
	"    * ASYNC: Asynchronously flush the scripts cache.",
	"    * SYNC: Synchronously flush the scripts cache.",
	"KILL",
	"    Kill the currently executing Lua script.",
	"LOAD <script>",
	"    Load a script into the scripts cache without executing it.",
	"HELP",
	"    Print this help.",
}

// SCRIPT LOAD script | EXISTS sha... | FLUSH [ASYNC|SYNC] | KILL | HELP
func script(c *Ctx) {
	eng := c.srv.scripts
	sub := c.Args[1]
	switch {
	case is(sub, "LOAD"):
		if len(c.Args) != 3 {
			c.W.Error(wrongArity("script|load"))
			return
		}
		sc, err := eng.Load(c.Args[2])
		if err != nil {
			c.W.Error(replyOf(err))
			return
		}
		c.W.BulkString(sc.SHA())
	case is(sub, "EXISTS"):
		if len(c.Args) < 3 {
			c.W.Error(wrongArity("script|exists"))
			return
		}
		c.W.Array(len(c.Args) - 2)
		for _, sha := range c.Args[2:] {
			if eng.Exists(sha) {
				c.W.Int(1)
			} else {
				c.W.Int(0)
			}
		}
	case is(sub, "FLUSH"):
		if len(c.Args) > 3 {
			c.W.Error(wrongArity("script|flush"))
			return
		}
		if len(c.Args) == 3 && !is(c.Args[2], "ASYNC") && !is(c.Args[2], "SYNC") {
			c.W.Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
			return
		}
		eng.Flush()
		c.W.OK()
	case is(sub, "KILL"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("script|kill"))
			return
		}
		switch err := eng.Kill(); {
		case err == nil:
			c.W.OK()
		case errors.Is(err, scripting.ErrNotBusy):
			c.W.Error(scripting.ReplyNotBusy)
		default:
			c.W.Error(scripting.ReplyUnkillable)
		}
	case is(sub, "HELP"):
		c.help("script", scriptHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "SCRIPT"))
	}
}

// allowedWhileBusy reports whether a command may run while a script is past
// its time limit; the others get BUSY, as in Redis.
func allowedWhileBusy(spec *Spec, args [][]byte) bool {
	switch spec.Name {
	// Redis 7's allow-busy commands. MULTI among them: a transaction can
	// begin while a script runs, and a command refused with BUSY while
	// queuing makes EXEC abort, as any refused command does.
	case "auth", "hello", "quit", "reset", "shutdown", "multi", "discard", "watch", "unwatch":
		return true
	case "script":
		return len(args) > 1 && strings.EqualFold(string(args[1]), "kill")
	}
	return false
}
