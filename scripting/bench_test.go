package scripting

import (
	"context"
	"testing"
)

// kongScript is the per-request script of Kong 3.4+'s rate-limiting plugin
// ("redis" policy, kong/plugins/rate-limiting/policies/init.lua), sent with
// EVAL <script> 1 <key> <ttl>.
const kongScript = `
        local cache_key, expiration = KEYS[1], ARGV[1]
        local result_incr = redis.call("incr", cache_key)
        if result_incr == 1 then
          redis.call("expire", cache_key, expiration)
        end

        return result_incr - 1
      `

// redisRateScript is go-redis/redis_rate v10's allowN script.
const redisRateScript = `
-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])

local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst

local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

local tat = redis.call("GET", rate_limit_key)

if not tat then
  tat = now
else
  tat = tonumber(tat)
end

tat = math.max(tat, now)

local new_tat = tat + increment
local allow_at = new_tat - burst_offset

local diff = now - allow_at
local remaining = math.floor(diff / emission_interval + 0.5)

if remaining >= 0 then
  local reset_after = new_tat - now
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
  local retry_after = -1
  return {cost, remaining, tostring(retry_after), tostring(reset_after)}
end

remaining = 0
local reset_after = tat - now
local retry_after = diff * -1
return {0, remaining, tostring(retry_after), tostring(reset_after)}
`

func TestKongScript(t *testing.T) {
	e, db := newEngine(t), newFakeDB()
	key := []string{"ratelimit:r:s:1.2.3.4:1700000000000:minute"}
	for i := 0; i < 3; i++ {
		if got, want := eval(t, e, db, 2, kongScript, key, []string{"60"}), ":"+itoa(int64(i))+"\r\n"; got != want {
			t.Fatalf("run %d: got %q, want %q", i, got, want)
		}
	}
	if len(db.calls) != 4 || db.calls[1][0] != "expire" || db.calls[1][2] != "60" {
		t.Errorf("calls: %q", db.calls)
	}
}

func TestRedisRateScript(t *testing.T) {
	e, db := newEngine(t), newFakeDB()
	args := []string{"10", "10", "1", "1"} // burst 10, 10/s, cost 1
	got := eval(t, e, db, 2, redisRateScript, []string{"rate:k"}, args)
	// TIME is fixed at 1700000000.123456; the numbers are what C doubles
	// give (checked with gcc): reset_after is 0.099999994039536 with %.14g,
	// new_tat 216771200.223456 with %.17g.
	want := "*4\r\n:1\r\n:9\r\n$2\r\n-1\r\n$17\r\n0.099999994039536\r\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	set := db.calls[len(db.calls)-1]
	if set[0] != "SET" || set[2] != "216771200.223456" || set[4] != "1" {
		t.Errorf("SET call: %q", set)
	}
}

// fastCaller answers INCR and EXPIRE without a keyspace, so the benchmark
// measures the scripting layer.
type fastCaller struct{ n int64 }

var (
	replyIncr   = []byte(":42\r\n")
	replyFirst  = []byte(":1\r\n")
	replyExpire = []byte(":1\r\n")
)

func (c *fastCaller) Call(x *Exec, args [][]byte) []byte {
	x.MarkWrite()
	if len(args[0]) == 4 { // incr
		c.n++
		if c.n%60 == 1 {
			return replyFirst
		}
		return replyIncr
	}
	return replyExpire
}

func BenchmarkRunKongScript(b *testing.B) {
	e := New(Options{})
	s, err := e.Load([]byte(kongScript))
	if err != nil {
		b.Fatal(err)
	}
	w := writer(2)
	c := &fastCaller{}
	keys := bs([]string{"ratelimit:00000000-0000-0000-0000-000000000000:00000000-0000-0000-0000-000000000000:1.2.3.4:1700000000000:minute"})
	argv := bs([]string{"60"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w.Truncate(0)
		e.Run(ctx, s, keys, argv, c, w)
	}
}

// BenchmarkEvalKongScript adds what EVAL does before Run: find the script
// by its body.
func BenchmarkEvalKongScript(b *testing.B) {
	e := New(Options{})
	body := []byte(kongScript)
	w := writer(2)
	c := &fastCaller{}
	keys := bs([]string{"ratelimit:00000000-0000-0000-0000-000000000000:00000000-0000-0000-0000-000000000000:1.2.3.4:1700000000000:minute"})
	argv := bs([]string{"60"})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w.Truncate(0)
		s, _ := e.Load(body)
		e.Run(ctx, s, keys, argv, c, w)
	}
}

func BenchmarkRunKongScriptParallel(b *testing.B) {
	e := New(Options{})
	s, _ := e.Load([]byte(kongScript))
	keys := bs([]string{"ratelimit:00000000-0000-0000-0000-000000000000:00000000-0000-0000-0000-000000000000:1.2.3.4:1700000000000:minute"})
	argv := bs([]string{"60"})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := writer(2)
		c := &fastCaller{}
		for pb.Next() {
			w.Truncate(0)
			e.Run(context.Background(), s, keys, argv, c, w)
		}
	})
}

func BenchmarkRunRedisRateScript(b *testing.B) {
	e := New(Options{})
	s, _ := e.Load([]byte(redisRateScript))
	w := writer(2)
	db := newFakeDB()
	keys, argv := bs([]string{"rate:k"}), bs([]string{"10", "10", "1", "1"})
	b.ReportAllocs()
	for b.Loop() {
		w.Truncate(0)
		db.calls = db.calls[:0]
		e.Run(context.Background(), s, keys, argv, db, w)
	}
}
