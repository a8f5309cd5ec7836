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
