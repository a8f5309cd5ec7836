package commands

import (
	"fmt"
	"strings"

	"github.com/throttleddb/throttled/store"
)

// Flags describe how the dispatcher treats a command.
type Flags uint16

const (
	// Write commands change the keyspace.
	Write Flags = 1 << iota
	// ReadOnly commands only read it.
	ReadOnly
	// Admin commands manage the server (CONFIG, DEBUG, FLUSHALL...).
	Admin
	// NoAuth commands may run before the connection has authenticated.
	NoAuth
	// NoQueue commands run at once inside MULTI instead of being queued.
	NoQueue
	// AllKeys commands work on the whole keyspace and lock every shard.
	AllKeys
	// Fast commands take constant time (COMMAND shows the flag).
	Fast
	// NoScript commands may not be called from a Lua script.
	NoScript
	// Script commands run a Lua script, whose redis.call is checked against
	// the caller's ACL: a Raft node sends the caller's rules with them.
	Script
	// SkipSlowlog commands are not logged in the SLOWLOG (EXEC: the
	// commands it runs are, one by one).
	SkipSlowlog
	// DenyOOM commands may add memory: under maxmemory-policy noeviction
	// they are refused once the store is over its bounds (Redis' denyoom).
	DenyOOM
	// NoMulti commands are refused inside MULTI (Redis' no-multi), which
	// then aborts the transaction: SHUTDOWN must not wait for EXEC.
	NoMulti
)

// Spec is one command.
type Spec struct {
	// Name is the lower-case name ("cl.throttle").
	Name string
	// Arity counts the name: n > 0 means exactly n, n < 0 at least -n.
	Arity int
	Flags Flags
	// FirstKey, LastKey and Step give the key positions as Redis' COMMAND
	// does: LastKey -1 is the last argument; FirstKey 0 means no keys.
	FirstKey, LastKey, Step int
	// KeysFn finds the keys of a command whose key positions depend on its
	// other arguments (Redis' "movablekeys"); it replaces FirstKey..Step.
	KeysFn func(args [][]byte, fn func(key []byte))
	// Locks finds the keys whose shards a call must hold when the server,
	// not the arguments, names them: THROTTLE.POLICY's tiers' keys come
	// from the policy table. They are locked as KeysFn's are, but are not
	// the call's keys for ACL patterns or COMMAND GETKEYS. It adds their
	// shards to l itself: a callback would cost the call an allocation.
	Locks func(s *Server, st *connState, args [][]byte, l *store.LockSet)
	// Prepare turns a call into the one that is logged and run, on the node
	// the client asked, before it is queued, proposed or run: POLICY
	// RELOAD reads the policy file there and becomes POLICY LOAD with its
	// text, so every replica applies the same policies. An error is the
	// reply text.
	Prepare func(s *Server, args [][]byte) ([][]byte, string)
	// AllKeysFn says which calls work on the whole keyspace and lock every
	// shard, for a command where only some do (DEBUG DIGEST, not DEBUG
	// DIGEST-VALUE or CLOCK); the AllKeys flag says it of every call. It
	// runs after the arity check.
	AllKeysFn func(args [][]byte) bool
	// Access is what the command does to its keys, as ACL key patterns
	// see it (Redis' key-spec flags); AccessFn replaces it for a command
	// whose access depends on its arguments (SET ... GET reads the key).
	Access   KeyAccess
	AccessFn func(args [][]byte) KeyAccess
	// Categories are the command's ACL categories: Redis 7.0's for the
	// commands Redis has, CatRatelimit for the throttle commands.
	Categories Category
	// Group and Summary are shown by COMMAND DOCS.
	Group, Summary string
	// Subcommands lists a container command's subcommands, so CLIENT LIST
	// can name the last command "client|list" as Redis 7 does, and ACL
	// rules can allow or deny each one ("-config|set").
	Subcommands []Sub
	// Secrets calls secret with the index of each argument that must never
	// be shown (a password), for the SLOWLOG; nil when there is none.
	Secrets func(args [][]byte, secret func(i int))
	// Run executes the command with its shards locked and writes one reply.
	Run func(c *Ctx)

	// aclID numbers the command in users' command sets (acl.go).
	aclID int
}

