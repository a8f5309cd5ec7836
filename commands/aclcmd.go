package commands

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/throttleddb/throttled/resp"
)

// The ACL command, and the ACL file ACL LOAD reads and ACL SAVE writes
// (the model is in acl.go).

var aclHelp = []string{
	"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"CAT [<category>]",
	"    List all commands that belong to <category>, or all command categories",
	"    when no category is specified.",
	"DELUSER <username> [<username> ...]",
	"    Delete a list of users.",
	"GETUSER <username>",
	"    Get the user's details.",
	"LIST",
	"    Show users details in config file format.",
	"LOAD",
	"    Reload users from the ACL file.",
	"SAVE",
	"    Save the current config to the ACL file.",
	"SETUSER <username> <attribute> [<attribute> ...]",
	"    Create or modify a user with the specified attributes.",
	"USERS",
	"    List all the registered usernames.",
	"WHOAMI",
	"    Return the current connection username.",
	"HELP",
	"    Prints this help.",
}

const errNoACLFile = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

// ACL CAT | DELUSER | GETUSER | HELP | LIST | LOAD | SAVE | SETUSER | USERS | WHOAMI
func aclCmd(c *Ctx) {
	sub := c.Args[1]
	a := c.srv.acl
	switch {
	case is(sub, "SETUSER"):
		if c.subArity(-3, "acl|setuser") {
			c.aclSetUser()
		}
	case is(sub, "GETUSER"):
		if c.subArity(3, "acl|getuser") {
			c.aclGetUser()
		}
	case is(sub, "DELUSER"):
		if !c.subArity(-3, "acl|deluser") {
			return
		}
		var names []string
		for _, n := range c.Args[2:] {
			if string(n) == "default" {
				c.W.Error("ERR The 'default' user cannot be removed")
				return
			}
			names = append(names, string(n))
		}
		gone := a.deleteUsers(names)
		c.closeUserConns(gone)
		c.W.Int(int64(len(gone)))
	case is(sub, "LIST"), is(sub, "USERS"):
		if !c.subArity(2, "acl|"+strings.ToLower(string(sub))) {
			return
		}
		users := a.sorted()
		c.W.Array(len(users))
		for _, u := range users {
			if is(sub, "USERS") {
				c.W.BulkString(u.name)
			} else {
				c.W.BulkString("user " + u.name + " " + u.rules.Load().describe())
			}
		}
	case is(sub, "WHOAMI"):
		if c.subArity(2, "acl|whoami") {
			c.W.BulkString(c.st.user.name)
		}
	case is(sub, "CAT"):
		c.aclCat()
	case is(sub, "LOAD"):
		if !c.aclFileReady("acl|load") {
			return
		}
		closed, problem := c.srv.loadACLFile()
		if problem != "" {
			c.W.Error("ERR " + sanitize(problem, len(problem)))
			return
		}
		c.closeUserConns(closed)
		c.W.OK()
	case is(sub, "SAVE"):
		if !c.aclFileReady("acl|save") {
			return
		}
		if err := c.srv.saveACLFile(); err != nil {
			c.srv.log.Warn("ACL SAVE failed", "file", c.srv.cfg.ACLFile, "err", err)
			c.W.Error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
			return
		}
		c.W.OK()
	case is(sub, "HELP"):
		c.help("acl", aclHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "ACL"))
	}
}

// aclFileReady checks ACL LOAD's or SAVE's arguments (name is
// "acl|load" or "acl|save") and that there is an ACL file, and answers the
// error if not.
func (c *Ctx) aclFileReady(name string) bool {
	if !c.subArity(2, name) {
		return false
	}
	if c.srv.cfg.ACLFile == "" {
		c.W.Error(errNoACLFile)
		return false
	}
	return true
}

// ACL SETUSER username [rule ...]
func (c *Ctx) aclSetUser() {
	name := string(c.Args[2])
	if hasSpace(name) {
		c.W.Error("ERR Usernames can't contain spaces or null characters")
		return
	}
	rules := make([]string, len(c.Args)-3)
	for i, a := range c.Args[3:] {
		rules[i] = string(a)
	}
	op, err := c.srv.acl.setUser(name, rules)
	if err == nil {
		c.W.OK()
		return
	}
	// The rule is repeated only when it cannot be a password.
	shown := "(redacted)"
	if err.echo {
		shown = sanitize(op, len(op))
	}
	c.W.Error("ERR Error in ACL SETUSER modifier '" + shown + "': " + err.reason)
}

// ACL GETUSER username: a map in Redis 7.0's shape.
func (c *Ctx) aclGetUser() {
	u := c.srv.acl.user(string(c.Args[2]))
	if u == nil {
		c.W.Null()
		return
	}
	r := u.rules.Load()
	c.W.Map(6)
	c.W.BulkString("flags")
	flags := r.flags()
	c.W.Set(len(flags))
	for _, f := range flags {
		c.W.BulkString(f)
	}
	c.W.BulkString("passwords")
	c.W.Array(len(r.passwords))
	for _, p := range r.passwords {
		c.W.BulkString(hex.EncodeToString(p[:]))
	}
	c.W.BulkString("commands")
	c.W.BulkString(r.describeCommands())
	c.W.BulkString("keys")
	c.W.BulkString(r.describeKeys())
	c.W.BulkString("channels")
	c.W.BulkString(r.describeChannels())
	c.W.BulkString("selectors")
	c.W.Array(0)
}

