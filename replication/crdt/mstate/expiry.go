package mstate

import (
	"bytes"
	"math"

	"github.com/throttleddb/throttled/engines"
)

// What a node needs to keep merged states without the parameters of the
// calls that wrote them: a node merging a peer's state has no call in hand.

// Expiry returns when a debt log (GCRA, TB, LB) decides as no state, for
// calls with the parameters that wrote it, from its bytes alone: the
// instant its debt is repaid if it keeps draining at its newest event's rate
// after that event (for GCRA, its TAT). Every node holding the same state
// then keeps the key until the same instant, and a merge, which can make
// the debt later than either state's (debts add up), gets the right one.
// It is MinInt64 when the bytes do not say: for the window kinds, whose
// expiry is the latest of their parts' (a part's lifetime does not depend
// on the others), and for a quiet TB or LB log (no events: its drain rate
// is not kept; its expiry is that of whichever state's base won the join).
func Expiry(state []byte) (int64, error) {
	m, state, err := unmark(state)
	switch {
	case err != nil:
		return 0, err
	case state == nil && m != NoMark:
		return m, nil // a bare mark: no debt after its reset
	case len(state) == 0:
		return math.MinInt64, nil
	}
	k, err := KindOf(state)
	if err != nil || !k.debt() {
		return math.MinInt64, err
	}
	var buf [stackEvents]event
	s, err := decodeDebt(state, k, buf[:0])
	if err != nil {
		return 0, err
	}
	return s.expiry()
}

// expiry is Expiry of the decoded log.
func (s *debtLog) expiry() (int64, error) {
	switch {
	case len(s.events) == 0 && s.kind == GCRA:
		return add(s.cut, s.base)
	case len(s.events) == 0:
		return math.MinInt64, nil
	}
	last := s.events[len(s.events)-1]
	at, d, _, err := s.replay(s.events, last.t)
	if err != nil {
		return 0, err
	}
	// d units drain at rate units per ns.
	return add(at, d/last.d.rate+min(d%last.d.rate, 1))
}

// Newest returns the stamp of o's newest admission that state holds as its
// own (an event, a slot or an entry of o), MinInt64 when it holds none: a
// string, whose writes are not stamped by origin, or a state whose events
// of o are folded into its base. A node uses it to keep a key that holds
// its own admissions past the key's expiry until every peer has them:
// only the writer folds its own events, and a write always leaves its own
// event in the log.
//
// Every encoding but a string's names an origin that has a part in it by
// its 16 bytes, verbatim: a state without them holds none of o's
// admissions, and is not decoded further (a node holds many keys that only
// others write, and checks each one that expires).
func Newest(state []byte, o Origin) (int64, error) {
	_, state, err := unmark(state)
	if err != nil || len(state) == 0 {
		return math.MinInt64, err
	}
	k, err := KindOf(state)
	var named [16]byte
	if err != nil || k == Str || !bytes.Contains(state, appendOrigin(named[:0], o)) {
		return math.MinInt64, err
	}
	switch k {
	case GCRA, TB, LB:
		var buf [stackEvents]event
		s, err := decodeDebt(state, k, buf[:0])
		return s.newest(o), err
	case SWL:
		s, err := decodeSWL(state)
		return s.newest(o), err
	}
	s, err := decodeSlots(state, k)
	if i, found := s.find(o); found && err == nil {
		return s.s[i].newest, nil
	}
	return math.MinInt64, err
}

// TAT returns the theoretical arrival time a GCRA state stands for: the
// instant its whole debt is repaid, what redis-cell's key holds (GET on a
// CL.THROTTLE key of a mesh node reads it).
func TAT(state []byte) (int64, error) {
	if k, err := KindOf(state); err != nil || k != GCRA {
		return 0, engines.ErrWrongKind
	}
	return Expiry(state)
}

// StrStoreExpiry is when a node's store may drop a string state, in Unix
// ms, 0 for never: grace ns after its TTL, or, for a deleted key, after its
// tombstone's stamp; the node keeps it longer while some node may not have
// seen the tombstone (StrTombstone says which stamp). It depends on the
// state alone, so nodes holding the same state drop it alike. grace should
// cover the mesh's clock skew, so that no node drops what another still
// reads.
func StrStoreExpiry(state []byte, grace int64) (int64, error) {
	s, err := decodeStr(state)
	if err != nil || len(state) == 0 {
		return 0, err
	}
	var at int64
	switch {
	case s.e.ms != 0 && s.e.ms != Persist:
		at = s.e.ms * 1e6
	case !s.exists():
		at = s.r.stamp
	default:
		return 0, nil
	}
	if at > math.MaxInt64-grace {
		return 0, nil
	}
	return max(1, floorMs(at+grace)), nil
}

// floorMs is t in whole Unix ms, rounded down.
func floorMs(t int64) int64 {
	if t < 0 && t%1e6 != 0 {
		return t/1e6 - 1
	}
	return t / 1e6
}
