// Package clock is the server's single source of time.
//
// The server reads the clock once per command, at the edge, and passes that
// instant down as Unix nanoseconds; nothing below the edge reads time itself.
// Started with --debug-clock the server uses a Manual clock that stands still
// until DEBUG CLOCK moves it, so tests can replay exact timelines over a socket.
package clock

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// ErrBackwards is returned when a manual clock is asked to move backwards by
// Advance. Set may move it anywhere: tests use it to model clock steps.
var ErrBackwards = errors.New("clock: cannot advance by a negative duration")

// ErrOverflow is returned when advancing would move the clock past the largest
// representable instant.
var ErrOverflow = errors.New("clock: advance overflows")

// Clock tells the current time as Unix nanoseconds.
type Clock interface {
	Now() int64
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now() as Unix nanoseconds.
func (Real) Now() int64 { return time.Now().UnixNano() }

// Manual is a clock that moves only when told to. It is safe for concurrent use.
type Manual struct {
	ns atomic.Int64
}

// NewManual returns a manual clock frozen at start (Unix nanoseconds).
func NewManual(start int64) *Manual {
	m := &Manual{}
	m.ns.Store(start)
	return m
}

// Now returns the frozen time.
func (m *Manual) Now() int64 { return m.ns.Load() }

// Set moves the clock to t (Unix nanoseconds).
func (m *Manual) Set(t int64) { m.ns.Store(t) }

// Advance moves the clock forward by d nanoseconds and returns the new time.
func (m *Manual) Advance(d int64) (int64, error) {
	if d < 0 {
		return m.Now(), ErrBackwards
	}
	for {
		old := m.ns.Load()
		if old > math.MaxInt64-d {
			return old, ErrOverflow
		}
		if m.ns.CompareAndSwap(old, old+d) {
			return old + d, nil
		}
	}
}
