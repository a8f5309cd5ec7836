package raft_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
)

// RAFT MEMBERS, LEADER and INFO replication answer from the node asked, and
// agree.
func TestRaft_MembersLeaderInfo(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	for _, m := range c.Members {
		testwait.For(t, 10*time.Second, m.ID+" knows every RESP address", func() bool {
			members, ok := c.Do(m, "RAFT", "MEMBERS").([]any)
			if !ok || len(members) != 3 {
				return false
			}
			for i, o := range c.Members {
				e := members[i].([]any)
				role := "follower"
				if o == lead {
					role = "leader"
				}
				if e[0] != o.ID || e[1] != string(o.Addr) || e[2] != o.Node.Addr() || e[3] != role {
					return false
				}
			}
			return true
		})
		if got := fmt.Sprint(c.Do(m, "RAFT", "LEADER")); got != fmt.Sprint([]any{lead.ID, lead.Node.Addr()}) {
			t.Fatalf("RAFT LEADER on %s: %s", m.ID, got)
		}
		info := fmt.Sprint(c.Do(m, "INFO", "replication"))
		state := "follower"
		if m == lead {
			state = "leader"
		}
		for _, want := range []string{"raft_state:" + state, "raft_leader_id:" + lead.ID, "raft_members:3", "raft_term:", "raft_commit_index:", "raft_applied_index:", "raft_member_n1:addr="} {
			if !strings.Contains(info, want) {
				t.Fatalf("INFO replication on %s lacks %q:\n%s", m.ID, want, info)
			}
		}
	}
	if got := fmt.Sprint(c.Do(lead, "RAFT", "HELP")); !strings.Contains(got, "TRANSFER [<id>]") {
		t.Fatalf("RAFT HELP: %s", got)
	}
	if got := fmt.Sprint(c.Do(lead, "RAFT", "NOPE")); !strings.HasPrefix(got, "ERR unknown subcommand 'NOPE'") {
		t.Fatalf("RAFT NOPE: %s", got)
	}
	if got := fmt.Sprint(c.Do(lead, "RAFT", "REMOVE")); !strings.Contains(got, "wrong number of arguments for 'raft|remove'") {
		t.Fatalf("RAFT REMOVE: %s", got)
	}
	if got := fmt.Sprint(c.Do(lead, "CONFIG", "SET", "maxkeys", "10")); !strings.Contains(got, "cannot be set on a Raft node") {
		t.Fatalf("CONFIG SET maxkeys on a Raft node: %s", got)
	}
	// The policy may be set: without a bound, which a member refuses, it
	// acts on nothing, and writes go on.
	if got := fmt.Sprint(c.Do(lead, "CONFIG", "SET", "maxmemory-policy", "noeviction")); got != "OK" {
		t.Fatalf("CONFIG SET maxmemory-policy on a Raft node: %s", got)
	}
	if got := fmt.Sprint(c.Do(lead, "SET", "k", "v")); got != "OK" {
		t.Fatalf("SET under noeviction without a bound: %s", got)
	}
}

// RAFT TRANSFER from a follower moves leadership; RAFT REMOVE takes a member
// out and the rest go on.
func TestRaft_TransferAndRemove(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	var target *rafttest.Member
	for _, m := range c.Members {
		if m != lead {
			target = m
			break
		}
	}
	if got := c.Do(target, "RAFT", "TRANSFER", target.ID); got != "OK" {
		t.Fatalf("RAFT TRANSFER %s: %v", target.ID, got)
	}
	if got := c.Leader(); got != target {
		t.Fatalf("leader after the transfer: %s, want %s", got.ID, target.ID)
	}
	if got := c.Do(lead, "RAFT", "REMOVE", lead.ID); got != "OK" {
		t.Fatalf("RAFT REMOVE %s: %v", lead.ID, got)
	}
	testwait.For(t, 10*time.Second, "two members listed", func() bool {
		members, ok := c.Do(target, "RAFT", "MEMBERS").([]any)
		return ok && len(members) == 2
	})
	if got := c.Do(target, "INCR", "n"); got != int64(1) {
		t.Fatalf("INCR after the removal: %v", got)
	}
}

