package server

import (
	"context"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// TestReleaseIdleMemory: after a burst of allocation the idle node forces a
// collection that returns memory; while commands keep coming it does not.
func TestReleaseIdleMemory(t *testing.T) {
	sample := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	forced := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	var commands atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := forced()
	go releaseIdleMemory(ctx, func() int64 { return commands.Add(1) }, time.Millisecond)
	garbage(64 << 20)
	// Busy: every tick sees a new command count, so nothing is forced.
	// Wait until the loop has looked 20 times.
	deadline := time.Now().Add(10 * time.Second)
	for commands.Load() < 20 {
		if time.Now().After(deadline) {
			t.Fatal("the loop did not tick")
		}
		time.Sleep(time.Millisecond) // polling
	}
	if got := forced() - before; got != 0 {
		t.Fatalf("%d forced collections while busy", got)
	}
	cancel()

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go releaseIdleMemory(ctx, func() int64 { return 0 }, time.Millisecond)
	garbage(64 << 20)
	deadline = time.Now().Add(10 * time.Second)
	for forced() == before {
		if time.Now().After(deadline) {
			t.Fatal("no forced collection 10 s into an idle period after 64 MiB of garbage")
		}
		time.Sleep(time.Millisecond) // polling
	}
}

var sink []byte

// garbage allocates n bytes that are garbage at once.
func garbage(n int) {
	for range n >> 16 {
		sink = make([]byte, 1<<16)
	}
	sink = nil
}
