package commands

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/bench"
	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// t0 is a fixed instant for frozen-clock tests (Unix ns).
const t0 = int64(1_700_000_000_000_000_000)

func newTestServer(t testing.TB) (*Server, *clock.Manual) {
	t.Helper()
	m := clock.NewManual(t0)
	return newServer(t, Config{Clock: m, Manual: m}), m
}

// newServer returns a server on a new store with cfg.
func newServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	st, err := store.New(store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do runs one command on conn and returns the raw reply.
func do(s *Server, c *resp.Conn, args ...string) string {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	c.W.Truncate(0)
	s.ServeRESP(c, bs)
	return string(c.W.Bytes())
}

func TestTable_WellFormed(t *testing.T) {
	tab := newTable(specs)
	for _, sp := range specs {
		if sp.Arity == 0 {
			t.Errorf("%s: arity 0", sp.Name)
		}
		if sp.Group == "" || sp.Summary == "" {
			t.Errorf("%s: missing group or summary for COMMAND DOCS", sp.Name)
		}
		if sp.Flags&Write != 0 && sp.Flags&ReadOnly != 0 {
			t.Errorf("%s: both write and readonly", sp.Name)
		}
		if got := tab.lookup([]byte(strings.ToUpper(sp.Name))); got != sp {
			t.Errorf("lookup(%q) = %v, want the spec", strings.ToUpper(sp.Name), got)
		}
	}
	if tab.lookup([]byte(strings.Repeat("x", maxNameLen+1))) != nil {
		t.Error("over-long name found a spec")
	}
}

func TestTable_DuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("duplicate spec did not panic")
		}
	}()
	newTable([]*Spec{specs[0], specs[0]})
}

func TestDispatch_Errors(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"NOSUCH", "a", "b"}, "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n"},
		{[]string{"get"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{[]string{"GET", "a", "b"}, "-ERR wrong number of arguments for 'get' command\r\n"},
		{[]string{"Cl.Throttle", "k"}, "-" + cellUsage + "\r\n"},
		{[]string{"ping"}, "+PONG\r\n"},
	} {
		if got := do(s, c, tc.args...); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestCLThrottle_PeekLeavesNoKey(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	if got, want := do(s, c, "CL.THROTTLE", "k", "15", "30", "60", "0"), "*5\r\n:0\r\n:16\r\n:16\r\n:-1\r\n:0\r\n"; got != want {
		t.Fatalf("peek: got %q, want %q", got, want)
	}
	if got := do(s, c, "EXISTS", "k"); got != ":0\r\n" {
		t.Fatalf("EXISTS after peek: got %q, want :0", got)
	}
}

// TestCLThrottle_HotPathAllocs guards the performance budget of DESIGN.md:
// CL.THROTTLE on an existing key allocates at most once, by the default
// user and by a gateway's ACL user, whose command and keys are checked.
func TestCLThrottle_HotPathAllocs(t *testing.T) {
	for _, user := range []string{"default", "gateway"} {
		s, _ := newTestServer(t)
		c := &resp.Conn{}
		if user == "gateway" {
			do(s, c, "ACL", "SETUSER", "gateway", "on", "nopass", "-@all", "+@ratelimit", "~user:*")
			do(s, c, "AUTH", "gateway", "x")
		}
		args := [][]byte{[]byte("CL.THROTTLE"), []byte("user:1"), []byte("15"), []byte("30"), []byte("60")}
		s.ServeRESP(c, args)
		allocs := testing.AllocsPerRun(1000, func() {
			c.W.Truncate(0)
			s.ServeRESP(c, args)
		})
		if allocs > 1 {
			t.Fatalf("CL.THROTTLE on an existing key by %s: %v allocs, want <= 1", user, allocs)
		}
	}
}

// BenchmarkDispatch runs one command on an existing key through the whole
// dispatch path (lookup, locks, clock, run, reply), on the real clock as a
// node runs it.
func BenchmarkDispatch(b *testing.B) {
	for _, bc := range []struct{ name, cmd string }{
		{"CL.THROTTLE", "CL.THROTTLE user:1 15 30 60"},
		// As a gateway's ACL user, whose commands and keys are checked.
		{"CL.THROTTLE-gateway", "CL.THROTTLE ratelimit:1 15 30 60"},
		{"INCR", "INCR counter:1"},
		{"FWC.THROTTLE", "FWC.THROTTLE f:1 1000000000 60"},
		{"SWL.THROTTLE", "SWL.THROTTLE l:1 100 60"},
		{"SWC.THROTTLE", "SWC.THROTTLE c:1 1000000000 60 1 SUBWINDOWS 5"},
		{"TB.THROTTLE", "TB.THROTTLE t:1 1000000000 1 1"},
		{"LB.THROTTLE", "LB.THROTTLE q:1 1000000000 1 1"},
		{"THROTTLE.ALL", "THROTTLE.ALL LIMIT CL a:1 9 10 1 LIMIT SWC b:1 50 10 LIMIT FWC tenant 1000000000 60"},
		// THROTTLE.POLICY on the last of 1,000 templates, and THROTTLE.ALL
		// with the same two tiers.
		{"THROTTLE.POLICY", "THROTTLE.POLICY GET /v1/t999/orgs/o1/items/5 user:1"},
		{"THROTTLE.ALL-policy-tiers", "THROTTLE.ALL LIMIT CL policy:t999:1::user:1 1000 1000000 1 LIMIT FWC policy:t999:2::user:1 1000000000 60"},
		{"EVAL", "EVAL return 1 0"},
		{"KONG.EVAL", "EVAL kong 1 kong:1 60"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newServer(b, Config{Clock: clock.Real{}})
			c := &resp.Conn{}
			var args [][]byte
			for _, a := range strings.Fields(bc.cmd) {
				args = append(args, []byte(a))
			}
			switch bc.name {
			case "CL.THROTTLE-gateway":
				do(s, c, "ACL", "SETUSER", "gw", "on", "nopass", "-@all", "+@ratelimit", "~ratelimit:*")
				do(s, c, "AUTH", "gw", "x")
			case "THROTTLE.POLICY":
				var file strings.Builder
				for i := range 1000 {
					fmt.Fprintf(&file, "- {id: t%d, path: '/v1/t%d/orgs/{org}/items/*', methods: [GET], tiers: [{algorithm: cl, burst: 1000, count: 1000000, period: 1s}, {algorithm: fwc, limit: 1000000000, window: 1m}]}\n", i, i)
				}
				if r := do(s, c, "POLICY", "LOAD", file.String()); r != ":1000\r\n" {
					b.Fatalf("POLICY LOAD: %q", r)
				}
			case "EVAL":
				args[1] = []byte("return 1")
			case "KONG.EVAL":
				args[1] = []byte(bench.KongLua)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.W.Truncate(0)
				s.ServeRESP(c, args)
			}
			if bytes.HasPrefix(c.W.Bytes(), []byte("-")) {
				b.Fatalf("%s: %s", bc.cmd, c.W.Bytes())
			}
		})
	}
}
