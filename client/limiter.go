package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/sleep"
	"github.com/throttleddb/throttled/policy"
)

// Mode is how a Limiter reaches its decisions.
type Mode int

const (
	// PerRequest sends one decision command per request: exact, one round
	// trip each.
	PerRequest Mode = iota
	// TwoLayer decides from local counters synced with INCRBY once per
	// SyncInterval: no round trip on the request path, bounded
	// over-admission. Fixed-window (fwc) tiers only.
	TwoLayer
	// Lease spends batches leased with QUOTA.LEASE (charged at the grant)
	// and returns what is left with QUOTA.RETURN; the next batch is leased
	// before the current one runs out. Exact (eager leases; see
	// Config.Lazy), one store call per batch. One tier.
	Lease
)

// FailMode is what a decision does when the store gives none.
type FailMode int

const (
	// FailOpen admits through the bounded local fallback limiter.
	FailOpen FailMode = iota
	// FailClosed refuses.
	FailClosed
)

// Config configures a Limiter.
type Config struct {
	// Client is the connection pool to throttled (a *redis.Client, a
	// *redis.Ring...). The Limiter does not close it.
	Client redis.UniversalClient
	// Tiers are the limits, in the policy package's terms (times in ms). A
	// request passes when every tier allows it and is charged on all or
	// none. With one tier the store key is the caller's key; with several,
	// tier i (1-based) uses key + ":" + i.
	Tiers []policy.Tier
	// Mode is PerRequest (the default) or TwoLayer.
	Mode Mode
	// SyncInterval is how often a TwoLayer limiter syncs its counters; 0:
	// only when Sync is called (tests, or a caller with its own ticker).
	SyncInterval time.Duration
	// BatchSize is the units a Lease limiter asks for per lease (the store
	// grants at most what remains); LeaseTTL how long a lease lives
	// (default 10 s; a batch is not used past 4/5 of it); Holder names this
	// instance to the store (default host:pid); RefreshAt is how few units
	// left in a batch start the lease of the next (default half of the
	// batch's grant).
	BatchSize int64
	LeaseTTL  time.Duration
	Holder    string
	RefreshAt int64
	// Share sizes a Lease limiter's grants (QUOTA.LEASE's SHARE): 0 asks
	// for BatchSize; 1..100 for at most that percentage of what the limit
	// has left (the study's static share, e.g. 50); ShareDynamic for twice
	// what this holder used per lease lately (half of what is left before
	// it has a history). The grant is never more than BatchSize nor than
	// what remains.
	Share int
	// Lazy makes a Lease limiter's leases lazy (QUOTA.LEASE's LAZY): a
	// grant charges nothing, and the store charges what the batch used
	// when it is returned. Over the limit by at most instances x
	// BatchSize per window, in exchange for never refusing early while
	// batches are out. Not for swl tiers.
	Lazy bool
	// Fail is the FailMode; FailOpen by default.
	Fail FailMode
	// Fallback are the fallback limiter's tiers (fwc, swl, swc, tb or lb),
	// used per key by this process alone when the store gives no decision
	// and Fail is FailOpen. Default: Tiers, with a cl tier as the token
	// bucket it is equivalent to. To keep the total across N instances at
	// the limit, give each instance 1/N of it.
	Fallback []policy.Tier
	// FallbackKeys bounds the keys the fallback limiter holds (default
	// 10,000): when it is full and no key in it has expired, a request for
	// a new key is refused.
	FallbackKeys int
	// Now is the clock of the local decisions (two-layer windows, the
	// fallback limiter); time.Now by default.
	Now func() time.Time
}

// ShareDynamic is Config.Share for a grant sized from the holder's recent
// use (QUOTA.LEASE ... SHARE DYNAMIC).
const ShareDynamic = -1

// Result is one decision: the deciding tier's state after it (when
// refused, the refusing tier with the longest RetryAfter; when allowed, the
// tier with the least remaining).
type Result struct {
	Allowed    bool
	Limit      int64         // the deciding tier's limit
	Remaining  int64         // 1-unit requests it would still admit now
	RetryAfter time.Duration // when refused: until a retry could pass; -1 when it never fits (or allowed)
	ResetAfter time.Duration // until the deciding tier is full again
	Delay      time.Duration // lb: how long to hold an admitted request before forwarding it
	// Tiers are every tier's state, in the order of Config.Tiers; Tier is
	// the deciding one's index in it.
	Tiers []TierState
	Tier  int
	// Fallback: the store gave no decision; Fail decided (and, failing
	// open, the fallback limiter).
	Fallback bool
}

// TierState is one tier's state after a decision.
type TierState struct {
	Algorithm  string
	Limited    bool // this tier refused the request
	Limit      int64
	Remaining  int64
	RetryAfter time.Duration // -1 when the tier allowed
	ResetAfter time.Duration
	Window     time.Duration // the window, or the time to refill a bucket: the RateLimit-Policy w
}

