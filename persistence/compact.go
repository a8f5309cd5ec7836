package persistence

import (
	"context"
	"sync/atomic"
	"time"
)

// compactor removes deleted keys from disk. Pebble drops a tombstone, and
// the value it hides, only when a compaction carries it down to the bottom
// level. While writes flow, Pebble's own compactions do that as they go;
// but once they stop (a burst of keys has expired and traffic is low),
// nothing schedules the last compactions and the folder keeps the dead
// keys. The compactor compacts the whole data range when
// enough deletions have been applied since its last run, or any at all once
// the DB has been quiet for compactIdle.
//
// It waits for a quiet second to do so: a manual compaction forces the
// memtables to flush, and doing that in the middle of a burst shrinks them
// and stalls writers. Under load that never quiets it runs anyway after
// compactDefer. Either way it keeps to about compactDuty of the time.
type compactor struct {
	deletes atomic.Int64 // deletions applied since the last run began
	runs    atomic.Int64
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	// compactAfter is how many deletions make a compaction due; a FlushDB
	// counts as this many. What waits on disk for it is bounded by this
	// many tombstones and the values they hide: a few MB.
	compactAfter = 100_000
	// compactQuiet is the apply rate (changes per second) under which the
	// DB counts as quiet.
	compactQuiet = 10_000
	// compactDefer is how long a due compaction waits for a quiet second.
	compactDefer = time.Minute
	// compactDuty is the share of time spent compacting: after a run of
	// t, the next waits t*(1/compactDuty - 1).
	compactDuty = 0.1
	// compactIdle is how long the DB must have been quiet for fewer than
	// compactAfter deletions to be compacted away: the last checkpoint
	// of a burst leaves fewer, and nothing else would remove them.
	compactIdle = 10 * time.Second
)

func (c *compactor) start(d *DB) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.run(ctx, d)
}

// add counts n applied deletions.
func (c *compactor) add(n int64) {
	if n > 0 {
		c.deletes.Add(n)
	}
}

func (c *compactor) close() {
	c.cancel()
	<-c.done
}

func (c *compactor) run(ctx context.Context, d *DB) {
	defer close(c.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var (
		lastApplied = d.applied.Load()
		due         time.Time    // when the compaction became due; zero when it is not
		next        time.Time    // earliest start the duty cycle allows
		busy        = time.Now() // the last second that was not quiet
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		applied := d.applied.Load()
		rate := applied - lastApplied
		lastApplied = applied
		now := time.Now()
		if rate >= compactQuiet {
			busy = now
		}
		pending := c.deletes.Load()
		if pending < compactAfter && (pending == 0 || now.Sub(busy) < compactIdle) {
			continue
		}
		if due.IsZero() {
			due = now
		}
		if now.Before(next) || (rate >= compactQuiet && now.Sub(due) < compactDefer) {
			continue
		}
		n := c.deletes.Swap(0)
		err := d.pdb.Compact(ctx, dataStart, dataEnd, true)
		took := time.Since(now)
		next = time.Now().Add(time.Duration(float64(took) * (1/compactDuty - 1)))
		due = time.Time{}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Not fatal: the data is intact, only the space is not
			// reclaimed yet. Count the deletions again to retry.
			d.log.Warn("persistence: compaction failed", "dir", d.dir, "err", err)
			c.add(n)
			continue
		}
		c.runs.Add(1)
		d.log.Debug("persistence: compacted deleted keys away", "dir", d.dir, "deletions", n, "took", took)
	}
}
