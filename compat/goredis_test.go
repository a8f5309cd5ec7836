package compat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestGoRedis drives a node through go-redis v9, the way Go services use it:
// once with the client's default handshake (HELLO 3, so the connection speaks
// RESP3) and once with Protocol: 2 (HELLO 2, RESP2). Each case gets a fresh
// node whose debug clock starts at e2eClockStart, so TTLs and TIME are exact.
func TestGoRedis(t *testing.T) {
	for _, proto := range []int{3, 2} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			for _, tc := range e2eGoRedisSuite {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, e2eNewGoRedisEnv(t, proto, server.Config{}))
				})
			}
		})
	}
}

// e2eGoRedisSuite lists the cases TestGoRedis runs for each protocol.
var e2eGoRedisSuite = []struct {
	name string
	run  func(t *testing.T, e *e2eGoRedisEnv)
}{
	{"Handshake", e2eGoRedisHandshake},
	{"Connection", e2eGoRedisConnection},
	{"ClientName", e2eGoRedisClientName},
	{"Select", e2eGoRedisSelect},
	{"Auth", e2eGoRedisAuth},
	{"ACLUser", e2eGoRedisACLUser},
	{"Strings", e2eGoRedisStrings},
	{"Counters", e2eGoRedisCounters},
	{"Keyspace", e2eGoRedisKeyspace},
	{"Scan", e2eGoRedisScan},
	{"Glob", e2eGoRedisGlob},
	{"Expiry", e2eGoRedisExpiry},
	{"Flush", e2eGoRedisFlush},
	{"Server", e2eGoRedisServer},
	{"Command", e2eGoRedisCommand},
	{"Throttle", e2eGoRedisThrottle},
	{"CellVectors", e2eGoRedisCellVectors},
	{"Pipelined", e2eGoRedisPipelined},
	{"TxPipelined", e2eGoRedisTxPipelined},
	{"Watch", e2eGoRedisWatch},
	{"WatchContended", e2eGoRedisWatchContended},
	{"Errors", e2eGoRedisErrors},
	{"Shutdown", e2eGoRedisShutdown},
}

// e2eGoRedisEnv is one case's node and its default client.
type e2eGoRedisEnv struct {
	ctx   context.Context
	node  *server.Node
	proto int
	c     *redis.Client
	// writes counts the Write calls made on the connections of the clients
	// that e2eClient dials.
	writes atomic.Int64
}

func e2eNewGoRedisEnv(t *testing.T, proto int, cfg server.Config) *e2eGoRedisEnv {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	t.Cleanup(cancel)
	e := &e2eGoRedisEnv{ctx: ctx, node: e2eNode(t, cfg), proto: proto}
	if cfg.RequirePass == "" {
		e.c = e.client(t, nil)
	}
	return e
}

// client returns a client of the env's protocol, changed by mod, closed when
// the test ends.
func (e *e2eGoRedisEnv) client(t *testing.T, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{
		Addr:        e.node.Addr(),
		Protocol:    e.proto,
		DialTimeout: e2eIOWait,
		ReadTimeout: e2eIOWait,
		// Errors must surface, not be hidden behind retries, and a
		// context's deadline must bound a call.
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &e2eCountingConn{Conn: nc, writes: &e.writes}, nil
		},
	}
	if mod != nil {
		mod(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// e2eCountingConn counts the writes made on a connection.
type e2eCountingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *e2eCountingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// advance moves the node's debug clock forward by d.
func (e *e2eGoRedisEnv) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if err := e.c.Do(e.ctx, "DEBUG", "CLOCK", "ADVANCE", int64(d)).Err(); err != nil {
		t.Fatalf("DEBUG CLOCK ADVANCE %d: %v", int64(d), err)
	}
}

// e2eOK fails the test when a command failed.
func e2eOK(t *testing.T, cmd redis.Cmder) {
	t.Helper()
	if err := cmd.Err(); err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
}

// e2eEq fails the test unless got equals want.
func e2eEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}

// e2eVal returns a command's value and fails the test on an error.
func e2eVal[T any](t *testing.T, cmd interface {
	redis.Cmder
	Result() (T, error)
}) T {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return v
}

// e2eText returns the string reply of a Do and fails the test on an error.
func e2eText(t *testing.T, cmd *redis.Cmd) string {
	t.Helper()
	v, err := cmd.Text()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return v
}

// e2eInt returns the integer reply of a Do and fails the test on an error.
func e2eInt(t *testing.T, cmd *redis.Cmd) int64 {
	t.Helper()
	v, err := cmd.Int64()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return v
}

// e2eSlice returns the array reply of a Do and fails the test on an error.
func e2eSlice(t *testing.T, cmd *redis.Cmd) []any {
	t.Helper()
	v, err := cmd.Slice()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return v
}

// e2eWantRedisErr fails the test unless err is a reply error whose text is
// exactly want.
func e2eWantRedisErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("%s: got error %v (%T), want the reply error %q", what, err, err, want)
	}
	if rerr.Error() != want {
		t.Fatalf("%s: got reply error %q, want %q", what, rerr.Error(), want)
	}
}

// e2eClientLine returns the CLIENT LIST line of the connection with id.
func e2eClientLine(t *testing.T, list string, id int64) string {
	t.Helper()
	for l := range strings.Lines(list) {
		if strings.HasPrefix(l, "id="+strconv.FormatInt(id, 10)+" ") {
			return strings.TrimRight(l, "\n")
		}
	}
	t.Fatalf("CLIENT LIST has no line for id %d:\n%s", id, list)
	return ""
}

// e2eField returns the value of name=value in a CLIENT LIST line.
func e2eField(line, name string) string {
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	return "<missing>"
}

// The handshake go-redis does (HELLO, CLIENT SETINFO, maintenance
// notifications in auto mode) leaves the connection in the asked protocol,
// with the library recorded.
func e2eGoRedisHandshake(t *testing.T, e *e2eGoRedisEnv) {
	conn := e.c.Conn()
	defer conn.Close()
	id := e2eVal(t, conn.ClientID(e.ctx))
	if id <= 0 {
		t.Fatalf("CLIENT ID = %d", id)
	}
	line := e2eClientLine(t, e2eVal(t, conn.ClientList(e.ctx)), id)
	e2eEq(t, "resp", e2eField(line, "resp"), strconv.Itoa(e.proto))
	if lib := e2eField(line, "lib-name"); !strings.HasPrefix(lib, "go-redis(") {
		t.Fatalf("lib-name = %q, want go-redis(...) from CLIENT SETINFO\n%s", lib, line)
	}
	e2eEq(t, "lib-ver", e2eField(line, "lib-ver"), redis.Version())
	e2eEq(t, "db", e2eField(line, "db"), "0")
	e2eEq(t, "cmd", e2eField(line, "cmd"), "client|list")

	// HELLO with no version answers in the connection's protocol.
	hello, err := conn.Do(e.ctx, "HELLO").Result()
	if err != nil {
		t.Fatal(err)
	}
	var proto any
	switch h := hello.(type) {
	case map[any]any:
		if e.proto != 3 {
			t.Fatalf("HELLO answered a map on a RESP%d connection", e.proto)
		}
		proto = h["proto"]
	case []any:
		if e.proto != 2 {
			t.Fatalf("HELLO answered an array on a RESP%d connection", e.proto)
		}
		for i := 0; i+1 < len(h); i += 2 {
			if h[i] == "proto" {
				proto = h[i+1]
			}
		}
	default:
		t.Fatalf("HELLO answered %T", hello)
	}
	e2eEq(t, "HELLO proto", proto, any(int64(e.proto)))
}

