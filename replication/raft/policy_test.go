package raft_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
)

// TestPolicies_OneGlobalBudget (the endpoint-aware study's A7 on Raft): a
// policy file loaded through a follower reaches every member through the
// log, a policy's budget is one for the whole cluster, exact whichever
// member each request reaches, and the members end with equal POLICY LIST
// and DEBUG DIGEST.
func TestPolicies_OneGlobalBudget(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{DebugClock: true})
	file := "policies:\n" +
		"  - {id: api, path: '/v1/{x}', tiers: [{algorithm: fwc, limit: 10, window: 1m}]}\n" +
		"  - {id: rest, fallback: unknown, tiers: [{algorithm: cl, burst: 2, count: 1, period: 60}]}\n"
	if got := c.Do(c.Follower(), "POLICY", "LOAD", file); got != int64(2) {
		t.Fatalf("POLICY LOAD: %v", got)
	}
	allowed := 0
	for i := range 30 {
		m := c.Members[i%len(c.Members)]
		reply, ok := c.Do(m, "THROTTLE.POLICY", "GET", fmt.Sprintf("/v1/%d", i), "alice").([]any)
		if !ok || reply[1] != "api" {
			t.Fatalf("call %d on %s: %v", i, m.ID, reply)
		}
		if reply[0] == int64(0) {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 30 calls allowed across the members, want exactly 10", allowed)
	}
	c.Converged()
	var lists [][]any
	for _, m := range c.Members {
		lists = append(lists, c.Do(m, "POLICY", "LIST").([]any))
	}
	for i := range lists {
		if len(lists[i]) != 2 || !slices.EqualFunc(lists[i], lists[0], func(a, b any) bool { return a == b }) {
			t.Errorf("member %d: POLICY LIST %v, member 0's %v", i, lists[i], lists[0])
		}
	}
}
