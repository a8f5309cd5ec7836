package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/policy"
)

// Policies decides requests by the policies held in the store
// (THROTTLE.POLICY, one command per request; see docs/policies.md). It is
// safe for concurrent use.
type Policies struct {
	rdb      redis.UniversalClient
	fail     FailMode
	fallback *fallback
	now      func() time.Time
}

// PoliciesConfig configures Policies.
type PoliciesConfig struct {
	Client redis.UniversalClient
	Fail   FailMode
	// Fallback are the tiers the fallback limiter applies per principal
	// while the store gives no decision and Fail is FailOpen (the store's
	// policies are not known here). Required with FailOpen.
	Fallback     []policy.Tier
	FallbackKeys int
	Now          func() time.Time
}

// NewPolicies checks cfg and returns its Policies.
func NewPolicies(cfg PoliciesConfig) (*Policies, error) {
	if cfg.Client == nil {
		return nil, errors.New("client: PoliciesConfig.Client is nil")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Policies{rdb: cfg.Client, fail: cfg.Fail, now: cfg.Now}
	if cfg.Fail == FailOpen {
		if len(cfg.Fallback) == 0 {
			return nil, errors.New("client: failing open needs fallback tiers for the store's policies")
		}
		var err error
		if p.fallback, err = newFallback(nil, cfg.Fallback, cfg.FallbackKeys); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// A PolicyRequest is what THROTTLE.POLICY decides: the method and target
// (a path, or a plain name), the principal and its tenant, and a cost (0:
// the policy's own).
type PolicyRequest struct {
	Method, Target, Principal, Tenant string
	Cost                              int64
}

// PolicyResult is a decision of the store's policies.
type PolicyResult struct {
	Result
	Policy   string // the deciding policy's id; "" when none applies (the request is allowed)
	Endpoint string // the endpoint the target reached: a template's shape, a name, or "unknown"
	Shadow   bool   // a shadow policy would have refused (the request was allowed)
}

// Decide asks THROTTLE.POLICY. When the store gives no decision, Fail
// decides (the fallback limiter is keyed by tenant and principal) and the
// error says why.
func (p *Policies) Decide(ctx context.Context, req PolicyRequest) (PolicyResult, error) {
	args := []any{"THROTTLE.POLICY", req.Method, req.Target, req.Principal}
	if req.Tenant != "" {
		args = append(args, "TENANT", req.Tenant)
	}
	if req.Cost != 0 {
		args = append(args, "COST", req.Cost)
	}
	v, err := p.rdb.Do(ctx, args...).Slice()
	if err == nil {
		var r PolicyResult
		if r, err = policyReply(v); err == nil {
			return r, nil
		}
	}
	n := max(req.Cost, 1)
	r, err := failed(p.fail, p.fallback, req.Tenant+"\x00"+req.Principal, n, p.now(), err)
	return PolicyResult{Result: r}, err
}

// policyReply reads THROTTLE.POLICY's reply: limited, policy, endpoint,
// tier, limit, remaining, reset_ms, retry_after_ms, shadow, and every tier
// as [algorithm, limit, remaining, reset_ms, retry_after_ms, window_ms].
func policyReply(v []any) (PolicyResult, error) {
	bad := func() (PolicyResult, error) {
		return PolicyResult{}, fmt.Errorf("client: THROTTLE.POLICY answered %v", v)
	}
	if len(v) != 10 {
		return bad()
	}
	var ints [9]int64
	for _, i := range []int{0, 3, 4, 5, 6, 7, 8} {
		x, ok := v[i].(int64)
		if !ok {
			return bad()
		}
		ints[i] = x
	}
	var r PolicyResult
	r.Policy, _ = v[1].(string) // nil: no policy
	r.Endpoint, _ = v[2].(string)
	r.Allowed, r.Shadow = ints[0] == 0, ints[8] != 0
	r.Limit, r.Remaining, r.Tier = ints[4], ints[5], max(int(ints[3])-1, 0)
	r.ResetAfter, r.RetryAfter = msDur(ints[6]), msDur(ints[7])
	tiers, ok := v[9].([]any)
	if !ok {
		return bad()
	}
	for _, t := range tiers {
		f, ok := t.([]any)
		if !ok || len(f) != 6 {
			return bad()
		}
		alg, ok := f[0].(string)
		var n [5]int64
		for i := range n {
			x, isInt := f[i+1].(int64)
			ok = ok && isInt
			n[i] = x
		}
		if !ok {
			return bad()
		}
		r.Tiers = append(r.Tiers, TierState{Algorithm: alg, Limited: n[3] >= 0, Limit: n[0], Remaining: n[1],
			ResetAfter: msDur(n[2]), RetryAfter: msDur(n[3]), Window: msDur(n[4])})
	}
	return r, nil
}

// msDur is a reply's milliseconds as a Duration, -1 staying -1.
func msDur(ms int64) time.Duration { return toDur(ms, time.Millisecond) }

// toDur is x units as a Duration; a negative x (a reply's "never" or
// "allowed") is -1.
func toDur(x int64, unit time.Duration) time.Duration {
	if x < 0 {
		return -1
	}
	return time.Duration(x) * unit
}
