package engines_test

import (
	"testing"

	"github.com/throttleddb/throttled/engines"
)

const us = 1_000 // ns

// BenchmarkCheckCommit is the per-command cost on one existing key: Check, and
// Commit when allowed, with the clock advancing step per request.
func BenchmarkCheckCommit(b *testing.B) {
	for _, bc := range []struct {
		name string
		l    engines.Limiter
		step int64
	}{
		{"fwc", must(engines.NewFWC(100, s)), ms}, // 1000/s against 100/s
		// 10,000 per minute at 50,000/s: after the first 0.2 s, one request in
		// 300 passes, as each entry leaves the window.
		{"swl", must(engines.NewSWL(10_000, 60*s)), 20 * us},
		{"swl_all_allowed", must(engines.NewSWL(10_000, 60*s)), 6 * ms}, // append and prune every time
		{"swl_100k", must(engines.NewSWL(100_000, 60*s)), 20 * us},      // a log 10x longer costs the same
		{"swc", must(engines.NewSWC(100, s, 2)), ms},
		{"swc_n60", must(engines.NewSWC(100, s, 60)), ms},
		{"tb", must(engines.NewTB(100, 100, s)), ms},
		{"lb", must(engines.NewLB(100, 100, s)), ms},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var state []byte
			now := int64(t0)
			for b.Loop() {
				now += bc.step
				res, err := bc.l.Check(state, now, 1)
				if err != nil {
					b.Fatal(err)
				}
				if !res.Limited {
					if state, _, err = bc.l.Commit(state, now, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkNewCheckCommit adds building the Limiter from the command's
// arguments, as the command layer does per call: the constructor boxes its
// parameters in the Limiter interface.
func BenchmarkNewCheckCommit(b *testing.B) {
	b.ReportAllocs()
	var state []byte
	now := int64(t0)
	for b.Loop() {
		now += ms
		l, err := engines.NewTB(100, 100, s)
		if err != nil {
			b.Fatal(err)
		}
		res, err := l.Check(state, now, 1)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Limited {
			if state, _, err = l.Commit(state, now, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}
