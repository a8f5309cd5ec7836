package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/policy"
)

// tier is one checked policy.Tier with what the commands need.
type tier struct {
	policy.Tier
	window time.Duration // the RateLimit-Policy window
}

// buildTiers checks the tiers as the store would, and that a cl tier's
// period is whole seconds (CL.THROTTLE has no milliseconds).
func buildTiers(ts []policy.Tier) ([]tier, error) {
	if len(ts) == 0 {
		return nil, errors.New("client: no tiers")
	}
	if len(ts) > policy.MaxTiers {
		return nil, fmt.Errorf("client: more than %d tiers", policy.MaxTiers)
	}
	out := make([]tier, len(ts))
	for i, t := range ts {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("client: tier %d: %w", i+1, err)
		}
		if t.Algorithm == policy.GCRA && t.Period%1000 != 0 {
			return nil, fmt.Errorf("client: tier %d: a cl period is whole seconds (CL.THROTTLE's unit)", i+1)
		}
		out[i] = tier{t, windowOf(t)}
	}
	return out, nil
}

// windowOf is the time a tier's limit spans (policy.Tier.Window, the
// RateLimit-Policy w that THROTTLE.POLICY answers too).
func windowOf(t policy.Tier) time.Duration {
	return time.Duration(t.Window()) * time.Millisecond
}

// tierKey is the store key of tier i (0-based) for the caller's key.
func tierKey(key string, i, n int) string {
	if n == 1 {
		return key
	}
	return key + ":" + strconv.Itoa(i+1)
}

// params are a tier's command arguments after its key: the algorithm's
// positional parameters (before a quantity), its options (after it), and
// whether its replies are in milliseconds. THROTTLE.ALL and QUOTA.LEASE
// take the same, so one list serves all three.
func (t tier) params() (pos, opts []any, ms bool) {
	switch t.Algorithm {
	case policy.GCRA:
		return []any{t.Burst, t.Count, t.Period / 1000}, nil, false
	case policy.FWC, policy.SWL:
		return []any{t.Limit, t.Period}, []any{"MS"}, true
	case policy.SWC:
		if t.Subwindows != 0 {
			return []any{t.Limit, t.Period}, []any{"SUBWINDOWS", t.Subwindows, "MS"}, true
		}
		return []any{t.Limit, t.Period}, []any{"MS"}, true
	default: // tb, lb
		return []any{t.Burst, t.Count, t.Period}, []any{"MS"}, true
	}
}

// command is the name of a tier's own command.
func (t tier) command() string {
	if t.Algorithm == policy.GCRA {
		return "CL.THROTTLE"
	}
	return strings.ToUpper(t.Algorithm) + ".THROTTLE"
}

// decideRemote asks the store for one decision: the tier's own command for
// one tier, THROTTLE.ALL for several (all or none charged).
func decideRemote(ctx context.Context, rdb redis.UniversalClient, ts []tier, key string, n int64) (Result, error) {
	if len(ts) == 1 {
		t := ts[0]
		pos, opts, ms := t.params()
		args := append(append(append([]any{t.command(), key}, pos...), n), opts...)
		v, err := rdb.Do(ctx, args...).Slice()
		if err != nil {
			return Result{}, err
		}
		st, delay, err := tierReply(t, v, ms)
		if err != nil {
			return Result{}, err
		}
		return combine([]TierState{st}, delay), nil
	}
	args := []any{"THROTTLE.ALL", "QUANTITY", n}
	for i, t := range ts {
		pos, opts, _ := t.params()
		args = append(append(append(args, "LIMIT", t.Algorithm, tierKey(key, i, len(ts))), pos...), opts...)
	}
	v, err := rdb.Do(ctx, args...).Slice()
	if err != nil {
		return Result{}, err
	}
	if len(v) != len(ts)+1 {
		return Result{}, fmt.Errorf("client: THROTTLE.ALL answered %d elements for %d tiers", len(v), len(ts))
	}
	states := make([]TierState, len(ts))
	var delay time.Duration
	for i, t := range ts {
		sub, ok := v[i+1].([]any)
		if !ok {
			return Result{}, fmt.Errorf("client: THROTTLE.ALL answered %v for tier %d", v[i+1], i+1)
		}
		_, _, ms := t.params()
		var d time.Duration
		if states[i], d, err = tierReply(t, sub, ms); err != nil {
			return Result{}, err
		}
		delay = max(delay, d)
	}
	return combine(states, delay), nil
}

// tierReply reads one command's reply, [limited, limit, remaining,
// retry_after, reset_after] (and lb's delay).
func tierReply(t tier, v []any, ms bool) (st TierState, delay time.Duration, err error) {
	if len(v) < 5 {
		return st, 0, fmt.Errorf("client: %s answered %v", t.command(), v)
	}
	var f [6]int64
	for i := range v {
		if i == len(f) {
			break
		}
		x, ok := v[i].(int64)
		if !ok {
			return st, 0, fmt.Errorf("client: %s answered %v", t.command(), v)
		}
		f[i] = x
	}
	unit := time.Second
	if ms {
		unit = time.Millisecond
	}
	dur := func(x int64) time.Duration { return toDur(x, unit) }
	st = TierState{Algorithm: t.Algorithm, Limited: f[0] != 0, Limit: f[1], Remaining: f[2], RetryAfter: dur(f[3]), ResetAfter: dur(f[4]), Window: t.window}
	return st, dur(f[5]), nil
}

// combine makes the Result of the tiers' states. A request passes when no
// tier refused it; then the tier with the least remaining decides. When
// refused, the refusing tier with the longest wait decides (one that never
// fits, RetryAfter -1, before all).
func combine(states []TierState, delay time.Duration) Result {
	allowed := !slices.ContainsFunc(states, func(s TierState) bool { return s.Limited })
	d := -1
	for i, s := range states {
		switch {
		case d < 0 && (allowed || s.Limited):
			d = i
		case allowed && s.Remaining < states[d].Remaining:
			d = i
		case !allowed && s.Limited && longer(s.RetryAfter, states[d].RetryAfter):
			d = i
		}
	}
	s := states[d]
	r := Result{Allowed: allowed, Limit: s.Limit, Remaining: s.Remaining, RetryAfter: s.RetryAfter,
		ResetAfter: s.ResetAfter, Tiers: states, Tier: d}
	if allowed {
		r.RetryAfter, r.Delay = -1, delay
	}
	return r
}

// longer reports whether wait a is longer than b, -1 (never) being the
// longest.
func longer(a, b time.Duration) bool { return b != -1 && (a == -1 || a > b) }