// ErrNeverFits is returned by Wait for a request larger than a tier's
// limit, which no wait can admit.
var ErrNeverFits = errors.New("client: the request exceeds the limit and can never pass")

// A Limiter decides requests per key against throttled. It is safe for
// concurrent use.
type Limiter struct {
	cfg      Config
	tiers    []tier
	fallback *fallback
	local    *twoLayer // TwoLayer only
	leases   *leases   // Lease only
}

// New checks cfg and returns its Limiter. A TwoLayer limiter with a
// SyncInterval runs a goroutine until Close.
func New(cfg Config) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, errors.New("client: Config.Client is nil")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ts, err := buildTiers(cfg.Tiers)
	if err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, tiers: ts}
	if l.fallback, err = newFallback(cfg.Tiers, cfg.Fallback, cfg.FallbackKeys); err != nil {
		return nil, err
	}
	switch cfg.Mode {
	case PerRequest:
	case TwoLayer:
		if l.local, err = newTwoLayer(cfg, ts); err != nil {
			return nil, err
		}
	case Lease:
		if l.leases, err = newLeases(cfg, ts); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("client: unknown mode %d", cfg.Mode)
	}
	return l, nil
}

// Close stops a TwoLayer limiter's sync goroutine and sends what it
// admitted since its last sync; a Lease limiter returns its batches. It
// does not close Config.Client.
func (l *Limiter) Close() error {
	switch {
	case l.local != nil:
		return l.local.close()
	case l.leases != nil:
		return l.leases.close()
	}
	return nil
}

// Sync sends a TwoLayer limiter's counts now and learns the global totals
// (a no-op in PerRequest mode).
func (l *Limiter) Sync(ctx context.Context) error {
	if l.local == nil {
		return nil
	}
	return l.local.sync(ctx)
}

// Decide decides a request of n units for key (n = 0 peeks in PerRequest
// mode). When the store gives no decision, the Result is Fail's (with
// Fallback set) and the error says why.
func (l *Limiter) Decide(ctx context.Context, key string, n int64) (Result, error) {
	if n < 0 {
		return Result{}, errors.New("client: negative quantity")
	}
	var (
		r   Result
		err error
	)
	switch {
	case l.local != nil:
		r, err = l.local.decide(key, n)
	case l.leases != nil:
		r, err = l.leases.decide(ctx, key, n)
	default:
		r, err = decideRemote(ctx, l.cfg.Client, l.tiers, key, n)
	}
	if err != nil {
		return failed(l.cfg.Fail, l.fallback, key, n, l.cfg.Now(), err)
	}
	return r, nil
}

// Allow reports whether one unit for key may pass now, as Decide decides.
func (l *Limiter) Allow(ctx context.Context, key string) bool {
	r, _ := l.Decide(ctx, key, 1)
	return r.Allowed
}

// A Reservation is an admitted (or refused) request and how long to hold
// it before acting, as golang.org/x/time/rate's.
type Reservation struct {
	Result
}

// OK reports whether the request was admitted.
func (r Reservation) OK() bool { return r.Allowed }

// Delay is how long to wait before acting on an admitted request (an lb
// tier's queue delay, 0 for the other algorithms); for a refused one, how
// long until a retry could pass (rate.InfDuration's role is played by -1:
// never).
func (r Reservation) Delay() time.Duration {
	if r.Allowed {
		return r.Result.Delay
	}
	return r.RetryAfter
}

// Reserve decides one unit for key and returns it as a Reservation.
func (l *Limiter) Reserve(ctx context.Context, key string) (Reservation, error) {
	return l.ReserveN(ctx, key, 1)
}

// ReserveN decides n units for key and returns them as a Reservation.
func (l *Limiter) ReserveN(ctx context.Context, key string, n int64) (Reservation, error) {
	r, err := l.Decide(ctx, key, n)
	return Reservation{r}, err
}

// Wait blocks until one unit for key passes, or ctx ends.
func (l *Limiter) Wait(ctx context.Context, key string) error { return l.WaitN(ctx, key, 1) }

// WaitN blocks until n units for key pass (and, for an lb tier, their
// delay is over), or ctx ends. Like rate.Limiter.WaitN it returns at once
// with an error when the wait would outlast ctx's deadline, and when the
// request can never pass. A store error with FailClosed is returned.
func (l *Limiter) WaitN(ctx context.Context, key string, n int64) error {
	for {
		r, err := l.Decide(ctx, key, n)
		if !r.Allowed && err != nil {
			return err
		}
		wait := r.Delay
		if !r.Allowed {
			if r.RetryAfter < 0 {
				return ErrNeverFits
			}
			wait = r.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("client: waiting %v would exceed the context's deadline", wait)
		}
		if err := sleep.For(ctx, wait); err != nil {
			return err
		}
		if r.Allowed {
			return nil
		}
	}
}
