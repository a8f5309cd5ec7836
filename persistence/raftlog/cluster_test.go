package raftlog

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/internal/testlog"
	"github.com/throttleddb/throttled/internal/testwait"
)

// TestCluster_FollowerRestarts runs three raft nodes in process, each on a
// Store, and restarts a follower twice on its folder: once to catch up from
// the log, once so far behind that it needs the leader's snapshot (raft
// then deletes its whole log, the Store being monotonic).
func TestCluster_FollowerRestarts(t *testing.T) {
	c := newCluster(t, 3)
	c.apply(t, 0, 300)
	for _, n := range c.nodes {
		// Every node compacts its own log (DeleteRange of a prefix), so
		// the restarts below start from a snapshot plus a log.
		snapshot(t, n)
	}
	f := c.follower(t)

	// Down for a few entries: raft resends them from the leader's log.
	f.stop(t, c)
	c.apply(t, 300, 320)
	f.start(t, c)
	c.waitSame(t)

	// Down for many, and the leader's log no longer holds what f lacks.
	f.stop(t, c)
	c.apply(t, 320, 620)
	l := c.leader(t)
	snapshot(t, l)
	fLast, _ := f.store.LastIndex() // the Store answers it from memory after Close too
	lFirst, _ := l.store.FirstIndex()
	if lFirst <= fLast+1 {
		t.Fatalf("the leader's log starts at %d, the follower's ends at %d: no snapshot needed", lFirst, fLast)
	}
	f.start(t, c)
	if term, err := f.store.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
		t.Errorf("the restarted follower's CurrentTerm = %d, %v; want the term it had", term, err)
	}
	c.waitSame(t)

	c.apply(t, 620, 700)
	c.waitSame(t)
	if first, _ := f.store.FirstIndex(); first <= fLast {
		t.Errorf("the follower's log starts at %d, within the log it had (to %d): it was not replaced", first, fLast)
	}
}

// node is one raft server. Its folder and its snapshot store outlive
// restarts, as its disk would.
type node struct {
	id    raft.ServerID
	dir   string
	snaps *raft.InmemSnapshotStore

	// Set by start, for one run.
	store *Store
	trans *raft.InmemTransport
	fsm   *testFSM
	raft  *raft.Raft
}

func (n *node) addr() raft.ServerAddress { return raft.ServerAddress(n.id) }

type cluster struct{ nodes []*node }

// newCluster starts n nodes, connected and bootstrapped with all of them
// as voters, and stops them when the test ends.
func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{}
	var conf raft.Configuration
	for i := range n {
		nd := &node{id: raft.ServerID(fmt.Sprintf("n%d", i)), dir: t.TempDir(), snaps: raft.NewInmemSnapshotStore()}
		c.nodes = append(c.nodes, nd)
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: nd.id, Address: nd.addr()})
	}
	for _, nd := range c.nodes {
		nd.start(t, c)
		t.Cleanup(func() {
			if nd.raft != nil {
				nd.stop(t, c)
			}
		})
	}
	for _, nd := range c.nodes {
		if err := nd.raft.BootstrapCluster(conf).Error(); err != nil {
			t.Fatalf("bootstrapping %s: %v", nd.id, err)
		}
	}
	return c
}

