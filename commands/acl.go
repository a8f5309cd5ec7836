package commands

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"iter"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	_ "embed"
)

// Access control: users, their rules, and the check every command passes.
//
// This follows Redis 7.0's ACL (src/acl.c): a user has flags (on/off,
// nopass), SHA-256 password hashes, a set of commands it may run, key
// patterns and channel patterns. ACL SETUSER applies rules from left to
// right to a copy of the user and publishes the copy only when all of them
// apply, so a bad rule changes nothing. A user's rules are an immutable
// userRules behind an atomic pointer: the connections authenticated as the
// user see a change at their next command, as in Redis, and the dispatcher
// reads them without a lock.
//
// Commands and subcommands are numbered once (aclIndex) and a user's
// commands are a bit set over those numbers. Rules on categories act on the
// commands in them at the time, as in Redis: "+@all -@dangerous" is the set
// of commands that are not dangerous, and the description ACL LIST shows is
// rebuilt from the bit set with Redis 7.0's algorithm (describeCommands), so
// a user made from a Redis ACL file shows the rules Redis would. The numbers
// cover Redis 7.0.15's commands this server lacks too (redis_commands.txt),
// as bits no command checks: "+@all -@set" and "-@all +hset" change the set
// as they do in Redis, so ACL LIST and ACL SAVE keep them, and a file saved
// here grants in Redis what the rules given grant there.
//
// What differs from Redis 7.0:
//   - Selectors ("(...)" rules) are refused with an error.
//   - Channel rules (&pattern, allchannels, resetchannels) are kept and shown
//     but have no effect: there is no Pub/Sub.
//   - A rule naming a command Redis 7.0 has and this server does not
//     ("+hset", "-client|pause") is accepted and kept, as said above; a
//     name Redis does not know either is refused.
//   - The single commands in ACL LIST come in name order; Redis lists them
//     in the order of its command hash table, which changes from one run
//     to the next.
//   - Error texts never repeat a rule that may hold a password: a bad
//     password rule, hash or unknown word is shown as '(redacted)'.

// Category is a set of ACL categories, one bit each.
type Category uint32

// The categories, in Redis 7.0's order (ACL CAT), then ours.
const (
	CatKeyspace Category = 1 << iota
	CatRead
	CatWrite
	CatSet
	CatSortedSet
	CatList
	CatHash
	CatString
	CatBitmap
	CatHyperLogLog
	CatGeo
	CatStream
	CatPubSub
	CatAdmin
	CatFast
	CatSlow
	CatBlocking
	CatDangerous
	CatConnection
	CatTransaction
	CatScripting
	// CatRatelimit holds every throttle command: a gateway's user needs
	// +@ratelimit and little else.
	CatRatelimit
)

// aclCategories names the categories in ACL CAT's order.
var aclCategories = []struct {
	name string
	cat  Category
}{
	{"keyspace", CatKeyspace}, {"read", CatRead}, {"write", CatWrite}, {"set", CatSet},
	{"sortedset", CatSortedSet}, {"list", CatList}, {"hash", CatHash}, {"string", CatString},
	{"bitmap", CatBitmap}, {"hyperloglog", CatHyperLogLog}, {"geo", CatGeo}, {"stream", CatStream},
	{"pubsub", CatPubSub}, {"admin", CatAdmin}, {"fast", CatFast}, {"slow", CatSlow},
	{"blocking", CatBlocking}, {"dangerous", CatDangerous}, {"connection", CatConnection},
	{"transaction", CatTransaction}, {"scripting", CatScripting}, {"ratelimit", CatRatelimit},
}

// categoryByName finds a category by name, ignoring case; 0 if unknown.
func categoryByName(name string) Category {
	for _, c := range aclCategories {
		if strings.EqualFold(name, c.name) {
			return c.cat
		}
	}
	return 0
}

// aclEntry is a command or a subcommand as ACL rules see it.
type aclEntry struct {
	name string // "get", "client|kill"
	cats Category
	id   int
	subs []*aclEntry // a container's subcommands, by name
	// served: this server has the command; the others are Redis 7.0.15's,
	// which rules name and no call checks.
	served bool
}

// cmdBits is a set of command numbers.
type cmdBits [8]uint64

func (b *cmdBits) has(id int) bool { return b[id/64]&(1<<(id%64)) != 0 }

