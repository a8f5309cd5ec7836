//go:build unix

package compat

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/procattr"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestEnvoyRatelimit runs Envoy's rate limit service
// (github.com/envoyproxy/ratelimit) with throttled as its Redis, built from
// the source the Go module proxy serves: nothing of it is vendored, and our
// go.mod does not change (it is built in its own module directory, with its
// own go.mod). See ENVOY.md.
//
//   - Service: the service binary, configured only through its environment
//     as an operator would, talks to an in-process node; requests go to its
//     HTTP /json endpoint, and the keys, counters, TTLs and command counts it
//     leaves in throttled are checked.
//   - Example: the service as examples/envoy configures it, logged in as
//     the user whose ACL SETUSER line examples/envoy/README.md gives.
//   - Failure: what the service answers Envoy (over gRPC, with the service's
//     own client) when throttled gives no decision: an error reply, or a
//     server that has gone away.
//   - OwnIntegrationTests: ratelimit's own integration tests that need only a
//     plain Redis run against throttled: they start "redis-server --port N
//     [--requirepass P]" themselves, and find a stand-in first on PATH that
//     execs the throttled binary. When one fails, it is run again against
//     the real redis-server, to tell a throttled bug from a broken test.
//
// The test is skipped when the Go module proxy cannot be reached (unless
// THROTTLED_REQUIRE_NETWORK is set, as .ci/run does) and in -short mode.
// The first run downloads and compiles about 150 modules (a few minutes on
// two cores); later runs hit the module and build caches and take about a
// minute, nearly all of it ratelimit's own tests.
func TestEnvoyRatelimit(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads, builds and runs Envoy's ratelimit service")
	}
	dir := envoyDownload(t)
	bin := filepath.Join(t.TempDir(), "ratelimit")
	// Built first and once: the integration tests' own build then finds
	// every shared package in the build cache.
	envoyGo(t, dir, "build", "-trimpath", "-o", bin, "./src/service_cmd")
	// The service's gRPC client, which asks as Envoy does.
	client := filepath.Join(t.TempDir(), "ratelimit_client")
	envoyGo(t, dir, "build", "-trimpath", "-o", client, "./src/client_cmd")

	t.Run("Service", func(t *testing.T) {
		t.Parallel()
		e2eModes(t, func(t *testing.T, start e2eStart) { envoyServiceTest(t, bin, start) })
	})
	t.Run("Example", func(t *testing.T) {
		t.Parallel()
		e2eModes(t, func(t *testing.T, start e2eStart) { envoyExampleTest(t, bin, start) })
	})
	t.Run("Failure", func(t *testing.T) {
		t.Parallel()
		envoyFailureTest(t, bin, client)
	})
	t.Run("OwnIntegrationTests", func(t *testing.T) {
		t.Parallel()
		envoyIntegrationTests(t, dir)
	})
}

const (
	// envoyModule is pinned to a pseudo-version of ratelimit's main branch
	// (commit 3fb702589d36, 2026-01-22, which uses radix v4.1.4): the
	// project tags no Go module versions, and this is what the proxy
	// answers for @latest.
	envoyModule  = "github.com/envoyproxy/ratelimit"
	envoyVersion = "v1.4.1-0.20260122083618-3fb702589d36"

	// envoyRequireNetworkEnv, when set to anything, turns the skip for an
	// unreachable module proxy into a failure (CI must run this test).
	envoyRequireNetworkEnv = "THROTTLED_REQUIRE_NETWORK"

	// envoyGoTimeout bounds one go command (download, build, test run).
	envoyGoTimeout = 8 * time.Minute
)

// envoyOfflineSigns are texts of the go command's errors that mean the
// module proxy could not be reached, as opposed to a broken build.
var envoyOfflineSigns = []string{
	"dial tcp", "no such host", "network is unreachable", "connection refused",
	"i/o timeout", "TLS handshake timeout", "proxyconnect", "GOPROXY=off",
	"module lookup disabled",
}

