package commands

import (
	"cmp"
	_ "embed"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/throttleddb/throttled/resp"
)

// COMMAND's entries. For a command or subcommand Redis 7.0.15 has, COMMAND
// INFO and COMMAND DOCS answer with redis-server's own reply, recorded in
// redis_command_info.txt and redis_command_docs.txt (compat's
// TestCommandTable_Fixtures regenerates them from a live redis-server and
// TestCommandTable_Live compares the answers), listing only the
// subcommands throttled has. throttled's own commands and subcommands get
// entries of the same shape built from their Spec (ownInfo, ownDocs).

//go:embed redis_command_info.txt
var redisInfoText string

//go:embed redis_command_docs.txt
var redisDocsText string

// reply is a RESP value as the fixtures write it, one element a line in
// compat's script format (children indented under their header).
type reply struct {
	kind  byte // '+' status, ':' integer, '"' bulk, '*' array, '~' set, '%' map
	text  string
	n     int64
	elems []*reply // a map's keys and values alternate
}

func status(s string) *reply            { return &reply{kind: '+', text: s} }
func integer(n int) *reply              { return &reply{kind: ':', n: int64(n)} }
func bulk(s string) *reply              { return &reply{kind: '"', text: s} }
func array(elems ...*reply) *reply      { return &reply{kind: '*', elems: elems} }
func setOf(elems ...*reply) *reply      { return &reply{kind: '~', elems: elems} }
func mapOf(keysValues ...*reply) *reply { return &reply{kind: '%', elems: keysValues} }
func statuses(names []string) []*reply  { return mapSlice(names, status) }
func mapSlice[T any](in []T, f func(T) *reply) []*reply {
	out := make([]*reply, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// write writes r; w turns maps and sets into arrays for RESP2 clients, as
// Redis does.
func (r *reply) write(w *resp.Writer) {
	switch r.kind {
	case '+':
		w.Status(r.text)
	case ':':
		w.Int(r.n)
	case '"':
		w.BulkString(r.text)
	case '*':
		w.Array(len(r.elems))
	case '~':
		w.Set(len(r.elems))
	case '%':
		w.Map(len(r.elems) / 2)
	}
	for _, e := range r.elems {
		e.write(w)
	}
}

// field returns the value under key in map r, or nil.
func (r *reply) field(key string) *reply {
	for i := 0; i+1 < len(r.elems); i += 2 {
		if r.elems[i].text == key {
			return r.elems[i+1]
		}
	}
	return nil
}

// withField returns a copy of map r with key's value replaced by v.
func (r *reply) withField(key string, v *reply) *reply {
	c := *r
	c.elems = slices.Clone(r.elems)
	for i := 0; i+1 < len(c.elems); i += 2 {
		if c.elems[i].text == key {
			c.elems[i+1] = v
		}
	}
	return &c
}

// parseReplies reads the values of a fixture, one after the other. The
// fixtures are generated, so a malformed one is a build error: it panics.
func parseReplies(text string) []*reply {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var out []*reply
	for len(lines) > 0 {
		var r *reply
		r, lines = parseReply(lines)
		out = append(out, r)
	}
	return out
}

func parseReply(lines []string) (*reply, []string) {
	l := strings.TrimLeft(lines[0], " ")
	lines = lines[1:]
	r := &reply{kind: l[0]}
	var err error
	switch l[0] {
	case '+':
		r.text = l[1:]
	case ':':
		r.n, err = strconv.ParseInt(l[1:], 10, 64)
	case '"':
		r.text, err = strconv.Unquote(l)
	case '*', '~', '%':
		var n int
		n, err = strconv.Atoi(l[1:])
		if l[0] == '%' {
			n *= 2
		}
		r.elems = make([]*reply, n)
		for i := range r.elems {
			r.elems[i], lines = parseReply(lines)
		}
	default:
		panic("commands: bad line in a COMMAND fixture: " + l)
	}
	if err != nil {
		panic("commands: bad line in a COMMAND fixture: " + l)
	}
	return r, lines
}

// entry is what COMMAND says of one command or subcommand.
type entry struct {
	name       string // "client|list" for a subcommand
	info, docs *reply
	categories Category
	sub        bool
}

// entryCache holds the entries, built on first use: every server has the
// same command table.
var entryCache struct {
	sync.Once
	list []*entry
}

// entries returns the entries of the command table, commands in name order
// each followed by its subcommands.
func (s *Server) entries() []*entry {
	entryCache.Do(func() { entryCache.list = buildEntries(s.sortedSpecs()) })
	return entryCache.list
}

// buildEntries builds the entries of list, which is in name order.
func buildEntries(list []*Spec) []*entry {
	redisInfo := map[string]*reply{}
	for _, r := range parseReplies(redisInfoText) {
		redisInfo[r.elems[0].text] = r
		for _, s := range r.elems[9].elems {
			redisInfo[s.elems[0].text] = s
		}
	}
	redisDocs := map[string]*reply{}
	docs := parseReplies(redisDocsText)
	for i := 0; i+1 < len(docs); i += 2 {
		redisDocs[docs[i].text] = docs[i+1]
		if subs := docs[i+1].field("subcommands"); subs != nil {
			for j := 0; j+1 < len(subs.elems); j += 2 {
				redisDocs[subs.elems[j].text] = subs.elems[j+1]
			}
		}
	}
	var out []*entry
	for _, sp := range list {
		var subEntries []*entry
		var subInfo, subDocs []*reply
		for _, sub := range sp.Subcommands { // in name order (acl_test)
			e := &entry{name: sp.Name + "|" + sub.Name, categories: sub.Categories, sub: true}
			e.info, e.docs = redisInfo[e.name], redisDocs[e.name]
			if e.info == nil {
				e.info = ownInfo(e.name, sp, sub.Categories, nil)
			}
			if e.docs == nil {
				e.docs = ownDocs(cmp.Or(sub.Summary, sp.Summary), sp.Group)
			}
			subEntries = append(subEntries, e)
			subInfo = append(subInfo, e.info)
			subDocs = append(subDocs, bulk(e.name), e.docs)
		}
		e := &entry{name: sp.Name, categories: sp.Categories}
		if r := redisInfo[sp.Name]; r != nil {
			c := *r
			c.elems = slices.Clone(r.elems)
			subs := *r.elems[9] // an array, or an empty set without subcommands
			subs.elems = subInfo
			c.elems[9] = &subs
			e.info = &c
		} else {
			e.info = ownInfo(sp.Name, sp, sp.Categories, subInfo)
		}
		if r := redisDocs[sp.Name]; r != nil {
			e.docs = r
			if r.field("subcommands") != nil {
				e.docs = r.withField("subcommands", mapOf(subDocs...))
			}
		} else {
			e.docs = ownDocs(sp.Summary, sp.Group)
			if len(subDocs) > 0 {
				e.docs.elems = append(e.docs.elems, bulk("subcommands"), mapOf(subDocs...))
			}
		}
		out = append(append(out, e), subEntries...)
	}
	return out
}

// findEntry returns the entry named name ("get", "client|list"), ignoring
// case, or nil.
func (s *Server) findEntry(name []byte) *entry {
	for _, e := range s.entries() {
		if strings.EqualFold(e.name, string(name)) {
			return e
		}
	}
	return nil
}

// ownFlags names a Spec's flags in Redis' order.
var ownFlags = []struct {
	f    Flags
	name string
}{{Write, "write"}, {ReadOnly, "readonly"}, {DenyOOM, "denyoom"}, {Admin, "admin"}, {NoScript, "noscript"},
	{SkipSlowlog, "skip_slowlog"}, {Fast, "fast"}, {NoAuth, "no_auth"}}

// ownInfo builds the COMMAND INFO entry of one of throttled's commands (or
// subcommands, which share their container's flags and keys).
func ownInfo(name string, sp *Spec, cats Category, subs []*reply) *reply {
	var flags []string
	for _, f := range ownFlags {
		if sp.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	if sp.KeysFn != nil {
		flags = append(flags, "movablekeys")
	}
	subList := setOf() // as Redis answers for a command without subcommands
	if len(subs) > 0 {
		subList = array(subs...)
	}
	var catNames []string
	for _, c := range aclCategories {
		if cats&c.cat != 0 {
			catNames = append(catNames, "@"+c.name)
		}
	}
	return array(bulk(name), integer(sp.Arity), setOf(statuses(flags)...), integer(sp.FirstKey), integer(sp.LastKey),
		integer(sp.Step), setOf(statuses(catNames)...), setOf(), setOf(ownKeySpecs(sp)...), subList)
}

// keyFlags returns the flags COMMAND GETKEYSANDFLAGS gives the keys of a
// call whose access is access: those of the command's key spec (every
// command throttled has holds one), or, where they depend on the
// arguments (SET ... GET), those of access.
func (e *entry) keyFlags(access KeyAccess) []string {
	var flags []string
	for _, f := range e.info.elems[8].elems[0].field("flags").elems {
		switch f.text {
		case "variable_flags":
			if access&KeyRead != 0 {
				return keyAccessFlags(access)
			}
			return []string{"OW", "update"}
		case "incomplete":
		default:
			flags = append(flags, f.text)
		}
	}
	return flags
}

// keyAccessFlags names a key access as key specs do.
func keyAccessFlags(access KeyAccess) []string {
	switch access {
	case KeyRead | KeyWrite:
		return []string{"RW", "access", "update"}
	case KeyWrite:
		return []string{"OW", "update"}
	case KeyRead:
		return []string{"RO", "access"}
	}
	return []string{"RO"}
}

// ownKeySpecs builds the key specs of one of throttled's commands from its
// key positions and access, in Redis' shape: a key at fixed places is
// found by index and range; one a KeysFn finds (THROTTLE.ALL's keys after
// each LIMIT) is "unknown", as Redis says of keys its specs cannot place.
func ownKeySpecs(sp *Spec) []*reply {
	if sp.FirstKey == 0 && sp.KeysFn == nil || sp.Access == KeyUnchecked {
		return nil
	}
	flags := keyAccessFlags(sp.Access)
	begin := mapOf(bulk("type"), bulk("unknown"), bulk("spec"), mapOf())
	find := begin
	if sp.KeysFn != nil {
		flags = append(flags, "incomplete")
	} else {
		last := sp.LastKey
		if last >= 0 {
			last -= sp.FirstKey
		}
		begin = mapOf(bulk("type"), bulk("index"), bulk("spec"), mapOf(bulk("index"), integer(sp.FirstKey)))
		find = mapOf(bulk("type"), bulk("range"), bulk("spec"),
			mapOf(bulk("lastkey"), integer(last), bulk("keystep"), integer(sp.Step), bulk("limit"), integer(0)))
	}
	return []*reply{mapOf(bulk("flags"), setOf(statuses(flags)...), bulk("begin_search"), begin, bulk("find_keys"), find)}
}

// ownDocs builds the COMMAND DOCS entry of one of throttled's commands.
func ownDocs(summary, group string) *reply {
	return mapOf(bulk("summary"), bulk(summary), bulk("since"), bulk("1.0.0"), bulk("group"), bulk(group))
}
