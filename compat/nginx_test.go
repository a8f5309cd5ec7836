package compat

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/procattr"
	"github.com/throttleddb/throttled/server"
)

// These tests run a real nginx with the Lua module (Debian's nginx-extras)
// and lua-resty-redis (Debian's lua-nginx-redis, installed as nginx.redis)
// in front of an in-process node, and drive it over HTTP:
//
//   - TestNginxGateway runs examples/openresty (nginx.conf and its Lua
//     module, unchanged but for the two ports): an access_by_lua gateway
//     that asks CL.THROTTLE, proxies what passes and answers 429 with
//     Retry-After and the RateLimit headers. The node's debug clock makes
//     every header exact.
//   - TestNginxKong replays what Kong's rate-limiting plugin sends with
//     policy "redis" (compat/nginx/lua/kong_rate_limiting.lua): Kong 3.4+'s
//     per-request EVAL and its sync pipeline of EVALs, and Kong 2.8's GET,
//     EXISTS and pipelined INCRBY/EXPIRE, each with Kong's connection helper
//     (AUTH and SELECT on fresh pooled connections only).
//   - Both run logged in as the user that their example's README makes (its
//     ACL SETUSER line, read from the README), and TestNginxGatewayFailure
//     and TestNginxKongFailure check what each gateway does when throttled
//     gives no decision (an error reply, or no server), under each of its
//     fail-open and fail-closed settings.
//
// nginx runs as a child with -g 'daemon off; master_process off;' (one
// process, so the connection pool is one), on a free port, with its pid,
// logs and temp files in a temp dir; it is stopped when the test ends, and
// its error log must hold no error. The tests are skipped when nginx, its Lua
// module or lua-resty-redis is missing (.ci/run installs them).

const (
	nginxModule   = "/usr/share/nginx/modules/ngx_http_lua_module.so"
	nginxRedisLua = "/usr/share/lua/5.1/nginx/redis.lua"
)

// nginxLook returns the nginx binary, or skips the test.
func nginxLook(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx" // not on a non-root user's PATH
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("nginx not installed (Debian nginx-extras): %v", err)
		}
	}
	for _, f := range []string{nginxModule, nginxRedisLua} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("nginx-lua or lua-resty-redis missing (Debian nginx-extras, lua-nginx-redis): %v", err)
		}
	}
	return bin
}

// nginxConfig is one nginx to run.
type nginxConfig struct {
	conf  string            // nginx.conf to use
	lua   string            // folder whose *.lua files go to <prefix>/lua
	subst map[string]string // text in conf to replace (each must occur)
	env   []string          // added to the environment
	// errorsExpected: the test reads the error log itself (errors), which
	// then need not be free of errors.
	errorsExpected bool
	// master runs nginx with its master process and the workers that conf
	// asks for, instead of one process.
	master bool
}

// nginxServer is a running nginx.
type nginxServer struct {
	url  string // http://127.0.0.1:port
	dir  string // its prefix: error.log is there
	cmd  *exec.Cmd
	done chan struct{} // closed when nginx has exited
}

// stop stops nginx gracefully (SIGQUIT: finish requests, run the Lua
// timers' exit work, then exit) and waits for it.
func (s *nginxServer) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		t.Errorf("nginx did not exit within 5s of SIGQUIT; killed")
	}
}

// kill9 kills nginx, its master and every worker, with SIGKILL (nginx runs
// in a process group of its own), as a crash would, and waits for it.
func (s *nginxServer) kill9(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 nginx: %v", err)
	}
	<-s.done
}

// nginxErrorLevels are the error log levels a test looks for.
var nginxErrorLevels = []string{"[error]", "[crit]", "[alert]", "[emerg]"}

