package mstate

import (
	"testing"

	"github.com/throttleddb/throttled/gcra"
)

// What a mesh node pays per key it receives (node.merge) and per
// CL.THROTTLE it decides: the join of a peer's state into none (a key new
// here) and into the sender's previous state, a decision on one hot key's
// log, and a decision.
func BenchmarkGCRA(b *testing.B) {
	g, _ := NewGCRA(gcra.Params{Burst: 15, Interval: 2 * s})
	a := NewOrigin("a", 1)
	_, s1, _, _, _ := decide(g, nil, a, t0, 1, Exact)
	_, s2, _, _, _ := decide(g, s1, a, t0+ms, 1, Exact)
	b.Run("join-new", func(b *testing.B) {
		for b.Loop() {
			if _, err := Join(nil, s2); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("join-older", func(b *testing.B) {
		for b.Loop() {
			if _, err := Join(s1, s2); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decide-busy", func(b *testing.B) {
		// One hot key: its writer's log at the per-key cap, nothing
		// foldable yet.
		busy, _ := NewGCRA(gcra.Params{Burst: 1000, Interval: 50_000})
		_, state := busySamples(b)
		now := int64(t0 + 3*capEvents*100_000)
		for b.Loop() {
			if _, _, _, _, err := decide(busy, state, testOrigin, now, 1, Bounds{Complete: NoBound, Unfolded: NoBound}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decide", func(b *testing.B) {
		for b.Loop() {
			if _, _, _, _, err := decide(g, s2, a, t0+2*ms, 1, Bounds{Complete: t0, Unfolded: Fixed}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
