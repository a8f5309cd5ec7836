package crdt_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/replication/crdt/crdttest"
)

// TestPolicies_Converge: a policy file loaded on one node reaches every
// node; during a partition two nodes change two policies and both changes
// survive, while one policy changed on both sides ends with the later
// write's everywhere; the nodes end with equal POLICY LIST and DEBUG
// DIGEST.
func TestPolicies_Converge(t *testing.T) {
	c := crdttest.New(t, 3, seed(t), fast)
	c.Connected()
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	file := "policies:\n" +
		"  - {id: a, path: /a, tiers: [{algorithm: fwc, limit: 1, window: 1m}]}\n" +
		"  - {id: b, path: /b, tiers: [{algorithm: fwc, limit: 1, window: 1m}]}\n" +
		"  - {id: both, path: /c, tiers: [{algorithm: fwc, limit: 1, window: 1m}]}\n"
	if got := c.Do(n1, "POLICY", "LOAD", file); got != int64(3) {
		t.Fatalf("POLICY LOAD: %v", got)
	}
	c.Converged()

	c.Net.Partition([]string{n2.Addr}, []string{n1.Addr, n3.Addr})
	set := func(n *crdttest.Node, policy string) {
		if got := c.Do(n, "POLICY", "SET", policy); got != "OK" {
			t.Fatalf("POLICY SET on %s: %v", n.ID, got)
		}
	}
	set(n2, "{id: a, path: /a, tiers: [{algorithm: fwc, limit: 2, window: 1m}]}")
	set(n3, "{id: b, path: /b, tiers: [{algorithm: fwc, limit: 3, window: 1m}]}")
	set(n2, "{id: both, path: /c, tiers: [{algorithm: fwc, limit: 4, window: 1m}]}")
	c.SetClocks(crdttest.Start + int64(time.Second)) // n3's write of both is the later
	set(n3, "{id: both, path: /c, tiers: [{algorithm: fwc, limit: 5, window: 1m}]}")
	c.Net.Heal()
	c.Converged()

	var lists [][]string
	for _, n := range c.Nodes {
		var list []string
		for _, p := range c.Do(n, "POLICY", "LIST").([]any) {
			list = append(list, p.(string))
		}
		lists = append(lists, list)
	}
	for i, list := range lists {
		if !slices.Equal(list, lists[0]) {
			t.Errorf("%s: POLICY LIST %q, %s's %q", c.Nodes[i].ID, list, n1.ID, lists[0])
		}
	}
	joined := strings.Join(lists[0], "\n")
	for _, want := range []string{`"id":"a","path":"/a","enabled":true,"tiers":[{"algorithm":"fwc","limit":2`,
		`"id":"b","path":"/b","enabled":true,"tiers":[{"algorithm":"fwc","limit":3`,
		`"id":"both","path":"/c","enabled":true,"tiers":[{"algorithm":"fwc","limit":5`} {
		if !strings.Contains(joined, want) {
			t.Errorf("POLICY LIST lacks %s:\n%s", want, joined)
		}
	}
}
