package commands

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/clock"
	"github.com/throttleddb/throttled/resp"
	"github.com/throttleddb/throttled/store"
)

// policyReply is the policy id and limited flag of a THROTTLE.POLICY reply.
func policyReply(t testing.TB, raw string) (id string, limited bool) {
	t.Helper()
	lines := strings.Split(raw, "\r\n")
	if len(lines) < 4 || lines[0] != "*10" {
		t.Fatalf("THROTTLE.POLICY: %q", raw)
	}
	if lines[2] == "$-1" || lines[2] == "_" {
		return "", lines[1] == ":1"
	}
	return lines[3], lines[1] == ":1"
}

// TestPolicy_UnknownFlood is the endpoint-aware study's A6: a flood of
// random paths reaches the UNKNOWN endpoint, never keys of its own; what
// they cost is the UNKNOWN policy's keys for the principals, one each.
func TestPolicy_UnknownFlood(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	do(s, c, "POLICY", "LOAD", "[{id: api, pathPattern: '/api/{x}', tiers: [{period: 1, threshold: 100}]}, "+
		"{id: unknown, fallback: unknown, tiers: [{period: 1, threshold: 1000000}]}]")
	for i := range 10000 {
		path := fmt.Sprintf("/%x/%d/x%%%02X/../y", i*7919, i, i%256)
		if id, _ := policyReply(t, do(s, c, "THROTTLE.POLICY", "GET", path, fmt.Sprint("p", i%3))); id != "unknown" {
			t.Fatalf("%s decided by %q, want unknown", path, id)
		}
	}
	if n := s.store.Tx(t0).DBSize(0); n != 3 {
		t.Errorf("%d keys after 10,000 random paths of 3 principals, want 3", n)
	}
}

// TestPolicy_PrincipalChurn is the study's A4: a million distinct
// principals through one policy stay within --maxkeys, by eviction, and a
// decision costs no more after a million than after the first hundred
// thousand (each batch of calls timed, the fastest of each stretch
// compared, so that other processes' bursts do not count).
func TestPolicy_PrincipalChurn(t *testing.T) {
	st, err := store.New(store.Config{MaxKeys: 10000})
	if err != nil {
		t.Fatal(err)
	}
	m := clock.NewManual(t0)
	s, err := New(Config{Store: st, Clock: m, Manual: m})
	if err != nil {
		t.Fatal(err)
	}
	c := &resp.Conn{}
	do(s, c, "POLICY", "SET", "{id: login, path: /login, tiers: [{algorithm: cl, burst: 4, count: 5, period: 60}]}")
	args := [][]byte{[]byte("THROTTLE.POLICY"), []byte("POST"), []byte("/login"), nil}
	const batch = 10000
	// fastest[0]: the fastest batch of 100k-200k (the store full since
	// 10k), fastest[1]: of the last 100k.
	fastest := [2]time.Duration{time.Hour, time.Hour}
	for b := range 1_000_000 / batch {
		start := time.Now()
		for i := b * batch; i < (b+1)*batch; i++ {
			args[3] = fmt.Appendf(args[3][:0], "user-%d", i)
			c.W.Truncate(0)
			s.ServeRESP(c, args)
		}
		took := time.Since(start)
		switch {
		case b >= 10 && b < 20:
			fastest[0] = min(fastest[0], took)
		case b >= 90:
			fastest[1] = min(fastest[1], took)
		}
		if keys, _ := st.Usage(); keys > 10000+1 { // + the policy itself
			t.Fatalf("after %d principals: %d keys", (b+1)*batch, keys)
		}
	}
	t.Logf("fastest batch of %d calls: %v at 100k-200k principals, %v at 900k-1M", batch, fastest[0], fastest[1])
	if fastest[1] > 2*fastest[0] {
		t.Errorf("a decision at 900k-1M principals costs %v a batch, more than twice the %v at 100k-200k", fastest[1], fastest[0])
	}
	keys, _ := st.Usage()
	if keys > 10000+1 || st.EvictedKeys() < 989_000 {
		t.Errorf("%d keys, %d evicted after a million principals; want at most 10,001 and the rest evicted", keys, st.EvictedKeys())
	}
	if n := st.Tx(t0).DBSize(st.SystemDB()); n != 1 {
		t.Errorf("the policy was evicted (%d system keys)", n)
	}
}

