package compat

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/server"
)

// The policy gateway of examples/openresty (location /v1/, Lua module
// throttled_policy.lua): one THROTTLE.POLICY per request, its reply mapped
// to 429, Retry-After, X-RateLimit-* and the IETF RateLimit fields. Run
// with the example's files, unchanged but for the ports, under real nginx.

// nginxPolicies are the policies the tests load: items (a GCRA of 3 at
// once, one more every 2 s, and 5 a minute) and the UNKNOWN fallback (one
// a second).
const nginxPolicies = `policies:
  - {id: items, path: '/v1/orgs/{org}/items/*', methods: [GET], tiers: [{algorithm: cl, burst: 2, count: 1, period: 2s}, {algorithm: fwc, limit: 5, window: 1m}]}
  - {id: unknown, fallback: unknown, tiers: [{algorithm: cl, burst: 0, count: 1, period: 1s}]}
`

// TestNginxPolicy runs the policy gateway against a node with a password,
// logged in as the user its README makes, on the debug clock (set 20 s into
// a minute, so the minute's window resets in 40 s): each response's status,
// headers and body are exact.
func TestNginxPolicy(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	e2eModes(t, func(t *testing.T, start e2eStart) { testNginxPolicy(t, bin, start) })
}

func testNginxPolicy(t *testing.T, bin string, start e2eStart) {
	const pass, userPass = "gw-s3cret", "policy-pw"
	node := start(t, server.Config{RequirePass: pass})
	admin := nginxDialAdmin(t, node, pass)
	admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/openresty/README.md", "openresty-policy", userPass)...)
	admin.want(t, ":2\r\n", "POLICY", "LOAD", nginxPolicies)
	ngx := nginxStartExample(t, bin, nil, append(gatewayEnv(t, node.Addr()), "THROTTLED_USERNAME=openresty-policy", "THROTTLED_PASSWORD="+userPass))
	before := admin.calls(t)

	const (
		items   = `"items.1";q=3;w=6, "items.2";q=5;w=60`
		unknown = `"unknown.1";q=1;w=1`
	)
	steps := []struct {
		advance   time.Duration
		principal string
		path      string
		status    int
		xrl       string // X-RateLimit-Limit/Remaining/Reset
		policy    string // RateLimit-Policy
		rateLimit string // RateLimit
		retry     string // Retry-After
	}{
		{0, "alice", "/v1/orgs/acme/items/1", 200, "3 2 2", items, `"items.1";r=2;t=2, "items.2";r=4;t=40`, ""},
		{0, "alice", "/v1/orgs/acme/items/2", 200, "3 1 4", items, `"items.1";r=1;t=4, "items.2";r=3;t=40`, ""},
		// Spellings of one item path reach the one policy and its keys.
		{0, "alice", "/v1/orgs/acme//items/./%33?page=2", 200, "3 0 6", items, `"items.1";r=0;t=6, "items.2";r=2;t=40`, ""},
		// The GCRA tier refuses; the minute's is not charged.
		{0, "alice", "/v1/orgs/acme/items/4", 429, "3 0 6", items, `"items.1";r=0;t=6, "items.2";r=2;t=40`, "2"},
		{0, "bob", "/v1/orgs/acme/items/4", 200, "3 2 2", items, `"items.1";r=2;t=2, "items.2";r=4;t=40`, ""},
		{2 * time.Second, "alice", "/v1/orgs/x/items/5", 200, "3 0 6", items, `"items.1";r=0;t=6, "items.2";r=1;t=38`, ""},
		{2 * time.Second, "alice", "/v1/orgs/x/items/6", 200, "3 0 6", items, `"items.1";r=0;t=6, "items.2";r=0;t=36`, ""},
		// Now the minute's tier refuses, until its window ends.
		{2 * time.Second, "alice", "/v1/orgs/x/items/7", 429, "5 0 34", items, `"items.1";r=1;t=4, "items.2";r=0;t=34`, "34"},
		// A path no template matches is the UNKNOWN endpoint's.
		{0, "carol", "/v1/no/such/thing", 200, "1 0 1", unknown, `"unknown.1";r=0;t=1`, ""},
		{0, "carol", "/v1/other/thing", 429, "1 0 1", unknown, `"unknown.1";r=0;t=1`, "1"},
	}
	for i, s := range steps {
		if s.advance > 0 {
			admin.advance(t, s.advance)
		}
		r := nginxGet(t, ngx.url+s.path, "X-API-Key", s.principal)
		h := r.header
		wantBody := "hello from the upstream: " + s.path + "\n"
		if s.status == 429 {
			id, _, _ := strings.Cut(strings.Trim(s.policy, `"`), ".")
			wantBody = fmt.Sprintf(`{"error":"rate limited","policy":"%s","retry_after":%s}`+"\n", id, s.retry)
		}
		got := fmt.Sprintf("%d [%s %s %s] %q %q %q %q", r.status, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"),
			h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"), r.body)
		want := fmt.Sprintf("%d [%s] %q %q %q %q", s.status, s.xrl, s.policy, s.rateLimit, s.retry, wantBody)
		if got != want {
			t.Errorf("step %d (%s %s):\n got %s\nwant %s", i, s.principal, s.path, got, want)
		}
	}
	// One AUTH on the pooled connection, then one THROTTLE.POLICY per request.
	admin.wantCalls(t, before, fmt.Sprintf("auth=1 throttle.policy=%d", len(steps)), "auth", "throttle.policy")
}

// nginxStartExample runs examples/openresty with the two ports replaced
// and subst's replacements.
func nginxStartExample(t *testing.T, bin string, subst map[string]string, env []string) *nginxServer {
	t.Helper()
	listen, upstream := nginxFreeAddr(t), nginxFreeAddr(t)
	all := map[string]string{"127.0.0.1:8080": listen, "127.0.0.1:8081": upstream}
	for k, v := range subst {
		all[k] = v
	}
	return nginxStart(t, bin, listen, nginxConfig{
		conf:           "../examples/openresty/nginx.conf",
		lua:            "../examples/openresty/lua",
		subst:          all,
		env:            env,
		errorsExpected: subst != nil,
	})
}

// policyFailureStore is a store that gives a policy gateway no decision:
// the environment that points the gateway at it, and the error it logs
// for GET /v1/orgs/acme/items/1.
type policyFailureStore struct {
	name string
	env  []string
	err  string
}

// policyFailureStores are an error reply (the default user, logged in with
// AUTH <password>, may not run THROTTLE.POLICY: NOPERM) and a dead port.
func policyFailureStores(t *testing.T) []policyFailureStore {
	const pass = "gw-s3cret"
	// The old recipe's +@ratelimit holds THROTTLE.POLICY: take it away.
	erring, dead := gatewayStores(t, pass, "-throttle.policy")
	return []policyFailureStore{
		{"error reply", append(gatewayEnv(t, erring.Addr()), "THROTTLED_PASSWORD="+pass),
			"THROTTLE.POLICY GET /v1/orgs/acme/items/1: NOPERM this user has no permissions to run the 'throttle.policy' command"},
		{"unreachable", gatewayEnv(t, dead), "connect: connection refused"},
	}
}

// TestNginxPolicyFailure: the policy gateway fails closed. When throttled
// answers an error (a user that may not run THROTTLE.POLICY: NOPERM) or
// cannot be reached, every request gets 503 without rate-limit headers, and
// each one logs the error and what was done.
func TestNginxPolicyFailure(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	for _, store := range policyFailureStores(t) {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			ngx := nginxStartExample(t, bin, map[string]string{}, store.env)
			const n = 5
			for i := range n {
				r := nginxGet(t, ngx.url+"/v1/orgs/acme/items/1", "X-API-Key", "alice")
				if r.status != 503 || r.header.Get("RateLimit") != "" || r.header.Get("X-RateLimit-Limit") != "" {
					t.Errorf("request %d: got %d RateLimit %q X-RateLimit-Limit %q, want 503 and no rate-limit headers",
						i, r.status, r.header.Get("RateLimit"), r.header.Get("X-RateLimit-Limit"))
				}
			}
			lines := ngx.errors()
			if got := gatewayCount(lines, "throttled_policy: "+store.err+" (failing closed: 503)"); got != n {
				t.Errorf("error log: %d lines with %q, want %d:\n%s", got, store.err, n, strings.Join(lines, "\n"))
			}
		})
	}
}

