package commands

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/throttleddb/throttled/resp"
)

func ping(c *Ctx) {
	switch len(c.Args) {
	case 1:
		c.W.Status("PONG")
	case 2:
		c.W.Bulk(c.Args[1])
	default:
		c.W.Error(wrongArity("ping"))
	}
}

func echo(c *Ctx) { c.W.Bulk(c.Args[1]) }

func quit(c *Ctx) {
	c.W.OK()
	c.Conn.CloseAfterReply()
}

// reset returns the connection to its state right after connecting.
func reset(c *Ctx) {
	if c.st.multi != nil {
		c.endMulti()
	}
	c.srv.unwatch(c.st)
	c.setDB(0)
	c.Conn.SetProto(2)
	c.Conn.SetName("")
	c.setUser(c.srv.acl.def)
	c.Conn.SetAuthenticated(!c.srv.RequireAuth())
	c.W.Status("RESET")
}

func (c *Ctx) setDB(db int) {
	c.st.db = db
	if c.Conn != nil { // nil when a replica applies a script's SELECT
		c.Conn.SetDB(db)
	}
}

// setUser makes u the connection's user, for its commands and CLIENT LIST.
func (c *Ctx) setUser(u *User) {
	c.st.user = u
	c.Conn.SetUser(u.name)
}

// login authenticates the connection as user/pass and reports whether it
// could.
func (c *Ctx) login(user, pass []byte) bool {
	u := c.srv.acl.authenticate(user, pass)
	if u == nil {
		return false
	}
	c.setUser(u)
	c.Conn.SetAuthenticated(true)
	return true
}

// AUTH [user] password
func auth(c *Ctx) {
	if len(c.Args) > 3 {
		c.W.Error(errSyntax)
		return
	}
	user, pass := []byte("default"), c.Args[1]
	if len(c.Args) == 3 {
		user, pass = c.Args[1], c.Args[2]
	} else if c.srv.acl.def.rules.Load().nopass {
		c.W.Error(errNoPassword)
		return
	}
	if !c.login(user, pass) {
		c.W.Error(errWrongPass)
		return
	}
	c.W.OK()
}

// authSecrets: every argument of AUTH is secret (Redis 7 redacts the user
// name too).
func authSecrets(args [][]byte, secret func(int)) {
	for i := 1; i < len(args); i++ {
		secret(i)
	}
}

// helloSecrets finds HELLO's AUTH pair as hello reads the options; an AUTH
// short of its pair (a syntax error) has what follows it redacted all the
// same, since that may be a password.
func helloSecrets(args [][]byte, secret func(int)) {
	for i := 2; i < len(args); i++ {
		switch {
		case is(args[i], "AUTH"):
			for j := i + 1; j <= i+2 && j < len(args); j++ {
				secret(j)
			}
			i += 2
		case is(args[i], "SETNAME"):
			i++
		}
	}
}

// HELLO [protover [AUTH user pass] [SETNAME name]]
func hello(c *Ctx) {
	proto := c.W.Proto()
	if len(c.Args) >= 2 {
		v, ok := parseInt(c.Args[1])
		if !ok {
			c.W.Error(errProtoVersion)
			return
		}
		if v != 2 && v != 3 {
			c.W.Error(errNoProto)
			return
		}
		proto = int(v)
	}
	// Redis 7.0 acts on each option as it reads it: an AUTH or SETNAME
	// before a failing option (or before the NOAUTH check) has happened.
	for i := 2; i < len(c.Args); i++ {
		more := len(c.Args) - i - 1
		switch {
		case is(c.Args[i], "AUTH") && more >= 2:
			if !c.login(c.Args[i+1], c.Args[i+2]) {
				c.W.Error(errWrongPass)
				return
			}
			i += 2
		case is(c.Args[i], "SETNAME") && more >= 1:
			if !validClientName(c.Args[i+1]) {
				c.W.Error(errClientName)
				return
			}
			c.Conn.SetName(string(c.Args[i+1]))
			i++
		default:
			c.W.Error("ERR Syntax error in HELLO option '" + sanitize(string(c.Args[i]), 128) + "'")
			return
		}
	}
	if !c.Conn.Authenticated() {
		c.W.Error(errHelloNoAuth)
		return
	}
	c.Conn.SetProto(proto)
	c.W.Map(7)
	c.W.BulkString("server")
	c.W.BulkString("redis")
	c.W.BulkString("version")
	c.W.BulkString(RedisVersion)
	c.W.BulkString("proto")
	c.W.Int(int64(proto))
	c.W.BulkString("id")
	c.W.Int(c.Conn.ID)
	c.W.BulkString("mode")
	c.W.BulkString("standalone")
	c.W.BulkString("role")
	c.W.BulkString("master")
	c.W.BulkString("modules")
	c.W.Array(0)
}

