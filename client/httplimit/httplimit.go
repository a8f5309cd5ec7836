// Package httplimit is a net/http middleware that limits requests with
// throttled through package client.
//
// For each request it finds the identity (a validated API key, by its keyed
// hash; else the client's address, read from Forwarded / X-Forwarded-For
// only when the direct peer is a trusted proxy), then the policy, either
//
//   - locally, from Config.Policies: endpoint templates matched by package
//     policy (the path normalized first: dot segments, repeated slashes,
//     percent-escapes; a path matching no template reaches the "unknown"
//     fallback, never its raw text), each policy a client.Limiter in
//     Config.Mode (per request, two-layer or lease) keyed
//     "<prefix><policy id>:<tenant>:<principal>"; or
//   - in the store, with THROTTLE.POLICY (Config.StorePolicies),
//
// and answers a refused request 429 with Retry-After. Every limited
// response carries x-ratelimit-limit, -remaining and -reset (seconds) and
// the IETF RateLimit-Policy and RateLimit fields. When the store gives no
// decision, Config.Fail decides: FailClosed answers 503, FailOpen limits
// with the bounded local fallback limiter.
package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/internal/sleep"
	"github.com/throttleddb/throttled/policy"
)

// Config configures a Middleware.
type Config struct {
	// Client is the pool to throttled.
	Client redis.UniversalClient

	// Policies are the local policies (endpoint templates and tiers),
	// decided by limiters in Mode (with SyncInterval for TwoLayer,
	// BatchSize, LeaseTTL, Share and Lazy for Lease: see client.Config).
	// Exactly one of Policies and StorePolicies.
	Policies     []policy.Policy
	Mode         client.Mode
	SyncInterval time.Duration
	BatchSize    int64
	LeaseTTL     time.Duration
	Share        int
	Lazy         bool
	// KeyPrefix starts every store key of the local policies; default
	// "httplimit:".
	KeyPrefix string
	// StorePolicies decides with the store's policies (THROTTLE.POLICY).
	StorePolicies bool

	// Fail is what happens when the store gives no decision, with the
	// fallback limiter's tiers (default: each policy's; required with
	// StorePolicies) and key bound, per policy.
	Fail         client.FailMode
	Fallback     []policy.Tier
	FallbackKeys int

	// APIKey reads a request's API key; default: the X-API-Key header.
	APIKey func(*http.Request) string
	// ValidateKey says whether an API key is valid, and its tenant. A
	// request whose key is missing or not valid (or any key, without
	// ValidateKey) is limited by its client address: random keys mint
	// no identities.
	ValidateKey func(r *http.Request, key string) (tenant string, ok bool)
	// Secret keys the hash of API keys (HMAC-SHA256); at least 16 bytes,
	// required with ValidateKey. Keep it secret and the same on every
	// instance.
	Secret []byte
	// TrustedProxies are the proxies whose forwarding headers are
	// believed; a request from any other peer is its own client.
	TrustedProxies []netip.Prefix

	// OnError sees every error of the store (a decision was made anyway,
	// by Fail); nil: none is reported.
	OnError func(*http.Request, error)
}

// Middleware limits requests; see the package doc. It is safe for
// concurrent use.
type Middleware struct {
	cfg      Config
	table    *policy.Table
	limiters map[string]*client.Limiter // by policy id
	store    *client.Policies
}

// New checks cfg and builds the Middleware. Close it to stop two-layer
// limiters (and send their last counts).
func New(cfg Config) (*Middleware, error) {
	if cfg.Client == nil {
		return nil, errors.New("httplimit: Config.Client is nil")
	}
	if cfg.ValidateKey != nil && len(cfg.Secret) < 16 {
		return nil, errors.New("httplimit: ValidateKey needs a Secret of at least 16 bytes to hash keys with")
	}
	if cfg.APIKey == nil {
		cfg.APIKey = func(r *http.Request) string { return r.Header.Get("X-API-Key") }
	}
	if cfg.KeyPrefix == "" {
		cfg.KeyPrefix = "httplimit:"
	}
	m := &Middleware{cfg: cfg}
	if cfg.StorePolicies == (len(cfg.Policies) > 0) {
		return nil, errors.New("httplimit: give either Policies or StorePolicies")
	}
	var err error
	if cfg.StorePolicies {
		m.store, err = client.NewPolicies(client.PoliciesConfig{Client: cfg.Client, Fail: cfg.Fail,
			Fallback: cfg.Fallback, FallbackKeys: cfg.FallbackKeys})
		return m, err
	}
	if m.table, err = policy.New(cfg.Policies); err != nil {
		return nil, err
	}
	m.limiters = map[string]*client.Limiter{}
	for _, p := range m.table.Policies() {
		l, err := client.New(client.Config{Client: cfg.Client, Tiers: p.Tiers, Mode: cfg.Mode,
			SyncInterval: cfg.SyncInterval, BatchSize: cfg.BatchSize, LeaseTTL: cfg.LeaseTTL, Share: cfg.Share, Lazy: cfg.Lazy,
			Fail: cfg.Fail, Fallback: cfg.Fallback, FallbackKeys: cfg.FallbackKeys})
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("httplimit: policy %s: %w", p.ID, err)
		}
		m.limiters[p.ID] = l
	}
	return m, nil
}

