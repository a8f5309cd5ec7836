package pebbledir

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// scheduler is the compaction scheduler of our databases
// (pebble.Options.Experimental.CompactionScheduler). It grants compactions
// as Pebble's default, pebble.ConcurrencyLimitScheduler, does: up to the
// concurrency the database allows (GetAllowedWithoutPermission, which grows
// with the compaction backlog), when the database asks (TrySchedule), when
// a compaction ends (Done), and when a flush raised the allowance
// (UpdateGetAllowedWithoutPermission). A database whose request was refused
// stops asking and waits for a grant; the allowance can also grow without
// any of those calls, so the scheduler looks again every grantEvery while a
// compaction waits.
//
// Pebble's own looks every 100 ms for as long as the database is open,
// whether a compaction waits or not: 10 wake-ups a second of an idle node
// and a tenth of them all on an idle Raft member (bench/idle). This one
// looks only while a compaction waits: from a refusal until a look finds
// none waiting.
type scheduler struct {
	every   time.Duration
	db      pebble.DBForCompaction
	wake    chan struct{} // buffered 1: look now
	stop    chan struct{} // closed by Unregister
	stopped chan struct{} // closed when run returns

	mu       sync.Mutex
	ended    sync.Cond // broadcast when a grant ends (granting false)
	running  int       // compactions granted and not done
	allowed  int       // the database's allowance at the last look
	refused  uint64    // TrySchedule's refusals
	settled  uint64    // refused as of the last look that found nothing waiting
	granting bool      // a grant is under way, without mu
	closed   bool
}

// grantEvery is how often the scheduler looks while a compaction waits, as
// Pebble's.
const grantEvery = 100 * time.Millisecond

var _ pebble.CompactionScheduler = (*scheduler)(nil)

func newScheduler(every time.Duration) *scheduler {
	s := &scheduler{every: every, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	s.ended.L = &s.mu
	return s
}

// Register implements pebble.CompactionScheduler: Pebble calls it once, as
// the database opens.
func (s *scheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	go s.run()
}

// Unregister implements pebble.CompactionScheduler: once it returns, no
// call into the database is under way and none follows.
func (s *scheduler) Unregister() {
	close(s.stop)
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for s.granting {
		s.ended.Wait()
	}
}

// TrySchedule implements pebble.CompactionScheduler.
func (s *scheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, nil
	}
	s.allowed = s.db.GetAllowedWithoutPermission()
	if s.allowed > s.running {
		s.running++
		return true, s
	}
	// The database now waits for a grant: run starts looking.
	s.refused++
	s.poke()
	return false, nil
}

// UpdateGetAllowedWithoutPermission implements pebble.CompactionScheduler:
// a flush may have raised the allowance.
func (s *scheduler) UpdateGetAllowedWithoutPermission() {
	s.mu.Lock()
	allowed := s.db.GetAllowedWithoutPermission()
	more := allowed > s.allowed
	s.allowed = allowed
	s.mu.Unlock()
	if more {
		s.poke()
	}
}

// The scheduler is its own grant handle, as Pebble's: only Done matters.

// Started implements pebble.CompactionGrantHandle.
func (s *scheduler) Started() {}

// MeasureCPU implements pebble.CompactionGrantHandle.
func (s *scheduler) MeasureCPU(pebble.CompactionGoroutineKind) {}

// CumulativeStats implements pebble.CompactionGrantHandle.
func (s *scheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done implements pebble.CompactionGrantHandle: a compaction ended, which
// makes room for a waiting one.
func (s *scheduler) Done() {
	s.mu.Lock()
	s.running--
	s.grantLocked()
}

func (s *scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run looks when poked, and every s.every while a compaction may wait,
// until Unregister.
func (s *scheduler) run() {
	defer close(s.stopped)
	t := time.NewTimer(s.every)
	t.Stop()
	defer t.Stop()
	for {
		s.mu.Lock()
		waiting := s.refused != s.settled
		s.mu.Unlock()
		var tick <-chan time.Time
		if waiting {
			t.Reset(s.every)
			tick = t.C
		}
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-tick:
		}
		s.mu.Lock()
		s.grantLocked()
	}
}

// grantLocked grants the database as many of its waiting compactions as
// its allowance leaves room for, one grant at a time. It is called with
// s.mu held and returns with it released.
func (s *scheduler) grantLocked() {
	defer s.mu.Unlock()
	for s.granting {
		s.ended.Wait()
	}
	if s.closed {
		return
	}
	s.allowed = s.db.GetAllowedWithoutPermission()
	room := s.allowed - s.running
	if room <= 0 {
		return
	}
	refused := s.refused
	s.granting = true
	s.mu.Unlock()
	// The database is asked for its waiting compaction only when one could
	// be granted: picking it is work.
	none := false
	for ; room > 0; room-- {
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting {
			none = true
			break
		}
		if !s.db.Schedule(s) {
			// It had none to run after all.
			none = true
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.granting = false
	// A refusal since the look began may have a compaction waiting that
	// this look did not see: keep looking then.
	if none && s.refused == refused {
		s.settled = refused
	}
	s.ended.Broadcast()
}