// envoySkipIfOffline skips the test when out shows an unreachable module
// proxy, unless envoyRequireNetworkEnv is set.
func envoySkipIfOffline(t *testing.T, out string) {
	t.Helper()
	for _, sign := range envoyOfflineSigns {
		if strings.Contains(out, sign) {
			if os.Getenv(envoyRequireNetworkEnv) != "" {
				t.Fatalf("the Go module proxy cannot be reached and %s is set:\n%s", envoyRequireNetworkEnv, out)
			}
			t.Skipf("the Go module proxy cannot be reached (offline?); %s@%s is not available:\n%s", envoyModule, envoyVersion, out)
		}
	}
}

// envoyGoEnv is the environment of the go commands run on ratelimit's
// module: never our go.work, and never a go.mod update (its copy in the
// module cache is read-only).
func envoyGoEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
}

// envoyGo runs the go command with args in dir and returns its standard
// output; it fails the test on error (or skips it when offline).
func envoyGo(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), envoyGoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = envoyGoEnv()
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		out := stdout.String() + stderr.String()
		envoySkipIfOffline(t, out)
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return stdout.String()
}

// envoyDownload puts the pinned ratelimit module in the module cache and
// returns its (read-only) directory.
func envoyDownload(t *testing.T) string {
	t.Helper()
	out := envoyGo(t, t.TempDir(), "mod", "download", "-json", envoyModule+"@"+envoyVersion)
	var m struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	if m.Error != "" || m.Dir == "" {
		envoySkipIfOffline(t, m.Error)
		t.Fatalf("go mod download %s@%s: %q", envoyModule, envoyVersion, m.Error)
	}
	return m.Dir
}

// --- The service against an in-process node -------------------------------

// envoyDomain is the domain of envoyConfig; its limits are per hour and
// per day, so a run never straddles a window (see envoyAwayFromHourEnd).
const envoyDomain = "throttled_compat"

const envoyConfig = `domain: throttled_compat
descriptors:
  - key: api_key
    rate_limit:
      unit: hour
      requests_per_unit: 3
  - key: tenant
    descriptors:
      - key: path
        rate_limit:
          unit: day
          requests_per_unit: 5
`

// envoyReply is the service's /json reply (protojson of RateLimitResponse;
// zero fields are left out).
type envoyReply struct {
	OverallCode string `json:"overallCode"`
	Statuses    []struct {
		Code         string `json:"code"`
		CurrentLimit *struct {
			RequestsPerUnit int    `json:"requestsPerUnit"`
			Unit            string `json:"unit"`
		} `json:"currentLimit"`
		LimitRemaining     int    `json:"limitRemaining"`
		DurationUntilReset string `json:"durationUntilReset"`
	} `json:"statuses"`
}

// envoyStep is one request to /json and what must come back: the HTTP
// status, the overall code and, per descriptor, "CODE remaining/limit UNIT".
type envoyStep struct {
	domain      string      // "" means envoyDomain
	descriptors [][2]string // per descriptor: its keys and its values, comma-separated
	hits        int         // hitsAddend; 0 leaves it out (1)
	status      int
	overall     string
	statuses    []string
}

