package e2e

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// crashLoad drives writers against s until at least minAcks changes are
// acknowledged, kills the server with SIGKILL mid-load and restarts it on
// the same folder. Each writer alternates INCRBY counter 1 and CL.THROTTLE on
// one key whose every allowed call adds exactly one second to its TAT (the
// debug clock is frozen). It returns the acknowledged counts, the most
// changes that were in flight when the server died, the counter and the
// number of seconds the TAT moved, read after the restart, and the rate of
// acknowledgements.
func crashLoad(t *testing.T, fsync string, minAcks int64) (ackIncr, ackAllowed, inflight, counter, tatSteps int64, rate float64) {
	t.Helper()
	const writers = 8
	s := start(t, t.TempDir(), "--debug-clock", "--appendfsync", fsync)
	c := s.client(t)
	now := do(t, c, "DEBUG", "CLOCK").(int64)
	var incr, allowed atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	began := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := s.client(t)
			for i := 0; ctx.Err() == nil; i++ {
				if i%2 == 0 {
					if _, err := wc.IncrBy(ctx, "counter", 1).Result(); err != nil {
						return
					}
					incr.Add(1)
					continue
				}
				v, err := wc.Do(ctx, "CL.THROTTLE", "gcra", 1_000_000_000, 1, 1).Int64Slice()
				if err != nil {
					return
				}
				if v[0] == 0 {
					allowed.Add(1)
				}
			}
		}()
	}
	deadline := time.Now().Add(60 * time.Second)
	for incr.Load()+allowed.Load() < minAcks {
		if time.Now().After(deadline) {
			t.Fatalf("only %d changes acknowledged in 60 s", incr.Load()+allowed.Load())
		}
		time.Sleep(10 * time.Millisecond) // polling the writers' progress
	}
	s.Kill()
	elapsed := time.Since(began)
	wg.Wait()
	ackIncr, ackAllowed = incr.Load(), allowed.Load()
	rate = float64(ackIncr+ackAllowed) / elapsed.Seconds()

	s = start(t, s.dir, s.args...)
	c = s.client(t)
	counter, _ = strconv.ParseInt(do(t, c, "GET", "counter").(string), 10, 64)
	tat, _ := strconv.ParseInt(do(t, c, "GET", "gcra").(string), 10, 64)
	tatSteps = (tat - now) / 1e9
	return ackIncr, ackAllowed, writers, counter, tatSteps, rate
}

// TestCrash_Always: with appendfsync always every acknowledged change
// survives a kill -9, and nothing beyond what was in flight appears.
func TestCrash_Always(t *testing.T) {
	incr, allowed, inflight, counter, steps, rate := crashLoad(t, "always", 2000)
	t.Logf("always: %d INCRBY and %d allowed CL.THROTTLE acknowledged (%.0f/s); after restart counter=%d, TAT moved %d s", incr, allowed, rate, counter, steps)
	if counter < incr || counter > incr+inflight {
		t.Errorf("counter = %d, want between the %d acknowledged and %d (plus what was in flight)", counter, incr, incr+inflight)
	}
	if steps < allowed || steps > allowed+inflight {
		t.Errorf("TAT moved %d s, want between the %d acknowledged and %d", steps, allowed, allowed+inflight)
	}
}

// TestCrash_EverySec: with appendfsync everysec a kill -9 loses at most about
// the last second of writes, and what is loaded is consistent (a folder that
// opens, values that are whole).
func TestCrash_EverySec(t *testing.T) {
	incr, allowed, inflight, counter, steps, rate := crashLoad(t, "everysec", 20000)
	t.Logf("everysec: %d INCRBY and %d allowed CL.THROTTLE acknowledged (%.0f/s); after restart counter=%d, TAT moved %d s", incr, allowed, rate, counter, steps)
	bound := int64(rate) // about one second of writes
	if counter > incr+inflight || counter < incr-bound {
		t.Errorf("counter = %d, want between %d (one second of writes lost) and %d", counter, incr-bound, incr+inflight)
	}
	if steps > allowed+inflight || steps < allowed-bound {
		t.Errorf("TAT moved %d s, want between %d and %d", steps, allowed-bound, allowed+inflight)
	}
}
