package mstate

import (
	"errors"
	"math"
	"strconv"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// Kind names the algorithm whose state an encoding holds: its second byte.
type Kind uint8

// The algorithms. 0 is not a Kind.
const (
	GCRA Kind = iota + 1 // CL.THROTTLE: debt log
	FWC                  // fixed window counter: per-origin slots
	SWL                  // sliding window log: per-origin entries
	SWC                  // sliding window counter: per-origin slots
	TB                   // token bucket: debt log
	LB                   // leaky bucket as a queue: debt log
)

// String returns the command prefix: "cl", "fwc", "swl", "swc", "tb" or "lb".
func (k Kind) String() string {
	switch k {
	case GCRA:
		return "cl"
	case FWC:
		return "fwc"
	case SWL:
		return "swl"
	case SWC:
		return "swc"
	case TB:
		return "tb"
	case LB:
		return "lb"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ErrSkew reports a negative maximum clock skew.
var ErrSkew = errors.New("mstate: negative clock skew")

// A Limiter is one algorithm with validated parameters, deciding on
// mergeable states. The implementations are small immutable values, safe for
// concurrent use.
type Limiter interface {
	// Decide decides qty units (0 peeks) at now for the writer self, as
	// engines.Apply does on a single node: res is the reply; when write is
	// true, next is the state to store (a new slice; state is not modified)
	// and fullAt the instant from which it is equivalent to no state. A
	// limited request or a peek writes nothing, and next is state.
	//
	// now earlier than self's newest stamp in state is taken as that stamp;
	// another origin's stamp never moves the decision time (see the package
	// doc). On error nothing is written.
	Decide(state []byte, self Origin, now, qty int64) (res engines.Result, next []byte, fullAt int64, write bool, err error)

	// FullAt returns the instant from which state, merged or not, decides as
	// no state under these parameters: when the key may expire. A missing
	// state is full from MinInt64.
	FullAt(state []byte) (int64, error)

	// Kind says which algorithm this is.
	Kind() Kind
}

// New returns the mergeable form of an engine from package engines. maxSkew
// (ns, >= 0) is the largest clock difference the mesh tolerates between its
// nodes (--crdt-max-skew): the window engines keep a part of a key that long
// past the window, for the nodes whose clocks lag. TB and LB ignore it.
func New(l engines.Limiter, maxSkew int64) (Limiter, error) {
	if maxSkew < 0 {
		return nil, ErrSkew
	}
	p := engines.ParamsOf(l)
	switch l.Kind() {
	case engines.TB, engines.LB:
		k := TB
		if l.Kind() == engines.LB {
			k = LB
		}
		return debtLimiter{kind: k, eng: l, drain: drain{unit: p.Unit, rate: p.Rate}}, nil
	case engines.FWC:
		// A slot holds the counts of its newest window and the one before,
		// for readers still in it; a slot is dead one window after its
		// newest stamp.
		return slotLimiter{kind: FWC, eng: l, read: 1, future: false, span: p.Window, skew: maxSkew}, nil
	case engines.SWC:
		// n counters and one more for readers a sub-window behind; a slot's
		// newest counter weighs 0 once it is m+1 sub-windows old, at most
		// two windows after its stamp.
		span := p.Window
		if span <= math.MaxInt64/2 {
			span *= 2
		}
		return slotLimiter{kind: SWC, eng: l, read: int(p.Subwindows), future: true, span: span, skew: maxSkew}, nil
	case engines.SWL:
		return swlLimiter{limit: p.Limit, window: p.Window, skew: maxSkew}, nil
	}
	return nil, engines.ErrWrongKind
}

// NewGCRA returns the mergeable CL.THROTTLE (redis-cell GCRA) of p. Bad
// parameters are gcra's errors (see gcra.Params.Validate).
func NewGCRA(p gcra.Params) (Limiter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return debtLimiter{kind: GCRA, gcra: p, drain: nsDrain}, nil
}

// KindOf reports which algorithm wrote state, from its first two bytes. It
// checks only those bytes; Merge, Fold and Decide validate the rest.
func KindOf(state []byte) (Kind, error) {
	if len(state) < headerLen || state[0] != version || Kind(state[1]) < GCRA || Kind(state[1]) > LB {
		return 0, engines.ErrCorruptState
	}
	return Kind(state[1]), nil
}

// Merge returns the join of two states of one key: commutative, associative
// and idempotent on the encoded bytes, so replicas that have merged the same
// states hold the same bytes whatever the order, grouping or repetition of
// the merges. nil or empty is the empty state. States of different kinds are
// engines.ErrWrongKind, a malformed one engines.ErrCorruptState. The result
// is a new slice.
func Merge(a, b []byte) ([]byte, error) {
	k, err := kindOfPair(a, b)
	if err != nil || k == 0 {
		return nil, err
	}
	switch k {
	case GCRA, TB, LB:
		x, err := decodeDebt(a, k)
		if err != nil {
			return nil, err
		}
		y, err := decodeDebt(b, k)
		if err != nil {
			return nil, err
		}
		m := mergeDebt(x, y)
		return m.encode()
	case SWL:
		x, err := decodeSWL(a)
		if err != nil {
			return nil, err
		}
		y, err := decodeSWL(b)
		if err != nil {
			return nil, err
		}
		m := mergeSWL(x, y)
		return m.encode()
	}
	x, err := decodeSlots(a, k)
	if err != nil {
		return nil, err
	}
	y, err := decodeSlots(b, k)
	if err != nil {
		return nil, err
	}
	m := mergeSlots(x, y)
	return m.encode(), nil
}

// kindOfPair returns the kind of two states to merge: 0 when both are empty.
func kindOfPair(a, b []byte) (Kind, error) {
	var k Kind
	for _, s := range [2][]byte{a, b} {
		if len(s) == 0 {
			continue
		}
		got, err := KindOf(s)
		switch {
		case err != nil:
			return 0, err
		case k != 0 && got != k:
			return 0, engines.ErrWrongKind
		}
		k = got
	}
	return k, nil
}

// Fold compacts a debt log (GCRA, TB, LB) whose holder knows every event
// stamped before complete: those events are folded into its base, exactly.
// complete is the completeness bound of the transport (the least watermark
// of the mesh); folding past it loses the events that arrive later, so never
// fold past it. The window kinds need no fold (Decide retires what no node
// counts any more): their state is returned validated and unchanged. The
// result is a new slice unless it is state unchanged.
func Fold(state []byte, complete int64) ([]byte, error) {
	if len(state) == 0 {
		return state, nil
	}
	k, err := KindOf(state)
	if err != nil {
		return nil, err
	}
	switch k {
	case GCRA, TB, LB:
		s, err := decodeDebt(state, k)
		if err != nil {
			return nil, err
		}
		switch moved, err := s.fold(complete); {
		case err != nil:
			return nil, err
		case !moved:
			return state, nil
		}
		return s.encode()
	case SWL:
		_, err = decodeSWL(state)
	default:
		_, err = decodeSlots(state, k)
	}
	if err != nil {
		return nil, err
	}
	return state, nil
}
