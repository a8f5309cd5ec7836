package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/policy"
)

// leases is Lease mode: per key, a batch of units leased from the store
// with QUOTA.LEASE (eager: charged at the grant; lazy: charged what it
// used at its return), sized by Config.Share, spent locally, and the
// next batch leased in the background when the current one runs low, so
// that a request waits for the store only when there is no batch at all
// (the key's first request, or after the store refused). A spent or
// expired batch is ended with QUOTA.RETURN of what was used: the store
// credits the rest back (eager) or charges what was used (lazy).
type leases struct {
	rdb       redis.UniversalClient
	t         tier
	want      int64
	ttl       time.Duration
	refreshAt int64 // 0: half of each grant
	opts      []any // QUOTA.LEASE's options after want: HOLDER, TTL, SHARE, LAZY
	lazy      bool
	now       func() time.Time

	mu     sync.Mutex
	keys   map[string]*leaseKey // mu
	closed bool                 // mu
	wg     sync.WaitGroup       // background leases and returns

	waits int // times the request path waited for a lease; mu (tests read it)
	calls int // decisions since the last sweep; mu
}

// leaseKey is one key's batches.
type leaseKey struct {
	cur, next  *batch
	inflight   chan struct{} // closed when the lease in flight ends; nil when none
	emptyUntil time.Time     // the store refused: refuse locally until then
	limit      int64         // from the last grant
	remaining  int64         // the store's remaining after the last grant
	resetAt    time.Time
}

// batch is one lease.
type batch struct {
	id            string
	granted, used int64
	expires       time.Time // locally: a margin before the store's TTL
	settled       bool      // lazy: reported as spent in full already; nothing to return
}

func (b *batch) left() int64 { return b.granted - b.used }

func newLeases(cfg Config, ts []tier) (*leases, error) {
	if len(ts) != 1 {
		return nil, errors.New("client: lease mode takes one tier (a lease is of one limit)")
	}
	if cfg.BatchSize <= 0 {
		return nil, errors.New("client: lease mode needs a positive BatchSize")
	}
	ttl := cfg.LeaseTTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	if ttl < time.Millisecond || ttl > 24*time.Hour {
		return nil, fmt.Errorf("client: LeaseTTL %v is not between 1 ms and a day", ttl)
	}
	holder := cfg.Holder
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if cfg.RefreshAt < 0 {
		return nil, errors.New("client: RefreshAt is negative")
	}
	opts := []any{"HOLDER", holder, "TTL", ttl.Milliseconds()}
	switch {
	case cfg.Share == ShareDynamic:
		opts = append(opts, "SHARE", "DYNAMIC")
	case cfg.Share >= 1 && cfg.Share <= 100:
		opts = append(opts, "SHARE", cfg.Share)
	case cfg.Share != 0:
		return nil, fmt.Errorf("client: Share %d is not a percentage (1..100) nor ShareDynamic", cfg.Share)
	}
	if cfg.Lazy {
		if ts[0].Algorithm == policy.SWL {
			return nil, errors.New("client: lazy leases are not for swl (its log cannot hold units past its limit)")
		}
		opts = append(opts, "LAZY")
	}
	return &leases{rdb: cfg.Client, t: ts[0], want: cfg.BatchSize, ttl: ttl, refreshAt: cfg.RefreshAt,
		opts: opts, lazy: cfg.Lazy, now: cfg.Now, keys: map[string]*leaseKey{}}, nil
}

