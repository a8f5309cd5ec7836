package e2e

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The endpoint-aware study's A7 with real processes: the same policies on
// a 3-member Raft cluster (one global budget, exact) and on a 3-node mesh
// (the bound docs/replication.md gives for the tier's algorithm), with
// concurrent clients on every node.

// a7Policies: one endpoint whose GCRA tier admits a7Burst at once and then
// one a day (so the budget does not refill during the test), and the
// UNKNOWN fallback.
const (
	a7Burst    = 30
	a7Policies = "policies:\n" +
		"  - {id: orders, path: '/v1/orgs/{org}/orders/*', methods: [POST], tiers: [{algorithm: cl, burst: 29, count: 1, period: 86400}, {algorithm: fwc, limit: 1000, window: 1h}]}\n" +
		"  - {id: rest, fallback: unknown, tiers: [{algorithm: cl, burst: 0, count: 1, period: 86400}]}\n"
)

// a7Load sends THROTTLE.POLICY for one principal from workers clients per
// node, each perWorker calls, all at once, and returns how many were
// admitted. Every call must get a decision by the orders policy.
func a7Load(t *testing.T, addrs []string, workers, perWorker int) int64 {
	t.Helper()
	var admitted, decided atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(addrs)*workers)
	for _, addr := range addrs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, PoolSize: 1})
				defer c.Close()
				<-start
				for i := range perWorker {
					path := fmt.Sprintf("/v1/orgs/acme/orders/%d-%d", w, i)
					v, err := c.Do(context.Background(), "THROTTLE.POLICY", "POST", path, "alice").Slice()
					if err != nil || len(v) != 10 || v[1] != "orders" {
						errs <- fmt.Errorf("%s %s: %v %v", addr, path, v, err)
						return
					}
					decided.Add(1)
					if v[0] == int64(0) {
						admitted.Add(1)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if want := int64(len(addrs) * workers * perWorker); decided.Load() != want {
		t.Fatalf("%d decisions, want %d", decided.Load(), want)
	}
	return admitted.Load()
}

// TestPolicy_RaftOneBudget: loaded through a follower, the policies reach
// every member through the log; 240 concurrent decisions for one principal
// spread over the three members admit exactly the policy's budget, and the
// members end with equal POLICY LIST and DEBUG DIGEST.
func TestPolicy_RaftOneBudget(t *testing.T) {
	nodes := raftCluster(t, 3)
	for _, s := range nodes {
		do(t, s.client(t), "DEBUG", "CLOCK", "SET", far)
	}
	lead := leaderOf(t, nodes)
	follower := nodes[0]
	if follower == lead {
		follower = nodes[1]
	}
	if got := do(t, follower.client(t), "POLICY", "LOAD", a7Policies); got != int64(2) {
		t.Fatalf("POLICY LOAD: %v", got)
	}
	var addrs []string
	for _, s := range nodes {
		addrs = append(addrs, s.Addr)
	}
	if admitted := a7Load(t, addrs, 4, 20); admitted != a7Burst {
		t.Errorf("%d of 240 calls admitted across the members, want exactly %d", admitted, a7Burst)
	}
	waitSameDigest(t, nodes)
	a7SameLists(t, addrs)
}

// a7SameLists checks that every node answers POLICY LIST alike, with both
// policies.
func a7SameLists(t *testing.T, addrs []string) {
	t.Helper()
	var first []any
	for i, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		list, err := c.Do(context.Background(), "POLICY", "LIST").Slice()
		c.Close()
		if err != nil || len(list) != 2 {
			t.Fatalf("%s: POLICY LIST %v %v", addr, list, err)
		}
		if i == 0 {
			first = list
		} else if fmt.Sprint(list) != fmt.Sprint(first) {
			t.Errorf("%s: POLICY LIST %v, %s's %v", addr, list, addrs[0], first)
		}
	}
}

// TestPolicy_MeshBound: on a connected 3-node mesh, the policies loaded on
// one node converge to all; 240 concurrent decisions for one principal over
// the three nodes admit at least the budget and at most what
// docs/replication.md bounds a coordinated burst on a GCRA key to,
// (N-1) x (max_burst+1) more, so N x 30 = 90 (each node admits at most the
// budget on its own view). Once converged, the nodes hold equal states.
func TestPolicy_MeshBound(t *testing.T) {
	m := newMesh(t, 3, false)
	m.waitLinks(20*time.Second, "every link up", allLinks)
	if got := do(t, m.nodes[0].c, "POLICY", "LOAD", a7Policies); got != int64(2) {
		t.Fatalf("POLICY LOAD: %v", got)
	}
	var addrs []string
	var srvs []*server
	for _, nd := range m.nodes {
		addrs = append(addrs, nd.srv.Addr)
		srvs = append(srvs, nd.srv)
	}
	for _, nd := range m.nodes { // each node has the policies
		deadline := time.Now().Add(20 * time.Second)
		for do(t, nd.c, "POLICY", "GET", "orders") == nil {
			if time.Now().After(deadline) {
				t.Fatalf("node %s: no policy orders after 20 s", nd.id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	const n = 3
	admitted := a7Load(t, addrs, 4, 20)
	t.Logf("admitted %d of 240 (budget %d, bound %d): over-admission %d", admitted, a7Burst, n*a7Burst, admitted-a7Burst)
	if admitted < a7Burst || admitted > n*a7Burst {
		t.Errorf("%d of 240 calls admitted across the nodes, want %d to %d", admitted, a7Burst, n*a7Burst)
	}
	waitSameDigest(t, srvs)
	a7SameLists(t, addrs)
}
