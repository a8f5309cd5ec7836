package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// The coordinated-microservices article's policy file, as it is.
const articleFile = `
- id: get-product
  enabled: true
  methods: ['GET']
  pathPattern: /product/*
  tiers:
    - period: 10      # seconds
      threshold: 2
`

// TestPolicyFile: --policy-file is loaded at start and decides requests;
// POLICY RELOAD reads it again; a file that does not load refuses the start
// (with its line) or the reload (the old policies stay); policies survive
// a restart on the same folder.
func TestPolicyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(file, []byte(articleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Dir: filepath.Join(dir, "data"), DebugClock: true, PolicyFile: file}
	n, err := servertest.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
	decide := func(cl *redis.Client) []any {
		t.Helper()
		v, err := cl.Do(ctx, "THROTTLE.POLICY", "GET", "/product/42", "alice").Slice()
		if err != nil {
			t.Fatalf("THROTTLE.POLICY: %v", err)
		}
		return v
	}
	for i, wantLimited := range []int64{0, 0, 1} {
		v := decide(cl)
		if v[0] != wantLimited || v[1] != "get-product" || v[2] != "/product/*" {
			t.Errorf("call %d: %v, want limited %d by get-product", i+1, v, wantLimited)
		}
	}

	// A bad file: the reload is refused with its line, the policies stay.
	if err := os.WriteFile(file, []byte("- id: x\n  pathPattern: /p\n  tiers: [{period: 0, threshold: 1}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = cl.Do(ctx, "POLICY", "RELOAD").Err()
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("POLICY RELOAD of a bad file: %v, want an error naming line 3", err)
	}
	if got, _ := cl.Do(ctx, "POLICY", "LIST").StringSlice(); len(got) != 1 || !strings.Contains(got[0], "get-product") {
		t.Errorf("after a refused reload: %q", got)
	}

	// A good file replaces the set.
	if err := os.WriteFile(file, []byte("policies:\n  - {id: login, path: /login, tiers: [{algorithm: fwc, limit: 1, window: 1m}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Do(ctx, "POLICY", "RELOAD").Int(); err != nil || got != 1 {
		t.Errorf("POLICY RELOAD: %d, %v", got, err)
	}
	if got, _ := cl.Do(ctx, "POLICY", "LIST").StringSlice(); len(got) != 1 || !strings.Contains(got[0], `"login"`) {
		t.Errorf("after the reload: %q", got)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart without the file keeps what the folder holds.
	cfg.PolicyFile = ""
	n = servertest.Start(t, cfg)
	cl = redis.NewClient(&redis.Options{Addr: n.Addr()})
	defer cl.Close()
	if got, _ := cl.Do(ctx, "POLICY", "LIST").StringSlice(); len(got) != 1 || !strings.Contains(got[0], `"login"`) {
		t.Errorf("after a restart: %q", got)
	}

	// A bad file refuses the start, with its line.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("- id: x\n  pathPattern: /p\n  tierz: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = servertest.Open(server.Config{DebugClock: true, PolicyFile: bad})
	if err == nil || !strings.Contains(err.Error(), `line 3: unknown field "tierz"`) {
		t.Errorf("start with a bad file: %v", err)
	}
}

// TestPolicyStats: each policy's decisions are counted by policy id (never
// by principal) in INFO policies and /metrics: allowed, limited, and a
// shadow policy's refusals let through; probes are not counted.
func TestPolicyStats(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true, MetricsAddr: "127.0.0.1:0"})
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
	defer cl.Close()
	load := "[{id: s, name: s, shadow: true, tiers: [{algorithm: fwc, limit: 1, window: 10}]}, " +
		"{id: h, name: h, tiers: [{algorithm: fwc, limit: 1, window: 10}]}]"
	if err := cl.Do(ctx, "POLICY", "LOAD", load).Err(); err != nil {
		t.Fatal(err)
	}
	for _, call := range [][]any{{"s", "alice"}, {"s", "bob"}, {"s", "bob"}, {"h", "alice"}, {"h", "alice"}, {"h", "alice", "PROBE"}} {
		args := append([]any{"THROTTLE.POLICY", "-"}, call...)
		if err := cl.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := cl.Info(ctx, "policies").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policies:2", "policy_h:allowed=1,limited=1,shadow_limited=0", "policy_s:allowed=2,limited=0,shadow_limited=1"} {
		if !strings.Contains(info, want+"\r\n") {
			t.Errorf("INFO policies lacks %q:\n%s", want, info)
		}
	}
	if def, _ := cl.Info(ctx).Result(); strings.Contains(def, "# Policies") {
		t.Errorf("the default INFO shows the Policies section")
	}
	got := map[string]float64{}
	for _, m := range scrape(t, n)["throttled_policy_decisions_total"].GetMetric() {
		var policy, result string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "policy":
				policy = l.GetValue()
			case "result":
				result = l.GetValue()
			}
		}
		got[policy+"/"+result] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"h/allowed": 1, "h/limited": 1, "h/shadow_limited": 0, "s/allowed": 2, "s/limited": 0, "s/shadow_limited": 1}
	if len(got) != len(want) {
		t.Errorf("throttled_policy_decisions_total: %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("throttled_policy_decisions_total %s = %v, want %v", k, got[k], v)
		}
	}
}
