// Package scripting is the Lua side of EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and
// SCRIPT, with Redis 7.0's semantics and error texts. It runs scripts on
// gopher-lua (Lua 5.1) and depends only on it; the command layer does the
// locking, the flags and the command dispatch.
//
// # Using it from the command layer
//
//	s, err := eng.Load(body)             // EVAL, SCRIPT LOAD: compiled once, cached by SHA1
//	s, ok := eng.Lookup(sha)             // EVALSHA: !ok -> ReplyNoScript
//	ro, err := s.ReadOnly(isRO)          // EVAL_RO vs shebang flags; err -> ReplyWriteFlag
//	eng.Run(ctx, s, keys, argv, caller, &conn.W)
//
// Load returns *ReplyError for scripts that do not compile or have a bad
// shebang; write its Reply as the error. Run writes the script's reply or
// error itself, in the client's protocol, to a Writer (*resp.Writer is one;
// one that also implements RESP3Writer gets the RESP3-only types right).
// Numkeys parsing and its errors ("ERR Number of keys can't be greater than
// number of args", "ERR Number of keys can't be negative") belong to the
// command layer.
//
// The Caller runs each redis.call: Call(x, args) returns the whole reply in
// RESP for x.Proto(). It must act as the script's client: same database and
// user, the command's time frozen for the whole script, and it must refuse,
// with the Reply* texts as error replies, unknown commands
// (ReplyUnknownCommand), wrong arity (ReplyWrongArity), commands not allowed
// in scripts such as EVAL, MULTI or blocking ones (ReplyNotAllowed), and
// writes in a read-only run (ReplyReadOnly). The engine adds " script:
// <sha>, on @user_script:<line>." when redis.call raises such an error.
// Before executing a write, the Caller calls x.MarkWrite and skips the
// command if that returns false (the script is being killed).
//
// Scripts must be atomic: the command layer holds whatever lock keeps other
// clients' commands out for the whole Run. Commands from other clients that
// would wait for that lock should first check Busy and answer ReplyBusy
// while it is true, except SCRIPT KILL (Kill: nil -> +OK, ErrNotBusy ->
// ReplyNotBusy, ErrUnkillable -> ReplyUnkillable), SHUTDOWN NOSAVE and the
// connection commands Redis allows while busy. The Caller's own commands
// never get BUSY.
//
// # Sandbox
//
// Scripts see Lua's base library (without dofile, loadfile, print, require
// and module), table, string, math, coroutine, the redis library, cjson and
// bit (struct and cmsgpack are not provided). Every table reachable from the
// globals is a read-only view, as in Redis 7: reading an undefined global
// fails with "Script attempted to access nonexistent global variable 'x'",
// assigning any global or library field fails with "Attempt to modify a
// readonly table", and rawset, setmetatable and table.insert/remove/sort
// refuse those tables too. KEYS and ARGV are ordinary tables, refilled for
// each run; nothing a run does is visible to the next one. Interpreters are
// pooled (a sync.Pool) and reused, which is what makes a run cheap: a
// script is compiled once per Engine and bound once per interpreter.
// Recursion is limited to 1024 Lua calls and the value stack to 128K slots;
// past them a script fails ("stack overflow", "registry overflow").
//
// # Conversions
//
// A redis.call reply becomes: integer -> number, bulk -> string, null bulk
// or null array -> false, array -> table, status -> {ok=...}, error ->
// {err=...} (redis.call raises it, redis.pcall returns it). After
// redis.setresp(3) the Caller answers in RESP3 and map -> {map={...}}, set ->
// {set={k=true}}, null -> nil, double -> {double=n}, boolean -> true/false,
// big number -> {big_number=s}, verbatim -> {verbatim_string={format=,
// string=}}. Numbers passed to redis.call become "%.17g" text.
//
// The script's result becomes: number -> integer, truncated toward zero;
// string -> bulk; true -> 1 and false -> null (after redis.setresp(3):
// RESP3 booleans); nil -> null; a table with err -> error, with ok ->
// status, with double, big_number, verbatim_string, map or set -> those
// RESP3 types (RESP2 clients get Redis' RESP2 forms); any other table -> an
// array cut at the first nil. RESP3 types need a Writer that also
// implements RESP3Writer.
//
// tostring and tonumber behave as in Lua 5.1 (numbers print with "%.14g").
// Other places where gopher-lua turns numbers into text (concatenation,
// string.format("%s")) print non-integral numbers with Go's shortest form,
// and runtime and compile error messages are gopher-lua's ("attempt to index
// a non-table object(nil) with key 'x'", "syntax error near 'x'"), inside
// Redis' frame ("ERR user_script:1: ... script: <sha>, on @user_script:1.").
//
// # Determinism
//
// A script's effects depend only on its arguments and the data it reads:
// math.random is Redis' lrand48, reseeded to 0 before every run, there is no
// clock or OS access, collectgarbage reports 0, and pairs iterates in
// insertion order.
//
// # Busy scripts and SCRIPT KILL
//
// A run is busy once it has lasted longer than Options.TimeLimit (5s by
// default). Kill stops busy runs that have not called MarkWrite; gopher-lua
// checks for it before each instruction, so a tight loop stops at once, and
// pcall inside the script cannot swallow it. A stopped run's client gets
// "ERR Script killed by user with SCRIPT KILL... script: <sha>, on
// @user_script:<line>.". Cancelling Run's context stops a run the same way
// (before any write only).
package scripting
