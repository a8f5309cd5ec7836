// Package bench holds the side-by-side benchmark runner for throttled (see
// bench/compare and bench/README.md) and the assets it needs.
package bench

import _ "embed"

// GCRALua is bench/gcra.lua: redis-cell's CL.THROTTLE written as a Redis Lua
// script. Called as EVALSHA <sha> 1 key max_burst count period [quantity], it
// replies with the same 5 integers as throttled's CL.THROTTLE, so redis-server
// running it is the apples-to-apples baseline for CL.THROTTLE.
//
//go:embed gcra.lua
var GCRALua string

// KongLua is bench/kong.lua: the per-request script of Kong 3.4+'s
// rate-limiting plugin ("redis" policy), which Kong sends on every request as
// EVAL <script> 1 <key> <ttl> (never EVALSHA), with single quotes here so it
// fits on a redis-benchmark command line. The benchmark sends it the same
// way to both servers.
//
//go:embed kong.lua
var KongLua string
