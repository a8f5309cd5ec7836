package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/client/httplimit"
	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// loginPolicies: 3 logins a minute per client (cl burst 2), 100 item reads.
const loginPolicies = `
policies:
  - id: login
    path: /v1/login
    methods: [POST]
    tiers: [{algorithm: cl, burst: 2, count: 1, period: 60}]
  - id: items
    path: /v1/items/{id}
    methods: [GET]
    tiers: [{algorithm: fwc, limit: 100, window: 1m}]
`

// store starts throttled on the debug clock at a minute's start, so fixed
// windows (aligned to the epoch) reset at known times.
func store(t *testing.T) *redis.Client {
	t.Helper()
	n := servertest.Start(t, server.Config{DebugClock: true, DebugClockStart: time.Now().Truncate(time.Minute).UnixNano()})
	return pool(t, n.Addr())
}

func pool(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func policies(t *testing.T, text string) []policy.Policy {
	t.Helper()
	ps, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// handler is the middleware over a handler that answers 200.
func handler(t *testing.T, cfg httplimit.Config) http.Handler {
	t.Helper()
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
}

// req sends one request from peer (host:port) with the headers (name,
// value pairs) and returns the response.
func req(h http.Handler, method, target, peer string, headers ...string) *http.Response {
	r := httptest.NewRequest(method, target, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// statuses sends n requests made by mk(i) and returns their status codes.
func statuses(n int, mk func(i int) *http.Response) []int {
	var out []int
	for i := range n {
		out = append(out, mk(i).StatusCode)
	}
	return out
}

func want(t *testing.T, what string, got []int, ok int) {
	t.Helper()
	for i, s := range got {
		if exp := map[bool]int{true: 200, false: 429}[i < ok]; s != exp {
			t.Errorf("%s: statuses %v, want %d passes then 429s", what, got, ok)
			return
		}
	}
}

func keys(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestA1LoginLockout: the endpoint-aware study's A1. An attacker floods the
// login endpoint for a victim's account: its own bucket (endpoint and its
// address) runs out, whatever spelling of the path it uses, while the
// victim logs in from its address and the attacker's other endpoints are
// untouched.
func TestA1LoginLockout(t *testing.T) {
	rdb := store(t)
	h := handler(t, httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies), Fail: client.FailClosed})
	paths := []string{"/v1/login", "/v1//login", "/v1/x/../login", "/v1/login/", "/%761/login", "/v1/login?user=victim"}
	got := statuses(20, func(i int) *http.Response {
		return req(h, "POST", paths[i%len(paths)], "198.51.100.66:4000")
	})
	want(t, "attacker", got, 3)
	res := req(h, "POST", "/v1/login", "198.51.100.66:4001")
	if ra := res.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("429 without Retry-After: %v", res.Header)
	}
	if res := req(h, "POST", "/v1/login", "203.0.113.7:5000"); res.StatusCode != 200 {
		t.Errorf("the victim is locked out: %d", res.StatusCode)
	}
	if res := req(h, "GET", "/v1/items/42", "198.51.100.66:4000"); res.StatusCode != 200 {
		t.Errorf("another endpoint of the attacker: %d", res.StatusCode)
	}
	ks := keys(t, rdb)
	for _, k := range []string{"httplimit:login::ip:198.51.100.66", "httplimit:login::ip:203.0.113.7", "httplimit:items::ip:198.51.100.66"} {
		if !contains(ks, k) {
			t.Errorf("no key %s in %v", k, ks)
		}
	}
	if len(ks) != 3 {
		t.Errorf("keys %v: the path spellings minted keys", ks)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestA2Spoofing: the study's A2. Forwarding headers from a peer that is
// not a trusted proxy are ignored, however they rotate; behind a trusted
// proxy the chain is read right to left, skipping trusted hops, so what
// the client wrote at the left of it changes nothing.
func TestA2Spoofing(t *testing.T) {
	rdb := store(t)
	h := handler(t, httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies), Fail: client.FailClosed,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	got := statuses(10, func(i int) *http.Response {
		return req(h, "POST", "/v1/login", "198.51.100.66:4000",
			"X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i),
			"Forwarded", fmt.Sprintf("for=192.0.2.%d", i))
	})
	want(t, "untrusted peer rotating headers", got, 3)

	// Through the trusted proxy 10.0.0.1, which got it from the trusted
	// 10.0.0.2, which got it from 203.0.113.9: the spoofed hops at the
	// left rotate.
	got = statuses(10, func(i int) *http.Response {
		return req(h, "POST", "/v1/login", "10.0.0.1:3000",
			"X-Forwarded-For", fmt.Sprintf("192.0.2.%d, 198.18.0.%d", i, i),
			"X-Forwarded-For", "203.0.113.9, 10.0.0.2")
	})
	want(t, "client behind trusted proxies", got, 3)
	// Another client behind the same proxies has its own bucket; so does
	// one named by Forwarded (IPv6 with a port, quoted), per /64.
	if res := req(h, "POST", "/v1/login", "10.0.0.1:3000", "X-Forwarded-For", "203.0.113.10, 10.0.0.2"); res.StatusCode != 200 {
		t.Errorf("another client behind the proxy: %d", res.StatusCode)
	}
	got = statuses(5, func(i int) *http.Response {
		return req(h, "POST", "/v1/login", "10.0.0.1:3000",
			"Forwarded", fmt.Sprintf(`for=192.0.2.%d, for="[2001:db8::%d]:4711";proto=https, for=10.0.0.2`, i, i+1))
	})
	want(t, "Forwarded IPv6 client rotating inside its /64", got, 3)
	ks := keys(t, rdb)
	for _, k := range []string{"httplimit:login::ip:198.51.100.66", "httplimit:login::ip:203.0.113.9",
		"httplimit:login::ip:203.0.113.10", "httplimit:login::ip:2001:db8::/64"} {
		if !contains(ks, k) {
			t.Errorf("no key %s in %v", k, ks)
		}
	}
	if len(ks) != 4 {
		t.Errorf("keys %v, want 4", ks)
	}
}

// TestA5FakeKeyRotation: the study's A5. Random API keys fail validation
// and fall back to the client's address, so rotating them mints no
// identity; a valid key has its own bucket, keyed by its HMAC, and never
// appears in a store key.
func TestA5FakeKeyRotation(t *testing.T) {
	rdb := store(t)
	const good = "sk_live_0123456789abcdef"
	h := handler(t, httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies), Fail: client.FailClosed,
		Secret: []byte("0123456789abcdef0123456789abcdef"),
		ValidateKey: func(r *http.Request, key string) (string, bool) {
			return "acme", key == good
		}})
	got := statuses(20, func(i int) *http.Response {
		return req(h, "POST", "/v1/login", "198.51.100.66:4000", "X-API-Key", fmt.Sprintf("sk_live_fake%04d", i))
	})
	want(t, "rotating fake keys", got, 3)
	got = statuses(5, func(i int) *http.Response {
		return req(h, "POST", "/v1/login", "198.51.100.66:4000", "X-API-Key", good)
	})
	want(t, "the valid key from the same address", got, 3)
	ks := keys(t, rdb)
	if len(ks) != 2 {
		t.Fatalf("keys %v: fake keys minted identities", ks)
	}
	for _, k := range ks {
		if strings.Contains(k, "sk_live") {
			t.Errorf("a raw API key in the store key %q", k)
		}
	}
	if !contains(ks, "httplimit:login::ip:198.51.100.66") {
		t.Errorf("no IP bucket in %v", ks)
	}
}

// TestHeaders: the x-ratelimit-* and IETF fields of a two-tier policy,
// allowed and refused, over a real HTTP server.
func TestHeaders(t *testing.T) {
	rdb := store(t)
	srv := httptest.NewServer(handler(t, httplimit.Config{Client: rdb, Policies: policies(t, `
policies:
  - id: search
    path: /search
    tiers:
      - {algorithm: fwc, limit: 2, window: 10s}
      - {algorithm: tb, capacity: 5, refill: 1, period: 1s}
`)}))
	defer srv.Close()
	get := func() *http.Response {
		res, err := http.Get(srv.URL + "/search?q=x")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := get()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	for name, v := range map[string]string{
		"X-Ratelimit-Limit":     "2",
		"X-Ratelimit-Remaining": "1",
		"X-Ratelimit-Reset":     "10",
		"Ratelimit-Policy":      `"search-1";q=2;w=10, "search-2";q=5;w=5`,
		"Ratelimit":             `"search-1";r=1;t=10`,
		"Retry-After":           "",
	} {
		if got := res.Header.Get(name); got != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
	get()
	res = get()
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "10" || res.Header.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("refused: %d %v", res.StatusCode, res.Header)
	}
	// A path no policy covers passes without fields.
	res, err := http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("RateLimit") != "" {
		t.Errorf("no policy: %d %v", res.StatusCode, res.Header)
	}
}

// TestStorePolicies: with the store's policies, the middleware asks
// THROTTLE.POLICY and writes its answer.
func TestStorePolicies(t *testing.T) {
	rdb := store(t)
	ctx := context.Background()
	if err := rdb.Do(ctx, "POLICY", "SET", "{id: login, path: /v1/login, methods: [POST], tiers: [{algorithm: fwc, limit: 2, window: 10s}, {algorithm: cl, burst: 4, count: 1, period: 1s}]}").Err(); err != nil {
		t.Fatal(err)
	}
	h := handler(t, httplimit.Config{Client: rdb, StorePolicies: true, Fail: client.FailClosed})
	got := statuses(4, func(int) *http.Response { return req(h, "POST", "/v1//login", "198.51.100.66:4000") })
	want(t, "store policy", got, 2)
	res := req(h, "POST", "/v1/login", "198.51.100.66:4000")
	for name, v := range map[string]string{
		"RateLimit-Policy": `"login-1";q=2;w=10, "login-2";q=5;w=5`, // a cl tier's window: its refill time, (burst+1) x period / count
		"RateLimit":        `"login-1";r=0;t=10`,
		"Retry-After":      "10",
	} {
		if got := res.Header.Get(name); got != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
	if res := req(h, "GET", "/v1/login", "198.51.100.66:4000"); res.StatusCode != 200 || res.Header.Get("RateLimit") != "" {
		t.Errorf("no policy for GET: %d %v", res.StatusCode, res.Header)
	}
}

// TestStoreStopped: with the store stopped (really: its listener closed),
// FailClosed answers 503 and reports the error; FailOpen limits with the
// fallback limiter: its tier per client, and no more clients than
// FallbackKeys.
func TestStoreStopped(t *testing.T) {
	n, err := servertest.Open(server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rdb := pool(t, n.Addr())
	var errs int
	closed := handler(t, httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies), Fail: client.FailClosed,
		OnError: func(*http.Request, error) { errs++ }})
	open := handler(t, httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies), FallbackKeys: 2,
		Fallback: []policy.Tier{{Algorithm: policy.FWC, Limit: 4, Period: 3_600_000}}})
	storeOpen := handler(t, httplimit.Config{Client: rdb, StorePolicies: true,
		Fallback: []policy.Tier{{Algorithm: policy.FWC, Limit: 4, Period: 3_600_000}}})
	if res := req(closed, "POST", "/v1/login", "198.51.100.66:4000"); res.StatusCode != 200 {
		t.Fatalf("store up: %d", res.StatusCode)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	got := statuses(3, func(int) *http.Response { return req(closed, "POST", "/v1/login", "198.51.100.66:4000") })
	if fmt.Sprint(got) != "[503 503 503]" || errs != 3 {
		t.Errorf("fail closed: %v, %d errors reported", got, errs)
	}
	for _, h := range []http.Handler{open, storeOpen} {
		for _, ip := range []string{"198.51.100.1", "198.51.100.2"} {
			got := statuses(8, func(int) *http.Response { return req(h, "POST", "/v1/login", ip+":4000") })
			want(t, "fallback for "+ip, got, 4)
		}
	}
	if res := req(open, "POST", "/v1/login", "198.51.100.3:4000"); res.StatusCode != 429 {
		t.Errorf("a third client past FallbackKeys 2: %d", res.StatusCode)
	}
}

// TestTwoLayer: two middleware instances in two-layer mode each decide
// from their local counts (no store call per request) and send them at
// Close: the store's window counter holds what both admitted.
func TestTwoLayer(t *testing.T) {
	rdb := store(t)
	var hs []http.Handler
	var ms []*httplimit.Middleware
	for range 2 {
		m, err := httplimit.New(httplimit.Config{Client: rdb, Policies: policies(t, `
- id: items
  methods: [GET]
  pathPattern: /v1/items/*
  tiers: [{period: 3600, threshold: 100}]
`), Mode: client.TwoLayer, SyncInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		hs = append(hs, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	window := time.Now().Truncate(time.Hour).UnixMilli()
	for _, h := range hs {
		got := statuses(5, func(int) *http.Response { return req(h, "GET", "/v1/items/7", "198.51.100.66:4000") })
		want(t, "one instance", got, 5)
	}
	if n := len(keys(t, rdb)); n != 0 {
		t.Fatalf("%d keys before a sync: the requests went to the store", n)
	}
	for _, m := range ms {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if time.Now().Truncate(time.Hour).UnixMilli() != window {
		t.Skip("the hour changed under the test")
	}
	if n, err := rdb.Get(context.Background(), fmt.Sprintf("httplimit:items::ip:198.51.100.66:%d", window)).Int64(); err != nil || n != 10 {
		t.Errorf("the window's counter: %d, %v; want 10", n, err)
	}
}