// kongPolicyStart runs examples/kong/plugins/throttled-policy's own files
// on the PDK shim (compat/nginx/kong.conf, location /v1/) against addr.
func kongPolicyStart(t *testing.T, bin string, subst map[string]string, env ...string) *nginxServer {
	t.Helper()
	dir, err := filepath.Abs("../examples/kong/plugins/throttled-policy")
	if err != nil {
		t.Fatal(err)
	}
	return kongStart(t, bin, nginxConfig{subst: subst, env: append(env, "KONG_PLUGIN_DIR="+dir), errorsExpected: len(subst) > 0})
}

// TestNginxKongPolicy runs the Kong plugin as the user examples/kong's
// README makes for it, with the policies and timeline of TestNginxPolicy:
// the consumer is the principal (else the address), X-Tenant the tenant,
// and a limited request gets Kong's 429 body with every header exact.
func TestNginxKongPolicy(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	e2eModes(t, func(t *testing.T, start e2eStart) {
		const pass, userPass = "kong-s3cret", "kong-policy-pw"
		node := start(t, server.Config{RequirePass: pass})
		admin := nginxDialAdmin(t, node, pass)
		admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/kong/README.md", "kong-policy", userPass)...)
		admin.want(t, ":2\r\n", "POLICY", "LOAD", nginxPolicies)
		ngx := kongPolicyStart(t, bin, map[string]string{}, append(gatewayEnv(t, node.Addr()), "THROTTLED_PASSWORD="+userPass)...)
		before := admin.calls(t)

		const items = `"items.1";q=3;w=6, "items.2";q=5;w=60`
		limitedBody := `{"message":"API rate limit exceeded"}` + "\n"
		for i, s := range []struct {
			headers []string
			path    string
			want    string // status [X-RateLimit-*] RateLimit-Policy | RateLimit | Retry-After
			body    string
		}{
			{[]string{"X-Test-Consumer-Id", "c1"}, "/v1/orgs/acme/items/1", `200 [3 2 2] ` + items + ` | "items.1";r=2;t=2, "items.2";r=4;t=40 | `, ""},
			{[]string{"X-Test-Consumer-Id", "c1"}, "/v1/orgs/acme//items/./2?x=1", `200 [3 1 4] ` + items + ` | "items.1";r=1;t=4, "items.2";r=3;t=40 | `, ""},
			{[]string{"X-Test-Consumer-Id", "c1"}, "/v1/orgs/acme/items/3", `200 [3 0 6] ` + items + ` | "items.1";r=0;t=6, "items.2";r=2;t=40 | `, ""},
			{[]string{"X-Test-Consumer-Id", "c1"}, "/v1/orgs/acme/items/4", `429 [3 0 6] ` + items + ` | "items.1";r=0;t=6, "items.2";r=2;t=40 | 2`, limitedBody},
			// Another tenant's keys, and the address when no consumer.
			{[]string{"X-Test-Consumer-Id", "c1", "X-Tenant", "acme"}, "/v1/orgs/acme/items/5", `200 [3 2 2] ` + items + ` | "items.1";r=2;t=2, "items.2";r=4;t=40 | `, ""},
			{nil, "/v1/orgs/acme/items/6", `200 [3 2 2] ` + items + ` | "items.1";r=2;t=2, "items.2";r=4;t=40 | `, ""},
			{nil, "/v1/nowhere", `200 [1 0 1] "unknown.1";q=1;w=1 | "unknown.1";r=0;t=1 | `, ""},
			{nil, "/v1/elsewhere", `429 [1 0 1] "unknown.1";q=1;w=1 | "unknown.1";r=0;t=1 | 1`, limitedBody},
		} {
			r := nginxGet(t, ngx.url+s.path, s.headers...)
			h := r.header
			body := s.body
			if body == "" {
				body = "hello from the upstream: " + s.path + "\n"
			}
			got := fmt.Sprintf("%d [%s %s %s] %s | %s | %s", r.status, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"),
				h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"))
			if got != s.want || r.body != body {
				t.Errorf("step %d (%q %s):\n got %s %q\nwant %s %q", i, s.headers, s.path, got, r.body, s.want, body)
			}
		}
		admin.want(t, ":3\r\n", "EXISTS", "policy:items:1::consumer:c1", "policy:items:1:acme:consumer:c1", "policy:items:1::ip:127.0.0.1")
		admin.wantCalls(t, before, "auth=1 throttle.policy=8", "auth", "throttle.policy")
	})
}

// TestNginxKongPolicyFailure: with fault_tolerant false (the schema's
// default) no decision is 503; with true the request passes. Each logs.
func TestNginxKongPolicyFailure(t *testing.T) {
	bin := nginxLook(t)
	t.Parallel()
	for _, store := range policyFailureStores(t) {
		for _, mode := range []struct {
			tolerant string
			status   int
			log      string
		}{{"false", 503, "(503)"}, {"true", 200, "(fault_tolerant: request let through)"}} {
			t.Run(store.name+"/fault_tolerant="+mode.tolerant, func(t *testing.T) {
				t.Parallel()
				ngx := kongPolicyStart(t, bin, map[string]string{
					`set $kong_conf_fault_tolerant "false";`: `set $kong_conf_fault_tolerant "` + mode.tolerant + `";`,
					// AUTH <password>: the default user, whom the erring
					// store refuses THROTTLE.POLICY.
					`set $kong_conf_username "kong-policy";`: `set $kong_conf_username "";`,
				}, store.env...)
				const n = 3
				for i := range n {
					if r := nginxGet(t, ngx.url+"/v1/orgs/acme/items/1"); r.status != mode.status || r.header.Get("RateLimit") != "" {
						t.Errorf("request %d: got %d RateLimit %q, want %d and none", i, r.status, r.header.Get("RateLimit"), mode.status)
					}
				}
				lines := ngx.errors()
				if got := gatewayCount(lines, "throttled-policy: "+store.err+" "+mode.log); got != n {
					t.Errorf("error log: %d lines with %q, want %d:\n%s", got, store.err, n, strings.Join(lines, "\n"))
				}
			})
		}
	}
}