func e2eGoRedisConnection(t *testing.T, e *e2eGoRedisEnv) {
	e2eEq(t, "PING", e2eVal(t, e.c.Ping(e.ctx)), "PONG")
	for _, s := range []string{"hello", "", "two words", "bin\x00\r\n\xff"} {
		e2eEq(t, "ECHO", e2eVal(t, e.c.Echo(e.ctx, s)), s)
	}
	e2eEq(t, "PING msg", e2eText(t, e.c.Do(e.ctx, "PING", "hi")), "hi")

	// QUIT closes only that connection; the pool dials a new one.
	conn := e.c.Conn()
	id := e2eVal(t, conn.ClientID(e.ctx))
	e2eEq(t, "QUIT", e2eText(t, conn.Do(e.ctx, "QUIT")), "OK")
	if err := conn.Ping(e.ctx).Err(); err == nil {
		t.Fatal("PING after QUIT succeeded on the same connection")
	}
	conn.Close()
	if got := e2eVal(t, e.c.ClientID(e.ctx)); got == id {
		t.Fatalf("CLIENT ID after QUIT = %d, the closed connection's", got)
	}
	e2eEq(t, "PING after QUIT", e2eVal(t, e.c.Ping(e.ctx)), "PONG")

	// RESET goes back to RESP2 and db 0 and drops the name.
	conn = e.c.Conn()
	defer conn.Close()
	e2eOK(t, conn.Select(e.ctx, 5))
	e2eOK(t, conn.ClientSetName(e.ctx, "before-reset"))
	e2eEq(t, "RESET", e2eText(t, conn.Do(e.ctx, "RESET")), "RESET")
	id = e2eVal(t, conn.ClientID(e.ctx))
	line := e2eClientLine(t, e2eVal(t, conn.ClientList(e.ctx)), id)
	e2eEq(t, "db after RESET", e2eField(line, "db"), "0")
	e2eEq(t, "name after RESET", e2eField(line, "name"), "")
	e2eEq(t, "resp after RESET", e2eField(line, "resp"), "2")
}

// Options.ClientName makes go-redis send CLIENT SETNAME (or HELLO SETNAME)
// on every new connection; a failure there would fail the connection.
func e2eGoRedisClientName(t *testing.T, e *e2eGoRedisEnv) {
	c := e.client(t, func(o *redis.Options) { o.ClientName = "e2e-app" })
	e2eEq(t, "CLIENT GETNAME", e2eVal(t, c.ClientGetName(e.ctx)), "e2e-app")
	conn := c.Conn()
	defer conn.Close()
	id := e2eVal(t, conn.ClientID(e.ctx))
	e2eEq(t, "name", e2eField(e2eClientLine(t, e2eVal(t, conn.ClientList(e.ctx)), id), "name"), "e2e-app")
	e2eEq(t, "CLIENT SETNAME", e2eVal(t, conn.ClientSetName(e.ctx, "renamed")), true)
	e2eEq(t, "CLIENT GETNAME", e2eVal(t, conn.ClientGetName(e.ctx)), "renamed")
	e2eWantRedisErr(t, "CLIENT SETNAME with a space", conn.ClientSetName(e.ctx, "a b").Err(),
		"ERR Client names cannot contain spaces, newlines or special characters.")

	// A connection without a name answers a nil.
	if err := e.c.ClientGetName(e.ctx).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("CLIENT GETNAME without a name: %v, want redis.Nil", err)
	}
}

// Options.DB makes go-redis SELECT on every new connection.
func e2eGoRedisSelect(t *testing.T, e *e2eGoRedisEnv) {
	c3 := e.client(t, func(o *redis.Options) { o.DB = 3 })
	e2eOK(t, c3.Set(e.ctx, "where", "db3", 0))
	e2eOK(t, e.c.Set(e.ctx, "where", "db0", 0))
	e2eEq(t, "GET in db 3", e2eVal(t, c3.Get(e.ctx, "where")), "db3")
	e2eEq(t, "GET in db 0", e2eVal(t, e.c.Get(e.ctx, "where")), "db0")
	e2eOK(t, c3.Set(e.ctx, "only3", "x", 0))
	e2eEq(t, "EXISTS only3 in db 0", e2eVal(t, e.c.Exists(e.ctx, "only3")), int64(0))
	e2eEq(t, "DBSIZE db 3", e2eVal(t, c3.DBSize(e.ctx)), int64(2))

	conn := c3.Conn()
	defer conn.Close()
	id := e2eVal(t, conn.ClientID(e.ctx))
	e2eEq(t, "db", e2eField(e2eClientLine(t, e2eVal(t, conn.ClientList(e.ctx)), id), "db"), "3")
	keyspace := e2eVal(t, c3.Info(e.ctx, "keyspace"))
	if !strings.Contains(keyspace, "db0:keys=1,expires=0") || !strings.Contains(keyspace, "db3:keys=2,expires=0") {
		t.Fatalf("INFO keyspace:\n%s", keyspace)
	}
	// A bad database fails the connection, so the client's commands fail.
	bad := e.client(t, func(o *redis.Options) { o.DB = 16 })
	e2eWantRedisErr(t, "PING with DB 16", bad.Ping(e.ctx).Err(), "ERR DB index is out of range")
}

