package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/policy"
)

// expiryGrace is how long a window's store counter outlives the window
// (the article's period + 2 s), so a late sync still finds it.
const expiryGrace = 2 * time.Second

// twoLayer is the coordinated-microservices article's two-layer cache: a
// local counter per key and fixed window, synced to the store counter
// "<tier key>:<window start, Unix ms>" with INCRBY.
type twoLayer struct {
	rdb   redis.UniversalClient
	tiers []tier
	now   func() time.Time
	fail  FailMode

	syncMu sync.Mutex // one sync at a time

	mu       sync.Mutex
	counters map[string]*counter // by store key; mu
	syncErr  error               // the last sync's error, nil after a good one; mu

	stop, done chan struct{} // the sync goroutine's; nil without one
}

// counter is one window's count as this instance knows it.
type counter struct {
	global  int64     // the store's total at the last sync, this instance's sends included
	pending int64     // admitted here since, not sent yet
	end     time.Time // the window's end
}

func newTwoLayer(cfg Config, ts []tier) (*twoLayer, error) {
	for i, t := range ts {
		if t.Algorithm != policy.FWC {
			return nil, fmt.Errorf("client: tier %d: two-layer mode counts fixed windows (fwc), not %s", i+1, t.Algorithm)
		}
	}
	if cfg.SyncInterval < 0 {
		return nil, errors.New("client: SyncInterval is negative")
	}
	tl := &twoLayer{rdb: cfg.Client, tiers: ts, now: cfg.Now, fail: cfg.Fail, counters: map[string]*counter{}}
	if cfg.SyncInterval > 0 {
		tl.stop, tl.done = make(chan struct{}), make(chan struct{})
		go tl.loop(cfg.SyncInterval)
	}
	return tl, nil
}

// loop syncs once per interval until close.
func (tl *twoLayer) loop(interval time.Duration) {
	defer close(tl.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tl.stop:
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(interval, time.Second))
			_ = tl.sync(ctx) // kept in syncErr; the next tick retries
			cancel()
		}
	}
}

func (tl *twoLayer) close() error {
	if tl.stop != nil {
		close(tl.stop)
		<-tl.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tl.sync(ctx)
}

// windowOf returns the store key and end of the fixed window of tier t
// that now falls in, aligned to the Unix epoch as FWC's windows are.
func (t tier) windowAt(key string, now time.Time) (string, time.Time) {
	ms := now.UnixMilli()
	start := ms - ((ms%t.Period)+t.Period)%t.Period
	return key + ":" + strconv.FormatInt(start, 10), time.UnixMilli(start + t.Period)
}

// decide decides n units from the local view, without the store. With
// FailClosed, while the last sync failed, it returns that error instead.
func (tl *twoLayer) decide(key string, n int64) (Result, error) {
	now := tl.now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.syncErr != nil && tl.fail == FailClosed {
		return Result{}, tl.syncErr
	}
	cs := make([]*counter, len(tl.tiers))
	states := make([]TierState, len(tl.tiers))
	for i, t := range tl.tiers {
		ck, end := t.windowAt(tierKey(key, i, len(tl.tiers)), now)
		c := tl.counters[ck]
		if c == nil {
			c = &counter{end: end}
			tl.counters[ck] = c
		}
		cs[i] = c
		used := c.global + c.pending
		st := TierState{Algorithm: t.Algorithm, Limit: t.Limit, RetryAfter: -1, Window: t.window}
		st.Limited = used+n > t.Limit
		if st.Limited && n <= t.Limit {
			st.RetryAfter = end.Sub(now)
		}
		if !st.Limited {
			used += n
		}
		st.Remaining = max(t.Limit-used, 0)
		if used > 0 {
			st.ResetAfter = end.Sub(now)
		}
		states[i] = st
	}
	r := combine(states, 0)
	if r.Allowed {
		for _, c := range cs {
			c.pending += n
		}
	}
	return r, nil
}

// sync sends every counter's pending count with INCRBY (0 for a counter of
// the current window with nothing pending, to learn the others' counts),
// sets the store counter's expiry, and takes the totals as the new global
// views. Counters of ended windows with nothing pending are dropped. A
// count whose INCRBY failed stays pending for the next sync; one whose
// reply was lost after the store applied it is sent again, which can only
// over-count (refuse early), never admit more.
func (tl *twoLayer) sync(ctx context.Context) error {
	tl.syncMu.Lock()
	defer tl.syncMu.Unlock()
	type send struct {
		key  string
		c    *counter
		sent int64
		incr *redis.IntCmd
	}
	now := tl.now()
	var sends []send
	tl.mu.Lock()
	for k, c := range tl.counters {
		if c.pending == 0 && !now.Before(c.end) {
			delete(tl.counters, k)
			continue
		}
		sends = append(sends, send{key: k, c: c, sent: c.pending})
	}
	tl.mu.Unlock()
	if len(sends) == 0 {
		return nil
	}
	pipe := tl.rdb.Pipeline()
	for i, s := range sends {
		sends[i].incr = pipe.IncrBy(ctx, s.key, s.sent)
		pipe.PExpireAt(ctx, s.key, s.c.end.Add(expiryGrace))
	}
	_, err := pipe.Exec(ctx)
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, s := range sends {
		total, ierr := s.incr.Result()
		if ierr != nil {
			continue
		}
		s.c.global = total
		s.c.pending -= s.sent
	}
	tl.syncErr = err
	return err
}