// TestPolicy_ReloadUnderLoad: while POLICY LOAD switches between two sets
// again and again, concurrent decisions are each made by a whole set
// (never by none, never against half of one), and none is lost or
// doubled: what each policy's state says it admitted is what the replies
// said.
func TestPolicy_ReloadUnderLoad(t *testing.T) {
	s, _ := newTestServer(t)
	sets := []string{
		"[{id: a1, pathPattern: '/x/*', tiers: [{period: 3600, threshold: 1000000}]}, {id: a2, pathPattern: /y, tiers: [{period: 3600, threshold: 1000000}]}]",
		"[{id: b1, pathPattern: '/x/{id}', tiers: [{period: 3600, threshold: 1000000}]}, {id: b2, pathPattern: /y, tiers: [{period: 3600, threshold: 1000000}]}]",
	}
	do(s, &resp.Conn{}, "POLICY", "LOAD", sets[0])
	var (
		mu       sync.Mutex
		admitted = map[string]int64{}
		wg       sync.WaitGroup
		stop     = make(chan struct{})
	)
	for w := range 4 {
		wg.Go(func() {
			c := &resp.Conn{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id, limited := policyReply(t, do(s, c, "THROTTLE.POLICY", "GET", fmt.Sprintf("/x/%d", i), "p"))
				if id != "a1" && id != "b1" {
					t.Errorf("worker %d: /x decided by %q", w, id)
					return
				}
				if !limited {
					mu.Lock()
					admitted[id]++
					mu.Unlock()
				}
			}
		})
	}
	c := &resp.Conn{}
	for i := range 200 {
		if r := do(s, c, "POLICY", "LOAD", sets[(i+1)%2]); r != ":2\r\n" {
			t.Fatalf("POLICY LOAD: %q", r)
		}
	}
	close(stop)
	wg.Wait()
	for i, id := range []string{"a1", "b1"} {
		do(s, c, "POLICY", "LOAD", sets[i])
		ints := replyInts(t, do(s, c, "THROTTLE.POLICY", "GET", "/x/1", "p", "PROBE"))
		// A probe answers as the call would: remaining after one more.
		if used := ints[2] - ints[3] - 1; used != admitted[id] {
			t.Errorf("%s: its state says %d admitted, the replies %d", id, used, admitted[id])
		}
	}
	if admitted["a1"] == 0 || admitted["b1"] == 0 {
		t.Errorf("admitted %v: the reloads did not interleave with decisions", admitted)
	}
}

// TestPolicy_HotPathAllocs guards bench/policy's bar: a decision on
// existing keys builds its keys once, in Spec.Locks, and allocates only
// the path's string (policy.Request holds strings), whatever the method's
// case.
func TestPolicy_HotPathAllocs(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	do(s, c, "POLICY", "SET", "{id: items, path: '/v1/orgs/{org}/items/*', methods: [GET], "+
		"tiers: [{algorithm: cl, burst: 1000, count: 1000000, period: 1s}, {algorithm: fwc, limit: 1000000000, window: 1m}]}")
	for _, method := range []string{"GET", "get"} {
		args := [][]byte{[]byte("THROTTLE.POLICY"), []byte(method), []byte("/v1/orgs/o1/items/5"), []byte("user:" + method)}
		c.W.Truncate(0)
		s.ServeRESP(c, args)
		if id, limited := policyReply(t, string(c.W.Bytes())); id != "items" || limited {
			t.Fatalf("%s: decided by %q (limited %v), want items", method, id, limited)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			c.W.Truncate(0)
			s.ServeRESP(c, args)
		})
		if allocs > 1 {
			t.Errorf("THROTTLE.POLICY %s on existing keys: %v allocs, want <= 1", method, allocs)
		}
	}
}
