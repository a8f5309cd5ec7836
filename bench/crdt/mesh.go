package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/throttleddb/throttled/bench/internal/harness"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// meshSize is the number of nodes of the throughput and lag parts' mesh.
const meshSize = 3

// node is one throttled process: a mesh node or the single node.
type node struct {
	id   string // a, b, c; "single"
	addr string // RESP host:port
	args []string
	p    *proc.Process
	// pprof is its net/http/pprof address, with -profile.
	pprof string
}

// baseArgs are every node's flags before its own: the single node and the
// mesh nodes differ only in the replication flags.
func (r *runner) baseArgs(port int, dir string) []string {
	return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--threads", strconv.Itoa(r.cfg.threads),
		"--dir", filepath.Join(r.tmp, dir)}
}

func (r *runner) startNode(ctx context.Context, n *node) error {
	r.logf("starting %s: %s", n.id, strings.Join(n.args, " "))
	wrap, err := r.pprofWrap(n)
	if err != nil {
		return err
	}
	p, err := proc.Start(ctx, proc.Config{Name: "throttled " + n.id, Path: r.bin, Args: n.args, Addr: n.addr, Dir: r.tmp, Timeout: time.Minute, Wrap: wrap})
	if err != nil {
		return err
	}
	n.p = p
	r.live[n] = true
	return nil
}

func (r *runner) stop(nodes ...*node) {
	for _, n := range nodes {
		if n.p == nil {
			continue
		}
		if err := n.p.Stop(); err != nil {
			r.logf("stop %s: %v", n.id, err)
		}
		n.p = nil
		delete(r.live, n)
	}
}

func (r *runner) stopAll() {
	for n := range r.live {
		r.stop(n)
	}
}

// startSingle starts a single node (--replication none) in folder dir,
// with extra flags.
func (r *runner) startSingle(ctx context.Context, dir string, extra ...string) (*node, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	n := &node{id: "single", addr: proc.Addr(port), args: append(r.baseArgs(port, dir), extra...)}
	return n, r.startNode(ctx, n)
}

// startMesh starts a mesh of size nodes a, b, c... in folders
// <prefix>-a..., each with extra flags, and waits until every node is
// connected to every other.
func (r *runner) startMesh(ctx context.Context, size int, prefix string, extra ...string) ([]*node, error) {
	ports, err := harness.FreePorts(2 * size)
	if err != nil {
		return nil, err
	}
	var nodes []*node
	var peers []string
	for i := range size {
		id := string(rune('a' + i))
		cluster := proc.Addr(ports[2*i+1])
		n := &node{id: id, addr: proc.Addr(ports[2*i])}
		n.args = append(r.baseArgs(ports[2*i], prefix+"-"+id), "--replication", "crdt", "--node-id", id, "--cluster-addr", cluster)
		nodes = append(nodes, n)
		peers = append(peers, id+"="+cluster)
	}
	for _, n := range nodes {
		n.args = append(append(n.args, "--peers", strings.Join(peers, ",")), extra...)
		if err := r.startNode(ctx, n); err != nil {
			return nil, err
		}
	}
	if slices.Contains(extra, "--debug-clock") {
		// A debug clock stands still at its node's start, and nodes
		// started more than --crdt-max-skew apart (on a busy machine, a
		// few hundred ms) refuse each other for good: set them alike.
		if err := setClocks(ctx, nodes, time.Now().UnixNano()); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		if err := proc.WaitReady(ctx, n.id+" connected to its peers", 30*time.Second, n.p.Exited(), func(ctx context.Context) error {
			return connected(ctx, n.addr, size-1)
		}); err != nil {
			return nil, r.dumpStuck(err, nodes)
		}
	}
	r.logf("mesh of %d up (%s)", size, strings.Join(extra, " "))
	return nodes, nil
}

// setClocks sets the debug clock of every node to t (Unix ns).
func setClocks(ctx context.Context, nodes []*node, t int64) error {
	for _, n := range nodes {
		c, err := respconn.Dial(ctx, n.addr, 5*time.Second)
		if err != nil {
			return err
		}
		v, err := c.Do("DEBUG", "CLOCK", "SET", strconv.FormatInt(t, 10))
		c.Close()
		if e, ok := v.(respconn.Error); ok && err == nil {
			err = e
		}
		if err != nil {
			return fmt.Errorf("%s: DEBUG CLOCK SET: %w", n.id, err)
		}
	}
	return nil
}

// connected checks that the node at addr is connected both ways to want
// peers (CRDT PEERS).
func connected(ctx context.Context, addr string, want int) error {
	c, err := respconn.Dial(ctx, addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Do("CRDT", "PEERS")
	if err != nil {
		return err
	}
	peers, _ := v.([]any)
	up := 0
	for _, p := range peers {
		if f, ok := p.([]any); ok && len(f) == 4 && f[2] == int64(1) {
			up++
		}
	}
	if up < want {
		return fmt.Errorf("%d of %d peers connected: %v", up, want, v)
	}
	return nil
}

// dumpStuck asks the nodes that did not get ready for their goroutines
// (SIGQUIT: the Go runtime prints them and exits) and keeps every node's
// output in a folder that outlives the run, named in the error.
func (r *runner) dumpStuck(err error, nodes []*node) error {
	dir, derr := os.MkdirTemp("", "throttled-crdt-stuck-")
	if derr != nil {
		return r.withOutput(err)
	}
	for _, n := range nodes {
		if n.p == nil {
			continue
		}
		_ = syscall.Kill(n.p.Pid(), syscall.SIGQUIT)
		select {
		case <-n.p.Exited():
		case <-time.After(5 * time.Second):
		}
		_ = os.WriteFile(filepath.Join(dir, n.id+".log"), []byte(strings.Join(n.args, " ")+"\n"+n.p.Output()), 0o644)
	}
	return fmt.Errorf("%w\n(the nodes' output, with their goroutines, is in %s)", r.withOutput(err), dir)
}

func pids(nodes []*node) []int {
	var out []int
	for _, n := range nodes {
		if n.p != nil {
			out = append(out, n.p.Pid())
		}
	}
	return out
}

// withOutput adds the end of every live node's output to err.
func (r *runner) withOutput(err error) error {
	for n := range r.live {
		select {
		case <-n.p.Exited():
			err = fmt.Errorf("%w\n--- %s exited; its output ---\n%s", err, n.id, n.p.Output())
		default:
			err = fmt.Errorf("%w\n--- %s, the end of its output ---\n%s", err, n.id, harness.LastLines(n.p.Output(), 10))
		}
	}
	return err
}