// Options.Username for an ACL user limited to the throttle commands and its
// keys, as a gateway would run: go-redis logs in with it (HELLO AUTH or
// AUTH, and its CLIENT SETINFO, which the user may not run, does not stop
// it), the throttle commands work on its keys, and the rest get NOPERM.
func e2eGoRedisACLUser(t *testing.T, e *e2eGoRedisEnv) {
	e2eOK(t, e.c.Do(e.ctx, "ACL", "SETUSER", "gateway", "on", ">gw", "-@all", "+@ratelimit", "+ping", "+auth", "+hello", "~ratelimit:*"))
	gw := e.client(t, func(o *redis.Options) { o.Username, o.Password = "gateway", "gw" })
	e2eEq(t, "PING", e2eVal(t, gw.Ping(e.ctx)), "PONG")
	got := e2eVal(t, gw.Do(e.ctx, "CL.THROTTLE", "ratelimit:user1", 15, 30, 60))
	e2eEq(t, "CL.THROTTLE", fmt.Sprint(got), "[0 16 15 -1 2]")
	e2eWantRedisErr(t, "CL.THROTTLE on another key", gw.Do(e.ctx, "CL.THROTTLE", "user1", 15, 30, 60).Err(),
		"NOPERM this user has no permissions to access one of the keys used as arguments")
	e2eWantRedisErr(t, "GET", gw.Get(e.ctx, "ratelimit:user1").Err(),
		"NOPERM this user has no permissions to run the 'get' command")

	conn := gw.Conn()
	defer conn.Close()
	e2eOK(t, conn.Ping(e.ctx))
	list := e2eVal(t, e.c.ClientList(e.ctx))
	if !slices.ContainsFunc(slices.Collect(strings.Lines(list)), func(l string) bool { return e2eField(l, "user") == "gateway" }) {
		t.Fatalf("CLIENT LIST has no connection of user gateway:\n%s", list)
	}
	e2eWantRedisErr(t, "wrong password", e.client(t, func(o *redis.Options) { o.Username, o.Password = "gateway", "x" }).Ping(e.ctx).Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")
}

// Options.Password against a node with requirepass: HELLO AUTH on RESP3,
// and the same through HELLO 2; a wrong password fails the connection with
// Redis' WRONGPASS text; no password gets NOAUTH.
func e2eGoRedisAuth(t *testing.T, e *e2eGoRedisEnv) {
	e = e2eNewGoRedisEnv(t, e.proto, server.Config{RequirePass: "pw"})
	for _, user := range []string{"", "default"} {
		c := e.client(t, func(o *redis.Options) { o.Username, o.Password = user, "pw" })
		e2eEq(t, "PING user "+user, e2eVal(t, c.Ping(e.ctx)), "PONG")
		e2eOK(t, c.Set(e.ctx, "k", "v", 0))
		e2eEq(t, "GET", e2eVal(t, c.Get(e.ctx, "k")), "v")
		conn := c.Conn()
		id := e2eVal(t, conn.ClientID(e.ctx))
		line := e2eClientLine(t, e2eVal(t, conn.ClientList(e.ctx)), id)
		conn.Close()
		e2eEq(t, "resp", e2eField(line, "resp"), strconv.Itoa(e.proto))
		e2eEq(t, "user", e2eField(line, "user"), "default")
	}

	wrong := e.client(t, func(o *redis.Options) { o.Password = "wrong" })
	e2eWantRedisErr(t, "PING with a wrong password", wrong.Ping(e.ctx).Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")
	wrongUser := e.client(t, func(o *redis.Options) { o.Username, o.Password = "nobody", "pw" })
	e2eWantRedisErr(t, "PING as an unknown user", wrongUser.Ping(e.ctx).Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")

	none := e.client(t, nil)
	e2eWantRedisErr(t, "PING without a password", none.Ping(e.ctx).Err(), "NOAUTH Authentication required.")
	conn := none.Conn()
	defer conn.Close()
	e2eWantRedisErr(t, "AUTH wrong", conn.Auth(e.ctx, "wrong").Err(),
		"WRONGPASS invalid username-password pair or user is disabled.")
	e2eEq(t, "AUTH pw", e2eVal(t, conn.Auth(e.ctx, "pw")), "OK")
	e2eEq(t, "GET after AUTH", e2eVal(t, conn.Get(e.ctx, "k")), "v")
}

func e2eGoRedisStrings(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eEq(t, "SET", e2eVal(t, c.Set(ctx, "k", "v1", 0)), "OK")
	e2eEq(t, "GET", e2eVal(t, c.Get(ctx, "k")), "v1")
	if err := c.Get(ctx, "missing").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET missing: %v, want redis.Nil", err)
	}
	// Binary-safe values, and integers kept as the text that was sent.
	for _, v := range []string{"", "a\r\nb\x00c", "007", "-0", "+1", " 1", "9223372036854775808", "-9223372036854775808"} {
		e2eOK(t, c.Set(ctx, "bin", v, 0))
		e2eEq(t, "GET "+strconv.Quote(v), e2eVal(t, c.Get(ctx, "bin")), v)
	}

	// SET options through SetArgs.
	if err := c.SetArgs(ctx, "k", "v2", redis.SetArgs{Mode: "NX"}).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("SET NX on an existing key: %v, want redis.Nil", err)
	}
	if err := c.SetArgs(ctx, "new", "v", redis.SetArgs{Mode: "XX"}).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("SET XX on a missing key: %v, want redis.Nil", err)
	}
	e2eEq(t, "EXISTS new", e2eVal(t, c.Exists(ctx, "new")), int64(0))
	e2eEq(t, "SET XX EX", e2eVal(t, c.SetArgs(ctx, "k", "v2", redis.SetArgs{Mode: "XX", TTL: 100 * time.Second})), "OK")
	e2eEq(t, "PTTL", e2eVal(t, c.PTTL(ctx, "k")), 100*time.Second)
	e2eEq(t, "SET NX PX", e2eVal(t, c.SetArgs(ctx, "px", "v", redis.SetArgs{Mode: "NX", TTL: 1500 * time.Millisecond})), "OK")
	e2eEq(t, "PTTL px", e2eVal(t, c.PTTL(ctx, "px")), 1500*time.Millisecond)
	e2eEq(t, "SET GET", e2eVal(t, c.SetArgs(ctx, "k", "v3", redis.SetArgs{Get: true, KeepTTL: true})), "v2")
	e2eEq(t, "TTL after KEEPTTL", e2eVal(t, c.TTL(ctx, "k")), 100*time.Second)
	if err := c.SetArgs(ctx, "fresh", "v", redis.SetArgs{Get: true}).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("SET GET on a missing key: %v, want redis.Nil", err)
	}
	e2eEq(t, "GET fresh", e2eVal(t, c.Get(ctx, "fresh")), "v")
	start := time.Unix(0, e2eClockStart)
	e2eEq(t, "SET EXAT", e2eVal(t, c.SetArgs(ctx, "at", "v", redis.SetArgs{ExpireAt: start.Add(42 * time.Second)})), "OK")
	e2eEq(t, "TTL at", e2eVal(t, c.TTL(ctx, "at")), 42*time.Second)
	e2eEq(t, "SET PXAT", e2eVal(t, c.SetArgs(ctx, "pat", "v", redis.SetArgs{ExpireAt: start.Add(4321 * time.Millisecond)})), "OK")
	e2eEq(t, "PTTL pat", e2eVal(t, c.PTTL(ctx, "pat")), 4321*time.Millisecond)
	e2eEq(t, "SET plain drops the TTL", e2eVal(t, c.Set(ctx, "k", "v4", 0)), "OK")
	e2eEq(t, "TTL", e2eVal(t, c.TTL(ctx, "k")), time.Duration(-1))

	e2eEq(t, "SETNX new", e2eVal(t, c.SetNX(ctx, "nx", "1", 0)), true)
	e2eEq(t, "SETNX again", e2eVal(t, c.SetNX(ctx, "nx", "2", 0)), false)
	e2eEq(t, "GET nx", e2eVal(t, c.Get(ctx, "nx")), "1")
	// go-redis sends SetNX with an expiry as SET NX EX.
	e2eEq(t, "SetNX with TTL", e2eVal(t, c.SetNX(ctx, "nxttl", "1", 7*time.Second)), true)
	e2eEq(t, "TTL nxttl", e2eVal(t, c.TTL(ctx, "nxttl")), 7*time.Second)

	e2eEq(t, "SETEX", e2eVal(t, c.SetEx(ctx, "ex", "v", 5*time.Second)), "OK")
	e2eEq(t, "PTTL ex", e2eVal(t, c.PTTL(ctx, "ex")), 5*time.Second)
	e2eEq(t, "PSETEX", e2eText(t, c.Do(ctx, "PSETEX", "pex", 2500, "v")), "OK")
	e2eEq(t, "PTTL pex", e2eVal(t, c.PTTL(ctx, "pex")), 2500*time.Millisecond)

	e2eEq(t, "GETDEL", e2eVal(t, c.GetDel(ctx, "ex")), "v")
	e2eEq(t, "EXISTS after GETDEL", e2eVal(t, c.Exists(ctx, "ex")), int64(0))
	if err := c.GetDel(ctx, "ex").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GETDEL missing: %v, want redis.Nil", err)
	}

	e2eEq(t, "MSET", e2eVal(t, c.MSet(ctx, "m1", "a", "m2", 2, "m3", "")), "OK")
	got := e2eVal(t, c.MGet(ctx, "m1", "missing", "m2", "m3"))
	want := []any{"a", nil, "2", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("MGET = %#v, want %#v", got, want)
	}
}

func e2eGoRedisCounters(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eEq(t, "INCR new", e2eVal(t, c.Incr(ctx, "n")), int64(1))
	e2eEq(t, "INCRBY", e2eVal(t, c.IncrBy(ctx, "n", 41)), int64(42))
	e2eEq(t, "DECR", e2eVal(t, c.Decr(ctx, "n")), int64(41))
	e2eEq(t, "DECRBY", e2eVal(t, c.DecrBy(ctx, "n", 50)), int64(-9))
	e2eEq(t, "GET", e2eVal(t, c.Get(ctx, "n")), "-9")
	e2eEq(t, "DECR new", e2eVal(t, c.Decr(ctx, "d")), int64(-1))

	// INCR keeps the TTL.
	e2eOK(t, c.Set(ctx, "ttl", "10", 30*time.Second))
	e2eEq(t, "INCR", e2eVal(t, c.Incr(ctx, "ttl")), int64(11))
	e2eEq(t, "TTL after INCR", e2eVal(t, c.TTL(ctx, "ttl")), 30*time.Second)

	e2eOK(t, c.Set(ctx, "s", "abc", 0))
	e2eWantRedisErr(t, "INCR abc", c.Incr(ctx, "s").Err(), "ERR value is not an integer or out of range")
	e2eOK(t, c.Set(ctx, "lead", "01", 0))
	e2eWantRedisErr(t, "INCR 01", c.Incr(ctx, "lead").Err(), "ERR value is not an integer or out of range")
	e2eOK(t, c.Set(ctx, "big", "9223372036854775807", 0))
	e2eWantRedisErr(t, "INCR max", c.Incr(ctx, "big").Err(), "ERR increment or decrement would overflow")
	e2eEq(t, "GET big", e2eVal(t, c.Get(ctx, "big")), "9223372036854775807")
	e2eOK(t, c.Set(ctx, "small", "-9223372036854775808", 0))
	e2eWantRedisErr(t, "DECR min", c.Decr(ctx, "small").Err(), "ERR increment or decrement would overflow")
	e2eWantRedisErr(t, "INCRBY 1.5", c.Do(ctx, "INCRBY", "n", "1.5").Err(), "ERR value is not an integer or out of range")
}

