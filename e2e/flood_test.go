package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rssBound is what RSS may reach with --maxmemory m, as docs/operations.md
// ("Bounded memory") documents it: m for the keys, a quarter of m for the garbage
// collector's headroom (the Go memory limit main sets), and 64 MiB for the
// runtime, connection buffers and Pebble's memtables and block cache.
func rssBound(m int64) int64 { return m + m/4 + 64<<20 }

// TestFlood_MaxMemory sprays 2 million unique CL.THROTTLE keys as fast as one
// pipelining client can send them at a server with --maxmemory 64mb and a
// data folder. Each key lives an hour, so the keyspace fills. RSS must stay
// under rssBound, keys are evicted (and counted),
// and another client keeps getting answers quickly.
func TestFlood_MaxMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("floods 2 million keys")
	}
	const (
		maxMemory = 64 << 20
		keys      = 2_000_000
		batch     = 2000
	)
	s := start(t, t.TempDir(), "--maxmemory", "64mb")
	flood := s.client(t)
	probe := s.client(t)
	ctx := context.Background()

	var (
		wg        sync.WaitGroup
		done      = make(chan struct{})
		latencies []time.Duration
		maxRSS    int64
	)
	wg.Add(1)
	go func() { // the other client, and the RSS sampler
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			begin := time.Now()
			if err := probe.Do(ctx, "CL.THROTTLE", "probe", 100, 1000, 1).Err(); err != nil {
				t.Errorf("probe: %v", err)
				return
			}
			latencies = append(latencies, time.Since(begin))
			if i%10 == 0 {
				maxRSS = max(maxRSS, rss(t, s.Pid()))
			}
			time.Sleep(time.Millisecond) // pace the probe: one request per ms
		}
	}()
	began := time.Now()
	for i := 0; i < keys; i += batch {
		p := flood.Pipeline()
		for j := i; j < i+batch; j++ {
			p.Do(ctx, "CL.THROTTLE", "flood:"+strconv.Itoa(j), 10, 1, 3600)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatalf("flood at key %d: %v", i, err)
		}
	}
	elapsed := time.Since(began)
	close(done)
	wg.Wait()
	maxRSS = max(maxRSS, rss(t, s.Pid()))

	slices.Sort(latencies)
	p99 := latencies[len(latencies)*99/100]
	worst := latencies[len(latencies)-1]
	evicted, _ := strconv.ParseInt(infoField(t, flood, "stats", "evicted_keys"), 10, 64)
	dataset, _ := strconv.ParseInt(infoField(t, flood, "memory", "used_memory_dataset"), 10, 64)
	t.Logf("%d keys in %v (%.0f/s); max RSS %d MiB (bound %d MiB); dataset %d MiB; %d evicted; probe: %d requests, p99 %v, max %v",
		keys, elapsed.Round(time.Millisecond), float64(keys)/elapsed.Seconds(), maxRSS>>20, rssBound(maxMemory)>>20,
		dataset>>20, evicted, len(latencies), p99, worst)
	if maxRSS > rssBound(maxMemory) {
		t.Errorf("RSS reached %d MiB, above the documented %d MiB", maxRSS>>20, rssBound(maxMemory)>>20)
	}
	if dataset > maxMemory {
		t.Errorf("dataset %d bytes is above maxmemory", dataset)
	}
	if evicted == 0 {
		t.Error("nothing was evicted")
	}
	if p99 > 100*time.Millisecond {
		t.Errorf("the other client's p99 latency was %v during the flood", p99)
	}
}

// rss returns the resident set size of process pid in bytes.
func rss(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read RSS: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/pid/status")
	return 0
}
