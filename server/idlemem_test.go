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
	// run starts the loop and returns a stop that waits for it to end, so
	// that no loop of this test (or of an earlier -count) outlives it.
	run := func(processed func() int64) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			releaseIdleMemory(ctx, processed, time.Millisecond)
		}()
		return func() { cancel(); <-done }
	}
	var commands atomic.Int64
	before := forced()
	stop := run(func() int64 { return commands.Add(1) })
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
	stop()
	if got := forced() - before; got != 0 {
		t.Fatalf("%d forced collections while busy", got)
	}

	// Idle: the command count never moves. The garbage comes only once the
	// loop has read its starting allocation figure (its first call of
	// processed), or the burst would count as already released.
	var looks atomic.Int64
	defer run(func() int64 { looks.Add(1); return 0 })()
	deadline = time.Now().Add(10 * time.Second)
	for looks.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the idle loop did not tick")
		}
		time.Sleep(time.Millisecond) // polling
	}
	garbage(64 << 20)
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
