package retry

import (
	"context"
	"sync"
	"time"

	"github.com/throttleddb/throttled/internal/sleep"
)

// Clock is the time a Client waits on; RealClock is the default. A test or
// an emulator passes its own.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done, and returns ctx's error then.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) Sleep(ctx context.Context, d time.Duration) error { return sleep.For(ctx, d) }

// Client runs a Strategy for one client: one attempt in flight at a time,
// the callers waiting their turn in arrival order (a FIFO, as the study's
// clients buffer their requests), then the strategy's wait. It is safe for
// concurrent use.
type Client struct {
	clock Clock
	// turn is the FIFO: a caller holds its one slot from Acquire to
	// Report. Go queues the goroutines waiting on a channel in order.
	turn chan struct{}

	mu sync.Mutex // guards s
	s  Strategy
}

// NewClient returns a Client running s on clock (RealClock when nil).
func NewClient(s Strategy, clock Clock) *Client {
	if clock == nil {
		clock = RealClock{}
	}
	return &Client{clock: clock, turn: make(chan struct{}, 1), s: s}
}

// Acquire waits for the caller's turn, then until the strategy lets an
// attempt go out, and records it as sent. Every Acquire that returns nil
// must be followed by one Report, which ends the turn. A caller that
// retries after a refusal calls Acquire again and queues behind the others
// (Do keeps its turn instead).
func (c *Client) Acquire(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.wait(ctx); err != nil {
		<-c.turn
		return err
	}
	return nil
}

// Report records the outcome of the attempt Acquire let out and ends the
// caller's turn.
func (c *Client) Report(o Outcome) {
	c.done(o)
	<-c.turn
}

// Do runs attempt under the strategy, keeping the caller's turn across its
// retries, until an attempt is not limited, attempts have been made
// (0: no limit), attempt fails, or ctx ends. It returns the last outcome.
func (c *Client) Do(ctx context.Context, attempts int, attempt func() (Outcome, error)) (Outcome, error) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
	defer func() { <-c.turn }()
	for n := 1; ; n++ {
		if err := c.wait(ctx); err != nil {
			return Outcome{}, err
		}
		o, err := attempt()
		if err != nil {
			// Nothing was learnt of the limit: the strategy is not told.
			return o, err
		}
		c.done(o)
		if !o.Limited || n == attempts {
			return o, nil
		}
	}
}

// wait sleeps until the strategy says 0, then records the attempt as sent.
func (c *Client) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		now := c.clock.Now()
		d := c.s.Wait(now)
		if d <= 0 {
			c.s.Sent(now)
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		if err := c.clock.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

func (c *Client) done(o Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Done(c.clock.Now(), o)
}
