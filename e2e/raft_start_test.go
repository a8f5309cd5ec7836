package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
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
// of the group without a word. It now asks --join (here a follower) for the
// leader and the leader for the members, finds itself missing and exits 78
// (a refused setting) saying what to do, with the RAFT JOIN line to paste
// filled in; once it is pasted, the same start succeeds and the member
// catches up. A member still in the group restarts with --join as before.
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
	c := lead.client(t)
	do(t, c, "RAFT", "REMOVE", goneID)
	if err := gone.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, gone.Output())
	}
	do(t, c, "SET", "after", "2")
	joinArgs := func(s *server, join string) []string {
		var args []string
		for i := 0; i < len(s.args); i++ {
			if s.args[i] == "--peers" {
				args = append(args, "--join", join)
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
	args := append([]string{"--port", strconv.Itoa(port), "--dir", gone.dir}, joinArgs(gone, kept.Addr)...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the removed member still runs after 30 s:\n%s", out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 78 ||
		!strings.Contains(string(out), "its leader "+idOf(lead)+" ("+lead.Addr+", named by --join "+kept.Addr+")") ||
		!strings.Contains(string(out), "empty its data folder") {
		t.Fatalf("exit %v, want 78 and a message naming the leader and what to do:\n%s", err, out)
	}
	join := regexp.MustCompile(`RAFT JOIN \S+ \S+ \S+`).FindString(string(out))
	want := fmt.Sprintf("RAFT JOIN %s %s 127.0.0.1:%d", goneID, argOf(gone, "--cluster-addr"), port)
	if join != want {
		t.Fatalf("the message gives %q, want %q:\n%s", join, want, out)
	}

	// Pasted as given, the line adds the member back: the same start now
	// succeeds (on another free port: the member announces its address
	// once it is in) and catches up with what was written while it was out.
	var cmd []any
	for _, f := range strings.Fields(join) {
		cmd = append(cmd, f)
	}
	do(t, c, cmd...)
	back := start(t, gone.dir, joinArgs(gone, kept.Addr)...).client(t)
	testwait.For(t, 20*time.Second, "the re-added member to apply what was written while it was out", func() bool {
		v, err := back.Do(context.Background(), "GET", "after").Result()
		return err == nil && v == "2"
	})

	// A member still in the group restarts with --join and serves.
	if err := kept.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, kept.Output())
	}
	again := start(t, kept.dir, joinArgs(kept, lead.Addr)...)
	testwait.For(t, 20*time.Second, "the kept member to see the leader", func() bool {
		v, err := again.client(t).Do(context.Background(), "RAFT", "LEADER").Slice()
		return err == nil && len(v) == 2 && v[1] == lead.Addr
	})
}

// idOf is the --node-id s was started with.
func idOf(s *server) string { return argOf(s, "--node-id") }

// argOf is the value of flag in the arguments s was started with.
func argOf(s *server, flag string) string {
	for i, a := range s.args {
		if a == flag {
			return s.args[i+1]
		}
	}
	return ""
}