func envoyServiceTest(t *testing.T, bin string, start e2eStart) {
	const pass = "s3cret"
	n := start(t, server.Config{RequirePass: pass})

	root := t.TempDir()
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "throttled.yaml"), []byte(envoyConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		p, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	httpAddr := proc.Addr(ports[0])
	// What a user sets to point the service at throttled (ENVOY.md).
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + root,
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + n.Addr(),
		"REDIS_AUTH=" + pass,
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false",
		"USE_STATSD=false",
		"LOG_LEVEL=info",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		// No random extra TTL, so each key's TTL is exactly its unit on
		// the node's frozen clock.
		"EXPIRATION_JITTER_MAX_SECONDS=0",
	}
	svc := envoyStartService(t, bin, env)
	client := &http.Client{Timeout: 10 * time.Second}
	envoyWaitHealthy(t, svc, client, "http://"+httpAddr+"/healthcheck")

	envoyAwayFromHourEnd(t)
	now := time.Now().Unix()
	hour, day := now/3600*3600, now/86400*86400

	steps := []envoyStep{
		// 3 per hour: the 4th is over the limit (HTTP 429).
		{descriptors: [][2]string{{"api_key", "alice"}}, status: 200, overall: "OK", statuses: []string{"OK 2/3 HOUR"}},
		{descriptors: [][2]string{{"api_key", "alice"}}, status: 200, overall: "OK", statuses: []string{"OK 1/3 HOUR"}},
		{descriptors: [][2]string{{"api_key", "alice"}}, status: 200, overall: "OK", statuses: []string{"OK 0/3 HOUR"}},
		{descriptors: [][2]string{{"api_key", "alice"}}, status: 429, overall: "OVER_LIMIT", statuses: []string{"OVER_LIMIT 0/3 HOUR"}},
		// Two descriptors in one request (one pipeline of 4 commands),
		// one of them nested, each hit twice.
		{descriptors: [][2]string{{"api_key", "bob"}, {"tenant,path", "acme,/v1"}}, hits: 2, status: 200, overall: "OK", statuses: []string{"OK 1/3 HOUR", "OK 3/5 DAY"}},
		{descriptors: [][2]string{{"api_key", "bob"}, {"tenant,path", "acme,/v1"}}, hits: 2, status: 429, overall: "OVER_LIMIT", statuses: []string{"OVER_LIMIT 0/3 HOUR", "OK 1/5 DAY"}},
	}
	for i, st := range steps {
		envoyDoStep(t, client, "http://"+httpAddr+"/json", i, st)
	}
	if end := time.Now().Unix() / 3600 * 3600; end != hour {
		t.Fatalf("the requests crossed an hour boundary (%d to %d); the key checks below would not hold", hour, end)
	}

	// Each descriptor is one INCRBY <key> <hits> and one EXPIRE <key>
	// <unit seconds>, keyed <domain>_<key>_<value>[_<key>_<value>]_<window
	// start>; counting goes on past the limit.
	c := e2eDial(t, n.Addr())
	e2eMustDo(t, c, "+OK\r\n", "AUTH", pass)
	keys := []struct {
		key   string
		count string
		ttl   int64
	}{
		{fmt.Sprintf("%s_api_key_alice_%d", envoyDomain, hour), "4", 3600},
		{fmt.Sprintf("%s_api_key_bob_%d", envoyDomain, hour), "4", 3600},
		{fmt.Sprintf("%s_tenant_acme_path_/v1_%d", envoyDomain, day), "4", 86400},
	}
	// Counted before this test's own GETs: 4 requests of one descriptor and
	// 2 of two; no GET (only sent with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT);
	// no command failed.
	// A Raft follower counts a command when it applies it, a moment
	// after the client had its reply: wait for the counts a little.
	var stats map[string][2]int
	counted := func() bool {
		stats = envoyCommandStats(t, c)
		return stats["incrby"][0] == 8 && stats["expire"][0] == 8
	}
	for deadline := time.Now().Add(5 * time.Second); !counted() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	for name, want := range map[string]int{"incrby": 8, "expire": 8, "get": 0} {
		if got := stats[name][0]; got != want {
			t.Errorf("INFO commandstats: %s calls: got %d, want %d", name, got, want)
		}
	}
	for name, st := range stats {
		if st[1] != 0 {
			t.Errorf("INFO commandstats: %s failed_calls: got %d, want 0", name, st[1])
		}
	}
	e2eMustDo(t, c, fmt.Sprintf(":%d\r\n", len(keys)), "DBSIZE")
	for _, k := range keys {
		e2eMustDo(t, c, fmt.Sprintf("$%d\r\n%s\r\n", len(k.count), k.count), "GET", k.key)
		e2eMustDo(t, c, fmt.Sprintf(":%d\r\n", k.ttl), "TTL", k.key)
	}
	if t.Failed() {
		t.Logf("ratelimit output:\n%s", svc.output())
	}
}

// envoyExample is the service running as examples/envoy configures it.
type envoyExample struct {
	svc                         *envoyService
	httpAddr, grpcAddr, dbgAddr string
}

