package mstate

import (
	"testing"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

var nodeA, nodeB = Origin{Node: 1}, Origin{Node: 2}

// admit decides qty at now for o and requires it allowed; it returns the
// new state.
func admit(t *testing.T, l Limiter, state []byte, o Origin, now, qty int64) []byte {
	t.Helper()
	res, next, _, write, err := decide(l, state, o, now, qty, Exact)
	if err != nil || res.Limited || !write {
		t.Fatalf("%v admitting %d at t0%+d: got %+v, write %v, %v", o, qty, now-t0, res, write, err)
	}
	return next
}

// expect decides qty at now for o and compares the reply.
func expect(t *testing.T, l Limiter, state []byte, o Origin, now, qty int64, want engines.Result) {
	t.Helper()
	if got, _, _, _, err := decide(l, state, o, now, qty, Exact); err != nil || got != want {
		t.Errorf("%v deciding %d at t0%+d: got %+v, %v; want %+v", o, qty, now-t0, got, err, want)
	}
}

// Two nodes that have not heard of each other each admit a full burst; once
// merged, the key owes both, and nothing passes until the excess is repaid
// (merging the TATs by max would have forgotten one burst).
func TestMulti_DebtAddsUpAndIsRepaid(t *testing.T) {
	g, _ := NewGCRA(gcra.Params{Burst: 4, Interval: s}) // 5 at once, then 1 per s
	a := admit(t, g, nil, nodeA, t0, 5)
	b := admit(t, g, nil, nodeB, t0, 5)
	m := must(Merge(a, b))
	expect(t, g, m, nodeA, t0, 0, engines.Result{Limited: true, Limit: 5, RetryAfter: 5 * s, ResetAfter: 10 * s})
	expect(t, g, m, nodeB, t0+5*s, 1, engines.Result{Limited: true, Limit: 5, RetryAfter: s, ResetAfter: 5 * s})
	expect(t, g, m, nodeB, t0+6*s, 1, engines.Result{Limit: 5, RetryAfter: -1, ResetAfter: 5 * s})
	if full, err := g.FullAt(m); err != nil || full != t0+10*s {
		t.Errorf("FullAt: got t0%+d, %v; want t0+10s", full-t0, err)
	}
}

// A node whose clock runs 3 s ahead stamps its admissions 3 s late. Another
// node counts them in full from the start (as if stamped at its own now) and
// drains them only from their stamp: a fast clock mints nothing.
func TestMulti_FastClockMintsNothing(t *testing.T) {
	g, _ := NewGCRA(gcra.Params{Burst: 4, Interval: s})
	b := admit(t, g, nil, nodeB, t0+3*s, 5)
	full := engines.Result{Limited: true, Limit: 5, RetryAfter: s, ResetAfter: 5 * s}
	expect(t, g, b, nodeA, t0, 1, full)
	expect(t, g, b, nodeA, t0+3*s, 1, full)
	expect(t, g, b, nodeA, t0+8*s, 0, engines.Result{Limit: 5, Remaining: 5, RetryAfter: -1})
}

// A stale now is taken as the deciding node's own newest stamp on the key,
// never as another node's: B's admission stamped later counts as if at A's
// decision time.
func TestMulti_StaleNowIsPerOrigin(t *testing.T) {
	tb := mergeable(mustLimiter(engines.NewTB(10, 1, s)), 0)
	a := admit(t, tb, nil, nodeA, t0+5*s, 1)
	b := admit(t, tb, nil, nodeB, t0+9*s, 1)
	// Decided at t0+5s (A's stamp), with B's token as if spent then too.
	expect(t, tb, must(Merge(a, b)), nodeA, t0+s, 0, engines.Result{Limit: 10, Remaining: 8, RetryAfter: -1, ResetAfter: 2 * s})
}

// An FWC slot keeps its previous window's count for nodes whose clocks are
// still in it, and its own window's count waits for theirs.
func TestMulti_FWCLaggingReader(t *testing.T) {
	fwc := mergeable(mustLimiter(engines.NewFWC(5, 10*s)), s)
	b := admit(t, fwc, nil, nodeB, t0+9*s, 3)
	b = admit(t, fwc, b, nodeB, t0+11*s, 1) // B's clock has reached the next window
	expect(t, fwc, b, nodeA, t0+9500*ms, 0, engines.Result{Limit: 5, Remaining: 2, RetryAfter: -1, ResetAfter: 500 * ms})
	expect(t, fwc, b, nodeA, t0+10*s, 0, engines.Result{Limit: 5, Remaining: 4, RetryAfter: -1, ResetAfter: 10 * s})
}

// SWC counts another node's sub-windows after the decision's as its own.
func TestMulti_SWCFutureCountsNow(t *testing.T) {
	swc := mergeable(mustLimiter(engines.NewSWC(5, 10*s, 3)), s) // sub-windows of 5 s
	b := admit(t, swc, nil, nodeB, t0+5*s, 2)
	res, _, _, _, err := decide(swc, b, nodeA, t0+4*s, 0, Exact)
	if err != nil || res.Remaining != 3 {
		t.Errorf("A a sub-window behind: got %+v, %v; want Remaining 3", res, err)
	}
}

// A node restarted with a new incarnation is a new writer; its old
// incarnation's slot is retired once no node within the skew counts it, and
// merging an old copy does not bring it back.
func TestMulti_RetiredIncarnation(t *testing.T) {
	fwc := mergeable(mustLimiter(engines.NewFWC(5, 10*s)), s)
	old := admit(t, fwc, nil, Origin{Node: 1, Inc: 1}, t0, 4)
	state := admit(t, fwc, old, Origin{Node: 1, Inc: 2}, t0+5*s, 1)
	if s, _ := decodeSlots(state, FWC); len(s.s) != 2 {
		t.Fatalf("within the window: %d slots, want both", len(s.s))
	}
	state = admit(t, fwc, state, Origin{Node: 1, Inc: 2}, t0+25*s, 1) // floor t0+14s
	for _, st := range [][]byte{state, must(Merge(state, old))} {
		if s, _ := decodeSlots(st, FWC); len(s.s) != 1 || s.s[0].o.Inc != 2 {
			t.Errorf("after the window and the skew: slots %+v, want only incarnation 2", s.s)
		}
	}
}