func e2eGoRedisKeyspace(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eOK(t, c.MSet(ctx, "user:1", "a", "user:2", "b", "user:10", "c", "other", "d", "tmp1", "x", "tmp2", "y"))
	e2eEq(t, "EXISTS", e2eVal(t, c.Exists(ctx, "user:1", "user:1", "missing", "other")), int64(3))
	e2eEq(t, "TYPE string", e2eVal(t, c.Type(ctx, "user:1")), "string")
	e2eEq(t, "TYPE none", e2eVal(t, c.Type(ctx, "missing")), "none")
	e2eOK(t, c.Do(ctx, "CL.THROTTLE", "tat", 1, 1, 1))
	e2eEq(t, "TYPE of a TAT", e2eVal(t, c.Type(ctx, "tat")), "string")

	keys := e2eVal(t, c.Keys(ctx, "user:*"))
	slices.Sort(keys)
	e2eEq(t, "KEYS user:*", strings.Join(keys, ","), "user:1,user:10,user:2")
	keys = e2eVal(t, c.Keys(ctx, "user:?"))
	slices.Sort(keys)
	e2eEq(t, "KEYS user:?", strings.Join(keys, ","), "user:1,user:2")
	e2eEq(t, "KEYS none", len(e2eVal(t, c.Keys(ctx, "nomatch*"))), 0)
	e2eEq(t, "KEYS *", len(e2eVal(t, c.Keys(ctx, "*"))), 7)

	e2eEq(t, "DEL", e2eVal(t, c.Del(ctx, "user:1", "user:2", "missing")), int64(2))
	e2eEq(t, "UNLINK", e2eVal(t, c.Unlink(ctx, "tmp1", "tmp2", "tmp1")), int64(2))
	e2eEq(t, "DBSIZE", e2eVal(t, c.DBSize(ctx)), int64(3))
	e2eEq(t, "DEL again", e2eVal(t, c.Del(ctx, "user:1")), int64(0))
}

// Patterns with many '*' take time linear in the key, not exponential
// (Redis' fix for CVE-2022-36021). KEYS and SCAN hold every shard lock, so a
// slow match would stall the whole server. The node is not the env's: if the
// match hangs, its connection goroutine cannot be stopped, and the test
// must fail instead of waiting for it.
func e2eGoRedisGlob(t *testing.T, e *e2eGoRedisEnv) {
	n, err := servertest.Open(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() { n.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(e2eIOWait):
			t.Error("the node did not stop: a command is still running")
		}
	})
	ctx := e.ctx
	c := e.client(t, func(o *redis.Options) { o.Addr = n.Addr() })
	long := strings.Repeat("a", 64)
	e2eOK(t, c.Set(ctx, long, 1, 0))
	evil := strings.Repeat("*a", 32) + "*b"
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e2eEq(t, "KEYS "+evil, len(e2eVal(t, c.Keys(quick, evil))), 0)
	e2eEq(t, "KEYS *a...*", strings.Join(e2eVal(t, c.Keys(quick, strings.Repeat("*a", 32)+"*")), ","), long)
	page, _ := e2eVal2(t, c.Scan(quick, 0, evil, 1000))
	e2eEq(t, "SCAN MATCH "+evil, len(page), 0)
	e2eEq(t, "CONFIG GET *a*...", len(e2eVal(t, c.ConfigGet(quick, strings.Repeat("*a", 40)+"*z"))), 0)
	// Redis gives up on patterns nested deeper than 1000 stars.
	e2eEq(t, "KEYS *a*a... (1001 stars)", len(e2eVal(t, c.Keys(quick, strings.Repeat("*a", 1001)))), 0)
}

func e2eGoRedisScan(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	const n = 500
	want := map[string]bool{}
	pairs := make([]any, 0, 2*n)
	for i := range n {
		k := fmt.Sprintf("scan:%d", i)
		want[k] = true
		pairs = append(pairs, k, i)
	}
	e2eOK(t, c.MSet(ctx, pairs...))
	e2eOK(t, c.MSet(ctx, "other:1", 1, "other:2", 2))
	e2eOK(t, c.Do(ctx, "CL.THROTTLE", "scan:tat", 5, 1, 1))
	want["scan:tat"] = true

	for _, count := range []int64{0, 1, 7, 50, 1000} {
		got := map[string]bool{}
		it := c.Scan(ctx, 0, "scan:*", count).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			if !strings.HasPrefix(k, "scan:") {
				t.Fatalf("SCAN MATCH scan:* COUNT %d returned %q", count, k)
			}
			got[k] = true
		}
		if err := it.Err(); err != nil {
			t.Fatalf("SCAN COUNT %d: %v", count, err)
		}
		if len(got) != len(want) {
			t.Fatalf("SCAN COUNT %d found %d keys, want %d", count, len(got), len(want))
		}
	}

	// A manual loop sees the cursor go back to 0.
	var cursor uint64
	seen := 0
	for calls := 0; ; calls++ {
		if calls > 10*n {
			t.Fatal("SCAN does not terminate")
		}
		var page []string
		page, cursor = e2eVal2(t, c.Scan(ctx, cursor, "", 100))
		seen += len(page)
		if cursor == 0 {
			break
		}
	}
	if seen < n+3 {
		t.Fatalf("SCAN saw %d keys, want at least %d", seen, n+3)
	}

	count := 0
	it := c.ScanType(ctx, 0, "*", 100, "string").Iterator()
	for it.Next(ctx) {
		count++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	e2eEq(t, "SCAN TYPE string", count, n+3)
	it = c.ScanType(ctx, 0, "*", 100, "hash").Iterator()
	for it.Next(ctx) {
		t.Fatalf("SCAN TYPE hash returned %q", it.Val())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	e2eWantRedisErr(t, "SCAN COUNT abc", c.Do(ctx, "SCAN", 0, "COUNT", "abc").Err(), "ERR value is not an integer or out of range")
}

// e2eVal2 returns SCAN's page and cursor.
func e2eVal2(t *testing.T, cmd *redis.ScanCmd) ([]string, uint64) {
	t.Helper()
	keys, cursor, err := cmd.Result()
	if err != nil {
		t.Fatalf("%v: %v", cmd.Args(), err)
	}
	return keys, cursor
}

func e2eGoRedisExpiry(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eEq(t, "TTL missing", e2eVal(t, c.TTL(ctx, "k")), time.Duration(-2))
	e2eEq(t, "PTTL missing", e2eVal(t, c.PTTL(ctx, "k")), time.Duration(-2))
	e2eEq(t, "EXPIRE missing", e2eVal(t, c.Expire(ctx, "k", time.Minute)), false)
	e2eOK(t, c.Set(ctx, "k", "v", 0))
	e2eEq(t, "TTL no expiry", e2eVal(t, c.TTL(ctx, "k")), time.Duration(-1))
	e2eEq(t, "EXPIRE XX without TTL", e2eVal(t, c.ExpireXX(ctx, "k", time.Minute)), false)
	e2eEq(t, "EXPIRE GT without TTL", e2eVal(t, c.ExpireGT(ctx, "k", time.Minute)), false)
	e2eEq(t, "EXPIRE NX", e2eVal(t, c.ExpireNX(ctx, "k", 100*time.Second)), true)
	e2eEq(t, "TTL", e2eVal(t, c.TTL(ctx, "k")), 100*time.Second)
	e2eEq(t, "EXPIRE NX again", e2eVal(t, c.ExpireNX(ctx, "k", 10*time.Second)), false)
	e2eEq(t, "EXPIRE XX", e2eVal(t, c.ExpireXX(ctx, "k", 200*time.Second)), true)
	e2eEq(t, "EXPIRE GT smaller", e2eVal(t, c.ExpireGT(ctx, "k", 150*time.Second)), false)
	e2eEq(t, "EXPIRE GT equal", e2eVal(t, c.ExpireGT(ctx, "k", 200*time.Second)), false)
	e2eEq(t, "EXPIRE GT larger", e2eVal(t, c.ExpireGT(ctx, "k", 300*time.Second)), true)
	e2eEq(t, "EXPIRE LT larger", e2eVal(t, c.ExpireLT(ctx, "k", 400*time.Second)), false)
	e2eEq(t, "EXPIRE LT smaller", e2eVal(t, c.ExpireLT(ctx, "k", 50*time.Second)), true)
	e2eEq(t, "TTL", e2eVal(t, c.TTL(ctx, "k")), 50*time.Second)
	e2eEq(t, "PTTL", e2eVal(t, c.PTTL(ctx, "k")), 50*time.Second)
	e2eEq(t, "EXPIRE", e2eVal(t, c.Expire(ctx, "k", 60*time.Second)), true)

	start := time.Unix(0, e2eClockStart)
	e2eEq(t, "EXPIREAT", e2eVal(t, c.ExpireAt(ctx, "k", start.Add(90*time.Second))), true)
	e2eEq(t, "TTL after EXPIREAT", e2eVal(t, c.TTL(ctx, "k")), 90*time.Second)
	e2eEq(t, "PEXPIRE", e2eVal(t, c.PExpire(ctx, "k", 1500*time.Millisecond)), true)
	e2eEq(t, "PTTL after PEXPIRE", e2eVal(t, c.PTTL(ctx, "k")), 1500*time.Millisecond)
	// TTL rounds to the nearest second, as Redis does.
	e2eEq(t, "TTL of 1500 ms", e2eVal(t, c.TTL(ctx, "k")), 2*time.Second)
	e2eEq(t, "PEXPIREAT", e2eVal(t, c.PExpireAt(ctx, "k", start.Add(2750*time.Millisecond))), true)
	e2eEq(t, "PTTL after PEXPIREAT", e2eVal(t, c.PTTL(ctx, "k")), 2750*time.Millisecond)
	e2eEq(t, "PERSIST", e2eVal(t, c.Persist(ctx, "k")), true)
	e2eEq(t, "PERSIST again", e2eVal(t, c.Persist(ctx, "k")), false)
	e2eEq(t, "PERSIST missing", e2eVal(t, c.Persist(ctx, "missing")), false)
	e2eEq(t, "TTL after PERSIST", e2eVal(t, c.TTL(ctx, "k")), time.Duration(-1))

	// The debug clock drives expiry: a key lives through its last
	// millisecond and is gone one millisecond later.
	e2eEq(t, "PEXPIRE", e2eVal(t, c.PExpire(ctx, "k", 1000*time.Millisecond)), true)
	e.advance(t, 999*time.Millisecond)
	e2eEq(t, "PTTL with 1 ms left", e2eVal(t, c.PTTL(ctx, "k")), time.Millisecond)
	e.advance(t, time.Millisecond)
	e2eEq(t, "PTTL at the expiry", e2eVal(t, c.PTTL(ctx, "k")), time.Duration(0))
	e2eEq(t, "GET at the expiry", e2eVal(t, c.Get(ctx, "k")), "v")
	e.advance(t, time.Millisecond)
	e2eEq(t, "EXISTS after the expiry", e2eVal(t, c.Exists(ctx, "k")), int64(0))
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after the expiry: %v, want redis.Nil", err)
	}

	// An expiry in the past deletes the key.
	e2eOK(t, c.Set(ctx, "gone", "v", 0))
	e2eEq(t, "EXPIREAT in the past", e2eVal(t, c.ExpireAt(ctx, "gone", start)), true)
	e2eEq(t, "EXISTS", e2eVal(t, c.Exists(ctx, "gone")), int64(0))
	e2eWantRedisErr(t, "EXPIRE NX XX", c.Do(ctx, "EXPIRE", "k", 100, "NX", "XX").Err(),
		"ERR NX and XX, GT or LT options at the same time are not compatible")
	e2eWantRedisErr(t, "EXPIRE abc", c.Do(ctx, "EXPIRE", "k", "abc").Err(), "ERR value is not an integer or out of range")
}

