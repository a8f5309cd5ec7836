package main

import (
	"strings"

	"github.com/throttleddb/throttled/bench"
)

// The benchmark cases. To compare a new throttled command, add a case here
// (Redis nil when redis-server has no counterpart) and, usually, a headline
// ratio against redis INCR below. Nothing else needs to change.

// side is one of the two servers under test.
type side int

const (
	throttledSide side = iota
	redisSide
)

func (s side) String() string {
	if s == throttledSide {
		return "throttled"
	}
	return "redis-server"
}

// shaArg in a Redis command is replaced by the SHA of bench/gcra.lua.
const shaArg = "{gcra.lua}"

// benchCase is one row of the table: a command for each server. __rand_int__
// is replaced by redis-benchmark (-r) with a random 12-digit number.
type benchCase struct {
	Name      string   // row label; also what -cases matches
	Throttled []string // command sent to throttled; nil: not measured there
	Redis     []string // command sent to redis-server; nil: not measured there
	// SameReply: before benchmarking, the command (on a fresh key) must get
	// the same reply from both servers. It guards the apples-to-apples claim.
	SameReply bool
}

var cases = []benchCase{
	{
		Name:      "PING",
		Throttled: []string{"PING"},
		Redis:     []string{"PING"},
		SameReply: true,
	},
	{
		Name:      "SET",
		Throttled: []string{"SET", "key:__rand_int__", "xxx"},
		Redis:     []string{"SET", "key:__rand_int__", "xxx"},
		SameReply: true,
	},
	{
		Name:      "GET",
		Throttled: []string{"GET", "key:__rand_int__"},
		Redis:     []string{"GET", "key:__rand_int__"},
		SameReply: true,
	},
	{
		Name:      "INCR",
		Throttled: []string{"INCR", "counter:__rand_int__"},
		Redis:     []string{"INCR", "counter:__rand_int__"},
		SameReply: true,
	},
	{
		// redis-server runs the same GCRA as a Lua script (bench/gcra.lua),
		// checked against redis-cell's vectors by gcra_lua_test.go.
		Name:      "CL.THROTTLE",
		Throttled: []string{"CL.THROTTLE", "k:__rand_int__", "15", "30", "60"},
		Redis:     []string{"EVALSHA", shaArg, "1", "k:__rand_int__", "15", "30", "60", "1"},
		SameReply: true,
	},
	{
		// Kong 3.4+ sends its rate-limiting script with EVAL on every
		// request; both servers get it the same way. It goes on one line
		// because redis-benchmark's CSV output prints the command unquoted.
		Name:      "KONG.EVAL",
		Throttled: []string{"EVAL", kongOneLine, "1", "kong:__rand_int__", "60"},
		Redis:     []string{"EVAL", kongOneLine, "1", "kong:__rand_int__", "60"},
		SameReply: true,
	},
	// The native algorithm commands have no redis-server counterpart; they
	// are compared with redis INCR, the cheapest write Redis does.
	{Name: "FWC.THROTTLE", Throttled: []string{"FWC.THROTTLE", "f:__rand_int__", "100", "60"}},
	{Name: "SWL.THROTTLE", Throttled: []string{"SWL.THROTTLE", "l:__rand_int__", "100", "60"}},
	// One hot key with a 10,000-per-minute log: once the log is full every
	// request is checked against 10,000 entries.
	{Name: "SWL.THROTTLE-10k-hot", Throttled: []string{"SWL.THROTTLE", "hot", "10000", "60"}},
	{Name: "SWC.THROTTLE", Throttled: []string{"SWC.THROTTLE", "c:__rand_int__", "100", "60", "1", "SUBWINDOWS", "5"}},
	// A bucket's key lives until it is full again. With 100,000 keys at
	// ~50,000 requests/s each key is hit every ~2 s, so these parameters
	// (a token or slot every 36 s) keep keys alive, as INCR's and the
	// window engines' are; the -new-keys case refills in 600 ms, so almost
	// every request finds its key expired and creates it again.
	{Name: "TB.THROTTLE", Throttled: []string{"TB.THROTTLE", "t:__rand_int__", "100", "100", "3600"}},
	{Name: "TB.THROTTLE-new-keys", Throttled: []string{"TB.THROTTLE", "n:__rand_int__", "5", "5", "3"}},
	{Name: "LB.THROTTLE", Throttled: []string{"LB.THROTTLE", "q:__rand_int__", "100", "100", "3600"}},
	{Name: "THROTTLE.ALL", Throttled: []string{"THROTTLE.ALL",
		"LIMIT", "CL", "a:__rand_int__", "9", "10", "1",
		"LIMIT", "SWC", "b:__rand_int__", "50", "10",
		"LIMIT", "FWC", "tenant", "1000000000", "60"}},
}

// kongOneLine is bench/kong.lua with its whitespace folded to single spaces.
var kongOneLine = strings.Join(strings.Fields(bench.KongLua), " ")

// ref names one measurement: a case on one server.
type ref struct {
	Case string
	Side side
}

// headline is a ratio reported under each pipeline's table.
type headline struct {
	Label    string
	Num, Den ref
}

var headlines = []headline{
	{"CL.THROTTLE / redis INCR", ref{"CL.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"CL.THROTTLE / redis EVALSHA GCRA", ref{"CL.THROTTLE", throttledSide}, ref{"CL.THROTTLE", redisSide}},
	{"Kong's EVAL / redis Kong's EVAL", ref{"KONG.EVAL", throttledSide}, ref{"KONG.EVAL", redisSide}},
	{"FWC.THROTTLE / redis INCR", ref{"FWC.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"SWL.THROTTLE / redis INCR", ref{"SWL.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"SWL.THROTTLE 10k hot key / redis INCR", ref{"SWL.THROTTLE-10k-hot", throttledSide}, ref{"INCR", redisSide}},
	{"SWC.THROTTLE / redis INCR", ref{"SWC.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"TB.THROTTLE / redis INCR", ref{"TB.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"TB.THROTTLE, every key new / redis INCR", ref{"TB.THROTTLE-new-keys", throttledSide}, ref{"INCR", redisSide}},
	{"LB.THROTTLE / redis INCR", ref{"LB.THROTTLE", throttledSide}, ref{"INCR", redisSide}},
	{"THROTTLE.ALL (3 limits) / redis INCR", ref{"THROTTLE.ALL", throttledSide}, ref{"INCR", redisSide}},
}