// RAFT FORWARD takes only what a member would forward: a command that does
// not go through the log, or bytes that are no command, are refused, and the
// cluster goes on.
func TestRaft_ForwardRefusesWhatNoMemberSends(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	bad := [][]byte{
		[]byte("garbage"),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("CLIENT"), []byte("LIST")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("NOSUCH")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("GET")}}).AppendBinary(nil),
		(&commands.Command{DB: 99, Proto: 2, Args: [][]byte{[]byte("GET"), []byte("k")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Exec: [][][]byte{{[]byte("DEBUG"), []byte("CLOCK")}}}).AppendBinary(nil),
	}
	for _, b := range bad {
		if got := fmt.Sprint(c.Do(lead, "RAFT", "FORWARD", b)); !strings.Contains(got, "not a command to forward") {
			t.Fatalf("RAFT FORWARD %q: %s", b, got)
		}
	}
	good := (&commands.Command{Proto: 2, Args: [][]byte{[]byte("INCR"), []byte("n")}}).AppendBinary(nil)
	if got := c.Do(lead, "RAFT", "FORWARD", good); got != int64(1) {
		t.Fatalf("RAFT FORWARD INCR: %v", got)
	}
	c.Converged()
}

// RAFT LEADER names the leader's RESP address, which clients dial, from the
// first moment any member names a leader: never its cluster address, which
// a member knows before the leader's RESP address has reached it.
func TestRaft_LeaderIsRESPAddress(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	resp := map[string]string{}
	for _, m := range c.Members {
		resp[m.ID] = m.Node.Addr()
	}
	named := map[string]bool{}
	testwait.For(t, 10*time.Second, "every member naming the leader", func() bool {
		for _, m := range c.Members {
			v, ok := c.Do(m, "RAFT", "LEADER").([]any)
			if !ok {
				continue
			}
			if v[1] != resp[v[0].(string)] {
				t.Fatalf("RAFT LEADER on %s: %v, want %s's RESP address %s", m.ID, v, v[0], resp[v[0].(string)])
			}
			named[m.ID] = true
		}
		return len(named) == len(c.Members)
	})
}

// Raft's own traffic is contact: on the in-memory transport no member can
// dial another's cluster address, so only the leader's heartbeats make its
// followers reachable on it, and the leader reachable on each follower
// (which is what spares an idle leader the probes: bench/idle). A follower
// cut off stops being reachable on the leader within the probe's window.
func TestRaft_RaftTrafficIsContact(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{})
	lead := c.Leader()
	reachable := func(on, of *rafttest.Member) bool {
		members, _ := c.Do(on, "RAFT", "MEMBERS").([]any)
		for _, e := range members {
			if e := e.([]any); e[0] == of.ID {
				return e[4] == int64(1)
			}
		}
		return false
	}
	for _, m := range c.Members {
		if m == lead {
			continue
		}
		testwait.For(t, 10*time.Second, "the leader reaches "+m.ID+" and "+m.ID+" the leader", func() bool {
			return reachable(lead, m) && reachable(m, lead)
		})
	}
	cut := c.Follower()
	c.Isolate(cut)
	testwait.For(t, 10*time.Second, cut.ID+" unreachable on the leader once cut off", func() bool {
		return !reachable(lead, cut)
	})
	info := fmt.Sprint(c.Do(lead, "INFO", "replication"))
	if !strings.Contains(info, "raft_member_"+cut.ID+":addr="+string(cut.Addr)) || !strings.Contains(info, "reachable=0") {
		t.Fatalf("INFO replication on the leader after %s was cut off:\n%s", cut.ID, info)
	}
}
