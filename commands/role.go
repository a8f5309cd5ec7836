package commands

import (
	"fmt"
	"strconv"
)

// Role is a replicated node's place in its group in Redis' replication
// terms, for ROLE and INFO replication: Redis-aware tools (redis-cli,
// redis_exporter, Sentinel-style checks) read a Raft leader as a master
// whose replicas are the other members, and a follower as a replica of the
// leader. Offsets are Raft log indexes.
type Role struct {
	// Primary is set on the Raft leader, which takes the writes.
	Primary bool
	// Offset is the last log index this node applied.
	Offset uint64
	// Replicas are the other members, as the leader sees them.
	Replicas []Replica
	// MasterHost and MasterPort are the leader's RESP address ("" and 0
	// while no leader is known), on a follower.
	MasterHost string
	MasterPort int
	// LinkUp: the follower hears from the leader.
	LinkUp bool
	// LastIO is the seconds since the follower last heard from the
	// leader, -1 when it never has.
	LastIO int64
}

// Replica is another member as the leader sees it.
type Replica struct {
	Host   string
	Port   int
	Online bool
	// Offset is the index the leader knows the member to hold, Lag the
	// seconds since the leader last reached it.
	Offset uint64
	Lag    int64
}

// role answers ROLE as Redis does: ["master", offset, [[ip, port,
// offset]...]] on a single node, a mesh node (which takes writes and has no
// replicas) and a Raft leader; ["slave", ip, port, state, offset] on a Raft
// follower.
func role(c *Ctx) {
	if c.srv.cluster == nil {
		c.W.Array(3)
		c.W.BulkString("master")
		c.W.Int(0)
		c.W.Array(0)
		return
	}
	r := c.srv.cluster.Role()
	if r.Primary {
		c.W.Array(3)
		c.W.BulkString("master")
		c.W.Int(int64(r.Offset))
		c.W.Array(len(r.Replicas))
		for _, rep := range r.Replicas {
			c.W.Array(3)
			c.W.BulkString(rep.Host)
			c.W.BulkString(strconv.Itoa(rep.Port))
			c.W.BulkString(strconv.FormatUint(rep.Offset, 10))
		}
		return
	}
	state := "connect"
	if r.LinkUp {
		state = "connected"
	}
	c.W.Array(5)
	c.W.BulkString("slave")
	c.W.BulkString(r.MasterHost)
	c.W.Int(int64(r.MasterPort))
	c.W.BulkString(state)
	c.W.Int(int64(r.Offset))
}

// appendReplication appends INFO replication's Redis fields: those of a
// Redis master with its replicas on a Raft leader, those of a Redis
// replica on a follower (the list a redis-server 7.0 replica prints), and
// a replica-less master's on a single node and a mesh node. throttled_mode
// says which (single, raft or mesh): a mesh node is a master in Redis'
// sense (it takes writes) but has peers, not replicas, listed in its
// crdt_* lines.
func (s *Server) appendReplication(b []byte) []byte {
	line := func(k string, v any) { b = fmt.Appendf(b, "%s:%v\r\n", k, v) }
	mode := "single"
	switch {
	case s.cluster != nil:
		mode = "raft"
	case s.mesh != nil:
		mode = "mesh"
	}
	var r Role
	if s.cluster != nil {
		r = s.cluster.Role()
	} else {
		r.Primary = true
	}
	if r.Primary {
		line("role", "master")
		line("connected_slaves", len(r.Replicas))
		for i, rep := range r.Replicas {
			state := "online"
			if !rep.Online {
				state = "offline"
			}
			line(fmt.Sprintf("slave%d", i), fmt.Sprintf("ip=%s,port=%d,state=%s,offset=%d,lag=%d", rep.Host, rep.Port, state, rep.Offset, rep.Lag))
		}
	} else {
		link := "down"
		if r.LinkUp {
			link = "up"
		}
		line("role", "slave")
		line("master_host", r.MasterHost)
		line("master_port", r.MasterPort)
		line("master_link_status", link)
		line("master_last_io_seconds_ago", r.LastIO)
		line("master_sync_in_progress", 0)
		line("slave_read_repl_offset", r.Offset)
		line("slave_repl_offset", r.Offset)
		if !r.LinkUp {
			line("master_link_down_since_seconds", r.LastIO)
		}
		line("slave_priority", 100)
		line("slave_read_only", 1)
		line("replica_announced", 1)
		line("connected_slaves", 0)
	}
	line("master_repl_offset", r.Offset)
	line("throttled_mode", mode)
	return b
}
