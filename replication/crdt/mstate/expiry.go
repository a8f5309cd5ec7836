package mstate

import "math"

// What a node needs to keep merged states without the parameters of the
// calls that wrote them: a node merging a peer's state has no call in hand.

// ExpiryBound returns, for a debt log (GCRA, TB, LB) holding events, the
// instant its debt is repaid if it keeps draining at its newest event's rate
// after that event: when the key decides as no state, for calls with the
// parameters that wrote it. Merging two states can make that later than
// either's own (their debts add up), so a node that merges must take this
// bound, not only the expiries of the states it joined. It is MinInt64 for
// a quiet log (no events: its expiry is that of whichever state's base won
// the join) and for the window kinds, whose expiry is the latest of their
// parts' (a part's lifetime does not depend on the others).
func ExpiryBound(state []byte) (int64, error) {
	if len(state) == 0 {
		return math.MinInt64, nil
	}
	k, err := KindOf(state)
	if err != nil || (k != GCRA && k != TB && k != LB) {
		return math.MinInt64, err
	}
	s, err := decodeDebt(state, k)
	if err != nil || len(s.events) == 0 {
		return math.MinInt64, err
	}
	last := s.events[len(s.events)-1]
	at, d, _, err := s.replay(s.events, last.t)
	if err != nil {
		return 0, err
	}
	// d units drain at rate units per ns.
	return add(at, d/last.d.rate+min(d%last.d.rate, 1))
}

// Unfolded returns the newest event time of a debt log that holds events
// after its cut, and false for a quiet log or any other kind: a node folds
// such a state once its completeness bound has passed that time (Fold), so
// that nodes which know the same events end with the same bytes.
func Unfolded(state []byte) (newest int64, ok bool) {
	k, err := KindOf(state)
	if err != nil || (k != GCRA && k != TB && k != LB) {
		return 0, false
	}
	s, err := decodeDebt(state, k)
	if err != nil || len(s.events) == 0 {
		return 0, false
	}
	return s.events[len(s.events)-1].t, true
}
