package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
)

// TestReleaseIdleMemory: after a burst of allocation the idle node releases
// memory; while commands keep coming it does not. The test counts the loop's
// calls of release rather than the runtime's forced collections: a
// runtime.GC that finds a background cycle already started waits for that
// one and is not counted as forced, so that counter misses releases on a
// loaded machine.
func TestReleaseIdleMemory(t *testing.T) {
	var releases, checkpoints atomic.Int64
	// run starts the loop and returns a stop that waits for it to end, so
	// that no loop of this test (or of an earlier -count) outlives it.
	run := func(processed func() int64) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			releaseIdleMemory(ctx, processed, checkpoints.Load, func() { releases.Add(1) }, time.Millisecond)
		}()
		return func() { cancel(); <-done }
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, 10*time.Second, what, cond)
	}
	// ticks waits for n more calls of a loop's processed, counted in calls.
	ticks := func(calls *atomic.Int64, n int64) {
		t.Helper()
		seen := calls.Load()
		waitFor("the loop stopped ticking", func() bool { return calls.Load() >= seen+n })
	}

	// Busy: every tick sees a new command count, so nothing is released.
	var commands atomic.Int64
	stop := run(func() int64 { return commands.Add(1) })
	garbage(64 << 20)
	ticks(&commands, 20)
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
	ticks(&looks, 2)
	garbage(64 << 20)
	waitFor("no release 10 s into an idle period after 64 MiB of garbage", func() bool { return releases.Load() > 0 })
	// Once the burst is released, quiet ticks release nothing more. Ticks
	// that overlapped the burst may each have released a part of it, so
	// the count is taken two looks after the burst ended.
	ticks(&looks, 2)
	released := releases.Load()
	ticks(&looks, 20)
	if got := releases.Load(); got != released {
		t.Fatalf("%d releases in 20 quiet ticks", got-released)
	}
	// A checkpoint that ended sets garbage free without allocating: the
	// next idle tick releases, once.
	checkpoints.Add(1)
	waitFor("no release after a checkpoint", func() bool { return releases.Load() > released })
	ticks(&looks, 20)
	if got := releases.Load(); got != released+1 {
		t.Fatalf("%d releases after one checkpoint, want 1", got-released)
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