// start opens n's store in its folder and starts raft on it; stop closes
// them (newCluster has it called when the test ends).
func (n *node) start(t *testing.T, c *cluster) {
	t.Helper()
	s, err := Open(Options{Dir: n.dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("opening %s's log: %v", n.id, err)
	}
	n.store = s
	_, n.trans = raft.NewInmemTransport(n.addr())
	for _, o := range c.nodes {
		if o != n && o.raft != nil {
			n.trans.Connect(o.addr(), o.trans)
			o.trans.Connect(n.addr(), n.trans)
		}
	}
	n.fsm = &testFSM{}
	conf := raft.DefaultConfig()
	conf.LocalID = n.id
	conf.HeartbeatTimeout = 100 * time.Millisecond
	conf.ElectionTimeout = 100 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	// Snapshots only when the test asks, keeping a short log behind them.
	conf.SnapshotThreshold = 1 << 30
	conf.SnapshotInterval = time.Hour
	conf.TrailingLogs = 32
	conf.Logger = hclog.New(&hclog.LoggerOptions{
		Name: string(n.id), Output: testlog.Writer{T: t}, Level: hclog.Info,
	})
	r, err := raft.NewRaft(conf, n.fsm, n.store, n.store, n.snaps, n.trans)
	if err != nil {
		closeT(t, n.store)
		t.Fatalf("starting %s: %v", n.id, err)
	}
	n.raft = r
}

// stop shuts n's raft down, cuts it off and closes its store.
func (n *node) stop(t *testing.T, c *cluster) {
	t.Helper()
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Errorf("shutting %s down: %v", n.id, err)
	}
	n.raft = nil
	for _, o := range c.nodes {
		if o.trans != nil {
			o.trans.Disconnect(n.addr())
		}
	}
	closeT(t, n.store)
}

// leader returns the node that leads, waiting for one.
func (c *cluster) leader(t *testing.T) *node {
	t.Helper()
	var l *node
	testwait.For(t, 10*time.Second, "a leader", func() bool {
		for _, n := range c.nodes {
			if n.raft != nil && n.raft.State() == raft.Leader {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func (c *cluster) follower(t *testing.T) *node {
	t.Helper()
	l := c.leader(t)
	for _, n := range c.nodes {
		if n != l {
			return n
		}
	}
	panic("a cluster of one")
}

// apply applies the values "e<from>" to "e<to-1>" through the leader, 32 in
// flight at a time so that raft batches them. A value whose Apply fails
// (the leader changed) is applied again, and may then be there twice:
// checks compare the replicas with each other and look for every value.
func (c *cluster) apply(t *testing.T, from, to int) {
	t.Helper()
	var todo []string
	for i := from; i < to; i++ {
		todo = append(todo, fmt.Sprintf("e%d", i))
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(todo) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d values not applied within 30s", len(todo))
		}
		l := c.leader(t)
		batch := todo[:min(32, len(todo))]
		todo = todo[len(batch):]
		futures := make([]raft.ApplyFuture, len(batch))
		for i, v := range batch {
			futures[i] = l.raft.Apply([]byte(v), time.Second)
		}
		for i, f := range futures {
			if err := f.Error(); err != nil {
				t.Logf("applying %s: %v; again", batch[i], err)
				todo = append(todo, batch[i])
			}
		}
	}
	applied := c.leader(t).fsm.values()
	for i := from; i < to; i++ {
		if v := fmt.Sprintf("e%d", i); !slices.Contains(applied, v) {
			t.Fatalf("the leader's state lacks %s", v)
		}
	}
}

// waitSame waits until every node has applied what the leader has.
func (c *cluster) waitSame(t *testing.T) {
	t.Helper()
	want := c.leader(t).fsm.values()
	for _, n := range c.nodes {
		testwait.For(t, 10*time.Second, fmt.Sprintf("%s to apply the leader's %d values", n.id, len(want)), func() bool {
			return slices.Equal(n.fsm.values(), want)
		})
	}
}

func snapshot(t *testing.T, n *node) {
	t.Helper()
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		t.Fatalf("snapshot of %s: %v", n.id, err)
	}
}

// testFSM keeps the commands it applied, in order.
type testFSM struct {
	mu   sync.Mutex
	vals []string // guarded by mu
}

func (f *testFSM) values() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.vals)
}

func (f *testFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals = append(f.vals, string(l.Data))
	return nil
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	return fsmSnapshot(strings.Join(f.values(), "\n")), nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	var vals []string
	if len(b) > 0 {
		vals = strings.Split(string(b), "\n")
	}
	f.mu.Lock()
	f.vals = vals
	f.mu.Unlock()
	return nil
}

type fsmSnapshot string

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, string(s)); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}