func (b *cmdBits) set(id int, on bool) {
	if on {
		b[id/64] |= 1 << (id % 64)
	} else {
		b[id/64] &^= 1 << (id % 64)
	}
}

// aclIndex numbers every command and subcommand, ours and Redis', in name
// order, and finds them by name. New builds it, once (initACLIndex), and
// sets the numbers in the table's Specs (Spec.aclID, Sub.aclID) so the
// dispatcher finds a command's number without a lookup. It cannot be a
// package initializer: the table it indexes holds the ACL command, whose
// rules read it.
var (
	aclIndex     *aclCommands
	aclIndexOnce sync.Once
)

type aclCommands struct {
	top    []*aclEntry          // top-level commands, by name
	byName map[string]*aclEntry // lower-case full name
	// members are the commands of each category, by its place in
	// aclCategories.
	members []cmdBits
}

// redisCommandsText lists the commands and subcommands of Redis 7.0.15,
// one a line: the lower-case name, then its ACL categories (compat's
// TestACL_RedisCommandsFixture writes it from a live redis-server).
//
//go:embed redis_commands.txt
var redisCommandsText string

func initACLIndex() { aclIndexOnce.Do(func() { aclIndex = newACLIndex(specs, redisCommandsText) }) }

// newACLIndex indexes the commands of list and those of redis (in
// redis_commands.txt's format) list lacks. A command both have takes the
// categories of its Spec, which a compat test holds to Redis'.
func newACLIndex(list []*Spec, redis string) *aclCommands {
	type command struct {
		cats   Category
		served bool
		aclID  *int // where the Spec keeps the number
	}
	all := map[string]command{}
	for _, sp := range list {
		all[sp.Name] = command{sp.Categories, true, &sp.aclID}
		for i := range sp.Subcommands {
			sub := &sp.Subcommands[i]
			all[sp.Name+"|"+sub.Name] = command{sub.Categories, true, &sub.aclID}
		}
	}
	for line := range strings.Lines(redis) {
		f := strings.Fields(line)
		if _, ok := all[f[0]]; ok {
			continue
		}
		var cats Category
		for _, name := range f[1:] {
			cats |= categoryByName(name)
		}
		all[f[0]] = command{cats: cats}
	}
	subs := map[string][]string{}
	for name := range all {
		if base, sub, ok := strings.Cut(name, "|"); ok {
			subs[base] = append(subs[base], sub)
		}
	}
	x := &aclCommands{byName: map[string]*aclEntry{}, members: make([]cmdBits, len(aclCategories))}
	id := 0
	add := func(name string) *aclEntry {
		c := all[name]
		e := &aclEntry{name: name, cats: c.cats, id: id, served: c.served}
		if c.aclID != nil {
			*c.aclID = id
		}
		for j, cat := range aclCategories {
			x.members[j].set(id, c.cats&cat.cat != 0)
		}
		id++
		x.byName[name] = e
		return e
	}
	for _, name := range slices.Sorted(maps.Keys(all)) {
		if strings.Contains(name, "|") {
			continue
		}
		e := add(name)
		x.top = append(x.top, e)
		slices.Sort(subs[name])
		for _, sub := range subs[name] {
			e.subs = append(e.subs, add(name+"|"+sub))
		}
	}
	if id > len(cmdBits{})*64 {
		panic("commands: more commands than an ACL command set holds")
	}
	return x
}