// validClientName applies Redis' rule: printable ASCII without spaces.
func validClientName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func selectDB(c *Ctx) {
	n, ok := parseInt(c.Args[1])
	if !ok {
		c.W.Error(errNotInt)
		return
	}
	if n < 0 || n >= int64(c.srv.store.Databases()) {
		c.W.Error(errDBRange)
		return
	}
	c.setDB(int(n))
	c.W.OK()
}

var clientHelp = []string{
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL ID <client-id>",
	"    Kill the connection with the given id.",
	"LIST [TYPE normal] [ID <client-id> [<client-id> ...]]",
	"    Return information about client connections.",
	"SETINFO <LIB-NAME|LIB-VER> <value>",
	"    Set client library name or version.",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"HELP",
	"    Print this help.",
}

// CLIENT subcommand ...
func client(c *Ctx) {
	sub := c.Args[1]
	switch {
	case is(sub, "ID"):
		if c.subArity(2, "client|id") {
			c.W.Int(c.Conn.ID)
		}
	case is(sub, "GETNAME"):
		if !c.subArity(2, "client|getname") {
			return
		}
		if n := c.Conn.Name(); n != "" {
			c.W.BulkString(n)
		} else {
			c.W.Null()
		}
	case is(sub, "SETNAME"):
		if !c.subArity(3, "client|setname") {
			return
		}
		if !validClientName(c.Args[2]) {
			c.W.Error(errClientName)
			return
		}
		c.Conn.SetName(string(c.Args[2]))
		c.W.OK()
	case is(sub, "SETINFO"):
		if !c.subArity(4, "client|setinfo") {
			return
		}
		attr := c.Args[2]
		if !is(attr, "LIB-NAME") && !is(attr, "LIB-VER") {
			c.W.Error("ERR Unrecognized option '" + sanitize(string(attr), 128) + "'")
			return
		}
		if !validClientName(c.Args[3]) {
			c.W.Error("ERR " + strings.ToLower(string(attr)) + " cannot contain spaces, newlines or special characters.")
			return
		}
		c.Conn.SetLib(is(attr, "LIB-NAME"), string(c.Args[3]))
		c.W.OK()
	case is(sub, "INFO"):
		if c.subArity(2, "client|info") {
			c.W.Verbatim(clientLine(nil, c.srv, c.Conn.InfoNow()))
		}
	case is(sub, "LIST"):
		c.clientList()
	case is(sub, "KILL"):
		c.clientKill()
	case is(sub, "HELP"):
		c.help("client", clientHelp)
	default:
		c.W.Error(unknownSubcommand(sub, "CLIENT"))
	}
}

// CLIENT LIST [TYPE normal|master|replica|pubsub] | CLIENT LIST ID id [id ...]
//
// As in Redis 7.0, TYPE and ID do not combine, and ID lists the connections
// in the order the ids are given.
func (c *Ctx) clientList() {
	var infos []resp.ClientInfo
	if n := c.srv.net.Load(); n != nil {
		n.ForEachConn(func(rc *resp.Conn) {
			if rc == c.Conn {
				infos = append(infos, rc.InfoNow())
			} else {
				infos = append(infos, rc.Info())
			}
		})
	}
	slices.SortFunc(infos, func(a, b resp.ClientInfo) int { return cmp.Compare(a.ID, b.ID) })
	switch {
	case len(c.Args) == 4 && is(c.Args[2], "TYPE"):
		switch t := c.Args[3]; {
		case is(t, "NORMAL"):
		case is(t, "MASTER"), is(t, "REPLICA"), is(t, "SLAVE"), is(t, "PUBSUB"):
			infos = nil // we have no such connections
		default:
			c.W.Error("ERR Unknown client type '" + sanitize(string(t), 128) + "'")
			return
		}
	case len(c.Args) > 3 && is(c.Args[2], "ID"):
		all := infos
		infos = nil
		for _, a := range c.Args[3:] {
			id, ok := parseInt(a)
			if !ok {
				c.W.Error("ERR Invalid client ID")
				return
			}
			if i := slices.IndexFunc(all, func(in resp.ClientInfo) bool { return in.ID == id }); i >= 0 {
				infos = append(infos, all[i])
			}
		}
	case len(c.Args) != 2:
		c.W.Error(errSyntax)
		return
	}
	var out []byte
	for _, in := range infos {
		out = clientLine(out, c.srv, in)
	}
	c.W.Verbatim(out)
}

