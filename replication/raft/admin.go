package raft

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/commands"
	"github.com/throttleddb/throttled/internal/respconn"
	"github.com/throttleddb/throttled/internal/tlsconf"
	"github.com/throttleddb/throttled/resp"
)

// The RAFT command:
//
//	RAFT MEMBERS                       this node's view of the members
//	RAFT LEADER                        [id, RESP address] of the leader, or null
//	RAFT JOIN id cluster-addr resp-addr   add a voter     \
//	RAFT REMOVE id                     remove a member      } from any node:
//	RAFT TRANSFER [id]                 hand leadership over } forwarded to
//	RAFT SNAPSHOT                      snapshot the leader  / the leader
//	RAFT FORWARD command               (between members) propose a command
//	RAFT ANNOUNCE id resp-addr         (between members) record an address
//
// MEMBERS and LEADER answer from the node asked, so replicas can be
// compared; the others run on the leader.

// Command implements commands.Cluster.
func (n *Node) Command(args [][]byte, proto int, done func([]byte)) {
	reply := func(fn func(w *resp.Writer)) {
		var w resp.Writer
		w.Reset(proto)
		fn(&w)
		done(w.Bytes())
	}
	fail := func(msg string) { reply(func(w *resp.Writer) { w.Error(msg) }) }
	sub := strings.ToUpper(string(args[1]))
	want, ok := raftArity[sub]
	switch {
	case !ok:
		fail("ERR unknown subcommand '" + string(args[1]) + "'. Try RAFT HELP.")
		return
	case len(args) < want.min || len(args) > want.max:
		fail("ERR wrong number of arguments for 'raft|" + strings.ToLower(sub) + "' command")
		return
	}
	switch sub {
	case "HELP":
		reply(func(w *resp.Writer) {
			w.Array(len(raftHelp))
			for _, l := range raftHelp {
				w.Status(l)
			}
		})
		return
	case "MEMBERS":
		members := n.members()
		reply(func(w *resp.Writer) {
			w.Array(len(members))
			for _, m := range members {
				w.Array(5)
				w.BulkString(m.id)
				w.BulkString(m.clusterAddr)
				w.BulkString(m.respAddr)
				w.BulkString(m.role)
				w.Int(boolInt(m.reachable))
			}
		})
		return
	case "LEADER":
		// Clients dial what LEADER names, so it is the leader's RESP
		// address, never its cluster address: until the leader's
		// announce entry has applied here, no leader is named.
		_, id := n.r.LeaderWithID()
		addr := n.respAddrOf(string(id))
		reply(func(w *resp.Writer) {
			if id == "" || addr == "" {
				w.NullArray()
				return
			}
			w.Array(2)
			w.BulkString(string(id))
			w.BulkString(addr)
		})
		return
	case "FORWARD":
		cmd, rest, err := commands.DecodeCommand(args[2])
		if err == nil && len(rest) == 0 {
			err = n.fsm.cmds.Check(&cmd)
		}
		if err != nil || len(rest) != 0 {
			fail("ERR RAFT FORWARD: not a command to forward")
			return
		}
		if n.r.State() != hraft.Leader {
			done(slices.Clone(replyDown))
			return
		}
		n.Propose(&cmd, done)
		return
	}
	go func() {
		// Run on the leader, or forward to it once it is known, within
		// the apply timeout.
		deadline := time.Now().Add(n.cfg.ApplyTimeout)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for n.r.State() != hraft.Leader {
			if addr := n.leaderRESP(); addr != "" {
				n.fwd.send(addr, request{args: args, done: done, deadline: deadline})
				return
			}
			select {
			case <-n.stop:
			case <-tick.C:
				if time.Now().Before(deadline) {
					continue
				}
			}
			done(slices.Clone(replyDown))
			return
		}
		if err := n.lead(sub, args); err != nil {
			fail("ERR " + err.Error())
			return
		}
		reply(func(w *resp.Writer) { w.OK() })
	}()
}

