package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestReleaseIdleMemory: after a burst of allocation the idle node releases
// memory; while commands keep coming it does not. The test counts the loop's
// calls of release rather than the runtime's forced collections: a
// runtime.GC that finds a background cycle already started waits for that
// one and is not counted as forced, so that counter misses releases on a
// loaded machine.
func TestReleaseIdleMemory(t *testing.T) {
	var releases atomic.Int64
	// run starts the loop and returns a stop that waits for it to end, so
	// that no loop of this test (or of an earlier -count) outlives it.
	run := func(processed func() int64) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			releaseIdleMemory(ctx, processed, func() { releases.Add(1) }, time.Millisecond)
		}()
		return func() { cancel(); <-done }
	}
	var commands atomic.Int64
	stop := run(func() int64 { return commands.Add(1) })
	garbage(64 << 20)
	// Busy: every tick sees a new command count, so nothing is released.
	// Wait until the loop has looked 20 times after the garbage.
	deadline := time.Now().Add(10 * time.Second)
	for seen := commands.Load(); commands.Load() < seen+20; {
		if time.Now().After(deadline) {
			t.Fatal("the loop did not tick")
		}
		time.Sleep(time.Millisecond) // polling
	}
	stop()
	if got := releases.Load(); got != 0 {
		t.Fatalf("%d releases while busy", got)
	}

	// Idle: the command count never moves. The garbage comes only once the
	// loop has read its starting allocation figure (its first call of
	// processed is followed by that read; the second comes a tick later),
	// or the burst would count as already released.
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
	for releases.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no release 10 s into an idle period after 64 MiB of garbage")
		}
		time.Sleep(time.Millisecond) // polling
	}
	// Once the burst is released, quiet ticks release nothing more. Ticks
	// that overlapped the burst may each have released a part of it, so
	// the count is taken two looks after the burst ended.
	waitLooks := func(n int64) {
		for seen := looks.Load(); looks.Load() < seen+n; {
			if time.Now().After(deadline) {
				t.Fatal("the idle loop stopped ticking")
			}
			time.Sleep(time.Millisecond) // polling
		}
	}
	waitLooks(2)
	released := releases.Load()
	waitLooks(20)
	if got := releases.Load(); got != released {
		t.Fatalf("%d releases in 20 quiet ticks", got-released)
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
