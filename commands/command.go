package commands

// COMMAND | COMMAND COUNT | COMMAND INFO name... | COMMAND DOCS [name...] | COMMAND LIST
func command(c *Ctx) {
	all := c.srv.sortedSpecs()
	if len(c.Args) == 1 {
		c.W.Array(len(all))
		for _, sp := range all {
			commandInfo(c, sp)
		}
		return
	}
	sub := c.Args[1]
	switch {
	case is(sub, "COUNT"):
		if len(c.Args) != 2 {
			c.W.Error(wrongArity("command|count"))
			return
		}
		c.W.Int(int64(len(all)))
	case is(sub, "LIST"):
		if len(c.Args) != 2 { // FILTERBY is not supported
			c.W.Error(errSyntax)
			return
		}
		c.W.Array(len(all))
		for _, sp := range all {
			c.W.BulkString(sp.Name)
		}
	case is(sub, "INFO"):
		names := c.Args[2:]
		if len(names) == 0 {
			c.W.Array(len(all))
			for _, sp := range all {
				commandInfo(c, sp)
			}
			return
		}
		c.W.Array(len(names))
		for _, n := range names {
			if sp := c.srv.cmds.lookup(n); sp != nil {
				commandInfo(c, sp)
			} else {
				c.W.Null()
			}
		}
	case is(sub, "DOCS"):
		list := all
		if len(c.Args) > 2 {
			list = nil
			for _, n := range c.Args[2:] {
				if sp := c.srv.cmds.lookup(n); sp != nil {
					list = append(list, sp)
				}
			}
		}
		c.W.Map(len(list))
		for _, sp := range list {
			c.W.BulkString(sp.Name)
			c.W.Map(3)
			c.W.BulkString("summary")
			c.W.BulkString(sp.Summary)
			c.W.BulkString("since")
			c.W.BulkString("1.0.0")
			c.W.BulkString("group")
			c.W.BulkString(sp.Group)
		}
	case is(sub, "HELP"):
		c.help("command", commandHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "COMMAND"))
	}
}

var commandHelp = []string{
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all commands.",
	"COUNT",
	"    Return the total number of commands in this server.",
	"LIST",
	"    Return a list of all commands in this server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple commands.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple commands.",
	"HELP",
	"    Print this help.",
}

// commandInfo writes one COMMAND entry in Redis 7's ten-element shape: name,
// arity, flags, first key, last key, step, ACL categories, tips, key specs,
// subcommands.
func commandInfo(c *Ctx, sp *Spec) {
	var flags []string
	for _, f := range []struct {
		f    Flags
		name string
	}{{Write, "write"}, {ReadOnly, "readonly"}, {Admin, "admin"}, {SkipSlowlog, "skip_slowlog"}, {NoAuth, "no_auth"}, {Fast, "fast"}} {
		if sp.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	c.W.Array(10)
	c.W.BulkString(sp.Name)
	c.W.Int(int64(sp.Arity))
	c.W.Set(len(flags))
	for _, f := range flags {
		c.W.Status(f)
	}
	c.W.Int(int64(sp.FirstKey))
	c.W.Int(int64(sp.LastKey))
	c.W.Int(int64(sp.Step))
	var cats []string
	for _, cat := range aclCategories {
		if sp.Categories&cat.cat != 0 {
			cats = append(cats, "@"+cat.name)
		}
	}
	c.W.Set(len(cats))
	for _, cat := range cats {
		c.W.Status(cat)
	}
	c.W.Array(0)
	c.W.Array(0)
	c.W.Array(0)
}