// errors returns the error log's lines at level error or above so far.
func (s *nginxServer) errors() []string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "error.log"))
	var out []string
	for line := range strings.Lines(string(b)) {
		for _, level := range nginxErrorLevels {
			if strings.Contains(line, level) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}

// nginxStart runs nginx for the test, its prefix a temp dir, and waits until
// it accepts connections on listen (a "127.0.0.1:port" that cfg.subst puts
// in the configuration). It is stopped when the test ends; then, unless
// cfg.errorsExpected, its error log must hold no [error], [crit], [alert]
// or [emerg] line.
func nginxStart(t *testing.T, bin, listen string, cfg nginxConfig) *nginxServer {
	t.Helper()
	dir := t.TempDir()
	conf, err := os.ReadFile(cfg.conf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(conf)
	for old, repl := range cfg.subst {
		if !strings.Contains(text, old) {
			t.Fatalf("%s: %q not found", cfg.conf, old)
		}
		text = strings.ReplaceAll(text, old, repl)
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	luaFiles, err := filepath.Glob(filepath.Join(cfg.lua, "*.lua"))
	if err != nil || len(luaFiles) == 0 {
		t.Fatalf("no Lua files in %s: %v", cfg.lua, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "lua"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range luaFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "lua", filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	global := "daemon off; master_process off;"
	if cfg.master {
		global = "daemon off;"
		if os.Geteuid() == 0 {
			// Workers of a root master run as nobody, who may not read
			// the test's temp dir.
			global += " user root;"
		}
	}
	cmd := exec.Command(bin, "-p", dir+"/", "-c", confPath, "-e", "stderr", "-g", global)
	cmd.Env = append(os.Environ(), cfg.env...)
	var out e2eOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procattr.Child()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	srv := &nginxServer{url: "http://" + listen, dir: dir, cmd: cmd, done: done}
	errorLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b)
	}
	t.Cleanup(func() {
		srv.stop(t) // returns at once when the test stopped it
		if !cfg.errorsExpected {
			for _, line := range srv.errors() {
				t.Errorf("nginx error log: %s", line)
			}
		}
		if t.Failed() {
			t.Logf("nginx output:\n%s\nnginx error.log:\n%s", out.String(), errorLog())
		}
	})

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("nginx exited at start:\n%s\n%s", out.String(), errorLog())
		default:
		}
		c, err := net.DialTimeout("tcp", listen, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx not listening on %s after 10s: %v\n%s", listen, err, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return srv
}

// nginxFreeAddr returns a free loopback address.
func nginxFreeAddr(t *testing.T) string {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Addr(port)
}

// nginxResponse is what an HTTP request got.
type nginxResponse struct {
	status int
	header http.Header
	body   string
}

var nginxClient = &http.Client{Timeout: e2eIOWait}

// nginxGet sends GET url with the headers (name, value pairs).
func nginxGet(t *testing.T, url string, headers ...string) nginxResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), e2eIOWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := nginxClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return nginxResponse{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

// nginxAdmin is a raw connection to the node, authenticated.
type nginxAdmin struct {
	c *e2eConn
}

func nginxDialAdmin(t *testing.T, n *server.Node, pass string) *nginxAdmin {
	t.Helper()
	c := e2eDial(t, n.Addr())
	e2eMustDo(t, c, "+OK\r\n", "AUTH", pass)
	return &nginxAdmin{c: c}
}

// do runs a command and returns its raw reply.
func (a *nginxAdmin) do(t *testing.T, args ...string) string {
	t.Helper()
	got, err := a.c.Do(args...)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return got
}

// want runs a command and fails the test unless the raw reply is want.
func (a *nginxAdmin) want(t *testing.T, want string, args ...string) {
	t.Helper()
	if got := a.do(t, args...); got != want {
		t.Errorf("%q: got %q, want %q", args, got, want)
	}
}

// advance moves the node's debug clock forward by d.
func (a *nginxAdmin) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if got := a.do(t, "DEBUG", "CLOCK", "ADVANCE", strconv.FormatInt(int64(d), 10)); !strings.HasPrefix(got, ":") {
		t.Fatalf("DEBUG CLOCK ADVANCE: %q", got)
	}
}

// clients returns the CLIENT LIST lines.
func (a *nginxAdmin) clients(t *testing.T) []string {
	t.Helper()
	reply := a.do(t, "CLIENT", "LIST")
	_, body, ok := strings.Cut(reply, "\r\n") // after the "$<len>" line
	if !ok || !strings.HasPrefix(reply, "$") {
		t.Fatalf("CLIENT LIST: %q", reply)
	}
	return strings.Split(strings.TrimRight(body, "\r\n"), "\n")
}

// calls returns the calls of each command so far (INFO commandstats).
func (a *nginxAdmin) calls(t *testing.T) map[string]int {
	t.Helper()
	reply := a.do(t, "INFO", "commandstats")
	out := map[string]int{}
	for l := range strings.Lines(reply) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(l, "cmdstat_"), ":calls=")
		if !ok || !strings.HasPrefix(l, "cmdstat_") {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		out[name], _ = strconv.Atoi(n)
	}
	return out
}

// wantCalls checks the calls of cmds made since before. A Raft follower
// counts a command when it applies it, which may be a moment after the
// client had its reply: it waits for want a little while.
// Each look is an INFO of our own, which a wanted "info=n" allows for.
func (a *nginxAdmin) wantCalls(t *testing.T, before map[string]int, want string, cmds ...string) {
	t.Helper()
	var got string
	for look, deadline := 0, time.Now().Add(5*time.Second); ; look++ {
		now := a.calls(t)
		now["info"] -= look
		var b strings.Builder
		for _, c := range cmds {
			fmt.Fprintf(&b, "%s=%d ", c, now[c]-before[c])
		}
		if got = strings.TrimSpace(b.String()); got == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got != want {
		t.Errorf("commands sent: got %s, want %s", got, want)
	}
}

func nginxBulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// TestNginxGateway runs examples/openresty against a node with a password,
// logged in as the user its README's ACL recipe makes, and checks the exact
// sequence on the debug clock: the burst passes, the next request gets 429
// with the right Retry-After, and passes again once the clock has moved on.
func TestNginxGateway(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	e2eModes(t, func(t *testing.T, start e2eStart) { testNginxGateway(t, bin, start) })
}

func testNginxGateway(t *testing.T, bin string, start e2eStart) {
	const pass, userPass = "gw-s3cret", "openresty-pw"
	node := start(t, server.Config{RequirePass: pass})
	admin := nginxDialAdmin(t, node, pass)
	admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/openresty/README.md", "openresty", userPass)...)
	listen, upstream := nginxFreeAddr(t), nginxFreeAddr(t)
	ngx := nginxStart(t, bin, listen, nginxConfig{
		conf: "../examples/openresty/nginx.conf",
		lua:  "../examples/openresty/lua",
		subst: map[string]string{
			"127.0.0.1:8080": listen,
			"127.0.0.1:8081": upstream,
		},
		env: append(gatewayEnv(t, node.Addr()), "THROTTLED_USERNAME=openresty", "THROTTLED_PASSWORD="+userPass),
	})
	before := admin.calls(t)

	// CL.THROTTLE api:<client> 15 30 60: a limit of 16, one more every 2 s.
	type step struct {
		advance    time.Duration // debug clock, before the request
		apiKey     string        // X-API-Key; "" is limited by address
		status     int
		rateLimit  string // the RateLimit header
		retryAfter string // "" when there must be none
	}
	var steps []step
	for i := 1; i <= 16; i++ {
		steps = append(steps, step{0, "alice", 200, fmt.Sprintf(`"default";r=%d;t=%d`, 16-i, 2*i), ""})
	}
	steps = append(steps,
		step{0, "alice", 429, `"default";r=0;t=32`, "2"},
		step{0, "bob", 200, `"default";r=15;t=2`, ""},
		step{time.Second, "alice", 429, `"default";r=0;t=31`, "1"},
		step{time.Second, "alice", 200, `"default";r=0;t=32`, ""},
		step{0, "alice", 429, `"default";r=0;t=32`, "2"},
		step{1500 * time.Millisecond, "alice", 429, `"default";r=0;t=31`, "1"}, // 0.5 s rounds up
		step{500 * time.Millisecond, "alice", 200, `"default";r=0;t=32`, ""},
		step{time.Minute, "alice", 200, `"default";r=15;t=2`, ""}, // full again
	)
	for i, s := range steps {
		if s.advance > 0 {
			admin.advance(t, s.advance)
		}
		var hdr []string
		if s.apiKey != "" {
			hdr = []string{"X-API-Key", s.apiKey}
		}
		r := nginxGet(t, ngx.url+"/api/hello", hdr...)
		wantBody := "hello from the upstream: /api/hello\n"
		if s.status == 429 {
			wantBody = fmt.Sprintf(`{"error":"rate limited","retry_after":%s}`+"\n", s.retryAfter)
		}
		got := fmt.Sprintf("%d %q %q %q %q", r.status, r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"), r.header.Get("Retry-After"), r.body)
		want := fmt.Sprintf("%d %q %q %q %q", s.status, `"default";q=16;w=60`, s.rateLimit, s.retryAfter, wantBody)
		if got != want {
			t.Errorf("step %d (%s): got %s, want %s", i, s.apiKey, got, want)
		}
	}

	// One key per client; bob's expired when his bucket was full again.
	// Without X-API-Key the client's address is the key.
	admin.want(t, ":1\r\n", "EXISTS", "api:alice", "api:bob", "api:127.0.0.1")
	if r := nginxGet(t, ngx.url+"/api/hello"); r.status != 200 || r.header.Get("RateLimit") != `"default";r=15;t=2` {
		t.Errorf("no X-API-Key: got %d RateLimit %q, want 200 %q", r.status, r.header.Get("RateLimit"), `"default";r=15;t=2`)
	}
	admin.want(t, ":2\r\n", "EXISTS", "api:alice", "api:bob", "api:127.0.0.1")
	admin.want(t, ":1\r\n", "EXISTS", "api:127.0.0.1")
	// One AUTH on nginx's one pooled connection (database 0: no SELECT),
	// then cl.throttle, sent lower-case, for every request.
	admin.wantCalls(t, before, fmt.Sprintf("auth=1 select=0 cl.throttle=%d", len(steps)+1), "auth", "select", "cl.throttle")
	var users []string
	for _, l := range admin.clients(t) {
		users = append(users, e2eField(l, "user"))
	}
	if slices.Sort(users); !slices.Equal(users, []string{"default", "openresty"}) {
		t.Errorf("CLIENT LIST users: got %q, want ours (default) and nginx's pooled one (openresty)", users)
	}
	// An unthrottled location carries no RateLimit header.
	if r := nginxGet(t, ngx.url+"/healthz"); r.status != 200 || r.header.Get("RateLimit") != "" {
		t.Errorf("/healthz: got %d RateLimit %q, want 200 and none", r.status, r.header.Get("RateLimit"))
	}
}

// TestNginxGatewayFailure runs examples/openresty when throttled gives no
// decision: an error reply (the gateway logs in as a user whose rules leave
// out its keys: NOPERM) or no server on the port. 20 requests of one client,
// more than the limit of 16: with $throttle_fail_open off, or unset, every
// one gets 503; with on, every one reaches the upstream, without RateLimit
// headers; either way each one logs the error and what was done. A value
// other than on or off answers 500 even while throttled works.
func TestNginxGatewayFailure(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	// The example logs in as default (AUTH <password>), here given the old
	// recipe: the keys it may name start with ratelimit:, the example's
	// with api:.
	const pass = "gw-s3cret"
	erring, dead := gatewayStores(t, pass)
	stores := []struct {
		name string
		env  []string
		err  string // in the log line
	}{
		{"error reply", append(gatewayEnv(t, erring.Addr()), "THROTTLED_PASSWORD="+pass),
			"CL.THROTTLE api:alice: NOPERM this user has no permissions to access one of the keys used as arguments"},
		{"unreachable", gatewayEnv(t, dead), "connect: connection refused"},
	}
	const setting = "set $throttle_fail_open on;" // as nginx.conf ships
	modes := []struct {
		name, setting string
		status        int
		log           string
	}{
		{"fail_open off", "set $throttle_fail_open off;", 503, "(failing closed: 503)"},
		{"fail_open unset", "", 503, "(failing closed: 503)"},
		{"fail_open on", setting, 200, "(failing open: request let through)"},
	}
	for _, store := range stores {
		for _, mode := range modes {
			t.Run(store.name+"/"+mode.name, func(t *testing.T) {
				t.Parallel()
				listen, upstream := nginxFreeAddr(t), nginxFreeAddr(t)
				ngx := nginxStart(t, bin, listen, nginxConfig{
					conf:           "../examples/openresty/nginx.conf",
					lua:            "../examples/openresty/lua",
					subst:          map[string]string{"127.0.0.1:8080": listen, "127.0.0.1:8081": upstream, setting: mode.setting},
					env:            store.env,
					errorsExpected: true,
				})
				const n = 20
				for i := range n {
					r := nginxGet(t, ngx.url+"/api/hello", "X-API-Key", "alice")
					if r.status != mode.status || r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
						t.Errorf("request %d: got %d RateLimit %q RateLimit-Policy %q, want %d and no RateLimit headers (body %q)",
							i, r.status, r.header.Get("RateLimit"), r.header.Get("RateLimit-Policy"), mode.status, r.body)
					}
					if mode.status == 200 && r.body != "hello from the upstream: /api/hello\n" {
						t.Errorf("request %d: body %q, want the upstream's", i, r.body)
					}
				}
				lines := ngx.errors()
				if got := gatewayCount(lines, "throttled_gateway: "+store.err+" "+mode.log); got != n {
					t.Errorf("error log: %d lines with %q and %q, want %d:\n%s", got, store.err, mode.log, n, strings.Join(lines, "\n"))
				}
			})
		}
	}

	t.Run("fail_open misspelt", func(t *testing.T) {
		t.Parallel()
		node := e2eNode(t, server.Config{})
		listen, upstream := nginxFreeAddr(t), nginxFreeAddr(t)
		ngx := nginxStart(t, bin, listen, nginxConfig{
			conf:           "../examples/openresty/nginx.conf",
			lua:            "../examples/openresty/lua",
			subst:          map[string]string{"127.0.0.1:8080": listen, "127.0.0.1:8081": upstream, setting: "set $throttle_fail_open yes;"},
			env:            gatewayEnv(t, node.Addr()),
			errorsExpected: true,
		})
		if r := nginxGet(t, ngx.url+"/api/hello"); r.status != 500 {
			t.Errorf("got %d, want 500", r.status)
		}
		if lines := ngx.errors(); gatewayCount(lines, "$throttle_fail_open must be on or off, not yes") != 1 {
			t.Errorf("error log: want one line naming the bad value:\n%s", strings.Join(lines, "\n"))
		}
	})
}

// kongStep is one request to the Kong shim and the headers Kong would send.
type kongStep struct {
	advance      time.Duration // both clocks, before the request
	status       int
	minute, hour int // X-RateLimit-Remaining-Minute / -Hour
	limit        int // RateLimit-Limit
	remaining    int // RateLimit-Remaining
	reset        int // RateLimit-Reset
	retryAfter   int // 0: no Retry-After
}

// kongEnv is a node (password, debug clock) with the Kong shim in front,
// logged in as the user that examples/kong/README.md makes for its version.
type kongEnv struct {
	admin *nginxAdmin
	url   string
	db    string
	user  string
	nowMs int64 // Kong's clock, kept equal to the node's
}

// kongVersion is how the shim runs one Kong version (compat/nginx/kong.conf).
type kongVersion struct {
	location string // its location
	db       string // the database it is set to
	username string // the kong.conf line giving Kong's username
	user     string // the user examples/kong/README.md makes for it
}

var (
	kong34 = kongVersion{"/kong34", "3", `set $kong_redis_username "default";`, "kong"}
	kong28 = kongVersion{"/kong28", "2", `set $kong_redis_username "";`, "kong-2.8"}
)

func newKongEnv(t *testing.T, bin string, v kongVersion, start e2eStart) *kongEnv {
	t.Helper()
	const pass, userPass = "kong-s3cret", "kong-pw"
	node := start(t, server.Config{RequirePass: pass})
	admin := nginxDialAdmin(t, node, pass)
	admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/kong/README.md", v.user, userPass, "+select|"+v.db)...)
	admin.want(t, "+OK\r\n", "SELECT", v.db)
	ngx := kongStart(t, bin, nginxConfig{
		subst: map[string]string{v.username: fmt.Sprintf("set $kong_redis_username %q;", v.user)},
		env:   append(gatewayEnv(t, node.Addr()), "THROTTLED_PASSWORD="+userPass),
	})
	return &kongEnv{admin: admin, url: ngx.url + v.location, db: v.db, user: v.user, nowMs: e2eClockStart / 1e6}
}

// kongStart runs nginx with the Kong shim (compat/nginx/kong.conf) on a
// free port; cfg gives its environment and further substitutions.
func kongStart(t *testing.T, bin string, cfg nginxConfig) *nginxServer {
	t.Helper()
	listen := nginxFreeAddr(t)
	cfg.conf, cfg.lua = "nginx/kong.conf", "nginx/lua"
	cfg.subst["127.0.0.1:8080"] = listen
	return nginxStart(t, bin, listen, cfg)
}

func (e *kongEnv) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if d > 0 {
		e.admin.advance(t, d)
		e.nowMs += d.Milliseconds()
	}
}

// request sends one request for consumer with limits ("minute=5 hour=8").
func (e *kongEnv) request(t *testing.T, consumer, limits string) nginxResponse {
	t.Helper()
	return nginxGet(t, e.url, "X-Consumer", consumer, "X-Kong-Limits", limits,
		"X-Kong-Now-Ms", strconv.FormatInt(e.nowMs, 10))
}

// key is Kong's key for consumer's counter of period (seconds) now.
func (e *kongEnv) key(consumer, period string, secs int64) string {
	start := e.nowMs / (secs * 1000) * (secs * 1000)
	const empty = "00000000-0000-0000-0000-000000000000"
	return fmt.Sprintf("ratelimit:%s:%s:%s:%d:%s", empty, empty, consumer, start, period)
}

// run sends the steps, checking each reply's status and Kong's headers.
func (e *kongEnv) run(t *testing.T, consumer, limits string, steps []kongStep) []nginxResponse {
	t.Helper()
	var out []nginxResponse
	for i, s := range steps {
		e.advance(t, s.advance)
		r := e.request(t, consumer, limits)
		out = append(out, r)
		h := r.header
		got := fmt.Sprintf("%d min=%s hour=%s limit=%s remaining=%s reset=%s retry=%s",
			r.status, h.Get("X-RateLimit-Remaining-Minute"), h.Get("X-RateLimit-Remaining-Hour"),
			h.Get("RateLimit-Limit"), h.Get("RateLimit-Remaining"), h.Get("RateLimit-Reset"), h.Get("Retry-After"))
		retry := ""
		if s.retryAfter > 0 {
			retry = strconv.Itoa(s.retryAfter)
		}
		want := fmt.Sprintf("%d min=%d hour=%d limit=%d remaining=%d reset=%d retry=%s",
			s.status, s.minute, s.hour, s.limit, s.remaining, s.reset, retry)
		if got != want {
			t.Errorf("step %d: got %s, want %s (body %q)", i, got, want, r.body)
		}
	}
	return out
}

// connections checks that every connection to the node is on the env's
// database, ours as default and each of nginx's pooled ones as the env's
// user, and returns how many there are.
func (e *kongEnv) connections(t *testing.T) int {
	t.Helper()
	lines := e.admin.clients(t)
	ours := 0
	for _, l := range lines {
		db, user := e2eField(l, "db"), e2eField(l, "user")
		if user == "default" {
			ours++
		}
		if db != e.db || (user != e.user && user != "default") {
			t.Errorf("CLIENT LIST: db=%s user=%s, want db=%s user=%s: %s", db, user, e.db, e.user, l)
		}
	}
	if ours != 1 {
		t.Errorf("CLIENT LIST: %d connections as default, want 1 (ours)", ours)
	}
	return len(lines)
}

// wireCmds are the commands whose calls the Kong tests count.
// Like Redis, throttled also counts the commands a script runs.
var wireCmds = []string{"auth", "select", "info", "eval", "incr", "get", "exists", "incrby", "expire"}

// TestNginxKong replays Kong's rate-limiting plugin ("redis" policy, minute
// and hour limits) against a node with a password and a database other than
// 0, on exact timelines, logged in as the user examples/kong/README.md
// makes for the version. The clock starts 20 s into a minute and 800 s into
// an hour; Kong's clock (X-Kong-Now-Ms) and the node's move together.
func TestNginxKong(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	e2eModes(t, func(t *testing.T, start e2eStart) { testNginxKong(t, bin, start) })
}

func testNginxKong(t *testing.T, bin string, start e2eStart) {
	// Kong 3.4+: each request runs the usage EVAL once per period, which
	// counts the request whether or not it is then refused.
	t.Run("3.4", func(t *testing.T) {
		t.Parallel()
		e := newKongEnv(t, bin, kong34, start)
		minute0, hour0 := e.key("alice", "minute", 60), e.key("alice", "hour", 3600)
		before := e.admin.calls(t)
		out := e.run(t, "alice", "minute=5 hour=8", []kongStep{
			{0, 200, 4, 7, 5, 4, 40, 0},
			{0, 200, 3, 6, 5, 3, 40, 0},
			{0, 200, 2, 5, 5, 2, 40, 0},
			{0, 200, 1, 4, 5, 1, 40, 0},
			{0, 200, 0, 3, 5, 0, 40, 0},
			{0, 429, 0, 3, 5, 0, 40, 40},
			{40 * time.Second, 200, 4, 1, 8, 1, 2760, 0}, // a new minute
			{0, 200, 3, 0, 8, 0, 2760, 0},
			{0, 429, 3, 0, 8, 0, 2760, 2760}, // the hour is used up
		})
		minute1 := e.key("alice", "minute", 60)
		// What nginx sent, besides our INFO: one AUTH and SELECT, INFO
		// server once, one EVAL per period and request, whose script ran
		// INCR each time and EXPIRE for the three new keys.
		e.admin.wantCalls(t, before, "auth=1 select=1 info=2 eval=18 incr=18 get=0 exists=0 incrby=0 expire=3", wireCmds...)
		// AUTH kong <pass> and SELECT 3 on the one fresh connection, the
		// INFO server probe parsed, the connection reused ever after.
		if got := out[0].header.Get("X-Redis-Reused-Times"); got != "0,1" {
			t.Errorf("first request: reused times %q, want 0,1", got)
		}
		for i, r := range out[1:] {
			if got := r.header.Get("X-Redis-Reused-Times"); strings.HasPrefix(got, "0") || strings.Contains(got, ",0") {
				t.Errorf("request %d: reused times %q: a new connection", i+1, got)
			}
		}
		if got := out[0].header.Get("X-Redis-Version"); got != "7.0" {
			t.Errorf("INFO server probe: redis_version %q, want 7.0", got)
		}
		if got := e.connections(t); got != 2 {
			t.Errorf("CLIENT LIST: %d connections, want 2 (ours and nginx's pooled one)", got)
		}
		// Counters and TTLs: EXPIRE only with the first INCR of a key.
		a := e.admin
		a.want(t, nginxBulk("6"), "GET", minute0)
		a.want(t, ":20\r\n", "TTL", minute0)
		a.want(t, nginxBulk("9"), "GET", hour0)
		a.want(t, ":3560\r\n", "TTL", hour0)
		a.want(t, nginxBulk("3"), "GET", minute1)
		a.want(t, ":60\r\n", "TTL", minute1)

		kongWindows(t, e, 10)
		kongConcurrent(t, e, true)

		// sync_rate > 0: the timer's pipeline of sync EVALs, each replying
		// nil; EXPIREAT at the period's start + its length.
		e.advance(t, 7*time.Second)
		r := nginxGet(t, e.url+"/sync", "X-Consumer", "carol", "X-Kong-Deltas", "minute=7 hour=9",
			"X-Kong-Now-Ms", strconv.FormatInt(e.nowMs, 10))
		if r.status != 200 || r.body != "null,null\n" {
			t.Errorf("sync: got %d %q, want 200 %q", r.status, r.body, "null,null\n")
		}
		mk, hk := e.key("carol", "minute", 60), e.key("carol", "hour", 3600)
		minuteTTL := 60 - e.nowMs/1000%60
		hourTTL := 3600 - e.nowMs/1000%3600
		a.want(t, nginxBulk("7"), "GET", mk)
		a.want(t, fmt.Sprintf(":%d\r\n", minuteTTL), "TTL", mk)
		a.want(t, nginxBulk("9"), "GET", hk)
		a.want(t, fmt.Sprintf(":%d\r\n", hourTTL), "TTL", hk)
		e.advance(t, 3*time.Second)
		r = nginxGet(t, e.url+"/sync", "X-Consumer", "carol", "X-Kong-Deltas", "minute=3",
			"X-Kong-Now-Ms", strconv.FormatInt(e.nowMs, 10))
		if r.status != 200 || r.body != "null\n" {
			t.Errorf("second sync: got %d %q, want 200 %q", r.status, r.body, "null\n")
		}
		a.want(t, nginxBulk("10"), "GET", mk)
		a.want(t, fmt.Sprintf(":%d\r\n", minuteTTL-3), "TTL", mk)
		e.connections(t)
	})

	// Kong 2.8-3.3: GET per period, then (only for an allowed request)
	// EXISTS per period and a pipeline of INCRBY, plus EXPIRE for new keys.
	t.Run("2.8", func(t *testing.T) {
		t.Parallel()
		e := newKongEnv(t, bin, kong28, start)
		minute0, hour0 := e.key("bob", "minute", 60), e.key("bob", "hour", 3600)
		before := e.admin.calls(t)
		out := e.run(t, "bob", "minute=5 hour=8", []kongStep{
			{0, 200, 4, 7, 5, 4, 40, 0},
			{0, 200, 3, 6, 5, 3, 40, 0},
			{0, 200, 2, 5, 5, 2, 40, 0},
			{0, 200, 1, 4, 5, 1, 40, 0},
			{0, 200, 0, 3, 5, 0, 40, 0},
			{0, 429, 0, 3, 5, 0, 40, 40},
			{40 * time.Second, 200, 4, 2, 8, 2, 2760, 0},
			{0, 200, 3, 1, 8, 1, 2760, 0},
			{0, 200, 2, 0, 8, 0, 2760, 0},
			{0, 429, 2, 0, 8, 0, 2760, 2760},
		})
		minute1 := e.key("bob", "minute", 60)
		// Two GETs a request; EXISTS and INCRBY for each allowed one (8),
		// EXPIRE for the three keys that were new.
		e.admin.wantCalls(t, before, "auth=1 select=1 info=2 eval=0 incr=0 get=20 exists=16 incrby=16 expire=3", wireCmds...)
		// Two GETs and the increment: AUTH kong-2.8 <pass>, SELECT 2 once.
		if got := out[0].header.Get("X-Redis-Reused-Times"); got != "0,1,2" {
			t.Errorf("first request: reused times %q, want 0,1,2", got)
		}
		if got := e.connections(t); got != 2 {
			t.Errorf("CLIENT LIST: %d connections, want 2 (ours and nginx's pooled one)", got)
		}
		a := e.admin
		a.want(t, nginxBulk("5"), "GET", minute0)
		a.want(t, ":20\r\n", "TTL", minute0)
		a.want(t, nginxBulk("8"), "GET", hour0)
		a.want(t, ":3560\r\n", "TTL", hour0)
		a.want(t, nginxBulk("3"), "GET", minute1)
		a.want(t, ":60\r\n", "TTL", minute1)

		kongWindows(t, e, 7)
		kongConcurrent(t, e, false)
	})
}

// TestNginxKongFailure replays Kong's rate-limiting plugin when throttled
// gives no decision: an error reply (Kong logs in as a user with the old
// recipe, plus SELECT: NOPERM on EVAL for 3.4, on GET for 2.8) or no server
// on the port. 20 requests of one client, with a limit of 16 a minute: with
// fault_tolerant false every one gets Kong's 500; with true (Kong's default)
// every one passes, without rate-limit headers, and Kong logs "failed to get
// usage" with the error for each.
func TestNginxKongFailure(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	// Kong 3.4's location sends AUTH default <pass>, 2.8's AUTH <pass>.
	const pass = "kong-s3cret"
	erring, deadAddr := gatewayStores(t, pass, "+select")
	live := append(gatewayEnv(t, erring.Addr()), "THROTTLED_PASSWORD="+pass)
	dead := gatewayEnv(t, deadAddr)
	cases := []struct {
		name    string
		version kongVersion
		env     []string
		err     string // in the log lines
	}{
		{"3.4/error reply", kong34, live, "NOPERM this user has no permissions to run the 'eval' command"},
		{"2.8/error reply", kong28, live, "NOPERM this user has no permissions to run the 'get' command"},
		{"3.4/unreachable", kong34, dead, "connection refused"},
		{"2.8/unreachable", kong28, dead, "connection refused"},
	}
	const setting = "set $kong_fault_tolerant true;" // as kong.conf has it
	for _, c := range cases {
		for _, tolerant := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fault_tolerant=%v", c.name, tolerant), func(t *testing.T) {
				t.Parallel()
				ngx := kongStart(t, bin, nginxConfig{
					subst:          map[string]string{setting: fmt.Sprintf("set $kong_fault_tolerant %v;", tolerant)},
					env:            c.env,
					errorsExpected: true,
				})
				const n = 20
				wantStatus, wantBody, wantLog := 500, `{"message":"An unexpected error occurred"}`+"\n", "rate-limiting: "+c.err
				if tolerant {
					wantStatus, wantBody, wantLog = 200, `{"message":"ok"}`+"\n", "failed to get usage: "+c.err
				}
				for i := range n {
					r := nginxGet(t, ngx.url+c.version.location, "X-Consumer", "alice", "X-Kong-Limits", "minute=16",
						"X-Kong-Now-Ms", strconv.FormatInt(e2eClockStart/1e6, 10))
					var limitHeaders []string
					for name := range r.header {
						if strings.Contains(name, "Ratelimit") || name == "Retry-After" {
							limitHeaders = append(limitHeaders, name)
						}
					}
					if r.status != wantStatus || r.body != wantBody || len(limitHeaders) > 0 {
						t.Errorf("request %d: got %d %q, rate-limit headers %q; want %d %q and none", i, r.status, r.body, limitHeaders, wantStatus, wantBody)
					}
				}
				lines := ngx.errors()
				if got := gatewayCount(lines, wantLog); got != n {
					t.Errorf("error log: %d lines with %q, want %d:\n%s", got, wantLog, n, strings.Join(lines, "\n"))
				}
			})
		}
	}
}

