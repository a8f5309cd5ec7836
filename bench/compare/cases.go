package main

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
}

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
}