func e2eGoRedisFlush(t *testing.T, e *e2eGoRedisEnv) {
	ctx := e.ctx
	c1 := e.client(t, func(o *redis.Options) { o.DB = 1 })
	e2eOK(t, e.c.MSet(ctx, "a", 1, "b", 2))
	e2eOK(t, c1.MSet(ctx, "a", 1, "b", 2, "c", 3))
	e2eEq(t, "DBSIZE 0", e2eVal(t, e.c.DBSize(ctx)), int64(2))
	e2eEq(t, "DBSIZE 1", e2eVal(t, c1.DBSize(ctx)), int64(3))
	e2eEq(t, "FLUSHDB", e2eVal(t, c1.FlushDB(ctx)), "OK")
	e2eEq(t, "DBSIZE 1 after FLUSHDB", e2eVal(t, c1.DBSize(ctx)), int64(0))
	e2eEq(t, "DBSIZE 0 after FLUSHDB in 1", e2eVal(t, e.c.DBSize(ctx)), int64(2))
	e2eOK(t, c1.Set(ctx, "x", 1, 0))
	e2eEq(t, "FLUSHDB ASYNC", e2eVal(t, e.c.FlushDBAsync(ctx)), "OK")
	e2eEq(t, "DBSIZE 0 after FLUSHDB ASYNC", e2eVal(t, e.c.DBSize(ctx)), int64(0))
	e2eOK(t, e.c.Set(ctx, "y", 1, 0))
	e2eEq(t, "FLUSHALL", e2eVal(t, e.c.FlushAll(ctx)), "OK")
	e2eEq(t, "DBSIZE 0 after FLUSHALL", e2eVal(t, e.c.DBSize(ctx)), int64(0))
	e2eEq(t, "DBSIZE 1 after FLUSHALL", e2eVal(t, c1.DBSize(ctx)), int64(0))
	e2eWantRedisErr(t, "FLUSHDB bogus", e.c.Do(ctx, "FLUSHDB", "bogus").Err(), "ERR syntax error")
}

func e2eGoRedisServer(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	// TIME shows the debug clock.
	e2eEq(t, "TIME", e2eVal(t, c.Time(ctx)).UnixNano(), e2eClockStart)
	e.advance(t, 1500*time.Microsecond+999)
	e2eEq(t, "TIME after 1.5 ms", e2eVal(t, c.Time(ctx)).UnixNano(), e2eClockStart+1500_000)
	now := e2eInt(t, c.Do(ctx, "DEBUG", "CLOCK"))
	e2eEq(t, "DEBUG CLOCK", now, e2eClockStart+1500_999)
	e2eEq(t, "DEBUG CLOCK SET", e2eInt(t, c.Do(ctx, "DEBUG", "CLOCK", "SET", e2eClockStart)), e2eClockStart)
	e2eWantRedisErr(t, "DEBUG CLOCK ADVANCE -1", c.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", -1).Err(),
		"ERR DEBUG CLOCK ADVANCE takes a non-negative number of nanoseconds")

	e2eOK(t, c.Set(ctx, "k", "v", time.Minute))
	all := e2eVal(t, c.Info(ctx))
	for _, want := range []string{"# Server\r\n", "redis_version:7.0.15\r\n", "redis_mode:standalone\r\n", "# Persistence\r\n", "loading:0\r\n", "# Keyspace\r\ndb0:keys=1,expires=1,avg_ttl=0\r\n"} {
		if !strings.Contains(all, want) {
			t.Fatalf("INFO lacks %q:\n%s", want, all)
		}
	}
	two := e2eVal(t, c.Info(ctx, "server", "keyspace"))
	if !strings.HasPrefix(two, "# Server\r\n") || !strings.Contains(two, "# Keyspace\r\n") || strings.Contains(two, "# Memory") {
		t.Fatalf("INFO server keyspace:\n%s", two)
	}
	m := e2eVal(t, c.InfoMap(ctx, "server"))
	e2eEq(t, "InfoMap redis_version", m["Server"]["redis_version"], "7.0.15")
	e2eEq(t, "InfoMap tcp_port", m["Server"]["tcp_port"], e.node.Addr()[strings.LastIndexByte(e.node.Addr(), ':')+1:])

	for param, want := range map[string]string{"save": "", "appendonly": "no", "databases": "16", "maxmemory": "0", "debug-clock": "yes"} {
		got := e2eVal(t, c.ConfigGet(ctx, param))
		if len(got) != 1 || got[param] != want {
			t.Fatalf("CONFIG GET %s = %v, want %s", param, got, want)
		}
	}
	e2eEq(t, "CONFIG GET nosuch", len(e2eVal(t, c.ConfigGet(ctx, "nosuchparam"))), 0)
	glob := e2eVal(t, c.ConfigGet(ctx, "max*"))
	if glob["maxmemory"] != "0" || glob["maxmemory-policy"] != "volatile-ttl" {
		t.Fatalf("CONFIG GET max* = %v", glob)
	}
	e2eWantRedisErr(t, "CONFIG SET nosuch", c.ConfigSet(ctx, "nosuchparam", "1").Err(),
		"ERR Unknown option or number of arguments for CONFIG SET - 'nosuchparam'")

	list := e2eVal(t, c.ClientList(ctx))
	if !strings.HasPrefix(list, "id=") || !strings.HasSuffix(list, "\n") || !strings.Contains(list, " cmd=client|list ") {
		t.Fatalf("CLIENT LIST:\n%s", list)
	}
	info := e2eVal(t, c.ClientInfo(ctx))
	if info.ID <= 0 || info.DB != 0 || info.LastCmd != "client|info" {
		t.Fatalf("CLIENT INFO = %+v", info)
	}
}

