package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// The helpers of the programs that drive several servers at once
// (bench/raft, bench/crdt, bench/lease).

// SplitEven splits total into n parts that differ by at most one, the
// larger first: 50 over 3 is 17, 17, 16.
func SplitEven(total, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = total / n
		if i < total%n {
			out[i]++
		}
	}
	return out
}

// SplitByWeight splits total in proportion to weights (rounded down, at
// least 1 each).
func SplitByWeight(total int, weights []int) []int {
	sum := 0
	for _, w := range weights {
		sum += w
	}
	out := make([]int, len(weights))
	for i, w := range weights {
		out[i] = max(1, total*w/sum)
	}
	return out
}

// SizeRuns gives each server's redis-benchmark enough requests to run
// about seconds at the rate it showed, and at least 10 per client: with
// the clients spread over several servers, their runs then end together.
func SizeRuns(rps []float64, seconds float64, clients []int) []int {
	out := make([]int, len(rps))
	for i, v := range rps {
		out[i] = max(10*clients[i], int(v*seconds))
	}
	return out
}

// Percentile returns the p-th percentile of sorted (not empty) by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it.
func Percentile(sorted []int64, p float64) int64 {
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// FreePorts asks the OS for n free loopback ports.
func FreePorts(n int) ([]int, error) {
	out := make([]int, n)
	for i := range out {
		var err error
		if out[i], err = proc.FreePort(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RaftLeader asks the cluster member at addr which member leads (RAFT
// LEADER) and returns its id.
func RaftLeader(ctx context.Context, addr string) (string, error) {
	conn, err := respconn.Dial(ctx, addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	v, err := conn.Do("RAFT", "LEADER")
	if err != nil {
		return "", err
	}
	if pair, ok := v.([]any); ok && len(pair) == 2 {
		if id, ok := pair[0].(string); ok && id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("RAFT LEADER answered %v", v)
}

// RaftMember is one member of a throttled Raft cluster on loopback, laid
// out by RaftCluster.
type RaftMember struct {
	ID   string   // n1, n2, ...
	Addr string   // where it serves RESP
	Args []string // throttled's flags
}

// RaftCluster lays out a throttled Raft cluster of n members on free
// loopback ports: member i is n<i+1>, with its data folder in dir. Each
// member's flags are --bind 127.0.0.1 --port P, then extra, then
// --replication raft, --node-id, --cluster-addr, --dir and --peers.
func RaftCluster(n int, dir string, extra ...string) ([]RaftMember, error) {
	ports, err := FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	members := make([]RaftMember, n)
	peers := make([]string, n)
	for i := range members {
		id, raft := fmt.Sprintf("n%d", i+1), proc.Addr(ports[2*i+1])
		peers[i] = id + "=" + raft
		args := append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[2*i])}, extra...)
		members[i] = RaftMember{ID: id, Addr: proc.Addr(ports[2*i]), Args: append(args,
			"--replication", "raft", "--node-id", id, "--cluster-addr", raft, "--dir", filepath.Join(dir, id))}
	}
	for i := range members {
		members[i].Args = append(members[i].Args, "--peers", strings.Join(peers, ","))
	}
	return members, nil
}

// WaitRaftLeader waits (up to 30 s) until a member at one of addrs names
// a leader whose ID is in ids, and returns its index. addrs[i] is where
// member ids[i] serves RESP.
func WaitRaftLeader(ctx context.Context, ids, addrs []string) (int, error) {
	lead := -1
	probe := func(ctx context.Context) error {
		for _, addr := range addrs {
			if id, err := RaftLeader(ctx, addr); err == nil {
				if lead = slices.Index(ids, id); lead >= 0 {
					return nil
				}
			}
		}
		return errors.New("no member names a leader among " + strings.Join(ids, ","))
	}
	if err := proc.WaitReady(ctx, "a Raft leader", 30*time.Second, nil, probe); err != nil {
		return -1, err
	}
	return lead, nil
}
