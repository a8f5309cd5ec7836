// Command idle measures what throttled costs when nobody asks it anything:
// the CPU each node uses over a window with no client, as a single node, a
// 3-node Raft group and a 3-node mesh, started as real processes.
//
//	go run ./bench/idle [-seconds 15] [-runs 3] [-bin name=path,...] [-setups raft]
//
// CPU is utime+stime from /proc/<pid>/stat at the start and the end of the
// window, as a percentage of one core. Each -bin (by default the binary
// built from this checkout) runs every setup in turn, run after run, so
// binaries compared in one invocation share the machine's conditions.
// Before the window, a Raft group waits for a leader known to every member
// and a mesh for every link to be up. Linux only. See bench/README.md
// ("Idle cost").
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
)

// clkTck is the kernel's USER_HZ, the unit of utime and stime: 100 on every
// Linux that Go runs on.
const clkTck = 100

func main() {
	seconds := flag.Float64("seconds", 15, "length of the idle window")
	runs := flag.Int("runs", 3, "runs of every setup per binary")
	bins := flag.String("bin", "", "binaries to compare, name=path,... (default: build ./cmd/throttled)")
	only := flag.String("setups", "single,raft,crdt", "setups to measure: single, raft, crdt (comma-separated)")
	flag.Parse()
	chosen, err := pick(*only)
	if err == nil {
		err = run(time.Duration(*seconds*float64(time.Second)), *runs, *bins, chosen)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle:", err)
		os.Exit(1)
	}
}

type binary struct{ name, path string }

func run(window time.Duration, runs int, bins string, setups []setup) error {
	var list []binary
	if bins == "" {
		dir, err := os.MkdirTemp("", "idle-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "throttled")
		if out, err := exec.Command("go", "build", "-o", path, "./cmd/throttled").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
		list = append(list, binary{"this checkout", path})
	}
	for _, b := range strings.Split(bins, ",") {
		if name, path, ok := strings.Cut(b, "="); ok {
			list = append(list, binary{name, path})
		}
	}
	fmt.Printf("Idle CPU per node over %s, %% of one core (utime+stime from /proc)\n\n", window)
	fmt.Println("| binary | setup | run | per node | mean per node |")
	fmt.Println("|---|---|---|---|---|")
	for r := 1; r <= runs; r++ {
		for _, b := range list {
			for _, s := range setups {
				pcts, err := measure(b.path, s, window)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", b.name, s.name, err)
				}
				var each []string
				sum := 0.0
				for _, p := range pcts {
					each = append(each, fmt.Sprintf("%.2f", p))
					sum += p
				}
				fmt.Printf("| %s | %s | %d | %s | %.2f |\n", b.name, s.name, r, strings.Join(each, " "), sum/float64(len(pcts)))
			}
		}
	}
	return nil
}

// A setup is a number of nodes and the flags that make them one group.
type setup struct {
	key   string // its name in -setups
	name  string
	nodes int
	mode  string // "", "raft" or "crdt"
}

var setups = []setup{{"single", "single node", 1, ""}, {"raft", "3-node Raft", 3, "raft"}, {"crdt", "3-node mesh", 3, "crdt"}}

// pick returns the setups -setups names, in the order of setups.
func pick(names string) ([]setup, error) {
	want := map[string]bool{}
	for n := range strings.SplitSeq(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []setup
	for _, s := range setups {
		if want[s.key] {
			out = append(out, s)
			delete(want, s.key)
		}
	}
	for n := range want {
		return nil, fmt.Errorf("-setups: no setup %q (single, raft, crdt)", n)
	}
	return out, nil
}

// measure starts s's nodes, waits until they are a group, and returns each
// node's CPU over window.
func measure(bin string, s setup, window time.Duration) ([]float64, error) {
	var ids []string
	var peers []string
	// A port FreePort gave is free again until a node binds it: it could
	// give it twice (a node's RESP port and another's cluster port).
	used := map[int]bool{}
	freePort := func() (int, error) {
		for {
			port, err := proc.FreePort()
			if err != nil || !used[port] {
				used[port] = true
				return port, err
			}
		}
	}
	for i := range s.nodes {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		ids = append(ids, fmt.Sprintf("n%d", i+1))
		peers = append(peers, ids[i]+"="+proc.Addr(port))
	}
	var nodes []*proc.Process
	defer func() {
		for _, p := range nodes {
			p.Stop()
		}
	}()
	for i := range s.nodes {
		dir, err := os.MkdirTemp("", "idle-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{"--port", strconv.Itoa(port), "--dir", dir}
		if s.mode != "" {
			_, addr, _ := strings.Cut(peers[i], "=")
			args = append(args, "--replication", s.mode, "--node-id", ids[i], "--cluster-addr", addr, "--peers", strings.Join(peers, ","))
		}
		p, err := proc.Start(context.Background(), proc.Config{Name: "throttled", Path: bin, Args: args, Addr: proc.Addr(port), Timeout: time.Minute})
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, p)
	}
	if err := settled(nodes, s.mode); err != nil {
		return nil, err
	}
	before := make([]int64, len(nodes))
	for i, p := range nodes {
		t, err := cpuTicks(p.Pid())
		if err != nil {
			return nil, err
		}
		before[i] = t
	}
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start).Seconds()
	out := make([]float64, len(nodes))
	for i, p := range nodes {
		t, err := cpuTicks(p.Pid())
		if err != nil {
			return nil, err
		}
		out[i] = float64(t-before[i]) / clkTck / elapsed * 100
	}
	return out, nil
}

// settled waits until every member of a Raft group knows the leader, or
// every mesh node has all its links up.
func settled(nodes []*proc.Process, mode string) error {
	if mode == "" {
		return nil
	}
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ok := true
		for _, p := range nodes {
			c := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
			switch mode {
			case "raft":
				v, err := c.Do(ctx, "RAFT", "LEADER").Slice()
				ok = ok && err == nil && len(v) == 2
			case "crdt":
				v, err := c.Do(ctx, "CRDT", "PEERS").Slice()
				ok = ok && err == nil && len(v) == len(nodes)-1
				for _, peer := range v {
					f, _ := peer.([]any)
					ok = ok && len(f) == 4 && f[2] == int64(1)
				}
			}
			c.Close()
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("the %s group did not settle within a minute", mode)
}

// cpuTicks is utime+stime of pid, in clock ticks (fields 14 and 15 of
// /proc/<pid>/stat, counted after the command name, which may hold spaces).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state): utime is field 14, stime 15.
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return u + st, nil
}
