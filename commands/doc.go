// Package commands is the command table and the one path every command takes:
// look up the name, check arity, authentication and the user's ACL, queue it
// when a MULTI is open, lock the shards of its keys, read the clock once, run
// it, reply.
//
// Each command is one Spec in table.go: its name, its arity in Redis'
// convention (n > 0: exactly n arguments counting the name; n < 0: at least
// -n), flags, the positions of its keys and what it does to them, its ACL
// categories and its subcommands', and the function that runs it. Run
// functions validate every argument before their first write, so bad input
// gets an error reply and changes nothing; they read time only from the Tx
// they are given, so running the same (database, instant, arguments) again
// gives the same result — the property replication will rely on.
//
// Every run is timed and counted per command (stats.go: calls, errors, run
// time in a fixed histogram, the throttle commands' decisions), which INFO
// commandstats shows and CommandStats hands to package server's Prometheus
// collector, and a slow run goes to the SLOWLOG (slowlog.go, with Redis 7's rules for what
// is logged and which arguments are redacted).
//
// The families, one file each: connection, server (admin, info, config,
// command, slowlog), keys, strings, transactions (multi.go), CL.THROTTLE
// (throttle.go), the native algorithms (engines.go) and THROTTLE.ALL
// (throttle_all.go) over package engines, and Lua scripting (scripting.go)
// over package scripting, whose redis.call comes back through the same table
// and the same Run functions, at the script's instant and inside its locks.
// Before running anything, the dispatcher answers BUSY while a script is
// past its time limit, and MISCONF for writes after a persistence error.
//
// Access control (acl.go, aclcmd.go) is Redis 7.0's ACL: users with
// passwords kept as SHA-256, commands, categories and key patterns; the
// dispatcher checks them right after NOAUTH (NOPERM), and scripts and EXEC
// check their commands with the caller's rules. The ACL command and the
// ACL file (ACL LOAD, ACL SAVE) are in aclcmd.go.
//
// Error texts are Redis 7's (errors.go); CL.THROTTLE uses redis-cell's.
package commands
