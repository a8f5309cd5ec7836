package crdttest

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// Start is the debug clocks' instant at start.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Cluster is an in-process mesh.
type Cluster struct {
	t     testing.TB
	base  server.Config
	Net   *Net
	Nodes []*Node
	// StartAt is the debug clock's instant when a node starts or
	// restarts: Start when 0.
	StartAt int64
}

// Node is one node of a Cluster.
type Node struct {
	ID   string
	Addr string // on Net
	Dir  string
	// Server is the running server; nil while stopped.
	Server *server.Node
	// Client talks to Server (RESP2, no retries).
	Client *redis.Client
}

// New starts n nodes, each a peer of every other, on a network whose faults
// draw from seed. base gives the servers' other settings (the sync
// interval in base.CRDT, RequirePass...).
func New(t testing.TB, n int, seed uint64, base server.Config) *Cluster {
	t.Helper()
	c := &Cluster{t: t, base: base, Net: NewNet(seed)}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		c.Nodes = append(c.Nodes, &Node{ID: id, Addr: id + ":cluster", Dir: t.TempDir()})
	}
	for _, m := range c.Nodes {
		c.run(m)
	}
	t.Cleanup(func() {
		for _, m := range c.Nodes {
			c.Stop(m)
		}
	})
	return c
}

// peers is every node's address by id.
func (c *Cluster) peers() map[string]string {
	p := map[string]string{}
	for _, m := range c.Nodes {
		p[m.ID] = m.Addr
	}
	return p
}

func (c *Cluster) run(m *Node) {
	t := c.t
	t.Helper()
	cfg := c.base
	// The clock starts at Start: a node whose clock went back after it
	// started would have promised its peers (in a watermark) that it
	// stamps nothing earlier.
	cfg.DebugClock, cfg.DebugClockStart, cfg.Dir = true, cmp.Or(c.StartAt, Start), m.Dir
	cfg.Logger = testlog.Slog(t, slog.LevelWarn).With("node", m.ID)
	mesh := server.CRDTConfig{}
	if c.base.CRDT != nil {
		mesh = *c.base.CRDT
	}
	mesh.NodeID, mesh.Peers, mesh.Transport = m.ID, c.peers(), c.Net.Transport(m.Addr)
	cfg.CRDT = &mesh
	node, err := servertest.Open(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", m.ID, err)
	}
	m.Server = node
	m.Client = redis.NewClient(&redis.Options{Addr: node.Addr(), Protocol: 2, MaxRetries: -1, Password: cfg.RequirePass})
}

// Stop closes m's server, if it runs.
func (c *Cluster) Stop(m *Node) {
	if m.Server == nil {
		return
	}
	m.Client.Close()
	if err := m.Server.Close(); err != nil {
		c.t.Errorf("close %s: %v", m.ID, err)
	}
	m.Server = nil
}

// Restart stops m and starts it again, with its data folder or, without
// keep, an empty one. Its clock starts at StartAt (Start) again.
func (c *Cluster) Restart(m *Node, keep bool) {
	c.Stop(m)
	if !keep {
		if err := os.RemoveAll(m.Dir); err != nil {
			c.t.Fatal(err)
		}
	}
	c.run(m)
}

// Do runs a command on m and returns its reply, or its error.
func (c *Cluster) Do(m *Node, args ...any) any { return servertest.Do(m.Client, args...) }

// SetClocks sets every running node's debug clock to at.
func (c *Cluster) SetClocks(at int64) {
	c.t.Helper()
	for _, m := range c.Nodes {
		if m.Server != nil {
			if err, ok := c.Do(m, "DEBUG", "CLOCK", "SET", at).(error); ok {
				c.t.Fatalf("%s: DEBUG CLOCK SET: %v", m.ID, err)
			}
		}
	}
}

// Converged waits until every running node has the same digest, and
// returns it.
func (c *Cluster) Converged() string {
	c.t.Helper()
	var clients []*redis.Client
	for _, m := range c.Nodes {
		if m.Server != nil {
			clients = append(clients, m.Client)
		}
	}
	return servertest.SameDigest(c.t, clients)
}

// Connected waits until every running node has every other running one
// connected both ways (CRDT PEERS).
func (c *Cluster) Connected() {
	c.t.Helper()
	running := map[string]bool{}
	for _, m := range c.Nodes {
		running[m.ID] = m.Server != nil
	}
	testwait.For(c.t, 10*time.Second, "connected peers", func() bool {
		for _, m := range c.Nodes {
			if m.Server == nil {
				continue
			}
			peers, _ := c.Do(m, "CRDT", "PEERS").([]any)
			for _, p := range peers {
				row := p.([]any)
				if running[row[0].(string)] && row[2] != int64(1) {
					return false
				}
			}
		}
		return true
	})
}

// The repltest.Cluster methods.

// Size is the number of nodes.
func (c *Cluster) Size() int { return len(c.Nodes) }

// Client returns node i's client.
func (c *Cluster) Client(i int) *redis.Client { return c.Nodes[i].Client }

// RestartMember restarts node i with its data.
func (c *Cluster) RestartMember(i int) { c.Restart(c.Nodes[i], true) }