// clientLine appends one CLIENT LIST line, with the fields Redis 7 prints
// (those about things we do not have are 0). The buffer figures are the
// connection's as of its last round (resp.ConnMem), or as they are for the
// connection running the command (resp.Conn.InfoNow): qbuf is request
// bytes not yet run (and the running one's), argv-mem the bytes of the
// arguments parsed, rbs and rbp the reply buffer's size and recent peak,
// omem replies not yet taken, oll deferred replies out.
func clientLine(dst []byte, s *Server, in resp.ClientInfo) []byte {
	now := s.clock.Now()
	idle := int64(0)
	if in.LastActive != 0 {
		idle = max(now-in.LastActive, 0) / 1e9
	}
	flags := "N"
	if in.Multi >= 0 {
		flags = "x"
	}
	events := "r"
	if in.Mem.Output > 0 {
		events = "rw"
	}
	m := in.Mem
	dst = fmt.Appendf(dst, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=%d sub=0 psub=0 ssub=0 multi=%d qbuf=%d qbuf-free=%d argv-mem=%d multi-mem=0 rbs=%d rbp=%d obl=0 oll=%d omem=%d tot-mem=%d events=%s cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s\n",
		in.ID, in.Addr, in.LAddr, in.FD, in.Name, int64(time.Since(in.Created).Seconds()), idle, flags, in.DB,
		in.Multi, m.QueryBuf, m.QueryBufFree, m.ArgvMem, m.ReplyBuf, m.ReplyPeak, m.Held, m.Output, m.Total, events,
		in.LastCmd, in.User, in.Proto, in.LibName, in.LibVer)
	return dst
}

// CLIENT KILL addr | CLIENT KILL ID id [SKIPME yes|no]
//
// The old form replies +OK or "No such client"; the new form, option/value
// pairs as Redis 7.0 parses them, replies how many connections it closed
// and by default spares the calling one.
func (c *Ctx) clientKill() {
	n := c.srv.net.Load()
	if len(c.Args) == 3 {
		killed := false
		if n != nil {
			n.ForEachConn(func(rc *resp.Conn) {
				if rc.Addr == string(c.Args[2]) {
					killed = n.Kill(rc.ID) || killed
				}
			})
		}
		if !killed {
			c.W.Error("ERR No such client")
			return
		}
		c.W.OK()
		return
	}
	if len(c.Args) < 3 {
		c.W.Error(wrongArity("client|kill"))
		return
	}
	// The filters: a client is killed when it matches every one given.
	// Without any, every client matches (SKIPME still spares the caller).
	var (
		id               int64
		addr, laddr, usr string
		noneOfType       bool // TYPE master, replica or pubsub: we have none
	)
	skipMe := true
	for i := 2; i < len(c.Args); i += 2 {
		if i+1 >= len(c.Args) {
			c.W.Error(errSyntax)
			return
		}
		v := c.Args[i+1]
		switch a := c.Args[i]; {
		case is(a, "ID"):
			n, ok := parseInt(v)
			if !ok || n < 1 {
				c.W.Error("ERR client-id should be greater than 0")
				return
			}
			id = n
		case is(a, "ADDR"):
			addr = string(v)
		case is(a, "LADDR"):
			laddr = string(v)
		case is(a, "USER"):
			if c.srv.acl.user(string(v)) == nil {
				c.W.Error("ERR No such user '" + sanitize(string(v), 128) + "'")
				return
			}
			usr = string(v)
		case is(a, "TYPE"):
			switch {
			case is(v, "NORMAL"):
			case is(v, "MASTER"), is(v, "REPLICA"), is(v, "SLAVE"), is(v, "PUBSUB"):
				noneOfType = true
			default:
				c.W.Error("ERR Unknown client type '" + sanitize(string(v), 128) + "'")
				return
			}
		case is(a, "SKIPME") && (is(v, "YES") || is(v, "NO")):
			skipMe = is(v, "YES")
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	if n == nil || noneOfType {
		c.W.Int(0)
		return
	}
	killed := int64(0)
	n.ForEachConn(func(rc *resp.Conn) {
		in := rc.Info()
		switch {
		case id != 0 && in.ID != id, addr != "" && in.Addr != addr, laddr != "" && in.LAddr != laddr, usr != "" && in.User != usr:
			return
		case rc.ID == c.Conn.ID:
			if skipMe {
				return
			}
			// Closing our own connection now would lose the reply.
			c.Conn.CloseAfterReply()
			killed++
		case n.Kill(rc.ID):
			killed++
		}
	})
	c.W.Int(killed)
}
