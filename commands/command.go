package commands

import "strings"

// COMMAND [COUNT | INFO [name...] | DOCS [name...] | LIST [FILTERBY ...] |
// GETKEYS command arg... | HELP]. The entries themselves are in cmdreply.go.
func command(c *Ctx) {
	if len(c.Args) == 1 {
		writeInfos(c, c.srv.topEntries())
		return
	}
	sub := c.Args[1]
	switch {
	case is(sub, "COUNT"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("command|count"))
			return
		}
		c.W.Int(int64(len(c.srv.topEntries())))
	case is(sub, "LIST"):
		commandList(c)
	case is(sub, "INFO"):
		if len(c.Args) == 2 {
			writeInfos(c, c.srv.topEntries())
			return
		}
		c.W.Array(len(c.Args) - 2)
		for _, n := range c.Args[2:] {
			if e := c.srv.findEntry(n); e != nil {
				e.info.write(c.W)
			} else {
				c.W.Null()
			}
		}
	case is(sub, "DOCS"):
		list := c.srv.topEntries()
		if len(c.Args) > 2 {
			list = nil
			for _, n := range c.Args[2:] {
				if e := c.srv.findEntry(n); e != nil {
					list = append(list, e)
				}
			}
		}
		c.W.Map(len(list))
		for _, e := range list {
			c.W.BulkString(e.name)
			e.docs.write(c.W)
		}
	case is(sub, "GETKEYS"), is(sub, "GETKEYSANDFLAGS"):
		if len(c.Args) < 4 {
			c.W.Error(wrongArity("command|" + strings.ToLower(string(sub))))
			return
		}
		commandGetKeys(c, c.Args[2:], is(sub, "GETKEYSANDFLAGS"))
	case is(sub, "HELP"):
		c.help("command", commandHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "COMMAND"))
	}
}

var commandHelp = []string{
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Prints this help.",
}

// topEntries returns the entries of the commands, without their
// subcommands (which their entries list).
func (s *Server) topEntries() []*entry {
	var out []*entry
	for _, e := range s.entries() {
		if !e.sub {
			out = append(out, e)
		}
	}
	return out
}

func writeInfos(c *Ctx, list []*entry) {
	c.W.Array(len(list))
	for _, e := range list {
		e.info.write(c.W)
	}
}

// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]:
// every command and subcommand, as Redis 7 lists them. There are no
// modules; PATTERN ignores case, as Redis' does.
func commandList(c *Ctx) {
	keep := func(*entry) bool { return true }
	switch {
	case len(c.Args) == 2:
	case len(c.Args) == 5 && is(c.Args[2], "FILTERBY"):
		arg := string(c.Args[4])
		switch {
		case is(c.Args[3], "MODULE"):
			keep = func(*entry) bool { return false }
		case is(c.Args[3], "ACLCAT"):
			cat := categoryByName(arg)
			keep = func(e *entry) bool { return cat != 0 && e.categories&cat != 0 }
		case is(c.Args[3], "PATTERN"):
			pattern := strings.ToLower(arg)
			keep = func(e *entry) bool { return globMatch(pattern, e.name) }
		default:
			c.W.Error(errSyntax)
			return
		}
	default:
		c.W.Error(errSyntax)
		return
	}
	var names []string
	for _, e := range c.srv.entries() {
		if keep(e) {
			names = append(names, e.name)
		}
	}
	c.W.Array(len(names))
	for _, n := range names {
		c.W.BulkString(n)
	}
}

// commandGetKeys answers COMMAND GETKEYS (GETKEYSANDFLAGS when withFlags)
// for the command args, with Redis' checks in Redis' order.
func commandGetKeys(c *Ctx, args [][]byte, withFlags bool) {
	sp := c.srv.cmds.lookup(args[0])
	if sp != nil && len(sp.Subcommands) > 0 && len(args) > 1 && sp.sub(args) < 0 {
		sp = nil // an unknown subcommand is an unknown command
	}
	switch {
	case sp == nil:
		c.W.Error("ERR Invalid command specified")
		return
	case len(sp.Subcommands) > 0 && len(args) > 1,
		sp.FirstKey == 0 && (sp.KeysFn == nil || sp.Access == KeyUnchecked):
		// throttled's subcommands have no keys; DEBUG's are not key
		// specs in Redis.
		c.W.Error("ERR The command has no key arguments")
		return
	case (sp.Arity > 0 && len(args) != sp.Arity) || len(args) < -sp.Arity:
		c.W.Error("ERR Invalid number of arguments specified for command")
		return
	}
	var keys [][]byte
	add := func(k []byte) { keys = append(keys, k) }
	if sp.KeysFn != nil {
		sp.KeysFn(args, add)
	} else {
		sp.keys(args, add)
	}
	if len(keys) == 0 && sp.Flags&Script == 0 {
		// Redis' EVAL family is no_mandatory_keys: no keys is an answer.
		c.W.Error("ERR Invalid arguments specified for command")
		return
	}
	var flags []string
	if withFlags {
		flags = c.srv.findEntry([]byte(sp.Name)).keyFlags(sp.access(args))
	}
	c.W.Array(len(keys))
	for _, k := range keys {
		if !withFlags {
			c.W.Bulk(k)
			continue
		}
		c.W.Array(2)
		c.W.Bulk(k)
		c.W.Set(len(flags))
		for _, f := range flags {
			c.W.Status(f)
		}
	}
}
