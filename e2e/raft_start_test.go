package e2e

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
)

// TestRaft_NoPeersNoJoinRefused: a member with neither --peers nor --join
// and an empty folder has no cluster to wait for; it used to wait forever,
// and now exits at once with a message naming both flags.
func TestRaft_NoPeersNoJoinRefused(t *testing.T) {
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	clusterPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--dir", t.TempDir(), "--replication", "raft",
		"--node-id", "n1", "--cluster-addr", proc.Addr(clusterPort)).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still running after 30 s:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "neither --peers (to start a new cluster) nor --join (to join one)") {
		t.Fatalf("exit %v, want a refusal naming --peers and --join:\n%s", err, out)
	}
}
