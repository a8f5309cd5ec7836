package raft_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// A leader cut off from the others steps down; the other two elect a new
// leader that serves, and the old one, healed, catches up.
func TestCluster_LeaderIsolated(t *testing.T) {
	c := newCluster(t, 3)
	old := c.leader()
	for range 10 {
		if got := fmt.Sprint(c.do(old, "INCR", "n")); strings.HasPrefix(got, "ERR") {
			t.Fatalf("INCR on the leader: %s", got)
		}
	}
	c.isolate(old)
	var lead *member
	testwait.For(t, 10*time.Second, "a new leader", func() bool {
		for _, m := range c.members {
			if m != old && c.do(m, "INCR", "n") == int64(11) {
				lead = m
				return true
			}
		}
		return false
	})
	start := time.Now()
	got := fmt.Sprint(c.do(old, "INCR", "n"))
	if !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "TRYAGAIN") {
		t.Fatalf("INCR on the isolated old leader: %s, want CLUSTERDOWN or TRYAGAIN", got)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the isolated old leader answered after %v, want within the apply timeout", d)
	}
	c.connectAll()
	c.converged()
	if got := c.do(old, "GET", "n"); got != "11" && got != "12" {
		t.Fatalf("GET n on the healed old leader: %v, want 11 (or 12 if its TRYAGAIN'd INCR committed)", got)
	}
	_ = lead
}

// With two of three members gone, the survivor admits nothing and answers
// every command within the apply timeout.
func TestCluster_NoQuorum(t *testing.T) {
	c := newCluster(t, 3)
	c.leader()
	survivor := c.members[0]
	c.stop(c.members[1])
	c.stop(c.members[2])
	for i := range 5 {
		start := time.Now()
		got := fmt.Sprint(c.do(survivor, "CL.THROTTLE", "k", 100, 1, 1))
		if !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "TRYAGAIN") {
			t.Fatalf("command %d on the survivor: %s, want CLUSTERDOWN or TRYAGAIN", i, got)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("command %d answered after %v, want within the 2s apply timeout", i, d)
		}
	}
	if got := fmt.Sprint(c.do(survivor, "GET", "k")); !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "TRYAGAIN") {
		t.Fatalf("a read on the survivor: %s, want it refused (reads are linearizable)", got)
	}
}

// A node started with Join asks the cluster to add it, catches up, and
// becomes a voting follower with the leader's state.
func TestCluster_Join(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	for range 20 {
		c.do(lead, "INCR", "n")
	}
	if got := c.do(lead, "RAFT", "SNAPSHOT"); got != "OK" {
		t.Fatalf("RAFT SNAPSHOT: %v", got)
	}
	m := c.add(c.members[1])
	testwait.For(t, 10*time.Second, "n4 listed as a follower", func() bool {
		return strings.Contains(fmt.Sprint(c.do(lead, "RAFT", "MEMBERS")), "n4 "+string(m.addr)+" "+m.node.Addr()+" follower")
	})
	c.converged()
	if got := c.do(m, "GET", "n"); got != "20" {
		t.Fatalf("GET n on the new member: %v, want 20", got)
	}
	if info := fmt.Sprint(c.do(m, "INFO", "replication")); strings.Contains(info, "raft_last_snapshot_index:0\r") {
		t.Fatalf("the new member installed no snapshot:\n%s", info)
	}
}

// A follower cut off from the others misses writes, refuses commands
// meanwhile, and catches up once healed.
func TestCluster_FollowerCutOffAndHealed(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	var cut *member
	for _, m := range c.members {
		if m != lead {
			cut = m
			break
		}
	}
	c.isolate(cut)
	for i := range 20 {
		if got := c.do(lead, "INCR", "n"); got != int64(i+1) {
			t.Fatalf("INCR on the leader: %v", got)
		}
	}
	got := fmt.Sprint(c.do(cut, "GET", "n"))
	if !strings.HasPrefix(got, "CLUSTERDOWN") && !strings.HasPrefix(got, "TRYAGAIN") {
		t.Fatalf("GET on the cut-off follower: %s, want it refused", got)
	}
	c.connectAll()
	c.converged()
	testwait.For(t, 10*time.Second, "the healed follower serving", func() bool { return c.do(cut, "GET", "n") == "20" })
}