// raftArity is each subcommand's argument count, the name included.
var raftArity = map[string]struct{ min, max int }{
	"HELP": {2, 2}, "MEMBERS": {2, 2}, "LEADER": {2, 2}, "FORWARD": {3, 3},
	"JOIN": {5, 5}, "REMOVE": {3, 3}, "TRANSFER": {2, 3}, "SNAPSHOT": {2, 2}, "ANNOUNCE": {4, 4},
}

var raftHelp = []string{
	"RAFT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"MEMBERS",
	"    Return this node's view of the members: id, cluster address, RESP address, role, reachable.",
	"LEADER",
	"    Return the leader's id and RESP address, or null when there is none.",
	"JOIN <id> <cluster-addr> <resp-addr>",
	"    Add a voter (run on the leader, from any node).",
	"REMOVE <id>",
	"    Remove a member (run on the leader, from any node).",
	"TRANSFER [<id>]",
	"    Hand leadership to <id>, or to the most up-to-date voter.",
	"SNAPSHOT",
	"    Have the leader write a snapshot.",
	"HELP",
	"    Print this help.",
}

// lead runs a subcommand that only the leader can.
func (n *Node) lead(sub string, args [][]byte) error {
	t := n.cfg.ApplyTimeout
	switch sub {
	case "JOIN":
		id, caddr, raddr := string(args[2]), string(args[3]), string(args[4])
		if err := n.r.Apply(announceEntry(id, raddr), t).Error(); err != nil {
			return err
		}
		return n.r.AddVoter(hraft.ServerID(id), hraft.ServerAddress(caddr), 0, t).Error()
	case "ANNOUNCE":
		return n.r.Apply(announceEntry(string(args[2]), string(args[3])), t).Error()
	case "REMOVE":
		return n.r.RemoveServer(hraft.ServerID(args[2]), 0, t).Error()
	case "TRANSFER":
		if len(args) == 2 {
			return n.r.LeadershipTransfer().Error()
		}
		id := string(args[2])
		for _, s := range n.servers() {
			if string(s.ID) == id {
				return n.r.LeadershipTransferToServer(s.ID, s.Address).Error()
			}
		}
		return fmt.Errorf("no member %q", id)
	case "SNAPSHOT":
		return n.r.Snapshot().Error()
	}
	panic("raft: lead: " + sub)
}

// announceEntry is the entry that records a member's RESP address. Its
// instant is 0: it does not move the cluster's time.
func announceEntry(id, addr string) []byte {
	return appendString(appendString(appendHeader(nil, kindAnnounce, 0), id), addr)
}

// announce makes sure the cluster knows this node's RESP address: the
// leader records it itself, a follower asks the leader to. One at a time.
func (n *Node) announce() {
	if n.fsm.addr(n.cfg.ID) == n.cfg.RESPAddr || !n.announcing.CompareAndSwap(false, true) {
		return
	}
	finish := func([]byte) { n.announcing.Store(false) }
	if n.ready.Load() {
		go func() {
			if err := n.r.Apply(announceEntry(n.cfg.ID, n.cfg.RESPAddr), n.cfg.ApplyTimeout).Error(); err != nil {
				n.log.Warn("raft: announcing this node's address failed", "err", err)
			}
			finish(nil)
		}()
		return
	}
	addr := n.leaderRESP()
	if addr == "" {
		finish(nil)
		return
	}
	args := [][]byte{[]byte("RAFT"), []byte("ANNOUNCE"), []byte(n.cfg.ID), []byte(n.cfg.RESPAddr)}
	n.fwd.send(addr, request{args: args, done: finish, deadline: time.Now().Add(n.cfg.ApplyTimeout)})
}

