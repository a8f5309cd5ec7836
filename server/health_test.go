package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// probe GETs path on n's metrics listener and returns the status and body.
func probe(t *testing.T, n *server.Node, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.MetricsAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// waitReady polls /readyz until its status is want, and returns the body.
func waitReady(t *testing.T, n *server.Node, want int, within time.Duration) string {
	t.Helper()
	var body string
	testwait.For(t, within, "/readyz "+http.StatusText(want), func() bool {
		var status int
		status, body = probe(t, n, "/readyz")
		return status == want
	})
	return body
}

func TestHealth_SingleNode(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{Dir: dir, MetricsAddr: "127.0.0.1:0"}
	n := servertest.Start(t, cfg)
	run(t, dial(t, n), []string{"SET", "k", "v"})
	n.Close()

	// Restarted on its folder: once Start returns, the keys are loaded
	// and the node says so.
	n = servertest.Start(t, cfg)
	if got, err := dial(t, n).Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET k after restart = %v, %v", got, err)
	}
	if status, body := probe(t, n, "/healthz"); status != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", status, body)
	}
	if status, body := probe(t, n, "/readyz"); status != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz = %d %q", status, body)
	}
}

func TestHealth_Raft(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{MetricsAddr: "127.0.0.1:0"})
	lead := c.Leader()
	for _, m := range c.Members {
		waitReady(t, m.Node, http.StatusOK, 10*time.Second)
	}

	// A follower cut off from the group stops hearing the leader and
	// turns not ready within the election timeout (the probe polls, so
	// the time also covers the follower's randomised timeout).
	f := c.Follower()
	c.Isolate(f)
	start := time.Now()
	body := waitReady(t, f.Node, http.StatusServiceUnavailable, 10*time.Second)
	t.Logf("isolated follower not ready after %v: %q", time.Since(start).Round(time.Millisecond), body)
	if !strings.Contains(body, "no leader known") {
		t.Fatalf("isolated follower's reason: %q", body)
	}
	c.ConnectAll()
	waitReady(t, f.Node, http.StatusOK, 10*time.Second)

	// The leader cut off from its quorum steps down after its lease.
	lead = c.Leader()
	c.Isolate(lead)
	start = time.Now()
	body = waitReady(t, lead.Node, http.StatusServiceUnavailable, 10*time.Second)
	t.Logf("isolated leader not ready after %v: %q", time.Since(start).Round(time.Millisecond), body)
	// The other two elect a leader among them and stay (or turn) ready.
	for _, m := range c.Members {
		if m != lead {
			waitReady(t, m.Node, http.StatusOK, 10*time.Second)
		}
	}
	c.ConnectAll()
	waitReady(t, lead.Node, http.StatusOK, 10*time.Second)
	c.Do(c.Leader(), "SET", "k", "v")
	c.Converged()
}

func TestHealth_Mesh(t *testing.T) {
	c := crdttest.New(t, 2, 1, server.Config{MetricsAddr: "127.0.0.1:0"})
	a, b := c.Nodes[0], c.Nodes[1]
	for _, m := range c.Nodes {
		waitReady(t, m.Server, http.StatusOK, 10*time.Second)
	}

	// Partitioned, both nodes keep deciding by design: they stay ready.
	c.Net.Partition([]string{a.Addr}, []string{b.Addr})
	testwait.For(t, 10*time.Second, "the link down", func() bool {
		v, _ := value(scrape(t, a.Server), "throttled_crdt_peer_connected", "peer="+b.ID)
		return v == 0
	})
	for _, m := range c.Nodes {
		if status, body := probe(t, m.Server, "/readyz"); status != http.StatusOK {
			t.Fatalf("%s partitioned: /readyz = %d %q", m.ID, status, body)
		}
	}

	// A node that starts while its only peer is out of reach has not
	// heard the mesh's consumption: not ready until it has.
	c.Restart(a, true)
	if status, body := probe(t, a.Server, "/readyz"); status != http.StatusServiceUnavailable || !strings.Contains(body, "no state received") {
		t.Fatalf("restarted during the partition: /readyz = %d %q", status, body)
	}
	c.Net.Heal()
	waitReady(t, a.Server, http.StatusOK, 10*time.Second)
}

func TestHealth_MeshAlone(t *testing.T) {
	n := servertest.Start(t, server.Config{Dir: t.TempDir(), MetricsAddr: "127.0.0.1:0",
		CRDT: &server.CRDTConfig{NodeID: "solo", ClusterAddr: "127.0.0.1:0"}})
	if status, body := probe(t, n, "/readyz"); status != http.StatusOK || !strings.Contains(body, "no peers") {
		t.Fatalf("/readyz = %d %q", status, body)
	}
}
