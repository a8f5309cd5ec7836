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

// store is what the gateways talk to: one throttled, or a 3-node Raft
// cluster whose leader they talk to (a follower would forward to it).
type store struct {
	name  string
	procs []*proc.Process
	addr  string // the node the gateways reach through the proxy
}

func (s *store) stop(logf func(string, ...any)) {
	for _, p := range s.procs {
		if err := p.Stop(); err != nil {
			logf("stop %s: %v", p.Name, err)
		}
	}
}

// startSingle starts one throttled with a data folder (everysec, the
// default persistence).
func startSingle(ctx context.Context, bin, tmp string, logf func(string, ...any)) (*store, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", filepath.Join(tmp, "single")}
	logf("starting the single node: %s", strings.Join(args, " "))
	p, err := proc.Start(ctx, proc.Config{Name: "throttled single", Path: bin, Args: args, Addr: proc.Addr(port), Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	return &store{name: "single node", procs: []*proc.Process{p}, addr: p.Addr}, nil
}

// startRaft starts a 3-node Raft cluster (each member its own folder and
// ports) and waits for a leader.
func startRaft(ctx context.Context, bin, tmp string, logf func(string, ...any)) (*store, error) {
	members, err := harness.RaftCluster(3, tmp)
	if err != nil {
		return nil, err
	}
	s := &store{name: "3-node Raft"}
	ids, addrs := make([]string, len(members)), make([]string, len(members))
	for i, m := range members {
		ids[i], addrs[i] = m.ID, m.Addr
		logf("starting %s: %s", m.ID, strings.Join(m.Args, " "))
		p, err := proc.Start(ctx, proc.Config{Name: "throttled " + m.ID, Path: bin, Args: m.Args, Addr: m.Addr, Timeout: 30 * time.Second})
		if err != nil {
			s.stop(logf)
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	lead, err := harness.WaitRaftLeader(ctx, ids, addrs)
	if err != nil {
		s.stop(logf)
		return nil, err
	}
	s.addr = addrs[lead]
	logf("cluster up, the leader is at %s", s.addr)
	return s, nil
}

// resetStats zeroes the node's command counters (CONFIG RESETSTAT), so
// that calls counts one case.
func resetStats(ctx context.Context, addr string) error {
	c, err := respconn.Dial(ctx, addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Do("CONFIG", "RESETSTAT")
	return err
}

// limiterCommands are the commands a client.Limiter sends for its
// decisions, by mode: the store calls counted.
var limiterCommands = []string{"fwc.throttle", "quota.lease", "quota.return", "incrby", "pexpireat"}

// calls is how many of limiterCommands the node has run since resetStats
// (INFO commandstats; a pipeline's commands each count). Connection setup
// (HELLO, CLIENT SETINFO) and the bench's own INFO are left out.
func calls(ctx context.Context, addr string) (int64, error) {
	info, err := respconn.Info(ctx, addr, "commandstats")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, name := range limiterCommands {
		v, ok := info["cmdstat_"+name]
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		c, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO commandstats: %s:%s", name, v)
		}
		n += c
	}
	return n, nil
}
