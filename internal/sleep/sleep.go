// Package sleep is the context-aware wait that the client packages and the
// benchmarks share: the limiter's wait for a retry_after, the retry
// strategies' real clock, the HTTP middleware's hold of a leaky bucket's
// delay, bench/retry's arrivals.
package sleep

import (
	"context"
	"time"
)

// For waits d or until ctx ends, and returns ctx's error then. A d of zero
// or less does not wait; it still returns ctx's error if ctx has ended, so
// a caller looping on For stops when its context does.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
