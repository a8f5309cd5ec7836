package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testwait"
)

// raftCluster starts n throttled processes as a new Raft group on loopback,
// each with its own data folder and the debug clock.
func raftCluster(t *testing.T, n int) []*server {
	t.Helper()
	var peers []string
	for i := range n {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, proc.Addr(port)))
	}
	var nodes []*server
	for i := range n {
		id, addr, _ := strings.Cut(peers[i], "=")
		nodes = append(nodes, start(t, t.TempDir(), "--debug-clock", "--replication", "raft", "--node-id", id,
			"--cluster-addr", addr, "--peers", strings.Join(peers, ",")))
	}
	return nodes
}

// leaderOf waits until a member names a leader, and returns it.
func leaderOf(t *testing.T, nodes []*server) *server {
	t.Helper()
	var lead *server
	testwait.For(t, 20*time.Second, "a leader", func() bool {
		for _, s := range nodes {
			c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1})
			v, err := c.Do(context.Background(), "RAFT", "LEADER").Slice()
			c.Close()
			if err != nil || len(v) != 2 {
				continue
			}
			for _, o := range nodes {
				if o.Addr == v[1] {
					lead = o
					return true
				}
			}
		}
		return false
	})
	return lead
}

// far is an instant every member's debug clock is set to: a restarted
// member's clock starts at the wall clock, which is earlier, and the leader
// never stamps an entry earlier than the last applied one, so the cluster's
// time stays at far whatever fails. Each limit then admits exactly its
// burst + 1 over the whole run.
var far = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// TestRaft_LeaderKilledUnderLoad: clients send CL.THROTTLE to every member
// while the leader is killed with SIGKILL and restarted. The cluster's time
// stands still, so for each key what was admitted over the whole run is what
// its state says was consumed: every acknowledged admission is there (none
// lost), and at most what was acknowledged plus what had an unknown outcome
// (none invented): no over-admission across the failover.
func TestRaft_LeaderKilledUnderLoad(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	nodes := raftCluster(t, 3)
	for _, s := range nodes {
		do(t, s.client(t), "DEBUG", "CLOCK", "SET", far)
	}
	old := leaderOf(t, nodes)
	const keys, burst = 8, 400
	type tally struct{ admitted, unknown atomic.Int64 }
	tallies := make([]tally, keys)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var total atomic.Int64
	for w := range 12 {
		wg.Add(1)
		target := nodes[w%len(nodes)]
		go func() {
			defer wg.Done()
			c := redis.NewClient(&redis.Options{Addr: target.Addr, Protocol: 2, MaxRetries: -1, PoolSize: 1})
			defer c.Close()
			for i := w; ctx.Err() == nil; i++ {
				k := i % keys
				v, err := c.Do(ctx, "CL.THROTTLE", fmt.Sprintf("k%d", k), burst-1, 1, 3600).Int64Slice()
				switch {
				case err == nil:
					total.Add(1)
					if v[0] == 0 {
						tallies[k].admitted.Add(1)
					}
				case strings.HasPrefix(err.Error(), "CLUSTERDOWN"):
					// Never applied.
				case strings.Contains(err.Error(), "connection refused"):
					// Its node is down: never sent. Try again soon.
					time.Sleep(10 * time.Millisecond)
				case errors.Is(err, context.Canceled):
					tallies[k].unknown.Add(1)
					return
				default:
					// UNKNOWN, or the connection died with the node.
					tallies[k].unknown.Add(1)
				}
			}
		}()
	}
	testwait.For(t, 30*time.Second, "some decisions", func() bool { return total.Load() > 200 })
	old.Kill()
	survivors := []*server{}
	for _, s := range nodes {
		if s != old {
			survivors = append(survivors, s)
		}
	}
	lead := leaderOf(t, survivors)
	before := total.Load()
	testwait.For(t, 30*time.Second, "decisions after the failover", func() bool { return total.Load() > before+200 })
	restarted := start(t, old.dir, old.args...)
	do(t, restarted.client(t), "DEBUG", "CLOCK", "SET", far)
	// The load stops at a moment the seed picks, after the restart.
	before = total.Load()
	more := int64(50 + rng.IntN(500))
	testwait.For(t, 30*time.Second, "decisions after the restart", func() bool { return total.Load() > before+more })
	cancel()
	wg.Wait()

	nodes = []*server{survivors[0], survivors[1], restarted}
	c := lead.client(t)
	for k := range keys {
		v := do(t, c, "CL.THROTTLE", fmt.Sprintf("k%d", k), burst-1, 1, 3600, 0).([]any)
		consumed := burst - v[2].(int64)
		acked, unknown := tallies[k].admitted.Load(), tallies[k].unknown.Load()
		t.Logf("key k%d: %d admitted by the state, %d acknowledged, %d unknown", k, consumed, acked, unknown)
		if consumed < acked || consumed > acked+unknown {
			t.Errorf("seed %d key k%d: the state says %d admitted; %d were acknowledged and %d had an unknown outcome",
				seed, k, consumed, acked, unknown)
		}
	}
	waitSameDigest(t, nodes)
}

// waitSameDigest waits until every node answers DEBUG DIGEST alike.
func waitSameDigest(t *testing.T, nodes []*server) {
	t.Helper()
	var got []string
	testwait.For(t, 20*time.Second, "equal digests", func() bool {
		got = got[:0]
		for _, s := range nodes {
			c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1})
			d, _ := c.Do(context.Background(), "DEBUG", "DIGEST").Text()
			c.Close()
			got = append(got, d)
		}
		for _, d := range got {
			if d != got[0] || d == "" {
				return false
			}
		}
		return true
	})
}

// TestRaft_WholeClusterRestart: every member stopped and started again on
// its folder keeps everything that was acknowledged.
func TestRaft_WholeClusterRestart(t *testing.T) {
	nodes := raftCluster(t, 3)
	lead := leaderOf(t, nodes)
	c := lead.client(t)
	for range 100 {
		do(t, c, "INCR", "n")
	}
	do(t, c, "CL.THROTTLE", "k", 10, 1, 60, 5)
	for _, s := range nodes {
		if err := s.Stop(); err != nil {
			t.Fatalf("stop: %v\n%s", err, s.Output())
		}
	}
	for i, s := range nodes {
		nodes[i] = start(t, s.dir, s.args...)
	}
	for _, s := range nodes {
		c := s.client(t)
		testwait.For(t, 20*time.Second, "n back on "+s.Addr, func() bool {
			v, err := c.Do(context.Background(), "GET", "n").Text()
			return err == nil && v == "100"
		})
	}
	v := do(t, nodes[0].client(t), "CL.THROTTLE", "k", 10, 1, 60, 0).([]any)
	if v[2].(int64) > 6 {
		t.Fatalf("CL.THROTTLE after the restart: %v, want the 5 taken before still taken", v)
	}
	waitSameDigest(t, nodes)
}