// all yields every command, each container followed by its subcommands.
func (x *aclCommands) all() iter.Seq[*aclEntry] {
	return func(yield func(*aclEntry) bool) {
		for _, e := range x.top {
			if !yield(e) {
				return
			}
			for _, s := range e.subs {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// lookup finds "cmd" or "cmd|sub", ignoring case, as Redis'
// lookupCommandBySds does.
func (x *aclCommands) lookup(name string) *aclEntry {
	if strings.Count(name, "|") > 1 {
		return nil
	}
	return x.byName[strings.ToLower(name)]
}

// keyPattern is one ~, %R~ or %W~ rule.
type keyPattern struct {
	pattern string
	perm    KeyAccess // KeyRead, KeyWrite or both
}

// userRules is one version of a user. It is never changed once published
// (User.rules): ACL SETUSER changes a copy.
type userRules struct {
	on, nopass bool
	// sanitize is "", "sanitize-payload" or "skip-sanitize-payload": kept
	// and shown as Redis does; there is no RESTORE for it to act on.
	sanitize  string
	passwords [][sha256.Size]byte

	// allCommands: +@all and no command taken away since (Redis'
	// ALLCOMMANDS flag); future: the set starts from +@all, so commands
	// added later are allowed too (Redis' reserved bit).
	allCommands, future bool
	cmds                cmdBits
	// firstArgs are the first arguments allowed for a command that is
	// otherwise denied ("+select|0"), by command number.
	firstArgs map[int][]string

	allKeys     bool
	keys        []keyPattern
	allChannels bool
	channels    []string

	// Set by seal: unrestricted users skip every check (the hot path);
	// selector is the description of the commands, keys and channels.
	unrestricted bool
	selector     string
}

// clone returns a copy that shares nothing mutable with r.
func (r *userRules) clone() *userRules {
	c := *r
	c.passwords = slices.Clone(r.passwords)
	c.keys = slices.Clone(r.keys)
	c.channels = slices.Clone(r.channels)
	if r.firstArgs != nil {
		c.firstArgs = make(map[int][]string, len(r.firstArgs))
		for id, args := range r.firstArgs {
			c.firstArgs[id] = slices.Clone(args)
		}
	}
	return &c
}

// seal fills the derived fields; call it before publishing r.
func (r *userRules) seal() *userRules {
	r.unrestricted = r.allCommands && r.allKeys
	r.selector = r.describeSelector()
	return r
}

// ruleError is a rule that could not be applied: Redis' reason, and whether
// the rule may be repeated in the error (never when it may be a password).
type ruleError struct {
	reason string
	echo   bool
}

var (
	errRuleUnknown = &ruleError{"Unknown command or category name in ACL", true}
	// errRuleUnknownWord is a rule that is no rule: it may be a password
	// given without its '>'.
	errRuleUnknownWord = &ruleError{"Syntax error", false}
	errRuleSyntax      = &ruleError{"Syntax error", true}
	errRuleKeysAll     = &ruleError{"Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns", true}
	errRuleChannelsAll = &ruleError{"Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels", true}
	errRuleNoSuchPass  = &ruleError{"The password you are trying to remove from the user does not exist", false}
	errRuleBadHash     = &ruleError{"The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters", false}
	errRuleFirstArgSub = &ruleError{"Allowing first-arg of a subcommand is not supported", true}
	// Ours: selectors are not implemented.
	errRuleSelector = &ruleError{"Selectors (rules in parentheses) are not supported by this server", true}
)

// newUserRules is a user as ACL SETUSER creates it: off, no password, no
// commands, keys or channels.
func newUserRules() *userRules { return &userRules{} }

// apply applies one rule, as Redis' ACLSetUser does.
func (r *userRules) apply(op string) *ruleError {
	switch {
	case op == "":
		// An empty rule does nothing (ACL files may have double spaces).
	case strings.EqualFold(op, "on"):
		r.on = true
	case strings.EqualFold(op, "off"):
		r.on = false
	case strings.EqualFold(op, "skip-sanitize-payload"), strings.EqualFold(op, "sanitize-payload"):
		r.sanitize = strings.ToLower(op)
	case strings.EqualFold(op, "nopass"):
		r.nopass, r.passwords = true, nil
	case strings.EqualFold(op, "resetpass"):
		r.nopass, r.passwords = false, nil
	case op[0] == '>' || op[0] == '#':
		h, err := passwordHash(op)
		if err != nil {
			return err
		}
		if !slices.Contains(r.passwords, h) {
			r.passwords = append(r.passwords, h)
		}
		r.nopass = false
	case op[0] == '<' || op[0] == '!':
		h, err := passwordHash(op)
		if err != nil {
			return err
		}
		i := slices.Index(r.passwords, h)
		if i < 0 {
			return errRuleNoSuchPass
		}
		r.passwords = slices.Delete(r.passwords, i, i+1)
	case op[0] == '(':
		return errRuleSelector
	case strings.EqualFold(op, "clearselectors"):
		// There are none to clear.
	case strings.EqualFold(op, "reset"):
		for _, o := range []string{"resetpass", "resetkeys", "resetchannels", "off", "sanitize-payload", "-@all"} {
			r.apply(o)
		}
	default:
		return r.applySelector(op)
	}
	return nil
}

// passwordHash is the hash a >pass, <pass (hashed here), #hash or !hash
// rule names.
func passwordHash(op string) ([sha256.Size]byte, *ruleError) {
	if op[0] == '>' || op[0] == '<' {
		return sha256.Sum256([]byte(op[1:])), nil
	}
	var h [sha256.Size]byte
	hx := op[1:]
	if len(hx) != 2*sha256.Size || strings.ContainsFunc(hx, func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') }) {
		return h, errRuleBadHash
	}
	hex.Decode(h[:], []byte(hx))
	return h, nil
}

// applySelector applies a rule about commands, keys or channels, as Redis'
// ACLSetSelector does.
func (r *userRules) applySelector(op string) *ruleError {
	switch {
	case strings.EqualFold(op, "allkeys"), strings.EqualFold(op, "~*"):
		r.allKeys, r.keys = true, nil
	case strings.EqualFold(op, "resetkeys"):
		r.allKeys, r.keys = false, nil
	case strings.EqualFold(op, "allchannels"), strings.EqualFold(op, "&*"):
		r.allChannels, r.channels = true, nil
	case strings.EqualFold(op, "resetchannels"):
		r.allChannels, r.channels = false, nil
	case strings.EqualFold(op, "allcommands"), strings.EqualFold(op, "+@all"):
		for i := range r.cmds {
			r.cmds[i] = math.MaxUint64
		}
		r.allCommands, r.future, r.firstArgs = true, true, nil
	case strings.EqualFold(op, "nocommands"), strings.EqualFold(op, "-@all"):
		r.cmds = cmdBits{}
		r.allCommands, r.future, r.firstArgs = false, false, nil
	case op[0] == '~' || op[0] == '%':
		return r.addKeyPattern(op)
	case op[0] == '&':
		if r.allChannels {
			return errRuleChannelsAll
		}
		if hasSpace(op[1:]) {
			return errRuleSyntax
		}
		if !slices.Contains(r.channels, op[1:]) {
			r.channels = append(r.channels, op[1:])
		}
	case len(op) > 1 && (op[0] == '+' || op[0] == '-') && op[1] == '@':
		cat := categoryByName(op[2:])
		if cat == 0 {
			return errRuleUnknown
		}
		r.setCategory(cat, op[0] == '+')
	case op[0] == '+':
		return r.allowCommand(op[1:])
	case op[0] == '-':
		e := aclIndex.lookup(op[1:])
		if e == nil {
			return errRuleUnknown
		}
		r.change(e, false)
	default:
		return errRuleUnknownWord
	}
	return nil
}

// addKeyPattern applies ~pattern or %R~pattern, %W~pattern, %RW~pattern.
func (r *userRules) addKeyPattern(op string) *ruleError {
	if r.allKeys {
		return errRuleKeysAll
	}
	perm, rest := KeyRead|KeyWrite, op[1:]
	if op[0] == '%' {
		perm = 0
		i := 1
		for ; i < len(op) && op[i] != '~'; i++ {
			switch c := op[i]; {
			case (c == 'R' || c == 'r') && perm&KeyRead == 0:
				perm |= KeyRead
			case (c == 'W' || c == 'w') && perm&KeyWrite == 0:
				perm |= KeyWrite
			default:
				return errRuleSyntax
			}
		}
		if perm == 0 {
			return errRuleSyntax
		}
		rest = op[min(i+1, len(op)):]
	}
	if hasSpace(rest) {
		return errRuleSyntax
	}
	if i := slices.IndexFunc(r.keys, func(k keyPattern) bool { return k.pattern == rest }); i >= 0 {
		r.keys[i].perm |= perm
	} else {
		r.keys = append(r.keys, keyPattern{rest, perm})
	}
	return nil
}

// allowCommand applies +cmd, +cmd|sub, or +cmd|first-arg for a command
// without subcommands.
func (r *userRules) allowCommand(name string) *ruleError {
	bar := strings.LastIndexByte(name, '|')
	if bar < 0 {
		e := aclIndex.lookup(name)
		if e == nil {
			return errRuleUnknown
		}
		r.change(e, true)
		return nil
	}
	base, arg := name[:bar], name[bar+1:]
	e := aclIndex.lookup(base)
	switch {
	case e == nil:
		return errRuleUnknown
	case strings.Contains(e.name, "|"):
		return errRuleFirstArgSub
	case arg == "" || hasSpace(arg):
		// (Redis takes a first argument with spaces, and then writes rules
		// it cannot read back.)
		return errRuleSyntax
	case e.subs != nil:
		sub := aclIndex.lookup(name)
		if sub == nil {
			return errRuleUnknown
		}
		r.change(sub, true)
	case r.cmds.has(e.id):
		// The command is allowed whatever its first argument.
	default:
		// Redis' deprecated first-arg rule ("+select|0"): still written by
		// its ACL SAVE, so it loads.
		if !slices.ContainsFunc(r.firstArgs[e.id], func(a string) bool { return strings.EqualFold(a, arg) }) {
			if r.firstArgs == nil {
				r.firstArgs = map[int][]string{}
			}
			r.firstArgs[e.id] = append(r.firstArgs[e.id], arg)
		}
	}
	return nil
}

// hasSpace reports whether s has white space or NUL, which Redis refuses in
// user names and patterns.
func hasSpace(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool {
		return c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
	})
}

// change allows or denies a command, and with a container all its
// subcommands (Redis' ACLChangeSelectorPerm).
func (r *userRules) change(e *aclEntry, allow bool) {
	r.setBit(e.id, allow)
	delete(r.firstArgs, e.id)
	for _, s := range e.subs {
		r.setBit(s.id, allow)
	}
}

func (r *userRules) setBit(id int, on bool) {
	r.cmds.set(id, on)
	if !on {
		r.allCommands = false
	}
}

// setCategory allows or denies the commands of cat. A container in the
// category takes all its subcommands along, then each subcommand in it is
// set on its own, in Redis' order.
func (r *userRules) setCategory(cat Category, allow bool) {
	for e := range aclIndex.all() {
		if e.cats&cat != 0 {
			r.change(e, allow)
		}
	}
}

// countCategory counts the commands of aclCategories[j] r allows and
// denies.
func (r *userRules) countCategory(j int) (on, off int) {
	for i, m := range aclIndex.members[j] {
		on += bits.OnesCount64(m & r.cmds[i])
		off += bits.OnesCount64(m &^ r.cmds[i])
	}
	return on, off
}

// describeCommands returns the command rules that rebuild r's command set,
// as Redis 7.0's ACLDescribeSelectorCommandRules does: +@all or -@all, then
// the categories that fit best, one at a time, then single commands.
func (r *userRules) describeCommands() string {
	var b strings.Builder
	fake := newUserRules()
	additive := !r.future
	if additive {
		b.WriteString("-@all ")
	} else {
		b.WriteString("+@all ")
		fake.applySelector("+@all")
	}
	temp := &userRules{cmds: r.cmds}
	applied := make([]bool, len(aclCategories))
	for {
		best, minDiff, maxSame := -1, math.MaxInt, 0
		for j := range aclCategories {
			if applied[j] {
				continue
			}
			on, off := temp.countCategory(j)
			diff, same := on, off
			if additive {
				diff, same = off, on
			}
			if same > diff && (diff < minDiff || diff == minDiff && same > maxSame) {
				best, minDiff, maxSame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		c := aclCategories[best]
		fake.setCategory(c.cat, additive)
		temp.setCategory(c.cat, !additive)
		if additive {
			b.WriteString("+@")
		} else {
			b.WriteString("-@")
		}
		b.WriteString(c.name + " ")
		applied[best] = true
	}
	// Then each command that still differs, and the first arguments of a
	// denied command (only commands without subcommands have any).
	for e := range aclIndex.all() {
		if on := r.cmds.has(e.id); on != fake.cmds.has(e.id) {
			if on {
				b.WriteString("+")
			} else {
				b.WriteString("-")
			}
			b.WriteString(e.name + " ")
			fake.change(e, on)
		}
		if !r.cmds.has(e.id) {
			for _, arg := range r.firstArgs[e.id] {
				b.WriteString("+" + e.name + "|" + arg + " ")
			}
		}
	}
	// Redis aborts here rather than show rules that would not rebuild
	// the user: so do we, as that would be a security hole.
	if fake.cmds != r.cmds {
		panic("commands: ACL description does not rebuild the user's commands: " + b.String())
	}
	return strings.TrimSuffix(b.String(), " ")
}

// describeKeys is the key patterns as ACL GETUSER shows them.
func (r *userRules) describeKeys() string {
	if r.allKeys {
		return "~*"
	}
	var parts []string
	for _, k := range r.keys {
		switch k.perm {
		case KeyRead:
			parts = append(parts, "%R~"+k.pattern)
		case KeyWrite:
			parts = append(parts, "%W~"+k.pattern)
		default:
			// Redis writes "~*" here too, which reads back as allkeys
			// (and refuses any pattern after it): "%RW~*" reads back
			// as this very pattern.
			if k.pattern == "*" {
				parts = append(parts, "%RW~*")
			} else {
				parts = append(parts, "~"+k.pattern)
			}
		}
	}
	return strings.Join(parts, " ")
}

// describeChannels is the channel patterns as ACL GETUSER shows them.
func (r *userRules) describeChannels() string {
	if r.allChannels {
		return "&*"
	}
	var parts []string
	for _, c := range r.channels {
		parts = append(parts, "&"+c)
	}
	return strings.Join(parts, " ")
}

// describeSelector is the keys, channels and commands as ACL LIST shows
// them; applied to a new user it gives the same permissions.
func (r *userRules) describeSelector() string {
	var b strings.Builder
	if k := r.describeKeys(); k != "" {
		b.WriteString(k + " ")
	}
	if !r.allChannels {
		b.WriteString("resetchannels ")
	}
	if c := r.describeChannels(); c != "" {
		b.WriteString(c + " ")
	}
	b.WriteString(r.describeCommands())
	return b.String()
}

// flags are the user's flags in ACL LIST's order.
func (r *userRules) flags() []string {
	f := []string{"off"}
	if r.on {
		f[0] = "on"
	}
	if r.nopass {
		f = append(f, "nopass")
	}
	if r.sanitize != "" {
		f = append(f, r.sanitize)
	}
	return f
}

// describe is the whole user as ACL LIST shows it, after "user <name> ".
func (r *userRules) describe() string {
	parts := r.flags()
	for _, p := range r.passwords {
		parts = append(parts, "#"+hex.EncodeToString(p[:]))
	}
	return strings.Join(append(parts, r.selector), " ")
}

// denial says why a user may not run a command.
type denial uint8

const (
	permitted denial = iota
	deniedCommand
	deniedKey
)

// check says whether r may run spec with args.
func (r *userRules) check(spec *Spec, args [][]byte) denial {
	if r.unrestricted {
		return permitted
	}
	if !r.allCommands && spec.Flags&NoAuth == 0 {
		id := spec.aclID
		if i := spec.sub(args); i >= 0 {
			id = spec.Subcommands[i].aclID
		}
		if !r.cmds.has(id) && !r.firstArgAllowed(id, args) {
			return deniedCommand
		}
	}
	if !r.allKeys && !r.keysAllowed(spec, args) {
		return deniedKey
	}
	return permitted
}

// firstArgAllowed reports whether a first-arg rule allows args.
func (r *userRules) firstArgAllowed(id int, args [][]byte) bool {
	if len(args) < 2 {
		return false
	}
	for _, a := range r.firstArgs[id] {
		if bytes.EqualFold(args[1], []byte(a)) {
			return true
		}
	}
	return false
}

// keysAllowed reports whether r's key patterns allow every key of the call.
// As in Server.addLocks, only a KeysFn gets a closure that escapes: keys at
// fixed places (the throttle commands) are checked without allocating.
func (r *userRules) keysAllowed(spec *Spec, args [][]byte) bool {
	access := spec.access(args)
	if access&KeyUnchecked != 0 {
		return true
	}
	need := access & (KeyRead | KeyWrite)
	if spec.KeysFn != nil {
		ok := true
		spec.KeysFn(args, func(k []byte) { ok = ok && r.keyAllowed(k, need) })
		return ok
	}
	ok := true
	spec.keys(args, func(k []byte) { ok = ok && r.keyAllowed(k, need) })
	return ok
}

// keyAllowed reports whether a pattern granting need matches key.
func (r *userRules) keyAllowed(key []byte, need KeyAccess) bool {
	for _, k := range r.keys {
		if k.perm&need == need && globMatch(k.pattern, string(key)) {
			return true
		}
	}
	return false
}

// The replies for a denial, in each place Redis gives one.
func (d denial) reply(spec *Spec, args [][]byte) string {
	if d == deniedKey {
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	}
	return "NOPERM this user has no permissions to run the '" + spec.fullName(args) + "' command"
}

func (d denial) execReply() string {
	const prefix = "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: "
	if d == deniedKey {
		return prefix + "no permission to touch the specified keys"
	}
	return prefix + "no permission to execute the command or subcommand"
}

func (d denial) scriptReply() string {
	if d == deniedKey {
		return "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments"
	}
	return "ERR The user executing the script can't run this command or subcommand"
}

// User is one ACL user. Its rules change as a whole (ACL SETUSER): the
// connections authenticated as it read them at each command.
type User struct {
	name  string
	rules atomic.Pointer[userRules]
}

func newUser(name string, r *userRules) *User {
	u := &User{name: name}
	u.rules.Store(r.seal())
	return u
}

// acl is the server's users. It is safe for concurrent use.
type acl struct {
	mu    sync.Mutex // guards users, and orders the changes to any user
	users map[string]*User
	// def is the default user: it is never deleted, and ACL LOAD changes
	// its rules in place, as new connections start as it.
	def *User
	// all is a user allowed everything, for commands a Raft replica
	// applies from the log: they were checked where they came in.
	all *User
	// none are the rules of a deleted user: a connection that
	// authenticated as it just before it went can run nothing any more.
	none *userRules
}

// defaultRules are the default user's rules with requirepass pass ("" for
// none): on, every key, channel and command.
func defaultRules(pass string) *userRules {
	r := newUserRules()
	for _, op := range []string{"+@all", "~*", "&*", "on"} {
		r.apply(op)
	}
	setPassword(r, pass)
	return r
}

// setPassword makes pass the only password of r, or none with nopass, as
// requirepass does to the default user.
func setPassword(r *userRules, pass string) {
	r.apply("resetpass")
	if pass == "" {
		r.apply("nopass")
	} else {
		r.apply(">" + pass)
	}
}

func newACL(requirePass string) *acl {
	a := &acl{users: map[string]*User{}}
	a.def = newUser("default", defaultRules(requirePass))
	a.users["default"] = a.def
	a.all = newUser("default", defaultRules(""))
	a.none = newUserRules().seal()
	return a
}

// authenticate returns the user name and pass log in as, or nil.
func (a *acl) authenticate(name, pass []byte) *User {
	a.mu.Lock()
	u := a.users[string(name)]
	a.mu.Unlock()
	if u == nil {
		return nil
	}
	r := u.rules.Load()
	if !r.on {
		return nil
	}
	if r.nopass {
		return u
	}
	h := sha256.Sum256(pass)
	ok := 0
	for _, p := range r.passwords {
		ok |= subtle.ConstantTimeCompare(h[:], p[:])
	}
	if ok == 1 {
		return u
	}
	return nil
}

// authRequired reports whether a connection that has not authenticated
// must: unless the default user is on and needs no password.
func (a *acl) authRequired() bool {
	r := a.def.rules.Load()
	return !r.nopass || !r.on
}

// setDefaultPassword makes pass the default user's password, as CONFIG SET
// requirepass does.
func (a *acl) setDefaultPassword(pass string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.def.rules.Load().clone()
	setPassword(r, pass)
	a.def.rules.Store(r.seal())
}

// setUser applies rules to a copy of the named user (a new one if there is
// none) and publishes it if they all apply. On failure it returns the rule
// and why.
func (a *acl) setUser(name string, rules []string) (string, *ruleError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.users[name]
	r := newUserRules()
	if u != nil {
		r = u.rules.Load().clone()
	}
	for _, op := range rules {
		if err := r.apply(op); err != nil {
			return op, err
		}
	}
	if u == nil {
		a.users[name] = newUser(name, r)
	} else {
		u.rules.Store(r.seal())
	}
	return "", nil
}

// deleteUsers deletes the named users and returns those that existed. The
// connections authenticated as them are the caller's to close.
func (a *acl) deleteUsers(names []string) (gone []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range names {
		if u := a.users[name]; u != nil {
			u.rules.Store(a.none)
			delete(a.users, name)
			gone = append(gone, name)
		}
	}
	return gone
}

// user returns the named user, or nil.
func (a *acl) user(name string) *User {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[name]
}

// sorted returns the users by name.
func (a *acl) sorted() []*User {
	a.mu.Lock()
	defer a.mu.Unlock()
	list := make([]*User, 0, len(a.users))
	for _, u := range a.users {
		list = append(list, u)
	}
	slices.SortFunc(list, func(x, y *User) int { return strings.Compare(x.name, y.name) })
	return list
}