// envoyStartExample runs the service with examples/envoy's ratelimit.env
// and ratelimit/config/apis.yaml, free ports, and settings (REDIS_URL,
// REDIS_AUTH, ...) set or replaced, and waits until it is healthy.
func envoyStartExample(t *testing.T, bin string, settings map[string]string) *envoyExample {
	t.Helper()
	example := filepath.Join("..", "examples", "envoy")
	root := t.TempDir()
	cfgDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	apis, err := os.ReadFile(filepath.Join(example, "ratelimit", "config", "apis.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "apis.yaml"), apis, 0o644); err != nil {
		t.Fatal(err)
	}
	envFile, err := os.ReadFile(filepath.Join(example, "ratelimit.env"))
	if err != nil {
		t.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	override := map[string]string{
		"RUNTIME_ROOT": root,
		"PORT":         strconv.Itoa(ports[0]),
		"GRPC_PORT":    strconv.Itoa(ports[1]),
		"DEBUG_PORT":   strconv.Itoa(ports[2]),
	}
	maps.Copy(override, settings)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for line := range strings.Lines(string(envFile)) {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, _, _ = strings.Cut(v, " #")
		if _, set := override[k]; !set {
			env = append(env, k+"="+strings.TrimSpace(v))
		}
	}
	for k, v := range override {
		env = append(env, k+"="+v)
	}
	e := &envoyExample{
		svc:      envoyStartService(t, bin, env),
		httpAddr: proc.Addr(ports[0]),
		grpcAddr: proc.Addr(ports[1]),
		dbgAddr:  proc.Addr(ports[2]),
	}
	envoyWaitHealthy(t, e.svc, &http.Client{Timeout: 10 * time.Second}, "http://"+e.httpAddr+"/healthcheck")
	return e
}

// envoyExampleTest runs the service as examples/envoy configures it,
// logged in as the user its README makes, and checks the example's limits
// and that its keys are the ones that user may name.
func envoyExampleTest(t *testing.T, bin string, start e2eStart) {
	const pass, userPass = "s3cret", "envoy-pw"
	n := start(t, server.Config{RequirePass: pass})
	admin := nginxDialAdmin(t, n, pass)
	admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/envoy/README.md", "envoy", userPass)...)
	e := envoyStartExample(t, bin, map[string]string{"REDIS_URL": n.Addr(), "REDIS_AUTH": "envoy:" + userPass})
	client := &http.Client{Timeout: 10 * time.Second}

	step := func(key, value, status string, code int) envoyStep {
		overall := "OK"
		if code == 429 {
			overall = "OVER_LIMIT"
		}
		return envoyStep{domain: "apis", descriptors: [][2]string{{key, value}}, status: code, overall: overall, statuses: []string{status}}
	}
	// The per-second limit needs its burst inside one second: start just
	// after a second begins.
	if left := time.Until(time.Now().Truncate(time.Second).Add(time.Second)); left < 600*time.Millisecond {
		time.Sleep(left) // waiting for the next wall-clock second, the service's window
	}
	steps := []envoyStep{step("remote_address", "10.0.0.1", "OK 59/60 MINUTE", 200)}
	for i := range 10 {
		steps = append(steps, step("api_key", "k1", fmt.Sprintf("OK %d/10 SECOND", 9-i), 200))
	}
	steps = append(steps,
		step("api_key", "k1", "OVER_LIMIT 0/10 SECOND", 429),
		step("api_key", "partner-1234", "OK 99/100 SECOND", 200))
	began := time.Now().Unix()
	for i, st := range steps {
		envoyDoStep(t, client, "http://"+e.httpAddr+"/json", i, st)
	}
	if time.Now().Unix() != began {
		t.Logf("the steps crossed a second boundary; a failure above may come from that")
	}
	// The service's connections are the envoy user's; its keys, which it
	// could write, start with the domain.
	for _, l := range admin.clients(t) {
		if user := e2eField(l, "user"); user != "envoy" && !strings.Contains(l, "cmd=client|list") {
			t.Errorf("CLIENT LIST: a connection as %q, want envoy: %s", user, l)
		}
	}
	var keys []string // from KEYS' reply: *n, then $len and the key for each
	for l := range strings.Lines(admin.do(t, "KEYS", "*")) {
		if !strings.HasPrefix(l, "*") && !strings.HasPrefix(l, "$") {
			keys = append(keys, strings.TrimSpace(l))
		}
	}
	if len(keys) != 3 {
		t.Errorf("KEYS *: got %q, want the 3 counters of the steps", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "apis_") {
			t.Errorf("key %q is not the domain's (apis_*)", k)
		}
	}
	if t.Failed() {
		t.Logf("ratelimit output:\n%s", e.svc.output())
	}
}

// envoyFailureTest checks what the service answers when throttled gives no
// decision. It runs as examples/envoy configures it, first logged in as a
// user with the old recipe (its PING passes, INCRBY gets NOPERM), then
// against a node that has gone away once the service was up. The service
// must answer an error, never OK: over gRPC, as Envoy asks, an error
// status, which Envoy's failure_mode_deny turns into a pass (false) or a
// 500 (true; status_on_error sets another status); over HTTP /json the
// service's 400. It logs each (at debug level, which the test turns on).
func envoyFailureTest(t *testing.T, bin, clientBin string) {
	cases := []struct {
		name  string
		setup func(t *testing.T) (addr, auth string, gone func())
		err   string // in the gRPC error and the log
	}{
		{"error reply", func(t *testing.T) (string, string, func()) {
			const pass = "s3cret"
			erring, _ := gatewayStores(t, pass)
			return erring.Addr(), pass, func() {}
		}, "NOPERM this user has no permissions to run the 'incrby' command"},
		// The pool's connections then fail (EOF), and new ones are refused.
		{"server gone", func(t *testing.T) (string, string, func()) {
			n, err := servertest.Open(server.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			return n.Addr(), "", func() { n.Close() }
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			addr, auth, gone := c.setup(t)
			e := envoyStartExample(t, bin, map[string]string{"REDIS_URL": addr, "REDIS_AUTH": auth, "LOG_LEVEL": "debug"})
			gone()
			const n = 3
			for i := range n {
				out, err := envoyAsk(t, clientBin, e.grpcAddr, "apis", "api_key=k1")
				if err == nil || !strings.Contains(out, "request error: rpc error: code = Unknown desc = ") || !strings.Contains(out, c.err) {
					t.Errorf("gRPC request %d: got %v, want an error status with %q:\n%s", i, err, c.err, out)
				}
			}
			resp, err := http.Post("http://"+e.httpAddr+"/json", "application/json",
				strings.NewReader(`{"domain":"apis","descriptors":[{"entries":[{"key":"api_key","value":"k1"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("POST /json: got HTTP %d %s, want 400", resp.StatusCode, body)
			}
			// Its output reaches us through a pipe, a moment after the reply.
			logged := func() int {
				count := 0
				for line := range strings.Lines(e.svc.output()) {
					if strings.Contains(line, "caught error during call") && strings.Contains(line, c.err) {
						count++
					}
				}
				return count
			}
			testwait.For(t, 10*time.Second, fmt.Sprintf("the service logging %d errors", n+1), func() bool { return logged() == n+1 })
			if t.Failed() {
				t.Logf("ratelimit output:\n%s", e.svc.output())
			}
		})
	}
}

// envoyAsk asks the service at grpcAddr about one descriptor with its own
// gRPC client, as Envoy would, and returns what the client printed; err is
// the client's exit status (1 on an error reply).
func envoyAsk(t *testing.T, clientBin, grpcAddr, domain, descriptor string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, clientBin, "-dial_string", grpcAddr, "-domain", domain, "-descriptors", descriptor)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// envoyCommandStats returns INFO commandstats as command -> [calls,
// failed_calls].
func envoyCommandStats(t *testing.T, c *e2eConn) map[string][2]int {
	t.Helper()
	info, err := c.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string][2]int{}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || len(name) == len(line) {
			continue
		}
		var st [2]int
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.Atoi(v)
			switch k {
			case "calls":
				st[0] = n
			case "failed_calls":
				st[1] = n
			}
		}
		stats[name] = st
	}
	if len(stats) == 0 {
		t.Fatalf("INFO commandstats: no cmdstat_ lines in %q", info)
	}
	return stats
}

// envoyDoStep sends one request and checks the reply.
func envoyDoStep(t *testing.T, client *http.Client, url string, i int, st envoyStep) {
	t.Helper()
	type entry struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	type descriptor struct {
		Entries []entry `json:"entries"`
	}
	req := struct {
		Domain      string       `json:"domain"`
		Descriptors []descriptor `json:"descriptors"`
		HitsAddend  int          `json:"hitsAddend,omitempty"`
	}{Domain: cmp.Or(st.domain, envoyDomain), HitsAddend: st.hits}
	for _, d := range st.descriptors {
		var es []entry
		vals := strings.Split(d[1], ",")
		for j, k := range strings.Split(d[0], ",") {
			es = append(es, entry{k, vals[j]})
		}
		req.Descriptors = append(req.Descriptors, descriptor{es})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("step %d: POST %s: %v", i, body, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	if resp.StatusCode != st.status {
		t.Fatalf("step %d: POST %s: got HTTP %d, want %d; body %s", i, body, resp.StatusCode, st.status, raw)
	}
	var r envoyReply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("step %d: %v in %s", i, err, raw)
	}
	var got []string
	for _, s := range r.Statuses {
		if s.CurrentLimit == nil || s.DurationUntilReset == "" {
			t.Fatalf("step %d: status without a current limit or reset duration: %s", i, raw)
		}
		got = append(got, fmt.Sprintf("%s %d/%d %s", s.Code, s.LimitRemaining, s.CurrentLimit.RequestsPerUnit, s.CurrentLimit.Unit))
	}
	if r.OverallCode != st.overall || !slices.Equal(got, st.statuses) {
		t.Fatalf("step %d: POST %s: got %s %v, want %s %v; body %s", i, body, r.OverallCode, got, st.overall, st.statuses, raw)
	}
}

// envoyAwayFromHourEnd waits for the next hour when the current one ends
// within 15 s, so that the steps' hour and day windows do not change.
func envoyAwayFromHourEnd(t *testing.T) {
	t.Helper()
	now := time.Now()
	next := now.Truncate(time.Hour).Add(time.Hour)
	if left := next.Sub(now); left < 15*time.Second {
		t.Logf("waiting %v for the next hour window", left.Round(time.Millisecond))
		select {
		case <-time.After(left + 100*time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// envoyService is a running ratelimit service process.
type envoyService struct {
	cmd  *exec.Cmd
	out  *e2eOutput
	done chan struct{} // closed when the process has exited and been waited for
}

func (s *envoyService) output() string { return s.out.String() }

// envoyStartService starts bin with exactly env. When the test ends it is
// sent SIGTERM, and SIGKILL if it has not exited 10 s later.
func envoyStartService(t *testing.T, bin string, env []string) *envoyService {
	t.Helper()
	s := &envoyService{cmd: exec.Command(bin), out: &e2eOutput{}, done: make(chan struct{})}
	s.cmd.Env = env
	s.cmd.Dir = t.TempDir()
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = procattr.Child()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start ratelimit: %v", err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
			t.Errorf("ratelimit did not exit within 10s of SIGTERM; killed\n%s", s.output())
		}
	})
	return s
}

// envoyWaitHealthy polls url until it answers 200, for at most 60 s.
func envoyWaitHealthy(t *testing.T, s *envoyService, client *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("ratelimit not healthy after 60s (%s: %v)\n%s", url, err, s.output())
		}
		select {
		case <-s.done:
			t.Fatalf("ratelimit exited before it was healthy: %v\n%s", s.cmd.ProcessState, s.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// --- ratelimit's own integration tests -------------------------------------

// envoyOwnTests are the tests of ratelimit's test/integration (build tag
// "integration") that need nothing but plain Redis servers, which they start
// themselves. Excluded, because they need what a plain Redis is not:
// TestBasicTLSConfig and Test_mTLS (stunnel in front of Redis, on fixed
// ports), TestBasicAuthConfigWithRedisCluster (a 6-node Redis Cluster),
// TestBasicAuthConfigWithRedisSentinel (Sentinels and replicas), and
// TestBasicConfigMemcache, TestConfigMemcacheWithMaxIdleConns and
// TestMultiNodeMemcache (memcached). Test_mTLSSetup only makes certificates
// and needs no server. The package's unit tests (no build tag) use mocks
// and an in-process miniredis, never a server.
var envoyOwnTests = []string{
	"TestBasicConfig",                  // INCRBY+EXPIRE pipelines, 2 servers (per-second), local cache, key prefix, GET with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
	"TestBasicAuthConfig",              // the same through AUTH (requirepass)
	"TestBasicReloadConfig",            // config reload while serving
	"TestShareThreshold",               // wildcard keys sharing one counter
	"TestBasicConfig_ExtraTags",        // starts a server only
	"TestXdsProviderBasicConfig",       // limits from an xDS server, same Redis traffic
	"TestXdsProviderBasicConfigReload", // xDS config update
	"TestReloadGRPCServerCerts",        // gRPC TLS reload with Redis behind
}

// envoyFixedPorts are the ports those tests use, hard-coded: Redis 6380,
// 6383, 6384, 6385; the service 8082-8084; the xDS server 18000. All are
// below Linux's ephemeral range, so free-port picks never take them.
var envoyFixedPorts = []int{6380, 6383, 6384, 6385, 8082, 8083, 8084, 18000}

func envoyIntegrationTests(t *testing.T, modDir string) {
	// A writable copy: the tests rewrite their runtime config directory.
	src := filepath.Join(t.TempDir(), "ratelimit")
	if err := envoyCopyTree(modDir, src); err != nil {
		t.Fatal(err)
	}

	// The redis-server stand-in: throttled, in memory, taking the same
	// --port and --requirepass; exec keeps the pid, so the tests' SIGKILL
	// reaches throttled itself. Every start is logged in starts.
	tools := t.TempDir()
	throttled := filepath.Join(tools, "throttled")
	if out, err := exec.Command("go", "build", "-o", throttled, "../cmd/throttled").CombinedOutput(); err != nil {
		t.Fatalf("go build throttled: %v\n%s", err, out)
	}
	shimDir := filepath.Join(tools, "bin")
	starts := filepath.Join(tools, "starts")
	if err := os.Mkdir(shimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	shim := "#!/bin/sh\n" +
		"# redis-server stand-in for ratelimit's test/common.WithMultiRedis\n" +
		"echo \"$*\" >> " + envoyShQuote(starts) + "\n" +
		"exec " + envoyShQuote(throttled) + " --persistence off --loglevel warn \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shimDir, "redis-server"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}

	testBin := filepath.Join(tools, "integration.test")
	envoyGo(t, src, "test", "-trimpath", "-tags=integration", "-c", "-o", testBin, "./test/integration/")

	unlock := envoyLockPorts(t)
	defer unlock()
	res := envoyRunOwnTests(t, testBin, src, shimDir, envoyOwnTests)
	startLog, _ := os.ReadFile(starts)
	t.Logf("ratelimit's integration tests against throttled (%v): %s\nthrottled started as redis-server with: %q",
		res.elapsed.Round(time.Millisecond), res.summary(), strings.Split(strings.TrimSpace(string(startLog)), "\n"))
	if len(startLog) == 0 {
		t.Errorf("the redis-server stand-in was never run")
	}

	var failed []string
	for _, name := range envoyOwnTests {
		switch res.result[name] {
		case "pass":
		case "fail":
			failed = append(failed, name)
		default:
			// A test that panicked stops the binary: the ones after it
			// never ran. They run again below, as the failures do.
			t.Logf("%s did not run (%q): the test binary stopped early", name, res.result[name])
			failed = append(failed, name)
		}
	}
	if len(failed) == 0 {
		return
	}
	// Those tests count hits in fixed windows of the wall clock (per
	// second, per minute): a test that runs across a window's end fails
	// against any server, more often on a loaded machine; and ratelimit's
	// TestReloadGRPCServerCerts dials its own gRPC server before it may
	// listen, then panics on the nil connection. So a failure counts only
	// if it comes back on a second run.
	again := envoyRunOwnTests(t, testBin, src, shimDir, failed)
	failed = slices.DeleteFunc(failed, func(name string) bool {
		if again.result[name] != "pass" {
			t.Errorf("%s fails against throttled, twice (or did not run):\n%s\n--- the second run ---\n%s", name, res.tail(name), again.tail(name))
			return false
		}
		t.Logf("%s failed against throttled and passed when run again (a window boundary?):\n%s", name, res.tail(name))
		return true
	})
	if len(failed) == 0 {
		return
	}
	// Tell a throttled bug from a test that fails anyway.
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Logf("redis-server is not installed; cannot check the failures against it")
		return
	}
	ref := envoyRunOwnTests(t, testBin, src, "", failed)
	for _, name := range failed {
		if ref.result[name] == "pass" {
			t.Errorf("%s passes against redis-server: a throttled bug", name)
		} else {
			t.Logf("%s also fails against redis-server (%q):\n%s", name, ref.result[name], ref.tail(name))
		}
	}
}

// envoyRun is the outcome of one go test run of ratelimit's tests.
type envoyRun struct {
	result  map[string]string           // test (and subtest) name -> pass, fail or skip
	output  map[string]*strings.Builder // top-level test name -> its output
	elapsed time.Duration
}

// envoyRunOwnTests runs tests of testBin, ratelimit's compiled
// test/integration package, in its source directory under src, as go test
// would (through test2json), with shimDir first on PATH ("" for the PATH
// as it is).
func envoyRunOwnTests(t *testing.T, testBin, src, shimDir string, tests []string) *envoyRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), envoyGoTimeout)
	defer cancel()
	args := []string{"tool", "test2json", "-t", "-p", envoyModule + "/test/integration", testBin,
		"-test.v=test2json", "-test.count=1", "-test.timeout=5m", "-test.run", "^(" + strings.Join(tests, "|") + ")$"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(src, "test", "integration")
	// Its TLS tests write certificates to temp files they leave behind:
	// into the test's own folder, which is removed.
	cmd.Env = append(envoyGoEnv(), "TMPDIR="+t.TempDir())
	if shimDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+shimDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	// Its own process group: on the way out, whatever it left behind (a
	// server whose test crashed) is killed with it.
	cmd.SysProcAttr = procattr.Child()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stderr e2eOutput
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run := &envoyRun{result: map[string]string{}, output: map[string]*strings.Builder{}}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var other strings.Builder // output not attributed to a test
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct{ Action, Test, Output string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			other.WriteString(sc.Text() + "\n")
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		switch {
		case ev.Test == "":
			other.WriteString(ev.Output)
		case ev.Action == "output":
			b := run.output[top]
			if b == nil {
				b = &strings.Builder{}
				run.output[top] = b
			}
			b.WriteString(ev.Output)
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			run.result[ev.Test] = ev.Action
		}
	}
	_, _ = io.Copy(io.Discard, stdout) // after a scanner error, so go test never blocks
	waitErr := cmd.Wait()
	run.elapsed = time.Since(start)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // stragglers only; the group leader is gone
	if len(run.result) == 0 {
		t.Fatalf("go %s: no test ran (%v)\n%s%s", strings.Join(args, " "), waitErr, stderr.String(), other.String())
	}
	return run
}

// summary counts the results of top-level tests and subtests.
func (r *envoyRun) summary() string {
	count := map[string]int{}
	var names []string
	for name, res := range r.result {
		count[res]++
		if !strings.Contains(name, "/") {
			names = append(names, name+"="+res)
		}
	}
	slices.Sort(names)
	return fmt.Sprintf("%d passed, %d failed, %d skipped (tests and subtests); %s",
		count["pass"], count["fail"], count["skip"], strings.Join(names, " "))
}

// tail returns the failure messages in a test's output, then the end of
// that output without the stats sink's debug lines.
func (r *envoyRun) tail(name string) string {
	b := r.output[name]
	if b == nil {
		return "(no output)"
	}
	var fails, rest []string
	for line := range strings.SplitSeq(b.String(), "\n") {
		if strings.Contains(line, `"logger":"gostats.`) {
			continue
		}
		rest = append(rest, line)
		if strings.Contains(line, "Error") || strings.Contains(line, "--- FAIL") || strings.Contains(line, "panic") {
			fails = append(fails, line)
		}
	}
	out := strings.Join(rest, "\n")
	if len(out) > 8<<10 {
		out = "..." + out[len(out)-8<<10:]
	}
	return strings.Join(fails, "\n") + "\n--- end of its output ---\n" + out
}

// envoyLockPorts takes an exclusive lock that serialises runs of ratelimit's
// integration tests on this machine (they use envoyFixedPorts), then checks
// that those ports are free. It waits up to 5 minutes for the lock.
func envoyLockPorts(t *testing.T) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "throttled-envoy-ratelimit.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("lock %s: %v", f.Name(), err)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-t.Context().Done():
			f.Close()
			t.Fatal(t.Context().Err())
		}
	}
	for _, p := range envoyFixedPorts {
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			f.Close()
			t.Fatalf("port %d, which ratelimit's integration tests hard-code, is taken: %v", p, err)
		}
		l.Close()
	}
	return func() { f.Close() }
}

// envoyCopyTree copies the regular files and directories under src to dst,
// writable (the module cache is read-only).
func envoyCopyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil // the module zip holds nothing else
	})
}

// envoyShQuote quotes s for a POSIX shell.
func envoyShQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
