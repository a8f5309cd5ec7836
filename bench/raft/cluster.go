package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// clusterSize is the number of members in the throttled and etcd clusters.
const clusterSize = 3

// node is one throttled process: a cluster member or the single node.
type node struct {
	id   string   // n1..n3; "single" for the single node
	addr string   // RESP host:port
	args []string // after the binary; the same on a restart
	p    *proc.Process
}

func (n *node) stop(logf func(string, ...any)) {
	if n.p == nil {
		return
	}
	if err := n.p.Stop(); err != nil {
		logf("stop %s: %v", n.id, err)
	}
	n.p = nil
}

// cluster is the 3-node throttled Raft group.
type cluster struct {
	nodes []*node
}

func (r *runner) startNode(ctx context.Context, n *node) error {
	p, err := r.start(ctx, proc.Config{Name: "throttled " + n.id, Path: r.bin, Args: n.args, Addr: n.addr})
	if err != nil {
		return err
	}
	n.p = p
	return nil
}

// baseArgs are every throttled node's flags before its own.
func (r *runner) baseArgs(port int) []string {
	return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--threads", strconv.Itoa(r.cfg.threads)}
}

// startSingle starts the single node the cluster is compared with: a data
// folder and appendfsync everysec, the defaults.
func (r *runner) startSingle(ctx context.Context) (*node, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	n := &node{id: "single", addr: proc.Addr(port),
		args: append(r.baseArgs(port), "--dir", filepath.Join(r.tmp, "single"))}
	r.logf("starting the single node: %s", strings.Join(n.args, " "))
	return n, r.startNode(ctx, n)
}

// startCluster starts n1..n3 with --replication raft, each with its own
// data folder, and waits for a leader.
func (r *runner) startCluster(ctx context.Context) (*cluster, error) {
	members, err := harness.RaftCluster(clusterSize, r.tmp, "--threads", strconv.Itoa(r.cfg.threads))
	if err != nil {
		return nil, err
	}
	c := &cluster{}
	for _, m := range members {
		c.nodes = append(c.nodes, &node{id: m.ID, addr: m.Addr, args: m.Args})
	}
	r.cluster = c // so that stopAll reaches the nodes started if one fails
	for _, n := range c.nodes {
		r.logf("starting %s: %s", n.id, strings.Join(n.args, " "))
		if err := r.startNode(ctx, n); err != nil {
			return nil, err
		}
	}
	lead, err := c.leader(ctx, c.nodes)
	if err != nil {
		return nil, err
	}
	r.logf("cluster up, %s leads", lead.id)
	return c, nil
}

// leader waits (up to 30 s) until a member of among names a leader that is
// in among, and returns it.
func (c *cluster) leader(ctx context.Context, among []*node) (*node, error) {
	ids, addrs := make([]string, len(among)), make([]string, len(among))
	for i, n := range among {
		ids[i], addrs[i] = n.id, n.addr
	}
	i, err := harness.WaitRaftLeader(ctx, ids, addrs)
	if err != nil {
		return nil, err
	}
	return among[i], nil
}

// term is the highest Raft term a member reports (INFO replication): each
// election adds one.
func (c *cluster) term(ctx context.Context) (uint64, error) {
	var top uint64
	for _, n := range c.nodes {
		info, err := respconn.Info(ctx, n.addr, "replication")
		if err != nil {
			return 0, err
		}
		t, err := strconv.ParseUint(info["raft_term"], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: raft_term %q: %w", n.id, info["raft_term"], err)
		}
		top = max(top, t)
	}
	return top, nil
}

// caughtUp waits (up to a minute) until member n follows and has applied
// every entry the leader lead had committed when the wait began.
func caughtUp(ctx context.Context, lead, n *node) error {
	info, err := respconn.Info(ctx, lead.addr, "replication")
	if err != nil {
		return err
	}
	want, err := strconv.ParseUint(info["raft_commit_index"], 10, 64)
	if err != nil {
		return fmt.Errorf("%s: raft_commit_index %q: %w", lead.id, info["raft_commit_index"], err)
	}
	probe := func(ctx context.Context) error {
		info, err := respconn.Info(ctx, n.addr, "replication")
		if err != nil {
			return err
		}
		applied, _ := strconv.ParseUint(info["raft_applied_index"], 10, 64)
		if info["raft_state"] != "follower" || applied < want {
			return fmt.Errorf("%s is %s with %d applied, %d wanted", n.id, info["raft_state"], applied, want)
		}
		return nil
	}
	return proc.WaitReady(ctx, n.id+" caught up", time.Minute, nil, probe)
}

func ids(nodes []*node) string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.id)
	}
	return strings.Join(out, ",")
}