// decide admits n units from key's batch. It waits for the store only when
// no batch has them: then it leases one (or waits for the lease already in
// flight).
func (ls *leases) decide(ctx context.Context, key string, n int64) (Result, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return Result{}, errors.New("client: the limiter is closed")
	}
	if ls.calls++; ls.calls >= sweepEvery {
		ls.sweep(ls.now())
	}
	k := ls.keys[key]
	if k == nil {
		k = &leaseKey{}
		ls.keys[key] = k
	}
	for {
		now := ls.now()
		if k.cur != nil && !now.Before(k.cur.expires) {
			ls.end(k.cur)
			k.cur = nil
		}
		if k.cur != nil && k.cur.left() >= n {
			k.cur.used += n
			if k.cur.left() <= ls.refreshPoint(k.cur) && k.next == nil && k.inflight == nil && !now.Before(k.emptyUntil) {
				ls.leaseAsync(key, k)
			}
			return ls.result(k, now, true, -1), nil
		}
		if k.next != nil { // the current batch cannot take n: move on
			if k.cur != nil {
				ls.end(k.cur)
			}
			k.cur, k.next = k.next, nil
			continue
		}
		if now.Before(k.emptyUntil) {
			return ls.result(k, now, false, k.emptyUntil.Sub(now)), nil
		}
		ls.waits++
		if k.inflight != nil { // wait for the lease already asked for
			ch := k.inflight
			ls.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				ls.mu.Lock()
				return Result{}, ctx.Err()
			}
			ls.mu.Lock()
			continue
		}
		k.inflight = make(chan struct{})
		b, err := ls.lease(ctx, key, k, max(ls.want, n), nil)
		if err != nil {
			return Result{}, err
		}
		if b == nil {
			continue // refused: emptyUntil is set
		}
		if b.granted < n { // what remains cannot take n now
			ls.end(b)
			return ls.result(k, now, false, max(k.resetAt.Sub(now), time.Millisecond)), nil
		}
		if k.cur != nil {
			ls.end(k.cur)
		}
		k.cur = b
	}
}

// refreshPoint is how few units left in b start the lease of the next
// batch: Config.RefreshAt, or half of b's grant.
func (ls *leases) refreshPoint(b *batch) int64 {
	if ls.refreshAt > 0 {
		return ls.refreshAt
	}
	return (b.granted + 1) / 2
}

// sweepEvery is how many decisions pass between sweeps of idle keys.
const sweepEvery = 1024

// sweep ends the batches that expired and forgets the keys left with
// nothing (no batch, no lease in flight, no refusal in force), so idle
// keys cost no memory: what the limiter holds is bounded by the keys in
// use within a lease's TTL. ls.mu is held.
func (ls *leases) sweep(now time.Time) {
	ls.calls = 0
	for key, k := range ls.keys {
		for _, b := range []**batch{&k.cur, &k.next} {
			if *b != nil && !now.Before((*b).expires) {
				ls.end(*b)
				*b = nil
			}
		}
		if k.cur == nil && k.next == nil && k.inflight == nil && !now.Before(k.emptyUntil) {
			delete(ls.keys, key)
		}
	}
}

// result is the Result of a decision from k's state: the store's
// remaining at the last grant plus what the eager batches still hold (a
// lazy grant charged nothing: what its batch used comes off instead,
// until it is settled).
func (ls *leases) result(k *leaseKey, now time.Time, allowed bool, retry time.Duration) Result {
	left := k.remaining
	for _, b := range []*batch{k.cur, k.next} {
		switch {
		case b == nil:
		case ls.lazy && !b.settled:
			left -= b.used
		default:
			left += b.left()
		}
	}
	left = max(left, 0)
	st := TierState{Algorithm: ls.t.Algorithm, Limited: !allowed, Limit: k.limit, Remaining: min(left, k.limit),
		RetryAfter: retry, ResetAfter: max(k.resetAt.Sub(now), 0), Window: ls.t.window}
	return combine([]TierState{st}, 0)
}