// ACL CAT [category]
func (c *Ctx) aclCat() {
	switch len(c.Args) {
	case 2:
		c.W.Array(len(aclCategories))
		for _, cat := range aclCategories {
			c.W.BulkString(cat.name)
		}
	case 3:
		cat := categoryByName(string(c.Args[2]))
		if cat == 0 {
			c.W.Error("ERR Unknown category '" + sanitize(string(c.Args[2]), 128) + "'")
			return
		}
		var names []string
		for e := range aclIndex.all() {
			if e.served && e.cats&cat != 0 {
				names = append(names, e.name)
			}
		}
		c.W.Array(len(names))
		for _, n := range names {
			c.W.BulkString(n)
		}
	default:
		c.W.Error("ERR unknown subcommand or wrong number of arguments for '" + sanitize(string(c.Args[1]), 128) + "'. Try ACL HELP.")
	}
}

// closeUserConns closes the connections authenticated as one of names: the
// calling one once its reply is out, as Redis does when a user goes.
func (c *Ctx) closeUserConns(names []string) {
	n := c.srv.net.Load()
	if n == nil || len(names) == 0 {
		return
	}
	n.ForEachConn(func(rc *resp.Conn) {
		if !slices.Contains(names, rc.Info().User) {
			return
		}
		if rc == c.Conn {
			rc.CloseAfterReply()
		} else {
			n.Kill(rc.ID)
		}
	})
}

// loadACLFile replaces the users with those of the ACL file, or changes
// nothing if any line is wrong; it returns the users that were replaced
// (every one but default), whose connections Redis closes. The default user
// keeps its place: ACL LOAD sets its rules, or when the file has none,
// those requirepass gives it. (Redis gives it no password then, even with
// requirepass set, which would open a server that looked closed.) When the
// file does not load, problem says why in Redis' words.
func (s *Server) loadACLFile() (replaced []string, problem string) {
	path := s.cfg.ACLFile
	data, err := os.ReadFile(path)
	if err != nil {
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return nil, "Error loading ACLs, opening file '" + path + "': " + err.Error()
	}
	users, problems := parseACLFile(path, string(data))
	if problems != "" {
		return nil, problems + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
	}
	a := s.acl
	def := users["default"]
	if def == nil {
		def = defaultRules(s.requirePass())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, u := range a.users {
		if u != a.def {
			u.rules.Store(a.none)
			replaced = append(replaced, name)
		}
	}
	a.users = map[string]*User{"default": a.def}
	a.def.rules.Store(def.seal())
	for name, r := range users {
		if name != "default" {
			a.users[name] = newUser(name, r)
		}
	}
	return replaced, ""
}

// parseACLFile reads the users of an ACL file: one "user <name> <rule>..."
// a line, rules separated by single spaces, as Redis 7.0 reads them (lines
// starting with # are comments here, an error in Redis). problems lists
// every error, in Redis' words; a rule is repeated only when it names an
// unknown command or category, as it cannot be a password then.
func parseACLFile(path, data string) (users map[string]*userRules, problems string) {
	users = map[string]*userRules{}
	var b strings.Builder
	for i, line := range strings.Split(data, "\n") {
		n := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&b, "%s:%d should start with user keyword followed by the username. ", path, n)
			continue
		}
		name := argv[1]
		if hasSpace(name) {
			fmt.Fprintf(&b, "'%s:%d: username '%s' contains invalid characters. ", path, n, name)
			continue
		}
		if users[name] != nil {
			fmt.Fprintf(&b, "WARNING: Duplicate user '%s' found on line %d. ", name, n)
			continue
		}
		r := newUserRules()
		users[name] = r
		for _, op := range argv[2:] {
			op = strings.Trim(op, "\t\r\n")
			switch err := r.apply(op); {
			case err == nil:
			case err == errRuleUnknown:
				fmt.Fprintf(&b, "%s:%d: Error in applying operation '%s': %s. ", path, n, op, err.reason)
			default:
				fmt.Fprintf(&b, "%s:%d: %s. ", path, n, err.reason)
			}
		}
	}
	return users, b.String()
}

// saveACLFile writes every user to the ACL file, as ACL LIST shows them. It
// writes a new file beside it and renames it over the old one, so the file
// is never seen half written, and syncs both before it returns.
func (s *Server) saveACLFile() error {
	var b strings.Builder
	for _, u := range s.acl.sorted() {
		b.WriteString("user " + u.name + " " + u.rules.Load().describe() + "\n")
	}
	path := s.cfg.ACLFile
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// aclSecrets: ACL SETUSER's rules may hold passwords (>pass, #hash), so a
// SLOWLOG entry shows none of its arguments, the user name included, as
// Redis 7.0 redacts them.
func aclSecrets(args [][]byte, secret func(int)) {
	if len(args) > 1 && is(args[1], "SETUSER") {
		for i := 2; i < len(args); i++ {
			secret(i)
		}
	}
}