// Sub is a subcommand of a container command.
type Sub struct {
	// Name is the lower-case name ("list" of "client|list").
	Name       string
	Categories Category
	// Summary is shown by COMMAND DOCS for a subcommand Redis does not
	// have (Redis' own text is shown for the others); the container's
	// when empty.
	Summary string
	aclID   int
}

// KeyAccess is what a command does with its keys, which decides what an
// ACL key pattern must grant (%R~, %W~ or ~ for both).
type KeyAccess uint8

const (
	// KeyRead commands read the value (Redis' ACCESS flag).
	KeyRead KeyAccess = 1 << iota
	// KeyWrite commands insert, change or delete it.
	KeyWrite
	// KeyNamed commands only name the key (EXISTS, TYPE, WATCH): any
	// pattern that matches it will do.
	KeyNamed
	// KeyUnchecked keys are not checked at all, as Redis does not check
	// DEBUG's (its arguments are not key specs there).
	KeyUnchecked
)

// sub returns the index in Subcommands of the subcommand args name, or -1.
func (s *Spec) sub(args [][]byte) int {
	if len(args) > 1 {
		for i, sub := range s.Subcommands {
			if is(args[1], sub.Name) {
				return i
			}
		}
	}
	return -1
}

// fullName is the command's name as CLIENT LIST shows it: "name|sub" for a
// known subcommand of a container command.
func (s *Spec) fullName(args [][]byte) string {
	if i := s.sub(args); i >= 0 {
		return s.Name + "|" + s.Subcommands[i].Name
	}
	return s.Name
}

// access returns what a call with args does to its keys.
func (s *Spec) access(args [][]byte) KeyAccess {
	if s.AccessFn != nil {
		return s.AccessFn(args)
	}
	return s.Access
}

// allKeys reports whether a call with args locks every shard.
func (s *Spec) allKeys(args [][]byte) bool {
	return s.Flags&AllKeys != 0 || s.AllKeysFn != nil && s.AllKeysFn(args)
}

// keys calls fn for each key argument of args.
// Callers call KeysFn themselves when a spec has one: a closure handed to a
// func value escapes to the heap, and keeping that call out of keys keeps the
// common path (keys at fixed places) free of allocations.
func (s *Spec) keys(args [][]byte, fn func(key []byte)) {
	if s.FirstKey == 0 || len(args) <= s.FirstKey {
		return
	}
	last := s.LastKey
	if last < 0 {
		last = len(args) + last
	}
	for i := s.FirstKey; i <= last && i < len(args); i += s.Step {
		fn(args[i])
	}
}

