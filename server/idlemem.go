package server

import (
	"context"
	"runtime/metrics"
	"time"

	"github.com/throttleddb/throttled/internal/pace"
)

// Go's garbage collector lets the heap grow to about twice the live data
// before it collects, and hands freed pages back to the operating system only
// slowly. After a burst of writes (a million new keys, a flood of unique
// keys) the process therefore keeps tens of megabytes of garbage resident
// long after the burst. releaseIdleMemory collects and returns that memory
// once the node has been idle for a moment, as Redis' allocator purges its
// dirty pages: an idle node's RSS follows its live keys.

const (
	// idleCheck is how often the node looks at its activity.
	idleCheck = 250 * time.Millisecond
	// idleAllocs is how much must have been allocated since the last
	// release for another one to be worth a full collection. A checkpoint
	// of persistence, which runs while the node is idle, leaves about
	// this much garbage per million keys.
	idleAllocs = 4 << 20
	// idleSlowdown bounds how much further apart the looks of an idle
	// node get: 8 × 250 ms.
	idleSlowdown = 8
)

// releaseIdleMemory runs until ctx is done, looking every "every" while
// the node is busy.
// processed is the node's command counter: a tick with no new command is
// idle. checkpoints counts persistence's checkpoints (and the server adds
// the idle connections' buffers given back): an idle tick after one ended
// releases too. A checkpoint's garbage is mostly allocated before a
// release that runs while it is still working (the node is idle meanwhile),
// and set free only after it, so the allocation count alone would not ask
// for another: a million keys' checkpoint then stayed in RSS (80 MB).
// release does the collection; the server passes debug.FreeOSMemory.
//
// A look that finds the node idle with nothing to release makes the next
// come twice as late, up to idleSlowdown times every: an idle node looks
// every 2 s instead of 4 times a second, and still releases within a few
// seconds of a burst.
func releaseIdleMemory(ctx context.Context, processed, checkpoints func() int64, release func(), every time.Duration) {
	p := pace.Pace{Busy: every, Idle: idleSlowdown * every}
	t := time.NewTimer(every)
	defer t.Stop()
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocs := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	last, released, saved := processed(), allocs(), checkpoints()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := processed()
		busy := now != last
		last = now
		if !busy {
			if cp := checkpoints(); allocs()-released >= idleAllocs || cp != saved {
				release()
				released, saved = allocs(), cp
				busy = true
			}
		}
		t.Reset(p.Next(busy))
	}
}
