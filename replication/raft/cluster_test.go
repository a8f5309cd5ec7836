package raft_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/raft"
	"github.com/throttleddb/throttled/replication/repltest"
	"github.com/throttleddb/throttled/server"
)

// fastTuning makes in-memory clusters elect within a few hundred
// milliseconds, yet not call elections when -race and a busy machine delay
// a heartbeat; and it keeps few entries after a snapshot, so that a member
// that falls behind gets one.
var fastTuning = raft.Tuning{Heartbeat: 200 * time.Millisecond, Election: 200 * time.Millisecond, LeaderLease: 100 * time.Millisecond,
	TrailingLogs: 4}

// cluster is an in-process Raft group: each member a whole server on a
// loopback RESP port, its Raft traffic on raft's in-memory transport (which
// cuts links on demand), its log and snapshots in memory, and the debug
// clock, so the instant every entry is stamped with is the test's.
type cluster struct {
	t       *testing.T
	members []*member
	start   int64 // the debug clocks' instant
}

type member struct {
	id     string
	addr   hraft.ServerAddress
	logs   *hraft.InmemStore
	snaps  *hraft.InmemSnapshotStore
	trans  *hraft.InmemTransport
	node   *server.Node
	client *redis.Client
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{t: t, start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()}
	peers := map[string]string{}
	for i := range n {
		m := &member{id: fmt.Sprintf("n%d", i+1), logs: hraft.NewInmemStore(), snaps: hraft.NewInmemSnapshotStore()}
		m.addr, m.trans = hraft.NewInmemTransport("")
		peers[m.id] = string(m.addr)
		c.members = append(c.members, m)
	}
	c.connectAll()
	for _, m := range c.members {
		c.run(m, peers)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.stop(m)
		}
	})
	return c
}

// add starts a new member that joins through member via's RESP address.
func (c *cluster) add(via *member) *member {
	m := &member{id: fmt.Sprintf("n%d", len(c.members)+1), logs: hraft.NewInmemStore(), snaps: hraft.NewInmemSnapshotStore()}
	m.addr, m.trans = hraft.NewInmemTransport("")
	c.members = append(c.members, m)
	c.connectAll()
	c.runJoin(m, nil, via.node.Addr())
	return m
}

// run starts m's server.
func (c *cluster) run(m *member, peers map[string]string) { c.runJoin(m, peers, "") }

func (c *cluster) runJoin(m *member, peers map[string]string, join string) {
	t := c.t
	t.Helper()
	node, err := server.Start(server.Config{
		Bind: "127.0.0.1", DebugClock: true, Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(testLog{t, m.id}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Raft: &server.RaftConfig{
			NodeID: m.id, ClusterAddr: string(m.addr), Peers: peers, Join: join, ApplyTimeout: 2 * time.Second, Tuning: fastTuning,
			Parts: &raft.Parts{Logs: m.logs, Stable: m.logs, Snaps: m.snaps, Trans: m.trans},
		},
	})
	if err != nil {
		t.Fatalf("start %s: %v", m.id, err)
	}
	m.node = node
	m.client = redis.NewClient(&redis.Options{Addr: node.Addr(), Protocol: 2, MaxRetries: -1})
	c.do(m, "DEBUG", "CLOCK", "SET", c.start)
}

// stop closes m's server, if it runs.
func (c *cluster) stop(m *member) {
	if m.node == nil {
		return
	}
	m.client.Close()
	if err := m.node.Close(); err != nil {
		c.t.Errorf("close %s: %v", m.id, err)
	}
	m.node = nil
}

// restart stops m and starts it again on the same log and snapshots, with
// a new transport at the same address.
func (c *cluster) restart(m *member) {
	c.stop(m)
	m.addr, m.trans = hraft.NewInmemTransport(m.addr)
	c.connectAll()
	c.run(m, nil)
}

// connectAll links every pair of members both ways.
func (c *cluster) connectAll() {
	for _, a := range c.members {
		for _, b := range c.members {
			if a != b {
				a.trans.Connect(b.addr, b.trans)
			}
		}
	}
}

// isolate cuts m off from every other member, both ways.
func (c *cluster) isolate(m *member) {
	m.trans.DisconnectAll()
	for _, o := range c.members {
		if o != m {
			o.trans.Disconnect(m.addr)
		}
	}
}

// do runs a command on m and returns its reply (or error).
func (c *cluster) do(m *member, args ...any) any {
	c.t.Helper()
	v, err := m.client.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	return v
}

// leader waits for a member that every running member agrees leads, and
// knows the RESP address of.
func (c *cluster) leader() *member {
	c.t.Helper()
	var lead *member
	testwait.For(c.t, 10*time.Second, "a leader", func() bool {
		lead = nil
		for _, m := range c.members {
			if m.node == nil {
				continue
			}
			v := c.do(m, "RAFT", "LEADER")
			pair, ok := v.([]any)
			if !ok || len(pair) != 2 {
				return false
			}
			for _, o := range c.members {
				// Its RESP address, not its cluster address: it has
				// announced it, so followers can forward to it.
				if o.id == pair[0] && o.node != nil && pair[1] == o.node.Addr() {
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

// digests returns every running member's DEBUG DIGEST.
func (c *cluster) digests() map[string]string {
	out := map[string]string{}
	for _, m := range c.members {
		if m.node != nil {
			out[m.id] = fmt.Sprint(c.do(m, "DEBUG", "DIGEST"))
		}
	}
	return out
}

// converged waits until every running member has the same non-empty
// digest.
func (c *cluster) converged() string {
	c.t.Helper()
	var last map[string]string
	var digest string
	testwait.For(c.t, 10*time.Second, "equal digests", func() bool {
		last = c.digests()
		digest = ""
		for _, d := range last {
			if digest != "" && d != digest {
				return false
			}
			digest = d
		}
		return true
	})
	return digest
}

type testLog struct {
	t  *testing.T
	id string
}

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(w.id + ": " + string(p))
	return len(p), nil
}

// The repltest.Cluster methods.

func (c *cluster) Size() int                  { return len(c.members) }
func (c *cluster) Client(i int) *redis.Client { return c.members[i].client }
func (c *cluster) Restart(i int)              { c.restart(c.members[i]) }

func TestConformance(t *testing.T) {
	repltest.Run(t, func(t *testing.T, n int) repltest.Cluster { return newCluster(t, n) })
}
