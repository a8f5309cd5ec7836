package client

import (
	"fmt"
	"sync"
	"time"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/policy"
)

// DefaultFallbackKeys bounds the fallback limiter's keys when
// Config.FallbackKeys is 0.
const DefaultFallbackKeys = 10000

// fallback is the local limiter a FailOpen limiter admits through while
// the store gives no decisions: the engines' own algorithms on states held
// in memory, per key, for at most max keys.
type fallback struct {
	tiers []policy.Tier
	lims  []engines.Limiter
	max   int

	mu   sync.Mutex
	keys map[string]*fbKey // mu
}

// fbKey is one key's state per tier and when it is full again everywhere
// (then it may be dropped).
type fbKey struct {
	states [][]byte
	fullAt int64
}

// newFallback builds the fallback limiter of fb, or of tiers (a cl tier as
// the token bucket of capacity burst+1 that runs the same arithmetic)
// when fb is empty.
func newFallback(tiers, fb []policy.Tier, max int) (*fallback, error) {
	if len(fb) == 0 {
		for _, t := range tiers {
			if t.Algorithm == policy.GCRA {
				t = policy.Tier{Algorithm: policy.TB, Burst: t.Burst + 1, Count: t.Count, Period: t.Period}
			}
			fb = append(fb, t)
		}
	}
	if max == 0 {
		max = DefaultFallbackKeys
	}
	if max < 0 {
		return nil, fmt.Errorf("client: FallbackKeys %d is negative", max)
	}
	f := &fallback{tiers: fb, max: max, keys: map[string]*fbKey{}}
	for i, t := range fb {
		l, _, err := t.Build()
		if err == nil && l == nil {
			err = fmt.Errorf("cl is not a fallback algorithm (use tb with capacity burst+1)")
		}
		if err != nil {
			return nil, fmt.Errorf("client: fallback tier %d: %w", i+1, err)
		}
		f.lims = append(f.lims, l)
	}
	return f, nil
}

// decide decides n units for key at now, locally. A new key when the map
// is full of keys that are not full yet is refused, so the limiter's
// memory is bounded.
func (f *fallback) decide(key string, n int64, now time.Time) Result {
	t := now.UnixNano()
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.keys[key]
	if k == nil {
		if len(f.keys) >= f.max {
			f.dropFull(t)
		}
		if len(f.keys) >= f.max {
			return Result{Fallback: true, RetryAfter: time.Second}
		}
		k = &fbKey{states: make([][]byte, len(f.lims))}
	}
	states := make([]TierState, len(f.lims))
	for i, l := range f.lims {
		r, err := l.Check(k.states[i], t, n)
		if err != nil { // a state this limiter wrote: cannot happen; refuse
			return Result{Fallback: true, RetryAfter: -1}
		}
		states[i] = TierState{Algorithm: f.tiers[i].Algorithm, Limited: r.Limited, Limit: r.Limit,
			Remaining: r.Remaining, RetryAfter: time.Duration(r.RetryAfter), ResetAfter: time.Duration(r.ResetAfter),
			Window: windowOf(f.tiers[i])}
	}
	res := combine(states, 0) // Check's Result is the state after the request

	res.Fallback = true
	if !res.Allowed || n == 0 {
		return res
	}
	k.fullAt = 0
	for i, l := range f.lims {
		next, fullAt, err := l.Commit(k.states[i], t, n)
		if err != nil {
			return Result{Fallback: true, RetryAfter: -1}
		}
		k.states[i], k.fullAt = next, max(k.fullAt, fullAt)
	}
	f.keys[key] = k
	return res
}

// dropFull forgets the keys that are full again at t: their state is the
// same as none.
func (f *fallback) dropFull(t int64) {
	for key, k := range f.keys {
		if k.fullAt <= t {
			delete(f.keys, key)
		}
	}
}

// failed is the decision when the store gave none: refused with
// FailClosed, the fallback limiter's otherwise; err is returned with it.
func failed(mode FailMode, fb *fallback, key string, n int64, now time.Time, err error) (Result, error) {
	if mode == FailClosed {
		return Result{Fallback: true, RetryAfter: time.Second}, err
	}
	return fb.decide(key, n, now), err
}
