package e2e

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testwait"
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

// TestRaft_RemovedMemberRejoinRefused: a member removed with RAFT REMOVE
// and restarted on its data folder with --join used to start and stay out
// of the group without a word. It now asks --join for the members, finds
// itself missing and exits 78 (a refused setting) saying what to do; a
// member still in the group restarts with --join as before.
func TestRaft_RemovedMemberRejoinRefused(t *testing.T) {
	nodes := raftCluster(t, 3)
	lead := leaderOf(t, nodes)
	var followers []*server
	for _, s := range nodes {
		if s != lead {
			followers = append(followers, s)
		}
	}
	gone, kept := followers[0], followers[1]
	goneID := idOf(gone)
	do(t, lead.client(t), "RAFT", "REMOVE", goneID)
	if err := gone.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, gone.Output())
	}
	joinArgs := func(s *server) []string {
		var args []string
		for i := 0; i < len(s.args); i++ {
			if s.args[i] == "--peers" {
				args = append(args, "--join", lead.Addr)
				i++
				continue
			}
			args = append(args, s.args[i])
		}
		return args
	}

	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--port", strconv.Itoa(port), "--dir", gone.dir}, joinArgs(gone)...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the removed member still runs after 30 s:\n%s", out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 78 ||
		!strings.Contains(string(out), "is no longer a member of the group at --join "+lead.Addr) ||
		!strings.Contains(string(out), "empty its data folder") || !strings.Contains(string(out), "RAFT JOIN "+goneID) {
		t.Fatalf("exit %v, want 78 and a message naming what to do:\n%s", err, out)
	}

	// A member still in the group restarts with --join and serves.
	if err := kept.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, kept.Output())
	}
	back := start(t, kept.dir, joinArgs(kept)...)
	testwait.For(t, 20*time.Second, "the kept member to see the leader", func() bool {
		v, err := back.client(t).Do(context.Background(), "RAFT", "LEADER").Slice()
		return err == nil && len(v) == 2 && v[1] == lead.Addr
	})
}

// idOf is the --node-id s was started with.
func idOf(s *server) string {
	for i, a := range s.args {
		if a == "--node-id" {
			return s.args[i+1]
		}
	}
	return ""
}