// specs is the command table. Every command the server answers is listed
// here, once; groups follow Redis' documentation.
var specs = []*Spec{
	// connection
	{Name: "ping", Arity: -1, Flags: Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Returns the server's liveliness response.", Run: ping},
	{Name: "echo", Arity: 2, Flags: Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Returns the given string.", Run: echo},
	{Name: "quit", Arity: -1, Flags: NoScript | NoAuth | NoQueue | Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Closes the connection.", Run: quit},
	{Name: "reset", Arity: 1, Flags: NoScript | NoAuth | NoQueue | Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Resets the connection.", Run: reset},
	{Name: "hello", Arity: -1, Flags: NoScript | NoAuth | Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Handshakes with the server.", Secrets: helloSecrets, Run: hello},
	{Name: "auth", Arity: -2, Flags: NoScript | NoAuth | Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Authenticates the connection.", Secrets: authSecrets, Run: auth},
	{Name: "select", Arity: 2, Flags: Fast, Categories: CatFast | CatConnection, Group: "connection", Summary: "Changes the selected database.", Run: selectDB},
	{Name: "client", Arity: -2, Flags: NoScript, Categories: CatSlow, Group: "connection", Summary: "A container for client connection commands.",
		Subcommands: []Sub{
			{Name: "getname", Categories: CatSlow | CatConnection},
			{Name: "help", Categories: CatSlow | CatConnection},
			{Name: "id", Categories: CatSlow | CatConnection},
			{Name: "info", Categories: CatSlow | CatConnection},
			{Name: "kill", Categories: CatAdmin | CatSlow | CatDangerous | CatConnection},
			{Name: "list", Categories: CatAdmin | CatSlow | CatDangerous | CatConnection},
			{Name: "setinfo", Categories: CatSlow | CatConnection, Summary: "Sets information specific to the client or connection (as Redis 7.2)."},
			{Name: "setname", Categories: CatSlow | CatConnection},
		}, Run: client},

	// server
	{Name: "info", Arity: -1, Categories: CatSlow | CatDangerous, Group: "server", Summary: "Returns information and statistics about the server.", Run: info},
	{Name: "config", Arity: -2, Flags: NoScript | Admin, Categories: CatSlow, Group: "server", Summary: "A container for server configuration commands.",
		Subcommands: []Sub{
			{Name: "get", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "help", Categories: CatSlow},
			{Name: "resetstat", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "set", Categories: CatAdmin | CatSlow | CatDangerous},
		}, Secrets: configSecrets, Run: config},
	{Name: "command", Arity: -1, Categories: CatSlow | CatConnection, Group: "server", Summary: "Returns detailed information about all commands.",
		Subcommands: []Sub{
			{Name: "count", Categories: CatSlow | CatConnection},
			{Name: "docs", Categories: CatSlow | CatConnection},
			{Name: "getkeys", Categories: CatSlow | CatConnection},
			{Name: "getkeysandflags", Categories: CatSlow | CatConnection},
			{Name: "help", Categories: CatSlow | CatConnection},
			{Name: "info", Categories: CatSlow | CatConnection},
			{Name: "list", Categories: CatSlow | CatConnection},
		}, Run: command},
	{Name: "dbsize", Arity: 1, Flags: ReadOnly | Fast | AllKeys, Categories: CatKeyspace | CatRead | CatFast, Group: "server", Summary: "Returns the number of keys in the database.", Run: dbsize},
	{Name: "flushdb", Arity: -1, Flags: Write | AllKeys, Categories: CatKeyspace | CatWrite | CatSlow | CatDangerous, Group: "server", Summary: "Removes all keys from the current database.", Run: flushdb},
	{Name: "flushall", Arity: -1, Flags: Write | AllKeys, Categories: CatKeyspace | CatWrite | CatSlow | CatDangerous, Group: "server", Summary: "Removes all keys from all databases.", Run: flushall},
	{Name: "role", Arity: 1, Flags: NoScript | Fast, Categories: CatAdmin | CatFast | CatDangerous, Group: "server", Summary: "Returns the replication role.", Run: role},
	{Name: "time", Arity: 1, Flags: Fast, Categories: CatFast, Group: "server", Summary: "Returns the server time.", Run: timeCmd},
	{Name: "backup", Arity: 2, Flags: NoScript | Admin | AllKeys | NoMulti, Categories: CatAdmin | CatSlow | CatDangerous, Group: "server",
		Summary: "Writes a consistent copy of the keyspace as a new data folder at an absolute path.", Run: backup},
	{Name: "shutdown", Arity: -1, Flags: NoScript | Admin | NoMulti, Categories: CatAdmin | CatSlow | CatDangerous, Group: "server", Summary: "Stops accepting connections, closes the open ones and exits.", Run: shutdown},
	// SLOWLOG is refused in scripts, where Redis allows it: each replica of
	// a Raft group has its own log, so a script that read it could make
	// them diverge.
	{Name: "slowlog", Arity: -2, Flags: NoScript | Admin, Categories: CatSlow, Group: "server", Summary: "A container for slow log commands.",
		Subcommands: []Sub{
			{Name: "get", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "help", Categories: CatSlow},
			{Name: "len", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "reset", Categories: CatAdmin | CatSlow | CatDangerous},
		}, Run: slowlogCmd},
	// LATENCY, like SLOWLOG, is refused in scripts: each replica has its
	// own samples.
	{Name: "latency", Arity: -2, Flags: NoScript | Admin, Categories: CatSlow, Group: "server", Summary: "A container for latency diagnostics commands.",
		Subcommands: []Sub{
			{Name: "doctor", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "help", Categories: CatSlow},
			{Name: "history", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "latest", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "reset", Categories: CatAdmin | CatSlow | CatDangerous},
		}, Run: latencyCmd},
	{Name: "debug", Arity: -2, Flags: NoScript | Admin, KeysFn: debugKeys, AllKeysFn: debugAllKeys, Access: KeyUnchecked, Categories: CatAdmin | CatSlow | CatDangerous, Group: "server",
		Summary: "A container for debugging commands (DEBUG CLOCK, DIGEST, DIGEST-VALUE).", Run: debug},

	// generic keyspace
	{Name: "del", Arity: -2, Flags: Write, FirstKey: 1, LastKey: -1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatSlow, Group: "generic", Summary: "Deletes one or more keys.", Run: del},
	{Name: "unlink", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: -1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Deletes one or more keys.", Run: del},
	{Name: "exists", Arity: -2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: -1, Step: 1, Access: KeyNamed, Categories: CatKeyspace | CatRead | CatFast, Group: "generic", Summary: "Determines whether one or more keys exist.", Run: exists},
	{Name: "type", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyNamed, Categories: CatKeyspace | CatRead | CatFast, Group: "generic", Summary: "Determines the type of value stored at a key.", Run: typeCmd},
	{Name: "keys", Arity: 2, Flags: ReadOnly | AllKeys, Categories: CatKeyspace | CatRead | CatSlow | CatDangerous, Group: "generic", Summary: "Returns all key names that match a pattern.", Run: keys},
	{Name: "scan", Arity: -2, Flags: ReadOnly | AllKeys, Categories: CatKeyspace | CatRead | CatSlow, Group: "generic", Summary: "Iterates over the key names in the database.", Run: scan},
	{Name: "ttl", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead, Categories: CatKeyspace | CatRead | CatFast, Group: "generic", Summary: "Returns the expiration time in seconds of a key.", Run: ttl},
	{Name: "pttl", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead, Categories: CatKeyspace | CatRead | CatFast, Group: "generic", Summary: "Returns the expiration time in milliseconds of a key.", Run: pttl},
	{Name: "expire", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Sets the expiration time of a key in seconds.", Run: expire},
	{Name: "pexpire", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Sets the expiration time of a key in milliseconds.", Run: pexpire},
	{Name: "expireat", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Sets the expiration time of a key to a Unix timestamp.", Run: expireat},
	{Name: "pexpireat", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", Run: pexpireat},
	{Name: "persist", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatFast, Group: "generic", Summary: "Removes the expiration time of a key.", Run: persist},

	// string
	{Name: "get", Arity: 2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead, Categories: CatRead | CatString | CatFast, Group: "string", Summary: "Returns the string value of a key.", Run: get},
	{Name: "set", Arity: -3, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, Step: 1, AccessFn: setAccess, Categories: CatWrite | CatString | CatSlow, Group: "string", Summary: "Sets the string value of a key, ignoring its type.", Run: set},
	{Name: "setnx", Arity: 3, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Set the string value of a key only when the key doesn't exist.", Run: setnx},
	{Name: "setex", Arity: 4, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatWrite | CatString | CatSlow, Group: "string", Summary: "Sets the string value and expiration time of a key.", Run: setex},
	{Name: "psetex", Arity: 4, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyWrite, Categories: CatWrite | CatString | CatSlow, Group: "string", Summary: "Sets both string value and expiration time in milliseconds of a key.", Run: psetex},
	{Name: "getdel", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Returns the string value of a key after deleting the key.", Run: getdel},
	{Name: "mget", Arity: -2, Flags: ReadOnly | Fast, FirstKey: 1, LastKey: -1, Step: 1, Access: KeyRead, Categories: CatRead | CatString | CatFast, Group: "string", Summary: "Atomically returns the string values of one or more keys.", Run: mget},
	{Name: "mset", Arity: -3, Flags: Write | DenyOOM, FirstKey: 1, LastKey: -1, Step: 2, Access: KeyWrite, Categories: CatWrite | CatString | CatSlow, Group: "string", Summary: "Atomically creates or modifies the string values of one or more keys.", Run: mset},
	{Name: "incr", Arity: 2, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Increments the integer value of a key by one.", Run: incr},
	{Name: "incrby", Arity: 3, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Increments the integer value of a key by a number.", Run: incrby},
	{Name: "decr", Arity: 2, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Decrements the integer value of a key by one.", Run: decr},
	{Name: "decrby", Arity: 3, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatString | CatFast, Group: "string", Summary: "Decrements a number from the integer value of a key.", Run: decrby},

	// transactions
	{Name: "multi", Arity: 1, Flags: NoScript | NoQueue | Fast, Categories: CatFast | CatTransaction, Group: "transactions", Summary: "Starts a transaction.", Run: multi},
	{Name: "exec", Arity: 1, Flags: NoScript | NoQueue | SkipSlowlog, Categories: CatSlow | CatTransaction, Group: "transactions", Summary: "Executes all commands in a transaction.", Run: exec},
	{Name: "discard", Arity: 1, Flags: NoScript | NoQueue | Fast, Categories: CatFast | CatTransaction, Group: "transactions", Summary: "Discards a transaction.", Run: discard},
	{Name: "watch", Arity: -2, Flags: NoScript | NoQueue | Fast, FirstKey: 1, LastKey: -1, Step: 1, Access: KeyNamed, Categories: CatFast | CatTransaction, Group: "transactions", Summary: "Monitors changes to keys to determine the execution of a transaction.", Run: watch},
	{Name: "unwatch", Arity: 1, Flags: NoScript | Fast, Categories: CatFast | CatTransaction, Group: "transactions", Summary: "Forgets about watched keys of a transaction.", Run: unwatch},

	// rate limiting
	{Name: "cl.throttle", Arity: -1, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatFast, Group: "throttle", Summary: "Applies the generic cell rate algorithm (redis-cell compatible).", Run: clThrottle},
	{Name: "fwc.throttle", Arity: -4, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatFast, Group: "throttle", Summary: "Applies a fixed window counter.", Run: engineThrottle(famFWC)},
	{Name: "swl.throttle", Arity: -4, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatSlow, Group: "throttle", Summary: "Applies a sliding window log.", Run: engineThrottle(famSWL)},
	{Name: "swc.throttle", Arity: -4, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatFast, Group: "throttle", Summary: "Applies a sliding window counter.", Run: engineThrottle(famSWC)},
	{Name: "tb.throttle", Arity: -5, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatFast, Group: "throttle", Summary: "Applies a token bucket.", Run: engineThrottle(famTB)},
	{Name: "lb.throttle", Arity: -5, Flags: Write | DenyOOM | Fast, FirstKey: 1, LastKey: 1, Step: 1, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatFast, Group: "throttle", Summary: "Applies a leaky bucket (as a queue).", Run: engineThrottle(famLB)},
	{Name: "throttle.reset", Arity: -2, Flags: Write, FirstKey: 1, LastKey: -1, Step: 1, Locks: resetLocks, Access: KeyWrite, Categories: CatKeyspace | CatWrite | CatSlow, Group: "generic", Summary: "Resets rate limits: forgets the keys' history (on a mesh, on every node).", Run: throttleReset},
	{Name: "throttle.policy", Arity: -4, Flags: Write | DenyOOM | NoScript, Locks: (*Server).policyLocks, Access: KeyUnchecked, Secrets: policySecrets, Categories: CatWrite | CatRatelimit | CatSlow, Group: "throttle", Summary: "Decides a request by the rate-limit policies held in the store.", Run: throttlePolicy},
	{Name: "policy", Arity: -2, Flags: Write | NoScript | AllKeys, Categories: CatSlow, Group: "server", Summary: "A container for rate-limit policy commands.",
		Subcommands: []Sub{
			{Name: "del", Categories: CatAdmin | CatWrite | CatSlow | CatDangerous},
			{Name: "get", Categories: CatRead | CatSlow},
			{Name: "help", Categories: CatSlow},
			{Name: "list", Categories: CatRead | CatSlow},
			{Name: "load", Categories: CatAdmin | CatWrite | CatSlow | CatDangerous},
			{Name: "reload", Categories: CatAdmin | CatWrite | CatSlow | CatDangerous},
			{Name: "set", Categories: CatAdmin | CatWrite | CatSlow | CatDangerous},
		}, Prepare: policyPrepare, Run: policyCmd},
	{Name: "quota.lease", Arity: -6, Flags: Write | DenyOOM | NoScript, FirstKey: 1, LastKey: 1, Step: 1, Locks: leaseTableLocks, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatSlow, Group: "throttle", Summary: "Leases a batch of a rate limit's units to a holder (eager or lazy).", Run: quotaLease},
	{Name: "quota.return", Arity: 3, Flags: Write | NoScript, KeysFn: quotaReturnKeys, Locks: leaseTableLocks, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatSlow, Group: "throttle", Summary: "Ends a lease: credits back its unused units, or charges a lazy lease's use.", Run: quotaReturn},
	// Node-local and outside the keyspace (telemetry.go): neither Write nor
	// ReadOnly, so a replicated node runs them without the log.
	{Name: "telemetry.report", Arity: -5, Flags: NoScript, Categories: CatRatelimit | CatSlow, Group: "throttle", Summary: "Reports a client's requests and 429s to its group and returns the group's aggregate (never charges a quota).", Run: telemetryReport},
	{Name: "telemetry.get", Arity: 2, Flags: NoScript, Categories: CatRatelimit | CatSlow, Group: "throttle", Summary: "Returns a telemetry group's aggregate.", Run: telemetryGet},
	{Name: "throttle.all", Arity: -5, Flags: Write | DenyOOM, KeysFn: throttleAllKeys, Access: KeyRead | KeyWrite, Categories: CatWrite | CatRatelimit | CatSlow, Group: "throttle", Summary: "Checks several rate limits and consumes from all of them only if all allow.", Run: throttleAll},

	// scripting
	{Name: "eval", Arity: -3, Flags: Write | NoScript | Script, KeysFn: evalKeys, Access: KeyRead | KeyWrite, Categories: CatSlow | CatScripting, Group: "scripting", Summary: "Executes a server-side Lua script.", Run: eval},
	{Name: "evalsha", Arity: -3, Flags: Write | NoScript | Script, KeysFn: evalKeys, Access: KeyRead | KeyWrite, Categories: CatSlow | CatScripting, Group: "scripting", Summary: "Executes a server-side Lua script by SHA1 digest.", Run: evalsha},
	{Name: "eval_ro", Arity: -3, Flags: ReadOnly | NoScript | Script, KeysFn: evalKeys, Access: KeyRead, Categories: CatSlow | CatScripting, Group: "scripting", Summary: "Executes a read-only server-side Lua script.", Run: evalRO},
	{Name: "evalsha_ro", Arity: -3, Flags: ReadOnly | NoScript | Script, KeysFn: evalKeys, Access: KeyRead, Categories: CatSlow | CatScripting, Group: "scripting", Summary: "Executes a read-only server-side Lua script by SHA1 digest.", Run: evalshaRO},
	{Name: "script", Arity: -2, Flags: NoScript, Categories: CatSlow, Group: "scripting", Summary: "A container for Lua scripts management commands.",
		Subcommands: []Sub{
			{Name: "exists", Categories: CatSlow | CatScripting},
			{Name: "flush", Categories: CatSlow | CatScripting},
			{Name: "help", Categories: CatSlow | CatScripting},
			{Name: "kill", Categories: CatSlow | CatScripting},
			{Name: "load", Categories: CatSlow | CatScripting},
		}, Run: script},

	// access control (acl.go, aclcmd.go)
	{Name: "acl", Arity: -2, Flags: NoScript, Categories: CatSlow, Group: "server", Summary: "A container for Access List Control commands.",
		Subcommands: []Sub{
			{Name: "cat", Categories: CatSlow},
			{Name: "deluser", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "getuser", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "help", Categories: CatSlow},
			{Name: "list", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "load", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "save", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "setuser", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "users", Categories: CatAdmin | CatSlow | CatDangerous},
			{Name: "whoami", Categories: CatSlow},
		}, Secrets: aclSecrets, Run: aclCmd},

	// Raft replication (replication/raft answers it)
	{Name: "raft", Arity: -2, Flags: NoScript | NoQueue, Categories: CatSlow, Group: "cluster", Summary: "A container for Raft replication commands.",
		Subcommands: []Sub{
			{Name: "announce", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Records a member's RESP address (between members)."},
			{Name: "forward", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Proposes a command to the leader (between members)."},
			{Name: "help", Categories: CatSlow, Summary: "Shows helpful text about the different subcommands."},
			{Name: "join", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Adds a voter to the Raft group."},
			{Name: "leader", Categories: CatSlow, Summary: "Returns the leader's id and RESP address."},
			{Name: "members", Categories: CatSlow, Summary: "Returns this node's view of the members."},
			{Name: "remove", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Removes a member from the Raft group."},
			{Name: "snapshot", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Has the leader write a snapshot."},
			{Name: "transfer", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Hands leadership to another voter."},
		}, Run: raftCmd},

	// Active-active replication (replication/crdt answers it)
	{Name: "crdt", Arity: -2, Flags: NoScript | NoQueue, Categories: CatSlow, Group: "cluster", Summary: "A container for active-active (CRDT) replication commands.",
		Subcommands: []Sub{
			{Name: "help", Categories: CatSlow, Summary: "Shows helpful text about the different subcommands."},
			{Name: "peer", Categories: CatAdmin | CatSlow | CatDangerous, Summary: "Adds or removes a peer of the mesh."},
			{Name: "peers", Categories: CatSlow, Summary: "Returns the mesh's peers."},
		}, Run: crdtCmd},

	// cluster and sentinel: answered as Redis does with cluster support off.
	// Redis 7.0 (not a sentinel) calls SENTINEL an unknown command; we answer
	// it like the cluster commands, so clients that probe for a sentinel or a
	// cluster get one clear answer that neither is here.
	{Name: "cluster", Arity: -2, Categories: CatSlow, Group: "cluster", Summary: "Cluster support is disabled.", Run: clusterOff},
	{Name: "readonly", Arity: 1, Flags: Fast, Categories: CatFast | CatConnection, Group: "cluster", Summary: "Cluster support is disabled.", Run: clusterOff},
	{Name: "readwrite", Arity: 1, Flags: Fast, Categories: CatFast | CatConnection, Group: "cluster", Summary: "Cluster support is disabled.", Run: clusterOff},
	{Name: "asking", Arity: 1, Flags: Fast, Categories: CatFast | CatConnection, Group: "cluster", Summary: "Cluster support is disabled.", Run: clusterOff},
	{Name: "sentinel", Arity: -2, Categories: CatAdmin | CatSlow | CatDangerous, Group: "sentinel", Summary: "Sentinel support is disabled.", Run: clusterOff},
}

// maxNameLen bounds command names so lookups can lower-case into a fixed
// buffer without allocating.
const maxNameLen = 32

// table indexes specs by name.
type table map[string]*Spec

func newTable(list []*Spec) table {
	t := make(table, len(list))
	for _, s := range list {
		if s.Name == "" || s.Run == nil || s.Name != strings.ToLower(s.Name) || len(s.Name) > maxNameLen {
			panic(fmt.Sprintf("commands: malformed spec %q", s.Name))
		}
		if _, dup := t[s.Name]; dup {
			panic("commands: duplicate spec " + s.Name)
		}
		if s.FirstKey != 0 && s.Step == 0 {
			panic("commands: spec " + s.Name + " has keys but no step")
		}
		t[s.Name] = s
	}
	return t
}

// lookup finds a command by name, ignoring ASCII case, without allocating.
func (t table) lookup(name []byte) *Spec {
	if len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t[string(buf[:len(name)])]
}
