package raft_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/testwait"
)

// RAFT MEMBERS, LEADER and INFO replication answer from the node asked, and
// agree.
func TestRaft_MembersLeaderInfo(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	for _, m := range c.members {
		testwait.For(t, 10*time.Second, m.id+" knows every RESP address", func() bool {
			members, ok := c.do(m, "RAFT", "MEMBERS").([]any)
			if !ok || len(members) != 3 {
				return false
			}
			for i, o := range c.members {
				e := members[i].([]any)
				role := "follower"
				if o == lead {
					role = "leader"
				}
				if e[0] != o.id || e[1] != string(o.addr) || e[2] != o.node.Addr() || e[3] != role {
					return false
				}
			}
			return true
		})
		if got := fmt.Sprint(c.do(m, "RAFT", "LEADER")); got != fmt.Sprint([]any{lead.id, lead.node.Addr()}) {
			t.Fatalf("RAFT LEADER on %s: %s", m.id, got)
		}
		info := fmt.Sprint(c.do(m, "INFO", "replication"))
		state := "follower"
		if m == lead {
			state = "leader"
		}
		for _, want := range []string{"raft_state:" + state, "raft_leader_id:" + lead.id, "raft_members:3", "raft_term:", "raft_commit_index:", "raft_applied_index:", "raft_member_n1:addr="} {
			if !strings.Contains(info, want) {
				t.Fatalf("INFO replication on %s lacks %q:\n%s", m.id, want, info)
			}
		}
	}
	if got := fmt.Sprint(c.do(lead, "RAFT", "NOPE")); !strings.HasPrefix(got, "ERR unknown subcommand 'NOPE'") {
		t.Fatalf("RAFT NOPE: %s", got)
	}
	if got := fmt.Sprint(c.do(lead, "RAFT", "REMOVE")); !strings.Contains(got, "wrong number of arguments for 'raft|remove'") {
		t.Fatalf("RAFT REMOVE: %s", got)
	}
}

// RAFT TRANSFER from a follower moves leadership; RAFT REMOVE takes a member
// out and the rest go on.
func TestRaft_TransferAndRemove(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	var target *member
	for _, m := range c.members {
		if m != lead {
			target = m
			break
		}
	}
	if got := c.do(target, "RAFT", "TRANSFER", target.id); got != "OK" {
		t.Fatalf("RAFT TRANSFER %s: %v", target.id, got)
	}
	if got := c.leader(); got != target {
		t.Fatalf("leader after the transfer: %s, want %s", got.id, target.id)
	}
	if got := c.do(lead, "RAFT", "REMOVE", lead.id); got != "OK" {
		t.Fatalf("RAFT REMOVE %s: %v", lead.id, got)
	}
	testwait.For(t, 10*time.Second, "two members listed", func() bool {
		members, ok := c.do(target, "RAFT", "MEMBERS").([]any)
		return ok && len(members) == 2
	})
	if got := c.do(target, "INCR", "n"); got != int64(1) {
		t.Fatalf("INCR after the removal: %v", got)
	}
}

// RAFT FORWARD takes only what a member would forward: a command that does
// not go through the log, or bytes that are no command, are refused, and the
// cluster goes on.
func TestRaft_ForwardRefusesWhatNoMemberSends(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	bad := [][]byte{
		[]byte("garbage"),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("CLIENT"), []byte("LIST")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("NOSUCH")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Args: [][]byte{[]byte("GET")}}).AppendBinary(nil),
		(&commands.Command{DB: 99, Proto: 2, Args: [][]byte{[]byte("GET"), []byte("k")}}).AppendBinary(nil),
		(&commands.Command{Proto: 2, Exec: [][][]byte{{[]byte("DEBUG"), []byte("CLOCK")}}}).AppendBinary(nil),
	}
	for _, b := range bad {
		if got := fmt.Sprint(c.do(lead, "RAFT", "FORWARD", b)); !strings.Contains(got, "not a command to forward") {
			t.Fatalf("RAFT FORWARD %q: %s", b, got)
		}
	}
	good := (&commands.Command{Proto: 2, Args: [][]byte{[]byte("INCR"), []byte("n")}}).AppendBinary(nil)
	if got := c.do(lead, "RAFT", "FORWARD", good); got != int64(1) {
		t.Fatalf("RAFT FORWARD INCR: %v", got)
	}
	c.converged()
}
