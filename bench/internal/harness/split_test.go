package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
)

func TestSplits(t *testing.T) {
	if got := SplitEven(50, 3); !slices.Equal(got, []int{17, 17, 16}) {
		t.Errorf("SplitEven(50, 3) = %v", got)
	}
	if got := SplitEven(6, 3); !slices.Equal(got, []int{2, 2, 2}) {
		t.Errorf("SplitEven(6, 3) = %v", got)
	}
	if got := SplitByWeight(20000, []int{17, 17, 16}); !slices.Equal(got, []int{6800, 6800, 6400}) {
		t.Errorf("SplitByWeight = %v", got)
	}
	// Each node's run lasts about 5 s at its own rate; a slow one still
	// gets 10 requests per client.
	if got := SizeRuns([]float64{1000, 2000.5, 1}, 5, []int{17, 17, 16}); !slices.Equal(got, []int{5000, 10002, 160}) {
		t.Errorf("SizeRuns = %v", got)
	}
}

func TestPercentile(t *testing.T) {
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for p, want := range map[float64]int64{50: 50, 99: 100, 90: 90, 91: 100, 10: 10, 1: 10, 100: 100} {
		if got := Percentile(sorted, p); got != want {
			t.Errorf("Percentile(%v) = %d, want %d", p, got, want)
		}
	}
	if got := Percentile([]int64{7}, 99); got != 7 {
		t.Errorf("Percentile of one value = %d", got)
	}
}

func TestLastLines(t *testing.T) {
	if got := LastLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("LastLines = %q", got)
	}
	if got := LastLines("a", 5); got != "a" {
		t.Errorf("LastLines = %q", got)
	}
}

// TestRaftCluster lays out a 3-member cluster, runs it from a freshly
// built throttled and waits for its leader.
func TestRaftCluster(t *testing.T) {
	dir := t.TempDir()
	members, err := RaftCluster(3, dir, "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, m := range members {
		peers = append(peers, m.ID+"="+m.Args[11])
	}
	seen := map[string]bool{}
	for i, m := range members {
		_, port, _ := strings.Cut(m.Addr, ":")
		want := []string{"--bind", "127.0.0.1", "--port", port, "--threads", "1", "--replication", "raft",
			"--node-id", fmt.Sprintf("n%d", i+1), "--cluster-addr", m.Args[11], "--dir", filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			"--peers", strings.Join(peers, ",")}
		if m.ID != fmt.Sprintf("n%d", i+1) || !strings.HasPrefix(m.Addr, "127.0.0.1:") || !slices.Equal(m.Args, want) {
			t.Errorf("member %d: %+v\nwant args %q", i, m, want)
		}
		for _, addr := range []string{m.Addr, m.Args[11]} {
			if seen[addr] {
				t.Errorf("%s given twice", addr)
			}
			seen[addr] = true
		}
	}
	if testing.Short() {
		t.Skip("builds and runs throttled")
	}
	bin, err := BuildThrottled(t.Context(), dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var ids, addrs []string
	for _, m := range members {
		p, err := proc.Start(t.Context(), proc.Config{Name: m.ID, Path: bin, Args: m.Args, Addr: m.Addr, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := p.Stop(); err != nil {
				t.Errorf("stop %s: %v", m.ID, err)
			}
		})
		ids, addrs = append(ids, m.ID), append(addrs, m.Addr)
	}
	lead, err := WaitRaftLeader(t.Context(), ids, addrs)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := RaftLeader(t.Context(), addrs[lead]); err != nil || id != ids[lead] {
		t.Errorf("WaitRaftLeader = %s, but it names %q (%v)", ids[lead], id, err)
	}
	// Among the others only, the leader is not found.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	others := slices.Delete(slices.Clone(ids), lead, lead+1)
	if _, err := WaitRaftLeader(ctx, others, slices.Delete(slices.Clone(addrs), lead, lead+1)); err == nil ||
		!strings.Contains(err.Error(), "no member names a leader among "+strings.Join(others, ",")) {
		t.Errorf("leader %s left out: err = %v", ids[lead], err)
	}
}