// leaseAsync leases k's next batch in the background. It marks the lease
// in flight at once, so no other is started before it runs.
//
// A lazy limiter settles the current batch in the same round trip: it
// reports it spent in full (QUOTA.RETURN id granted) just before asking
// for the next, so its last units are charged before they are used, and
// the store sizes the next grant knowing them. So an instance has at most
// one batch out that the store has not charged, which is what keeps lazy
// leases within instances x BatchSize over the limit (with the next batch
// leased while the current one was still uncharged, it would be twice
// that). The price: the settled units a key leaves unused stay charged.
func (ls *leases) leaseAsync(key string, k *leaseKey) {
	k.inflight = make(chan struct{})
	var settle *batch
	if ls.lazy {
		settle = k.cur
		settle.settled = true
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ls.ttl)
		defer cancel()
		ls.mu.Lock()
		defer ls.mu.Unlock()
		b, err := ls.lease(ctx, key, k, ls.want, settle)
		switch {
		case err != nil || b == nil: // left to the request path
		case ls.closed:
			ls.end(b)
		default:
			k.next = b
		}
	}()
}

// lease asks the store for up to want units of key, with ls.mu held on
// entry and exit (released during the call). The caller has set
// k.inflight, so that no other lease of the key is asked for meanwhile;
// lease closes it when done. A refusal (nothing granted) sets
// k.emptyUntil and returns no batch. A settle batch (lazy) is returned as
// spent in full in the same pipeline, before the lease.
func (ls *leases) lease(ctx context.Context, key string, k *leaseKey, want int64, settle *batch) (*batch, error) {
	defer func() { close(k.inflight); k.inflight = nil }()
	pos, opts, _ := ls.t.params()
	args := append(append(append([]any{"QUOTA.LEASE", key, strings.ToUpper(ls.t.Algorithm)}, pos...), want), opts...)
	args = append(args, ls.opts...)
	ls.mu.Unlock()
	start := ls.now()
	pipe := ls.rdb.Pipeline()
	if settle != nil {
		pipe.Do(ctx, "QUOTA.RETURN", settle.id, settle.granted) // its error is the lease's concern only
	}
	cmd := pipe.Do(ctx, args...)
	_, _ = pipe.Exec(ctx)
	v, err := cmd.Slice()
	ls.mu.Lock()
	if err != nil {
		return nil, err
	}
	if len(v) != 7 {
		return nil, fmt.Errorf("client: QUOTA.LEASE answered %v", v)
	}
	var f [6]int64
	for i := range f {
		x, ok := v[i+1].(int64)
		if !ok {
			return nil, fmt.Errorf("client: QUOTA.LEASE answered %v", v)
		}
		f[i] = x
	}
	granted, retry, reset, ttl := f[0], f[3], f[4], f[5]
	k.limit, k.remaining = f[1], f[2]
	k.resetAt = start.Add(time.Duration(reset) * time.Millisecond)
	id, _ := v[0].(string)
	if granted == 0 || id == "" {
		k.emptyUntil = start.Add(max(time.Duration(retry)*time.Millisecond, time.Millisecond))
		if retry < 0 { // never fits: refuse until the limit is full again
			k.emptyUntil = k.resetAt
		}
		return nil, nil
	}
	life := time.Duration(ttl) * time.Millisecond
	return &batch{id: id, granted: granted, expires: start.Add(life - life/5)}, nil
}

// end returns b with what it used, in the background: the store credits
// the rest (lazy: charges what it used). A return that fails leaves the
// whole grant charged (the lease counts as spent at its TTL): never over
// the limit.
func (ls *leases) end(b *batch) {
	if b.settled {
		return
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), ls.ttl)
		defer cancel()
		ls.rdb.Do(ctx, "QUOTA.RETURN", b.id, b.used)
	}()
}

// close returns every batch and waits for the returns.
func (ls *leases) close() error {
	ls.mu.Lock()
	if !ls.closed {
		ls.closed = true
		for _, k := range ls.keys {
			for _, b := range []*batch{k.cur, k.next} {
				if b != nil {
					ls.end(b)
				}
			}
			k.cur, k.next = nil, nil
		}
	}
	ls.mu.Unlock()
	ls.wg.Wait()
	return nil
}
