package raft_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
)

// A leader cut off from the others steps down; the other two elect a new
// leader that serves, and the old one, healed, catches up.
func TestCluster_LeaderIsolated(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	old := c.Leader()
	for range 10 {
		if got := fmt.Sprint(c.Do(old, "INCR", "n")); strings.HasPrefix(got, "ERR") {
			t.Fatalf("INCR on the leader: %s", got)
		}
	}
	c.Isolate(old)
	var lead *rafttest.Member
	testwait.For(t, 10*time.Second, "a new leader", func() bool {
		for _, m := range c.Members {
			if m != old && c.Do(m, "INCR", "n") == int64(11) {
				lead = m
				return true
			}
		}
		return false
	})
	start := time.Now()
	got := fmt.Sprint(c.Do(old, "INCR", "n"))
	if !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "UNKNOWN") {
		t.Fatalf("INCR on the isolated old leader: %s, want CLUSTERDOWN or UNKNOWN", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the isolated old leader answered after %v, want within the apply timeout", d)
	}
	c.ConnectAll()
	c.Converged()
	if got := c.Do(old, "GET", "n"); got != "11" && got != "12" {
		t.Fatalf("GET n on the healed old leader: %v, want 11 (or 12 if its UNKNOWN'd INCR committed)", got)
	}
	_ = lead
}

// With two of three members gone, the survivor admits nothing and answers
// every command within the apply timeout.
func TestCluster_NoQuorum(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	c.Leader()
	survivor := c.Members[0]
	c.Stop(c.Members[1])
	c.Stop(c.Members[2])
	for i := range 5 {
		start := time.Now()
		got := fmt.Sprint(c.Do(survivor, "CL.THROTTLE", "k", 100, 1, 1))
		if !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "UNKNOWN") {
			t.Fatalf("command %d on the survivor: %s, want CLUSTERDOWN or UNKNOWN", i, got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("command %d answered after %v, want within the 2s apply timeout", i, d)
		}
	}
	if got := fmt.Sprint(c.Do(survivor, "GET", "k")); !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "UNKNOWN") {
		t.Fatalf("a read on the survivor: %s, want it refused (reads are linearizable)", got)
	}
}

// A node started with Join asks the cluster to add it, catches up, and
// becomes a voting follower with the leader's state.
func TestCluster_Join(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	for range 20 {
		c.Do(lead, "INCR", "n")
	}
	if got := c.Do(lead, "RAFT", "SNAPSHOT"); got != "OK" {
		t.Fatalf("RAFT SNAPSHOT: %v", got)
	}
	m := c.Add(c.Members[1])
	testwait.For(t, 10*time.Second, "n4 listed as a follower", func() bool {
		return strings.Contains(fmt.Sprint(c.Do(lead, "RAFT", "MEMBERS")), "n4 "+string(m.Addr)+" "+m.Node.Addr()+" follower")
	})
	c.Converged()
	if got := c.Do(m, "GET", "n"); got != "20" {
		t.Fatalf("GET n on the new member: %v, want 20", got)
	}
	if info := fmt.Sprint(c.Do(m, "INFO", "replication")); strings.Contains(info, "raft_last_snapshot_index:0\r") {
		t.Fatalf("the new member installed no snapshot:\n%s", info)
	}
}

// A follower cut off from the others' Raft traffic misses the log; its
// clients are served by the leader, to which it forwards over RESP, as long
// as it knows which member leads; healed, it catches up.
func TestCluster_FollowerCutOffAndHealed(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	cut := c.Follower()
	c.Isolate(cut)
	for i := range 20 {
		if got := c.Do(lead, "INCR", "n"); got != int64(i+1) {
			t.Fatalf("INCR on the leader: %v", got)
		}
	}
	// While it still knows the leader it forwards; once it misses the
	// heartbeats it knows none and refuses.
	if got := fmt.Sprint(c.Do(cut, "GET", "n")); got != "20" && !strings.HasPrefix(got, "CLUSTERDOWN") {
		t.Fatalf("GET on the cut-off follower: %v, want 20 (the leader's answer) or CLUSTERDOWN", got)
	}
	if c.Do(cut, "DEBUG", "DIGEST") == c.Do(lead, "DEBUG", "DIGEST") {
		t.Fatal("the cut-off follower has the leader's state: it was not cut off")
	}
	c.ConnectAll()
	c.Converged()
}