// kongWindows sends 10 requests 5 s apart in each of 4 minutes of one hour,
// with a limit of 7 a minute: 7 pass and 3 get 429 in every minute. perWindow
// is what a minute's counter holds after them (Kong 3.4 counts refused
// requests too, Kong 2.8 does not).
func kongWindows(t *testing.T, e *kongEnv, perWindow int) {
	t.Helper()
	// Start at the next hour.
	e.advance(t, time.Duration(3600_000-e.nowMs%3600_000)*time.Millisecond)
	hourStart := e.nowMs
	hourKey := e.key("win", "hour", 3600)
	const windows, perMinute, limit = 4, 10, 7
	for w := range windows {
		if w > 0 {
			e.advance(t, time.Duration(60_000-e.nowMs%60_000)*time.Millisecond)
		}
		minuteKey := e.key("win", "minute", 60)
		allowed := 0
		for j := range perMinute {
			if j > 0 {
				e.advance(t, 5*time.Second)
			}
			r := e.request(t, "win", "minute=7 hour=1000")
			reset := strconv.Itoa(60 - 5*j)
			wantStatus, wantRetry, wantRemaining := 200, "", strconv.Itoa(max(0, limit-j-1))
			if j >= limit {
				wantStatus, wantRetry = 429, reset
			}
			if r.status == 200 {
				allowed++
			}
			got := fmt.Sprintf("%d min=%s reset=%s retry=%s", r.status, r.header.Get("X-RateLimit-Remaining-Minute"), r.header.Get("RateLimit-Reset"), r.header.Get("Retry-After"))
			want := fmt.Sprintf("%d min=%s reset=%s retry=%s", wantStatus, wantRemaining, reset, wantRetry)
			if got != want {
				t.Errorf("minute %d request %d: got %s, want %s", w, j, got, want)
			}
		}
		if allowed != limit {
			t.Errorf("minute %d: %d allowed, want %d", w, allowed, limit)
		}
		e.admin.want(t, nginxBulk(strconv.Itoa(perWindow)), "GET", minuteKey)
	}
	e.admin.want(t, nginxBulk(strconv.Itoa(windows*perWindow)), "GET", hourKey)
	e.admin.want(t, fmt.Sprintf(":%d\r\n", 3600-(e.nowMs-hourStart)/1000), "TTL", hourKey)
}

