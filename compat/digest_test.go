package compat

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/server"
)

// TestDebugDigest_TwoNodes is how replication tests compare replicas: two
// nodes, each with its own hash seed and so its own shard layout, given the
// same writes in opposite orders, answer the same DEBUG DIGEST and DEBUG
// DIGEST-VALUE; one more write on one of them sets them apart.
func TestDebugDigest_TwoNodes(t *testing.T) {
	// Each op writes one key of its own, so the ops commute: any order of
	// them leaves the same data.
	var ops [][][]string
	for i := range 60 {
		k := "k" + strconv.Itoa(i)
		var w [][]string
		switch i % 7 {
		case 0:
			w = [][]string{{"SET", k, strconv.Itoa(i)}}
		case 1:
			w = [][]string{{"INCRBY", k, strconv.Itoa(i)}, {"PEXPIRE", k, "60000"}}
		case 2:
			w = [][]string{{"SET", k, "text " + k, "PX", "30000"}}
		case 3:
			w = [][]string{{"CL.THROTTLE", k, "5", "10", "60"}}
		case 4:
			w = [][]string{{"FWC.THROTTLE", k, "10", "60"}, {"FWC.THROTTLE", k, "10", "60", "3"}}
		case 5:
			w = [][]string{{"SWL.THROTTLE", k, "10", "60"}, {"SWC.THROTTLE", k + "c", "10", "60"}}
		case 6:
			w = [][]string{{"TB.THROTTLE", k, "10", "1", "1"}, {"LB.THROTTLE", k + "l", "10", "1", "1"}}
		}
		ops = append(ops, append([][]string{{"SELECT", strconv.Itoa(i % 3)}}, w...))
	}
	write := func(c *e2eConn, ops [][][]string) {
		t.Helper()
		for _, op := range ops {
			for _, args := range op {
				if got, err := c.Do(args...); err != nil || strings.HasPrefix(got, "-") {
					t.Fatalf("%q: %q, %v", args, got, err)
				}
			}
		}
	}
	do := func(c *e2eConn, args ...string) string {
		t.Helper()
		got, err := c.Do(args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return got
	}
	a := e2eDial(t, e2eNode(t, server.Config{}).Addr())
	b := e2eDial(t, e2eNode(t, server.Config{}).Addr())
	write(a, ops)
	reversed := slices.Clone(ops)
	slices.Reverse(reversed)
	write(b, reversed)

	digest := do(a, "DEBUG", "DIGEST")
	if len(digest) != len("+\r\n")+40 || digest == "+"+strings.Repeat("0", 40)+"\r\n" {
		t.Fatalf("DEBUG DIGEST: %q, want 40 hex digits, not all zeros", digest)
	}
	if got := do(b, "DEBUG", "DIGEST"); got != digest {
		t.Fatalf("DEBUG DIGEST: %q on one node, %q on the other", digest, got)
	}
	// The last op of ops left a in db 2; b did it first and is in db 0.
	do(b, "SELECT", "2")
	values := []string{"DEBUG", "DIGEST-VALUE", "k2", "k5", "k5c", "k8", "k11", "k17", "k20", "k20l", "missing"}
	if got, want := do(b, values...), do(a, values...); got != want {
		t.Fatalf("%q: %q on one node, %q on the other", values, want, got)
	}
	do(b, "INCR", "k8")
	if got := do(b, "DEBUG", "DIGEST"); got == digest {
		t.Fatalf("DEBUG DIGEST did not change after INCR: %q", got)
	}
}