// join asks the member at cfg.Join to add this node, until it is added or
// the node stops.
func (n *Node) join() {
	defer n.stopped.Done()
	args := [][]byte{[]byte("RAFT"), []byte("JOIN"), []byte(n.cfg.ID), []byte(n.cfg.ClusterAddr), []byte(n.cfg.RESPAddr)}
	for {
		got := make(chan []byte, 1)
		n.fwd.send(n.cfg.Join, request{args: args, done: func(r []byte) { got <- r }, deadline: time.Now().Add(n.cfg.ApplyTimeout)})
		select {
		case <-n.stop:
			return
		case r := <-got:
			if string(r) == "+OK\r\n" {
				n.log.Info("raft: joined the cluster", "via", n.cfg.Join)
				return
			}
			n.log.Warn("raft: join refused, retrying", "via", n.cfg.Join, "reply", strings.TrimSpace(string(r)))
		}
		select {
		case <-n.stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// checkStillMember asks the group, for a node that restarts with stored
// state and --join, whether this node is still a member. One that was
// removed (RAFT REMOVE) would otherwise start and stay out without a word:
// its own log may still list it, but the group no longer sends it
// anything. It is not added back by itself: someone removed it, and only
// they know whether it should return; the error gives the RAFT JOIN that
// would. The member at cfg.Join names the leader (RAFT LEADER), whose
// configuration is the newest (a follower's may lag), and the leader lists
// the members (RAFT MEMBERS). When that cannot be learnt (no leader known,
// a member unreachable: the whole group may be restarting), the node
// starts from its stored state as before.
func (n *Node) checkStillMember() error {
	cannot := func(asked string, err error) error {
		n.log.Warn("raft: could not ask the group whether this node is still a member; starting from the stored state",
			"via", n.cfg.Join, "asked", asked, "err", err)
		return nil
	}
	v, err := n.ask(n.cfg.Join, "RAFT", "LEADER")
	leader, _ := v.([]any)
	if err == nil && len(leader) != 2 {
		err = fmt.Errorf("no leader known (%v)", v)
	}
	if err != nil {
		return cannot("RAFT LEADER", err)
	}
	leaderID, _ := leader[0].(string)
	leaderAddr, _ := leader[1].(string)
	v, err = n.ask(leaderAddr, "RAFT", "MEMBERS")
	list, ok := v.([]any)
	if err == nil && !ok {
		err = fmt.Errorf("not a list of members (%v)", v)
	}
	if err != nil {
		return cannot("RAFT MEMBERS of the leader at "+leaderAddr, err)
	}
	var ids []string
	for _, m := range list {
		if fields, _ := m.([]any); len(fields) > 0 {
			id, _ := fields[0].(string)
			ids = append(ids, id)
		}
	}
	if slices.Contains(ids, n.cfg.ID) {
		return nil
	}
	return fmt.Errorf("%w: this node (%s) holds Raft state but is no longer a member of the group: "+
		"its leader %s (%s, named by --join %s) lists %s (removed with RAFT REMOVE?). "+
		"To join it again as a new member, empty its data folder and start it with --join; "+
		"or, to keep its state, start it again once this line has run on any member: RAFT JOIN %s %s %s",
		ErrConfig, n.cfg.ID, leaderID, leaderAddr, n.cfg.Join, strings.Join(ids, ", "),
		n.cfg.ID, n.cfg.ClusterAddr, n.cfg.RESPAddr)
}

// ask sends a command to the member at addr through the forwarder and
// returns its reply as respconn.Parse reads it (CLUSTERDOWN, an error,
// when addr cannot be reached).
func (n *Node) ask(addr string, args ...string) (any, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	got := make(chan []byte, 1)
	n.fwd.send(addr, request{args: b, done: func(r []byte) { got <- r }, deadline: time.Now().Add(n.cfg.ApplyTimeout)})
	return respconn.Parse(<-got)
}

func (n *Node) servers() []hraft.Server {
	f := n.r.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	return f.Configuration().Servers
}

// respAddrOf returns a member's RESP address, "" when it has not announced
// one yet.
func (n *Node) respAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.cfg.RESPAddr
	}
	return n.fsm.addr(id)
}

// member is one line of RAFT MEMBERS and INFO replication.
type member struct {
	id, clusterAddr, respAddr, role string
	reachable                       bool
	lastContact                     time.Time
}

// members lists the configuration's servers, in id order, as this node sees
// them.
func (n *Node) members() []member {
	_, leader := n.r.LeaderWithID()
	var list []member
	for _, s := range n.servers() {
		m := member{id: string(s.ID), clusterAddr: string(s.Address), respAddr: n.respAddrOf(string(s.ID))}
		switch {
		case s.ID == leader:
			m.role = "leader"
		case s.Suffrage == hraft.Voter:
			m.role = "follower"
		default:
			m.role = "learner"
		}
		if m.id == n.cfg.ID {
			m.reachable, m.lastContact = true, time.Now()
		} else {
			m.lastContact = n.contact(s, leader)
			m.reachable = time.Since(m.lastContact) < 2*probeEvery
		}
		list = append(list, m)
	}
	slices.SortFunc(list, func(a, b member) int { return strings.Compare(a.id, b.id) })
	return list
}

// Status is this member's view of the group, as INFO replication shows it
// and the metrics export it.
type Status struct {
	// State is "follower", "candidate", "leader" or "shutdown".
	State string
	Term  uint64
	// Leader is the leader's id, "" when this member knows of none.
	Leader                                       string
	CommitIndex, AppliedIndex, LastSnapshotIndex uint64
	// Members counts the members of the configuration, Reachable those
	// this member can reach (itself included).
	Members, Reachable int
}

// Status returns this member's view of the group.
func (n *Node) Status() Status { return n.status(n.members()) }

func (n *Node) status(members []member) Status {
	_, leader := n.r.LeaderWithID()
	snap, _ := strconv.ParseUint(n.r.Stats()["last_snapshot_index"], 10, 64)
	st := Status{
		State:             strings.ToLower(n.r.State().String()),
		Term:              n.r.CurrentTerm(),
		Leader:            string(leader),
		CommitIndex:       n.r.CommitIndex(),
		AppliedIndex:      n.fsm.index.Load(),
		LastSnapshotIndex: snap,
		Members:           len(members),
	}
	for _, m := range members {
		if m.reachable {
			st.Reachable++
		}
	}
	return st
}

// AppendInfo implements commands.Cluster: INFO replication's Raft lines.
func (n *Node) AppendInfo(b []byte) []byte {
	line := func(k, v string) { b = append(append(append(append(b, k...), ':'), v...), "\r\n"...) }
	members := n.members()
	st := n.status(members)
	line("raft_node_id", n.cfg.ID)
	line("raft_state", st.State)
	line("raft_term", strconv.FormatUint(st.Term, 10))
	line("raft_leader_id", st.Leader)
	line("raft_commit_index", strconv.FormatUint(st.CommitIndex, 10))
	line("raft_applied_index", strconv.FormatUint(st.AppliedIndex, 10))
	line("raft_last_snapshot_index", strconv.FormatUint(st.LastSnapshotIndex, 10))
	line("raft_members", strconv.Itoa(st.Members))
	for _, m := range members {
		contact := "never"
		if !m.lastContact.IsZero() {
			contact = strconv.FormatInt(time.Since(m.lastContact).Milliseconds(), 10)
		}
		line("raft_member_"+m.id, fmt.Sprintf("addr=%s,resp=%s,role=%s,reachable=%d,last_contact_ms=%s",
			m.clusterAddr, m.respAddr, m.role, boolInt(m.reachable), contact))
	}
	return b
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// probeEvery is how often a node checks that it can reach each member's
// cluster address (RAFT MEMBERS' reachable, INFO's last contact). Raft's
// own traffic counts as contact too, so a member dials only those it has
// not exchanged a Raft message with within probeEvery: on a settled group
// the followers dial each other, and the leader, whose heartbeats reach
// every follower ten times a second and which hears from no one else,
// neither dials nor is dialled (bench/idle: the probes were a quarter of
// an idle leader's CPU).
const probeEvery = 500 * time.Millisecond

// reachability remembers when each cluster address last took a connection
// from the probe or answered one of this node's Raft messages.
type reachability struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (r *reachability) last(addr string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[addr]
}

// note records contact with addr now.
func (r *reachability) note(addr string) {
	r.mu.Lock()
	r.seen[addr] = time.Now()
	r.mu.Unlock()
}

// contact returns when this node last had contact with member s: a probe
// or a Raft message it answered, or, for the leader when this node is a
// follower, the leader's last message (its heartbeats).
func (n *Node) contact(s hraft.Server, leader hraft.ServerID) time.Time {
	last := n.reach.last(string(s.Address))
	if s.ID == leader && s.ID != hraft.ServerID(n.cfg.ID) {
		if heard := n.r.LastContact(); heard.After(last) {
			last = heard
		}
	}
	return last
}

// dialProbe connects to a member's cluster address: under tls-replication
// the handshake must pass too, so that a member that does not take this
// one's certificate (or shows one the CA did not sign) is not reachable.
func (n *Node) dialProbe(addr string) (net.Conn, error) {
	if n.cfg.TLS != nil {
		return tlsconf.Dial(addr, probeEvery, n.cfg.TLS)
	}
	return net.DialTimeout("tcp", addr, probeEvery)
}

// probe connects, every probeEvery, to every other member this node has had
// no contact with (Raft's traffic, or the last probe) within probeEvery.
func (n *Node) probe() {
	defer n.stopped.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		_, leader := n.r.LeaderWithID()
		for _, s := range n.servers() {
			if string(s.ID) == n.cfg.ID || time.Since(n.contact(s, leader)) < probeEvery/2 {
				continue
			}
			if c, err := n.dialProbe(string(s.Address)); err == nil {
				c.Close()
				n.reach.note(string(s.Address))
			}
		}
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
	}
}

// Role implements commands.Cluster: the leader is a master whose replicas
// are the other members, a follower (or candidate) a replica of the
// leader. hashicorp/raft tells the leader neither how far each follower
// has applied nor when it last answered, only when heartbeats to it fail
// and resume: a follower it reaches is online with the commit index (what
// the leader sends it within a heartbeat) and lag 0; one it fails to reach
// is offline, offset 0, lag the seconds since its last contact.
func (n *Node) Role() commands.Role {
	r := commands.Role{Offset: n.fsm.index.Load(), LastIO: -1}
	if n.r.State() == hraft.Leader {
		r.Primary = true
		commit := n.r.CommitIndex()
		for _, m := range n.members() {
			if m.id == n.cfg.ID {
				continue
			}
			host, port := splitRESP(m.respAddr)
			rep := commands.Replica{Host: host, Port: port, Online: true, Offset: commit}
			if last, failing := n.failing.Load(m.id); failing {
				rep.Online, rep.Offset = false, 0
				rep.Lag = int64(time.Since(last.(time.Time)) / time.Second)
			}
			r.Replicas = append(r.Replicas, rep)
		}
		return r
	}
	if _, id := n.r.LeaderWithID(); id != "" {
		r.MasterHost, r.MasterPort = splitRESP(n.respAddrOf(string(id)))
	}
	if last := n.r.LastContact(); !last.IsZero() {
		r.LastIO = int64(time.Since(last) / time.Second)
		r.LinkUp = r.MasterHost != "" && time.Since(last) < 2*n.cfg.Tuning.Heartbeat
	}
	return r
}

// splitRESP splits a RESP address into host and port ("" and 0 when it is
// not known yet).
func splitRESP(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// noteHeartbeat records, from the leader's heartbeat observations, which
// followers it fails to reach; a new leadership starts with none.
func (n *Node) noteHeartbeat(data any) {
	switch o := data.(type) {
	case hraft.FailedHeartbeatObservation:
		n.failing.Store(string(o.PeerID), o.LastContact)
	case hraft.ResumedHeartbeatObservation:
		n.failing.Delete(string(o.PeerID))
	case hraft.LeaderObservation:
		n.failing.Clear()
	}
}
