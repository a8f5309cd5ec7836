package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// The gateway against a real throttled node on loopback, as a user that may
// run THROTTLE.POLICY only, on the debug clock (20 s into a minute): the
// same policies and timeline as compat's TestNginxPolicy, so the Go and the
// OpenResty gateways answer alike.

const policies = `policies:
  - {id: items, path: '/v1/orgs/{org}/items/*', methods: [GET], tiers: [{algorithm: cl, burst: 2, count: 1, period: 2s}, {algorithm: fwc, limit: 5, window: 1m}]}
  - {id: unknown, fallback: unknown, tiers: [{algorithm: cl, burst: 0, count: 1, period: 1s}]}
`

func TestLimit(t *testing.T) {
	ctx := context.Background()
	node := servertest.Start(t, server.Config{DebugClock: true, RequirePass: "admin-pw"})
	admin := redis.NewClient(&redis.Options{Addr: node.Addr(), Password: "admin-pw"})
	defer admin.Close()
	for _, cmd := range [][]any{
		{"DEBUG", "CLOCK", "SET", int64(1_700_000_000_000_000_000)},
		{"ACL", "SETUSER", "gateway", "on", ">gw-pw", "-@all", "+throttle.policy"},
		{"POLICY", "LOAD", policies},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr(), Username: "gateway", Password: "gw-pw"})
	defer rdb.Close()
	gw := httptest.NewServer(Limit(rdb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream: %s\n", r.RequestURI)
	})))
	defer gw.Close()

	const items = `"items.1";q=3;w=6, "items.2";q=5;w=60`
	for i, s := range []struct {
		advance         time.Duration
		principal, path string
		want            string // status [X-RateLimit-*] RateLimit-Policy RateLimit Retry-After
		body            string
	}{
		{0, "alice", "/v1/orgs/acme/items/1", `200 [3 2 2] ` + items + ` | "items.1";r=2;t=2, "items.2";r=4;t=40 | `, "upstream: /v1/orgs/acme/items/1\n"},
		{0, "alice", "/v1/orgs/acme//items/./2?x=1", `200 [3 1 4] ` + items + ` | "items.1";r=1;t=4, "items.2";r=3;t=40 | `, "upstream: /v1/orgs/acme//items/./2?x=1\n"},
		{0, "alice", "/v1/orgs/acme/items/3", `200 [3 0 6] ` + items + ` | "items.1";r=0;t=6, "items.2";r=2;t=40 | `, "upstream: /v1/orgs/acme/items/3\n"},
		{0, "alice", "/v1/orgs/acme/items/4", `429 [3 0 6] ` + items + ` | "items.1";r=0;t=6, "items.2";r=2;t=40 | 2`, `{"error":"rate limited","policy":"items","retry_after":2}` + "\n"},
		{2 * time.Second, "alice", "/v1/orgs/acme/items/4", `200 [3 0 6] ` + items + ` | "items.1";r=0;t=6, "items.2";r=1;t=38 | `, "upstream: /v1/orgs/acme/items/4\n"},
		{0, "carol", "/v1/no/such/thing", `200 [1 0 1] "unknown.1";q=1;w=1 | "unknown.1";r=0;t=1 | `, "upstream: /v1/no/such/thing\n"},
		{0, "carol", "/v1/other", `429 [1 0 1] "unknown.1";q=1;w=1 | "unknown.1";r=0;t=1 | 1`, `{"error":"rate limited","policy":"unknown","retry_after":1}` + "\n"},
	} {
		if s.advance > 0 {
			if err := admin.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", int64(s.advance)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		status, h, body := get(t, gw.URL+s.path, s.principal)
		got := fmt.Sprintf("%d [%s %s %s] %s | %s | %s", status, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"),
			h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("Retry-After"))
		if got != s.want || body != s.body {
			t.Errorf("step %d (%s %s):\n got %s %q\nwant %s %q", i, s.principal, s.path, got, body, s.want, s.body)
		}
	}
}

// TestLimit_FailsClosed: no decision (nothing listening, or a user that
// may not run THROTTLE.POLICY) is 503, never the upstream.
func TestLimit_FailsClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	node := servertest.Start(t, server.Config{})
	if err := redis.NewClient(&redis.Options{Addr: node.Addr()}).Do(context.Background(), "ACL", "SETUSER", "nobody", "on", ">pw", "-@all").Err(); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]*redis.Options{
		"unreachable": {Addr: dead, MaxRetries: -1},
		"error reply": {Addr: node.Addr(), Username: "nobody", Password: "pw"},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redis.NewClient(opts)
			defer rdb.Close()
			gw := httptest.NewServer(Limit(rdb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Errorf("the upstream was reached")
			})))
			defer gw.Close()
			if status, h, _ := get(t, gw.URL+"/v1/orgs/acme/items/1", "alice"); status != 503 || h.Get("RateLimit") != "" {
				t.Errorf("got %d RateLimit %q, want 503 and none", status, h.Get("RateLimit"))
			}
		})
	}
}

func get(t *testing.T, url, apiKey string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}