func e2eGoRedisCommand(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	cmds := e2eVal(t, c.Command(ctx))
	count := e2eInt(t, c.Do(ctx, "COMMAND", "COUNT"))
	e2eEq(t, "COMMAND COUNT", count, int64(len(cmds)))
	// COMMAND LIST names the subcommands too ("client|list"), as Redis 7
	// does; COMMAND COUNT counts the commands.
	names := e2eVal(t, c.CommandList(ctx, nil))
	top := 0
	for _, name := range names {
		parent, _, sub := strings.Cut(name, "|")
		if !sub {
			top++
		}
		if cmds[parent] == nil {
			t.Fatalf("COMMAND LIST has %q, COMMAND does not", name)
		}
	}
	e2eEq(t, "COMMAND LIST commands", int64(top), count)
	e2eEq(t, "COMMAND LIST has client|list", slices.Contains(names, "client|list"), true)
	get := cmds["get"]
	if get == nil || get.Arity != 2 || get.FirstKeyPos != 1 || get.LastKeyPos != 1 || get.StepCount != 1 || !get.ReadOnly {
		t.Fatalf("COMMAND get = %+v", get)
	}
	mset := cmds["mset"]
	if mset == nil || mset.Arity != -3 || mset.FirstKeyPos != 1 || mset.LastKeyPos != -1 || mset.StepCount != 2 || mset.ReadOnly {
		t.Fatalf("COMMAND mset = %+v", mset)
	}
	cl := cmds["cl.throttle"]
	if cl == nil || cl.FirstKeyPos != 1 || !slices.Contains(cl.Flags, "write") {
		t.Fatalf("COMMAND cl.throttle = %+v", cl)
	}
	for _, name := range []string{"ping", "set", "del", "scan", "expire", "multi", "exec", "watch", "hello", "auth", "select", "client", "config", "info", "debug", "time"} {
		if cmds[name] == nil {
			t.Fatalf("COMMAND lacks %q", name)
		}
	}
}