// Close stops the limiters' sync goroutines after a last sync.
func (m *Middleware) Close() error {
	var errs []error
	for _, l := range m.limiters {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// Identify is the request's Identity, as the middleware limits it.
func (m *Middleware) Identify(r *http.Request) Identity {
	if key := m.cfg.APIKey(r); key != "" && m.cfg.ValidateKey != nil {
		if tenant, ok := m.cfg.ValidateKey(r, key); ok {
			return Identity{Principal: keyHash(m.cfg.Secret, key), Tenant: tenant}
		}
	}
	a, ok := clientIP(r, m.trusted)
	if !ok { // not an IP peer (a unix socket, a test without RemoteAddr): one bucket for all
		return Identity{Principal: "ip:unknown"}
	}
	return Identity{Principal: ipPrincipal(a)}
}

func (m *Middleware) trusted(a netip.Addr) bool {
	for _, p := range m.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// decision is what the middleware does with a request.
type decision struct {
	client.Result
	name string // the policy's id, for the RateLimit fields; "" when no policy applies
}

func (m *Middleware) decide(r *http.Request) (decision, error) {
	id := m.Identify(r)
	target := r.URL.EscapedPath()
	if m.store != nil {
		pr, err := m.store.Decide(r.Context(), client.PolicyRequest{Method: r.Method, Target: target,
			Principal: id.Principal, Tenant: id.Tenant})
		name := pr.Policy
		if pr.Fallback {
			name = "fallback"
		}
		return decision{pr.Result, name}, err
	}
	_, p := m.table.Decide(policy.Request{Method: r.Method, Target: target, Tenant: id.Tenant})
	if p == nil {
		return decision{}, nil
	}
	key := m.cfg.KeyPrefix + p.ID + ":" + id.Tenant + ":" + id.Principal
	res, err := m.limiters[p.ID].Decide(r.Context(), key, max(p.Cost, 1))
	if p.Shadow && !res.Allowed && !res.Fallback {
		res.Allowed = true // a shadow policy counts, never refuses
	}
	return decision{res, p.ID}, err
}

// Handler limits the requests to next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := m.decide(r)
		if err != nil && m.cfg.OnError != nil {
			m.cfg.OnError(r, err)
		}
		if d.name == "" && !d.Fallback {
			next.ServeHTTP(w, r)
			return
		}
		if d.Fallback && m.cfg.Fail == client.FailClosed {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		setHeaders(w.Header(), d)
		if !d.Allowed {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		if d.Delay > 0 { // an lb tier: hold the request its queue delay
			if sleep.For(r.Context(), d.Delay) != nil {
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// setHeaders writes the rate-limit fields of a decision: the article's
// x-ratelimit-* of the deciding tier, the IETF draft's RateLimit-Policy
// (one item per tier: "name";q=limit;w=window) and RateLimit (the deciding
// tier: "name";r=remaining;t=reset), and Retry-After when refused.
func setHeaders(h http.Header, d decision) {
	if !d.Allowed {
		retry := d.RetryAfter
		if retry < 0 && d.Tier < len(d.Tiers) { // never fits: no sooner than a window
			retry = d.Tiers[d.Tier].Window
		}
		h.Set("Retry-After", strconv.FormatInt(max(seconds(retry), 1), 10))
	}
	if len(d.Tiers) == 0 {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(d.ResetAfter), 10))
	items := make([]string, len(d.Tiers))
	for i, t := range d.Tiers {
		items[i] = fmt.Sprintf("%s;q=%d;w=%d", itemName(d, i), t.Limit, seconds(t.Window))
	}
	h.Set("RateLimit-Policy", strings.Join(items, ", "))
	h.Set("RateLimit", fmt.Sprintf("%s;r=%d;t=%d", itemName(d, d.Tier), d.Remaining, seconds(d.ResetAfter)))
}

// itemName is tier i's name in the RateLimit fields, a quoted string: the
// policy's id, with "-<n>" when it has several tiers.
func itemName(d decision, i int) string {
	if len(d.Tiers) == 1 {
		return strconv.Quote(d.name)
	}
	return strconv.Quote(fmt.Sprintf("%s-%d", d.name, i+1))
}

// seconds is d in whole seconds, rounded up; 0 for a negative d.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