// kongConcurrent sends 40 requests at once with a limit of 25 a minute.
// Kong 3.4's EVAL counts atomically, so exactly 25 pass; Kong 2.8 reads with
// GET and increments later, so it may let more through, but its counter must
// still hold exactly the number that passed. Every connection nginx opened
// for them must have done AUTH and SELECT.
func kongConcurrent(t *testing.T, e *kongEnv, atomic bool) {
	t.Helper()
	e.advance(t, time.Duration(60_000-e.nowMs%60_000)*time.Millisecond)
	const n, limit = 40, 25
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// nginxGet may not call t.Fatal off the test goroutine.
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url, nil)
			if err != nil {
				return
			}
			req.Header.Set("X-Consumer", "crowd")
			req.Header.Set("X-Kong-Limits", "minute=25")
			req.Header.Set("X-Kong-Now-Ms", strconv.FormatInt(e.nowMs, 10))
			resp, err := nginxClient.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	allowed, refused := 0, 0
	for i, s := range statuses {
		switch s {
		case 200:
			allowed++
		case 429:
			refused++
		default:
			t.Errorf("request %d: status %d", i, s)
		}
	}
	key := e.key("crowd", "minute", 60)
	if atomic {
		if allowed != limit || refused != n-limit {
			t.Errorf("concurrent: %d allowed, %d refused, want %d and %d", allowed, refused, limit, n-limit)
		}
		e.admin.want(t, nginxBulk(strconv.Itoa(n)), "GET", key)
	} else {
		if allowed < limit {
			t.Errorf("concurrent: %d allowed, want at least %d", allowed, limit)
		}
		e.admin.want(t, nginxBulk(strconv.Itoa(allowed)), "GET", key)
	}
	e.admin.want(t, ":60\r\n", "TTL", key)
	if got := e.connections(t); got < 2 {
		t.Errorf("CLIENT LIST: %d connections, want nginx's and ours", got)
	}
}