// CL.THROTTLE through Do, on a fresh key, an existing key and bad input.
func e2eGoRedisThrottle(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eThrottle(t, e, "user123 15 30 60", [5]int64{0, 16, 15, -1, 2})
	e2eThrottle(t, e, "user123 15 30 60", [5]int64{0, 16, 14, -1, 4})
	e2eThrottle(t, e, "USER123 15 30 60 0", [5]int64{0, 16, 16, -1, 0})
	e2eEq(t, "EXISTS after a peek", e2eVal(t, c.Exists(ctx, "USER123")), int64(0))
	// Case-insensitive command name.
	e2eEq(t, "cl.throttle", fmt.Sprint(e2eSlice(t, c.Do(ctx, "cl.throttle", "user123", 15, 30, 60))), "[0 16 13 -1 6]")

	e2eWantRedisErr(t, "too few", c.Do(ctx, "CL.THROTTLE", "k", 1, 2).Err(),
		"Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
	e2eWantRedisErr(t, "too many", c.Do(ctx, "CL.THROTTLE", "k", 1, 2, 3, 4, 5).Err(),
		"Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
	e2eWantRedisErr(t, "not a number", c.Do(ctx, "CL.THROTTLE", "k", "x1", 2, 3).Err(),
		"Cell error: Store error: Couldn't parse as integer: x1")
	e2eWantRedisErr(t, "zero rate", c.Do(ctx, "CL.THROTTLE", "k", 1, 0, 3).Err(),
		"Cell error: Store error: Zero rates are not supported")
	e2eWantRedisErr(t, "negative", c.Do(ctx, "CL.THROTTLE", "k", -1, 1, 3).Err(),
		"Cell error: Store error: Negative values are not supported")
	e2eOK(t, c.Set(ctx, "text", "abc", 0))
	e2eWantRedisErr(t, "on a text key", c.Do(ctx, "CL.THROTTLE", "text", 1, 1, 1).Err(),
		"ERR value is not an integer or out of range")
	e2eEq(t, "DBSIZE", e2eVal(t, c.DBSize(ctx)), int64(2))
}

// e2eThrottle runs CL.THROTTLE args and checks its five integers.
func e2eThrottle(t *testing.T, e *e2eGoRedisEnv, args string, want [5]int64) {
	t.Helper()
	cmd := []any{"CL.THROTTLE"}
	for _, a := range strings.Fields(args) {
		cmd = append(cmd, a)
	}
	got, err := e.c.Do(e.ctx, cmd...).Slice()
	if err != nil {
		t.Fatalf("CL.THROTTLE %s: %v", args, err)
	}
	if len(got) != 5 {
		t.Fatalf("CL.THROTTLE %s = %#v, want 5 integers", args, got)
	}
	for i, v := range got {
		if n, ok := v.(int64); !ok || n != want[i] {
			t.Fatalf("CL.THROTTLE %s = %v, want %v", args, got, want)
		}
	}
}

// e2eCellStep is one row of a redis-cell test vector
// (shared/reference/redis-cell.md section 4, column "redis-cell 0.4/0.5").
type e2eCellStep struct {
	at   int64  // ms since the scenario's first call
	args string // after CL.THROTTLE
	want [5]int64
}

var e2eCellVectors = []struct {
	name  string
	steps []e2eCellStep
}{
	{"V01", []e2eCellStep{
		{0, "user123 15 30 60", [5]int64{0, 16, 15, -1, 2}},
	}},
	{"V03", []e2eCellStep{
		{0, "user123 0 1 2 1", [5]int64{0, 1, 0, -1, 2}},
		{10, "user123 0 1 2 1", [5]int64{1, 1, 0, 2, 2}},
		{2010, "user123 0 1 2 1", [5]int64{0, 1, 0, -1, 2}},
	}},
	{"V04", []e2eCellStep{
		{0, "foo 4 1 1 6", [5]int64{1, 5, 5, -1, 0}},
		{0, "foo 4 1 1", [5]int64{0, 5, 4, -1, 1}},
		{0, "foo 4 1 1", [5]int64{0, 5, 3, -1, 2}},
		{0, "foo 4 1 1", [5]int64{0, 5, 2, -1, 3}},
		{0, "foo 4 1 1", [5]int64{0, 5, 1, -1, 4}},
		{0, "foo 4 1 1", [5]int64{0, 5, 0, -1, 5}},
		{0, "foo 4 1 1", [5]int64{1, 5, 0, 1, 5}},
		{3000, "foo 4 1 1 1", [5]int64{0, 5, 2, -1, 3}},
		{3100, "foo 4 1 1 1", [5]int64{0, 5, 1, -1, 4}},
		{4000, "foo 4 1 1 1", [5]int64{0, 5, 1, -1, 4}},
		{8000, "foo 4 1 1 1", [5]int64{0, 5, 4, -1, 1}},
		{9500, "foo 4 1 1 1", [5]int64{0, 5, 4, -1, 1}},
		{9500, "foo 4 1 1 0", [5]int64{0, 5, 4, -1, 1}},
		{9500, "foo 4 1 1 2", [5]int64{0, 5, 2, -1, 3}},
		{9500, "foo 4 1 1 5", [5]int64{1, 5, 2, 3, 3}},
	}},
}

// e2eGoRedisCellVectors replays redis-cell's vectors V01, V03 and V04 on the
// debug clock. After each call it checks the key as redis-cell leaves it:
// an allowed call stores the TAT max(tat, now) + T*quantity in decimal
// nanoseconds with PTTL floor_ms(TAT - now); a limited call changes nothing.
func e2eGoRedisCellVectors(t *testing.T, e *e2eGoRedisEnv) {
	for _, v := range e2eCellVectors {
		t.Run(v.name, func(t *testing.T) {
			ctx, c := e.ctx, e.c
			e2eOK(t, c.FlushAll(ctx))
			e2eOK(t, c.Do(ctx, "DEBUG", "CLOCK", "SET", e2eClockStart))
			var tat, expMs int64 // the model of the key; tat 0 means no key
			at := int64(0)
			for i, s := range v.steps {
				e.advance(t, time.Duration(s.at-at)*time.Millisecond)
				at = s.at
				now := e2eClockStart + at*1e6
				nowMs := now / 1e6
				if tat != 0 && nowMs > expMs {
					tat = 0 // expired
				}
				e2eThrottle(t, e, s.args, s.want)

				f := strings.Fields(s.args)
				key := f[0]
				count, _ := strconv.ParseInt(f[2], 10, 64)
				period, _ := strconv.ParseInt(f[3], 10, 64)
				q := int64(1)
				if len(f) == 5 {
					q, _ = strconv.ParseInt(f[4], 10, 64)
				}
				if s.want[0] == 0 {
					next := max(tat, now) + period*1e9/count*q
					if ttl := (next - now) / 1e6; ttl > 0 {
						tat, expMs = next, nowMs+ttl
					} else {
						tat = 0
					}
				}
				step := fmt.Sprintf("step %d (t=%d ms, %s)", i+1, s.at, s.args)
				if tat == 0 {
					e2eEq(t, step+": PTTL", e2eVal(t, c.PTTL(ctx, key)), time.Duration(-2))
					if err := c.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
						t.Fatalf("%s: GET: %v, want redis.Nil", step, err)
					}
					continue
				}
				e2eEq(t, step+": PTTL", e2eVal(t, c.PTTL(ctx, key)), time.Duration(expMs-nowMs)*time.Millisecond)
				e2eEq(t, step+": GET", e2eVal(t, c.Get(ctx, key)), strconv.FormatInt(tat, 10))
			}
		})
	}
	// V01's note: PTTL right after the first call is 2000.
	e2eOK(t, e.c.FlushAll(e.ctx))
	e2eThrottle(t, e, "user123 15 30 60", [5]int64{0, 16, 15, -1, 2})
	e2eEq(t, "V01 PTTL", e2eVal(t, e.c.PTTL(e.ctx, "user123")), 2000*time.Millisecond)
}

// Pipelined sends its commands in one write and gets every reply in order,
// errors included.
func e2eGoRedisPipelined(t *testing.T, e *e2eGoRedisEnv) {
	ctx := e.ctx
	c := e.client(t, func(o *redis.Options) { o.PoolSize = 1 })
	// go-redis keeps pipelines on a pool of their own: a first pipeline
	// makes it dial and do its handshake, so only the second is measured.
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var incrs []*redis.IntCmd
	var throttles []*redis.Cmd
	var bad *redis.IntCmd
	var get *redis.StringCmd
	before := e.writes.Load()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "s", "text", 0)
		for i := range n {
			incrs = append(incrs, p.Incr(ctx, "counter"))
			if i%10 == 0 {
				throttles = append(throttles, p.Do(ctx, "CL.THROTTLE", "pipe", 100, 1, 1))
			}
		}
		bad = p.Incr(ctx, "s")
		get = p.Get(ctx, "counter")
		return nil
	})
	e2eEq(t, "writes for one pipeline", e.writes.Load()-before, int64(1))
	e2eWantRedisErr(t, "Pipelined", err, "ERR value is not an integer or out of range")
	e2eEq(t, "replies", len(cmds), n+n/10+3)
	for i, cmd := range incrs {
		e2eEq(t, "INCR", e2eVal(t, cmd), int64(i+1))
	}
	for i, cmd := range throttles {
		got := fmt.Sprint(e2eSlice(t, cmd))
		e2eEq(t, "CL.THROTTLE "+strconv.Itoa(i), got, fmt.Sprintf("[0 101 %d -1 %d]", 100-i, i+1))
	}
	e2eWantRedisErr(t, "INCR s", bad.Err(), "ERR value is not an integer or out of range")
	e2eEq(t, "GET counter", e2eVal(t, get), strconv.Itoa(n))

	// A pipeline of GETs whose replies exceed one buffer.
	big := strings.Repeat("x", 100<<10)
	e2eOK(t, c.Set(ctx, "big", big, 0))
	var gets []*redis.StringCmd
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range 20 {
			gets = append(gets, p.Get(ctx, "big"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gets {
		if v := e2eVal(t, g); v != big {
			t.Fatalf("GET big returned %d bytes", len(v))
		}
	}
}

// TxPipelined sends MULTI ... EXEC: the commands run together and each gets
// its own result; a command that fails at run time does not stop the others,
// one that fails to queue aborts the transaction.
func e2eGoRedisTxPipelined(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	e2eOK(t, c.Set(ctx, "s", "text", 0))
	var incr, bad *redis.IntCmd
	var get *redis.StringCmd
	var thr *redis.Cmd
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "a", 10, 0)
		incr = p.IncrBy(ctx, "a", 5)
		bad = p.Incr(ctx, "s")
		get = p.Get(ctx, "a")
		thr = p.Do(ctx, "CL.THROTTLE", "tx", 1, 1, 1)
		return nil
	})
	e2eWantRedisErr(t, "TxPipelined", err, "ERR value is not an integer or out of range")
	e2eEq(t, "commands", len(cmds), 5)
	e2eEq(t, "INCRBY", e2eVal(t, incr), int64(15))
	e2eWantRedisErr(t, "INCR s", bad.Err(), "ERR value is not an integer or out of range")
	e2eEq(t, "GET", e2eVal(t, get), "15")
	e2eEq(t, "CL.THROTTLE", fmt.Sprint(e2eSlice(t, thr)), "[0 2 1 -1 1]")

	cmds, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "b", 1, 0)
		p.Do(ctx, "NOSUCH", "x")
		p.Incr(ctx, "b")
		return nil
	})
	const abort = "EXECABORT Transaction discarded because of previous errors."
	e2eWantRedisErr(t, "TxPipelined with an unknown command", err, abort)
	e2eWantRedisErr(t, "SET in the aborted transaction", cmds[0].Err(), abort)
	e2eWantRedisErr(t, "INCR in the aborted transaction", cmds[2].Err(), abort)
	e2eEq(t, "EXISTS b", e2eVal(t, c.Exists(ctx, "b")), int64(0))

	// Every command in EXEC sees the same instant, and SELECT inside it
	// moves the rest of the transaction to another database.
	cmds, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Select(ctx, 2)
		p.Set(ctx, "in2", "x", time.Second)
		p.PTTL(ctx, "in2")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e2eEq(t, "PTTL in EXEC", e2eVal(t, cmds[2].(*redis.DurationCmd)), time.Second)
	c2 := e.client(t, func(o *redis.Options) { o.DB = 2 })
	e2eEq(t, "GET in2 in db 2", e2eVal(t, c2.Get(ctx, "in2")), "x")
}

