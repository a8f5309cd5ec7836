package pebbledir

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/throttleddb/throttled/internal/testwait"
)

// fakeDB is the database side of the scheduler: compactions it asks for
// and is refused wait until the scheduler grants them. mu plays Pebble's
// DB mutex: a request and the waiting it leaves behind are one step.
type fakeDB struct {
	allowed atomic.Int64
	asks    atomic.Int64 // calls of GetAllowedWithoutPermission
	s       *scheduler

	mu      sync.Mutex
	waiting int // refused compactions not granted yet
	granted int // grants accepted (Schedule)
}

func (f *fakeDB) GetAllowedWithoutPermission() int {
	f.asks.Add(1)
	return int(f.allowed.Load())
}

func (f *fakeDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting > 0, pebble.WaitingCompaction{}
}

func (f *fakeDB) Schedule(pebble.CompactionGrantHandle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waiting == 0 {
		return false
	}
	f.waiting--
	f.granted++
	return true
}

// request asks for a compaction, as Pebble's maybeScheduleCompaction does:
// it runs at once or waits. It reports whether it runs.
func (f *fakeDB) request() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, _ := f.s.TrySchedule()
	if !ok {
		f.waiting++
	}
	return ok
}

func (f *fakeDB) grants() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.granted
}

func newFake(t *testing.T, every time.Duration, allowed int) *fakeDB {
	f := &fakeDB{s: newScheduler(every)}
	f.allowed.Store(int64(allowed))
	f.s.Register(2, f)
	t.Cleanup(f.s.Unregister)
	return f
}

// quiet checks that the scheduler looks at the database at most slack
// times over 50 of its periods (a look every period would be 50).
func quiet(t *testing.T, f *fakeDB, every time.Duration, slack int64) {
	t.Helper()
	before := f.asks.Load()
	time.Sleep(50 * every)
	if n := f.asks.Load() - before; n > slack {
		t.Fatalf("the scheduler looked at the database %d times in 50 periods with no compaction waiting", n)
	}
}

// TestSchedulerSleepsWhenNothingWaits: with no compaction waiting, the
// scheduler does not look at the database, where Pebble's looks every
// period for as long as the database is open.
func TestSchedulerSleepsWhenNothingWaits(t *testing.T) {
	const every = time.Millisecond
	f := newFake(t, every, 1)
	quiet(t, f, every, 0)
	if !f.request() {
		t.Fatal("a compaction within the allowance was refused")
	}
	quiet(t, f, every, 0)
	// Its end makes room: the scheduler asks whether one waits (none).
	f.s.Done()
	quiet(t, f, every, 0)
}

// TestSchedulerGrantsWaitingCompactions: a refused compaction is granted
// when the allowance grows with no call from the database (the periodic
// look) and when a running one ends; once none waits the looks stop.
func TestSchedulerGrantsWaitingCompactions(t *testing.T) {
	const every = time.Millisecond
	f := newFake(t, every, 1)
	if !f.request() {
		t.Fatal("the first compaction was refused")
	}
	if f.request() || f.request() {
		t.Fatal("compactions beyond the allowance of 1 were granted at once")
	}
	// Refused: the scheduler looks every period.
	asks := f.asks.Load()
	testwait.For(t, 5*time.Second, "the scheduler looks again while compactions wait", func() bool { return f.asks.Load() >= asks+3 })
	if f.grants() != 0 {
		t.Fatalf("granted %d compactions beyond the allowance", f.grants())
	}
	// The backlog raises the allowance, which nothing tells the scheduler.
	f.allowed.Store(2)
	testwait.For(t, 5*time.Second, "a waiting compaction granted when the allowance grew", func() bool { return f.grants() == 1 })
	// Running 2 of 2, one still waits: granted when one ends.
	f.s.Done()
	testwait.For(t, 5*time.Second, "the last waiting compaction granted when one ended", func() bool { return f.grants() == 2 })
	// Nothing waits, but no look with room found that out yet: the first
	// Done's does. A periodic look already under way may still end after it.
	f.s.Done()
	f.s.Done()
	quiet(t, f, every, 1)
	if f.grants() != 2 {
		t.Fatalf("%d grants, want 2", f.grants())
	}
}

// TestSchedulerUnregister: after Unregister the scheduler refuses and does
// not call the database any more.
func TestSchedulerUnregister(t *testing.T) {
	const every = time.Millisecond
	f := &fakeDB{s: newScheduler(every)}
	f.s.Register(2, f)
	f.request()
	f.request() // refused: it looks every period
	f.s.Unregister()
	before := f.asks.Load()
	if ok, _ := f.s.TrySchedule(); ok {
		t.Fatal("granted after Unregister")
	}
	f.s.Done()
	f.s.UpdateGetAllowedWithoutPermission()
	// UpdateGetAllowedWithoutPermission reads the allowance (1 call), as
	// Pebble's; nothing is granted.
	time.Sleep(50 * every)
	if n := f.asks.Load() - before; n > 1 || f.grants() != 0 {
		t.Fatalf("after Unregister: %d looks, %d grants", n, f.grants())
	}
}

// TestSchedulerWithPebble: a real database runs its compactions under the
// scheduler, the automatic ones after its flushes and a manual one (here
// each is granted at once and ends before the next is asked for; the
// waiting ones are TestSchedulerGrantsWaitingCompactions').
func TestSchedulerWithPebble(t *testing.T) {
	dir := t.TempDir()
	f := Format{Key: []byte("\x00test-format"), Reads: []byte{1}, Name: "a test folder"}
	db, lock, err := Open(dir, f, func(lock *pebble.Lock, readOnly bool) *pebble.Options {
		return &pebble.Options{FormatMajorVersion: FormatMajorVersion, L0CompactionThreshold: 2, ReadOnly: readOnly, Lock: lock}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	defer db.Close()
	value := make([]byte, 100)
	for range 12 {
		for k := range 2000 {
			if err := db.Set(fmt.Appendf(nil, "key-%04d", k), value, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 5*time.Second, "the L0 files compacted", func() bool {
		m := db.Metrics()
		return m.Compact.Count > 0 && m.Levels[0].TablesCount < 2
	})
	if err := db.Compact(context.Background(), []byte("key-"), []byte("key-\xff"), false); err != nil {
		t.Fatal(err)
	}
	if m := db.Metrics(); m.Levels[0].TablesCount != 0 {
		t.Fatalf("%d L0 files after a manual compaction of everything", m.Levels[0].TablesCount)
	}
}
