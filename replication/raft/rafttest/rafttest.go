// Package rafttest starts in-process Raft clusters for tests: each member a
// whole server on a loopback RESP port with the debug clock, its Raft
// traffic on raft's in-memory transport (whose links a test can cut), and
// its log and snapshots in memory; every member is closed when the test
// ends.
package rafttest

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// Tuning makes in-memory clusters elect within a few hundred milliseconds,
// yet not call elections when -race and a busy machine delay a heartbeat;
// and it keeps few entries after a snapshot, so that a member that falls
// behind gets one.
var Tuning = raft.Tuning{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond, LeaderLease: 100 * time.Millisecond,
	TrailingLogs: 4}

// Start is the debug clocks' instant at start.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Cluster is an in-process Raft group.
type Cluster struct {
	t       testing.TB
	base    server.Config
	Members []*Member
}

// Member is one member of a Cluster.
type Member struct {
	ID   string
	Addr hraft.ServerAddress // on the in-memory transport
	// Node is the running server; nil while stopped.
	Node *server.Node
	// Client talks to Node (RESP2, no retries).
	Client *redis.Client
	logs   *hraft.InmemStore
	snaps  *hraft.InmemSnapshotStore
	trans  *hraft.InmemTransport
}

// New starts n members that bootstrap a cluster. base gives the servers'
// other settings (RequirePass...).
func New(t testing.TB, n int, base server.Config) *Cluster {
	t.Helper()
	c := &Cluster{t: t, base: base}
	peers := map[string]string{}
	for range n {
		m := c.newMember()
		peers[m.ID] = string(m.Addr)
	}
	c.ConnectAll()
	for _, m := range c.Members {
		c.run(m, peers, "")
	}
	t.Cleanup(func() {
		for _, m := range c.Members {
			c.Stop(m)
		}
	})
	return c
}

func (c *Cluster) newMember() *Member {
	m := &Member{ID: fmt.Sprintf("n%d", len(c.Members)+1), logs: hraft.NewInmemStore(), snaps: hraft.NewInmemSnapshotStore()}
	m.Addr, m.trans = hraft.NewInmemTransport("")
	c.Members = append(c.Members, m)
	return m
}

// Add starts a new member that joins through via's RESP address.
func (c *Cluster) Add(via *Member) *Member {
	m := c.newMember()
	c.ConnectAll()
	c.run(m, nil, via.Node.Addr())
	return m
}

func (c *Cluster) run(m *Member, peers map[string]string, join string) {
	t := c.t
	t.Helper()
	cfg := c.base
	cfg.DebugClock, cfg.Dir = true, t.TempDir()
	cfg.Logger = testlog.Slog(t, slog.LevelWarn).With("member", m.ID)
	cfg.Raft = &server.RaftConfig{
		NodeID: m.ID, ClusterAddr: string(m.Addr), Peers: peers, Join: join, ApplyTimeout: 2 * time.Second, Tuning: Tuning,
		Parts: &raft.Parts{Logs: m.logs, Stable: m.logs, Snaps: m.snaps, Trans: m.trans},
	}
	node, err := servertest.Open(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", m.ID, err)
	}
	m.Node = node
	m.Client = redis.NewClient(&redis.Options{Addr: node.Addr(), Protocol: 2, MaxRetries: -1, Password: cfg.RequirePass})
	c.Do(m, "DEBUG", "CLOCK", "SET", Start)
}

// Stop closes m's server, if it runs.
func (c *Cluster) Stop(m *Member) {
	if m.Node == nil {
		return
	}
	m.Client.Close()
	if err := m.Node.Close(); err != nil {
		c.t.Errorf("close %s: %v", m.ID, err)
	}
	m.Node = nil
}

// Restart stops m and starts it again on the same log and snapshots, with
// a new transport at the same address.
func (c *Cluster) Restart(m *Member) {
	c.Stop(m)
	m.Addr, m.trans = hraft.NewInmemTransport(m.Addr)
	c.ConnectAll()
	c.run(m, nil, "")
}

// ConnectAll links every pair of members both ways.
func (c *Cluster) ConnectAll() {
	for _, a := range c.Members {
		for _, b := range c.Members {
			if a != b {
				a.trans.Connect(b.Addr, b.trans)
			}
		}
	}
}

// Isolate cuts m off from every other member, both ways.
func (c *Cluster) Isolate(m *Member) {
	m.trans.DisconnectAll()
	for _, o := range c.Members {
		if o != m {
			o.trans.Disconnect(m.Addr)
		}
	}
}

// Do runs a command on m and returns its reply, or its error.
func (c *Cluster) Do(m *Member, args ...any) any { return servertest.Do(m.Client, args...) }

// Leader waits for a member that every running member agrees leads, and
// knows the RESP address of (it has announced it, so followers can forward
// to it).
func (c *Cluster) Leader() *Member {
	c.t.Helper()
	var lead *Member
	testwait.For(c.t, 10*time.Second, "a leader", func() bool {
		lead = nil
		for _, m := range c.Members {
			if m.Node == nil {
				continue
			}
			pair, ok := c.Do(m, "RAFT", "LEADER").([]any)
			if !ok || len(pair) != 2 {
				return false
			}
			for _, o := range c.Members {
				if o.ID == pair[0] && o.Node != nil && pair[1] == o.Node.Addr() {
					if lead != nil && lead != o {
						return false
					}
					lead = o
				}
			}
		}
		return lead != nil
	})
	return lead
}

// Follower waits for a leader and returns another running member.
func (c *Cluster) Follower() *Member {
	c.t.Helper()
	lead := c.Leader()
	for _, m := range c.Members {
		if m != lead && m.Node != nil {
			return m
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// Converged waits until every running member has the same digest, and
// returns it.
func (c *Cluster) Converged() string {
	c.t.Helper()
	var clients []*redis.Client
	for _, m := range c.Members {
		if m.Node != nil {
			clients = append(clients, m.Client)
		}
	}
	return servertest.SameDigest(c.t, clients)
}

// The repltest.Cluster methods.

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.Members) }

// Client returns member i's client.
func (c *Cluster) Client(i int) *redis.Client { return c.Members[i].Client }

// RestartMember restarts member i.
func (c *Cluster) RestartMember(i int) { c.Restart(c.Members[i]) }