// Watch: a transaction whose watched key another client changes fails with
// TxFailedErr and writes nothing; without interference it commits.
func e2eGoRedisWatch(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	other := e.client(t, nil)
	e2eOK(t, c.Set(ctx, "bal", 10, 0))
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, "bal").Int()
		if err != nil {
			return err
		}
		e2eOK(t, other.Set(ctx, "bal", 100, 0))
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "bal", n+1, 0)
			p.Set(ctx, "side", "effect", 0)
			return nil
		})
		return err
	}, "bal")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("Watch with a concurrent write: %v, want redis.TxFailedErr", err)
	}
	e2eEq(t, "GET bal", e2eVal(t, c.Get(ctx, "bal")), "100")
	e2eEq(t, "EXISTS side", e2eVal(t, c.Exists(ctx, "side")), int64(0))

	// A CL.THROTTLE on the watched key is a write too.
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		e2eOK(t, other.Do(ctx, "CL.THROTTLE", "limit", 5, 1, 1))
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "side", "effect", 0)
			return nil
		})
		return err
	}, "limit")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("Watch with a concurrent CL.THROTTLE: %v, want redis.TxFailedErr", err)
	}

	// Expiry of a watched key aborts too (Redis 7).
	e2eOK(t, c.Set(ctx, "short", 1, time.Second))
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		e.advance(t, 1001*time.Millisecond)
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "side", "effect", 0)
			return nil
		})
		return err
	}, "short")
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("Watch of a key that expired: %v, want redis.TxFailedErr", err)
	}
	e2eEq(t, "EXISTS side", e2eVal(t, c.Exists(ctx, "side")), int64(0))

	err = c.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Get(ctx, "bal").Int()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "bal", n+1, 0)
			return nil
		})
		return err
	}, "bal")
	if err != nil {
		t.Fatalf("Watch without interference: %v", err)
	}
	e2eEq(t, "GET bal", e2eVal(t, c.Get(ctx, "bal")), "101")

	// After UNWATCH a write by another client no longer aborts EXEC.
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		e2eEq(t, "UNWATCH", e2eVal(t, tx.Unwatch(ctx)), "OK")
		e2eOK(t, other.Set(ctx, "bal", 200, 0))
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "bal")
			return nil
		})
		return err
	}, "bal")
	if err != nil {
		t.Fatalf("Watch after UNWATCH: %v", err)
	}
	e2eEq(t, "GET bal", e2eVal(t, c.Get(ctx, "bal")), "201")
}

// SHUTDOWN closes the connection without a reply, which go-redis takes as
// success, and stops the node.
func e2eGoRedisShutdown(t *testing.T, e *e2eGoRedisEnv) {
	e2eWantRedisErr(t, "SHUTDOWN bogus", e.c.Do(e.ctx, "SHUTDOWN", "bogus").Err(), "ERR syntax error")
	if err := e.c.ShutdownNoSave(e.ctx).Err(); err != nil {
		t.Fatalf("SHUTDOWN NOSAVE: %v", err)
	}
	select {
	case <-e.node.Done():
	case <-time.After(e2eIOWait):
		t.Fatal("the node still serves after SHUTDOWN")
	}
}

// Optimistic increments from many clients at once: every increment lands
// exactly once.
func e2eGoRedisWatchContended(t *testing.T, e *e2eGoRedisEnv) {
	ctx := e.ctx
	const workers, each = 8, 25
	c := e.client(t, func(o *redis.Options) { o.PoolSize = workers })
	var wg sync.WaitGroup
	var retries atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				for {
					err := c.Watch(ctx, func(tx *redis.Tx) error {
						n, err := tx.Get(ctx, "shared").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
							p.Set(ctx, "shared", n+1, 0)
							return nil
						})
						return err
					}, "shared")
					if errors.Is(err, redis.TxFailedErr) {
						retries.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e2eEq(t, "GET shared", e2eVal(t, c.Get(ctx, "shared")), strconv.Itoa(workers*each))
	t.Logf("%d transactions retried", retries.Load())
}

// Errors reach go-redis as redis.Error with Redis' exact text.
func e2eGoRedisErrors(t *testing.T, e *e2eGoRedisEnv) {
	ctx, c := e.ctx, e.c
	conn := c.Conn()
	defer conn.Close()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"NOSUCH", "a", "b", "c"}, "ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' 'c' "},
		{[]any{"nosuch"}, "ERR unknown command 'nosuch', with args beginning with: "},
		// Redis formats these with C's %s, which stops at a NUL byte.
		{[]any{"PI\x00G", "a\x00b", "c"}, "ERR unknown command 'PI', with args beginning with: 'a' 'c' "},
		{[]any{"CLIENT", "X\x00Y"}, "ERR unknown subcommand 'X'. Try CLIENT HELP."},
		{[]any{"NOSUCH", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"}, "ERR unknown command 'NOSUCH', with args beginning with: '" + strings.Repeat("a", 100) + "' '" + strings.Repeat("b", 25) + "' "},
		{[]any{"GET"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"GET", "a", "b"}, "ERR wrong number of arguments for 'get' command"},
		{[]any{"ECHO"}, "ERR wrong number of arguments for 'echo' command"},
		{[]any{"SET", "k", "v", "EX", 0}, "ERR invalid expire time in 'set' command"},
		{[]any{"SET", "k", "v", "EX", "abc"}, "ERR value is not an integer or out of range"},
		{[]any{"SET", "k", "v", "NX", "XX"}, "ERR syntax error"},
		{[]any{"SET", "k", "v", "BOGUS"}, "ERR syntax error"},
		{[]any{"SETEX", "k", 0, "v"}, "ERR invalid expire time in 'setex' command"},
		{[]any{"MSET", "a", 1, "b"}, "ERR wrong number of arguments for 'mset' command"},
		{[]any{"SELECT", 16}, "ERR DB index is out of range"},
		{[]any{"SELECT", "abc"}, "ERR value is not an integer or out of range"},
		{[]any{"EXEC"}, "ERR EXEC without MULTI"},
		{[]any{"DISCARD"}, "ERR DISCARD without MULTI"},
		{[]any{"HELLO", 4}, "NOPROTO unsupported protocol version"},
		{[]any{"HELLO", "abc"}, "ERR Protocol version is not an integer or out of range"},
		{[]any{"CLIENT", "BOGUS"}, "ERR unknown subcommand 'BOGUS'. Try CLIENT HELP."},
		{[]any{"CONFIG", "BOGUS"}, "ERR unknown subcommand 'BOGUS'. Try CONFIG HELP."},
		{[]any{"AUTH", "x"}, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{[]any{"CLUSTER", "SLOTS"}, "ERR This instance has cluster support disabled"},
		{[]any{"READONLY"}, "ERR This instance has cluster support disabled"},
		{[]any{"READWRITE"}, "ERR This instance has cluster support disabled"},
		{[]any{"ASKING"}, "ERR This instance has cluster support disabled"},
		{[]any{"SENTINEL", "MASTERS"}, "ERR This instance has cluster support disabled"},
		{[]any{"SHUTDOWN", "bogus"}, "ERR syntax error"},
	} {
		e2eWantRedisErr(t, fmt.Sprint(tc.args), conn.Do(ctx, tc.args...).Err(), tc.want)
	}
	// The connection is still usable and unchanged after all of them.
	e2eEq(t, "PING", e2eVal(t, conn.Ping(ctx)), "PONG")
	id := e2eVal(t, conn.ClientID(ctx))
	line := e2eClientLine(t, e2eVal(t, conn.ClientList(ctx)), id)
	e2eEq(t, "resp", e2eField(line, "resp"), strconv.Itoa(e.proto))
	e2eEq(t, "db", e2eField(line, "db"), "0")

	// WRONGTYPE cannot happen with strings only; MULTI errors can.
	e2eOK(t, conn.Do(ctx, "MULTI"))
	e2eWantRedisErr(t, "MULTI in MULTI", conn.Do(ctx, "MULTI").Err(), "ERR MULTI calls can not be nested")
	e2eWantRedisErr(t, "WATCH in MULTI", conn.Do(ctx, "WATCH", "k").Err(), "ERR WATCH inside MULTI is not allowed")
	e2eEq(t, "queued", e2eText(t, conn.Do(ctx, "SET", "k", "v")), "QUEUED")
	e2eEq(t, "DISCARD", e2eText(t, conn.Do(ctx, "DISCARD")), "OK")
	e2eEq(t, "EXISTS k", e2eVal(t, conn.Exists(ctx, "k")), int64(0))

	// redis.HasErrorPrefix, as applications use it.
	err := c.Do(ctx, "CL.THROTTLE", "k").Err()
	if !redis.HasErrorPrefix(err, "Cell error") {
		t.Fatalf("CL.THROTTLE k: %v, want a Cell error", err)
	}
}
