package mstate

import (
	"cmp"
	"errors"
	"math"
	"slices"

	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/gcra"
)

// Kind names the algorithm whose state an encoding holds: its second byte.
// The engines' kinds keep their numbers from package engines.
type Kind uint8

// The algorithms. 0 is not a Kind.
const (
	FWC  = Kind(engines.FWC) // fixed window counter: per-origin slots
	SWL  = Kind(engines.SWL) // sliding window log: per-origin entries
	SWC  = Kind(engines.SWC) // sliding window counter: per-origin slots
	TB   = Kind(engines.TB)  // token bucket: debt log
	LB   = Kind(engines.LB)  // leaky bucket as a queue: debt log
	GCRA = LB + 1            // CL.THROTTLE: debt log
	Str  = GCRA + 1          // Redis string: register, counters, expiry
)

// String returns the command prefix: "cl", "fwc", "swl", "swc", "tb" or
// "lb"; "string" for Str, what TYPE answers.
func (k Kind) String() string {
	switch k {
	case GCRA:
		return "cl"
	case Str:
		return "string"
	case Marker:
		return "none"
	}
	return engines.Kind(k).String()
}

// NoBound is the completeness bound of a writer that knows none: Decide
// folds nothing.
const NoBound int64 = math.MinInt64

// Bounds are what a writer knows of the mesh when it decides.
type Bounds struct {
	// Complete is the writer's completeness bound (see Fold), NoBound for
	// none: a debt log that Decide writes has its events before it folded
	// first, so a key's log stays short where it is written and no other
	// pass over the keys is needed.
	Complete int64
	// Unfolded is an instant from which no node has folded, or will fold
	// before it receives this write, an event of the writer: the writer may
	// then merge its own events from there on into coarser ones (see
	// coarsen), which bounds a busy key's log. MaxInt64 (Fixed) allows
	// none; a writer alone, whose events nobody else folds, passes
	// NoBound.
	Unfolded int64
}

// Fixed is the Unfolded of a writer that merges none of its events.
const Fixed int64 = math.MaxInt64

// Exact are the bounds of a writer that knows nothing: Decide folds and
// coarsens nothing.
var Exact = Bounds{Complete: NoBound, Unfolded: Fixed}

// ErrSkew reports a negative maximum clock skew.
var ErrSkew = errors.New("mstate: negative clock skew")

// A Limiter is one algorithm with validated parameters, deciding on
// mergeable states. The implementations are small immutable values, safe for
// concurrent use.
type Limiter interface {
	// Decide decides qty units (0 peeks) at now for the writer self, as
	// engines.Apply does on a single node (see Decision). now earlier than
	// self's newest stamp in state is taken as that stamp; another
	// origin's stamp never moves the decision time (see the package doc).
	// On error nothing is written.
	//
	// b says what the writer may fold and coarsen (see Bounds).
	Decide(state []byte, self Origin, now, qty int64, b Bounds) (Decision, error)

	// FullAt returns the instant from which state, merged or not, decides as
	// no state under these parameters: when the key may expire. A missing
	// state is full from MinInt64.
	FullAt(state []byte) (int64, error)

	// Kind says which algorithm this is.
	Kind() Kind
}

// A Decision is what Decide decided.
type Decision struct {
	Res engines.Result // the reply
	// Write says whether there is a state to store: not after a limited
	// request or a peek, whose Next is the state given.
	Write bool
	// Next is the state to store (a new slice; the given state is not
	// modified).
	Next []byte
	// FullAt is the instant from which Next decides as no state under
	// these parameters.
	FullAt int64
	// Expiry is Expiry(Next), from the decoded state: for a debt log the
	// instant its bytes say it is repaid, which every node that merges it
	// derives alike; MinInt64 when they do not say.
	Expiry int64
}

// limiter is every Limiter: Decide and FullAt are the same steps for each
// algorithm, which p supplies on its decoded state.
type limiter struct {
	kind Kind
	p    interface {
		open(state []byte, self Origin) (view, error)
	}
}

// A view is a decoded state under one algorithm's parameters, as seen by the
// writer self.
type view interface {
	// at returns the decision time for now: now, or self's newest stamp
	// when later (and, for a debt log, its cut).
	at(now int64) int64
	// check decides qty at t; GCRA replies from the caller's now.
	check(t, now, qty int64) (engines.Result, error)
	// admit records the admission check allowed, and retires what no node
	// counts any more (a debt log folds its events before b.Complete and
	// coarsens its writer's from b.Unfolded).
	admit(t, qty int64, b Bounds) error
	// fullAt returns the instant from which the state decides as none.
	fullAt() (int64, error)
	// expiry is Expiry of the state.
	expiry() (int64, error)
	encode() ([]byte, error)
}

func (l limiter) Kind() Kind { return l.kind }

func (l limiter) Decide(state []byte, self Origin, now, qty int64, b Bounds) (Decision, error) {
	m, plain, err := unmarkFor(state, l.kind)
	if err != nil {
		return Decision{Next: state, Expiry: math.MinInt64}, err
	}
	d, err := l.decide(plain, self, afterMark(now, m), qty, b)
	if d.Write {
		d.Next = withMark(d.Next, m)
	} else {
		d.Next = state
	}
	return d, err
}

// decide is Decide on an unmarked state.
func (l limiter) decide(state []byte, self Origin, now, qty int64, b Bounds) (Decision, error) {
	none := Decision{Next: state, Expiry: math.MinInt64}
	v, err := l.p.open(state, self)
	if err != nil {
		return none, err
	}
	t := v.at(now)
	d := none
	d.Res, err = v.check(t, now, qty)
	if err != nil || d.Res.Limited || qty == 0 {
		return d, err
	}
	if err = v.admit(t, qty, b); err == nil {
		if d.FullAt, err = v.fullAt(); err == nil {
			d.Next, err = v.encode()
		}
	}
	if err != nil {
		return none, err
	}
	d.Write = true
	if at, err := v.expiry(); err == nil {
		d.Expiry = at // else the node falls back on FullAt, as for a window
	}
	return d, nil
}

func (l limiter) FullAt(state []byte) (int64, error) {
	_, state, err := unmarkFor(state, l.kind)
	if err != nil {
		return 0, err
	}
	if len(state) == 0 {
		return math.MinInt64, nil
	}
	v, err := l.p.open(state, Origin{})
	if err != nil {
		return 0, err
	}
	return v.fullAt()
}

// New returns the mergeable form of an engine from package engines. maxSkew
// (ns, >= 0) is the largest clock difference the mesh tolerates between its
// nodes (--crdt-max-skew): the window engines keep a part of a key that long
// past the window, for the nodes whose clocks lag. TB and LB ignore it.
func New(l engines.Limiter, maxSkew int64) (Limiter, error) {
	if maxSkew < 0 {
		return nil, ErrSkew
	}
	k, p := Kind(l.Kind()), engines.ParamsOf(l)
	switch k {
	case TB, LB:
		return limiter{k, debtParams{kind: k, eng: l, drain: drain{unit: p.Unit, rate: p.Rate}}}, nil
	case FWC:
		// A slot holds the counts of its newest window and the one before,
		// for readers still in it; a slot is dead one window after its
		// newest stamp.
		return limiter{k, slotParams{kind: k, eng: l, read: 1, future: false, span: p.Window, skew: maxSkew}}, nil
	case SWC:
		// n counters and one more for readers a sub-window behind; a slot's
		// newest counter weighs 0 once it is m+1 sub-windows old, at most
		// two windows after its stamp.
		span := p.Window
		if span <= math.MaxInt64/2 {
			span *= 2
		}
		return limiter{k, slotParams{kind: k, eng: l, read: int(p.Subwindows), future: true, span: span, skew: maxSkew}}, nil
	case SWL:
		return limiter{k, swlParams{limit: p.Limit, window: p.Window, skew: maxSkew}}, nil
	}
	return nil, engines.ErrWrongKind
}

// NewGCRA returns the mergeable CL.THROTTLE (redis-cell GCRA) of p. Bad
// parameters are gcra's errors (see gcra.Params.Validate).
func NewGCRA(p gcra.Params) (Limiter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return limiter{GCRA, debtParams{kind: GCRA, gcra: p, drain: nsDrain}}, nil
}

// KindOf reports which algorithm wrote state, from its first two bytes. It
// checks only those bytes; Merge, Fold and Decide validate the rest.
func KindOf(state []byte) (Kind, error) {
	if len(state) >= headerLen {
		switch k := Kind(state[1]); state[0] {
		case version:
			if k >= FWC && k <= Str {
				return k, nil
			}
		case markedVersion: // see reset.go
			if len(state) >= markedLen && ((k >= FWC && k < Str) || k == Marker) {
				return k, nil
			}
		}
	}
	return 0, engines.ErrCorruptState
}

// debt reports whether k's state is a debt log (GCRA, TB, LB).
func (k Kind) debt() bool { return k == GCRA || k == TB || k == LB }

// A decoded state of a window kind or a string. (Debt logs, which every
// command and merge of a busy node decodes, have their own path that keeps
// them off the heap: joinDebt.)
type decoded interface {
	encode() ([]byte, error)
	// join returns the join with another decoded state of the same kind.
	join(decoded) decoded
}

func decode(b []byte, k Kind) (decoded, error) {
	switch k {
	case SWL:
		s, err := decodeSWL(b)
		return &s, err
	case Str:
		s, err := decodeStr(b)
		return &s, err
	}
	s, err := decodeSlots(b, k)
	return &s, err
}

// Merge returns the join of two states of one key: commutative, associative
// and idempotent on the encoded bytes, so replicas that have merged the same
// states hold the same bytes whatever the order, grouping or repetition of
// the merges. nil or empty is the empty state. States of different kinds are
// engines.ErrWrongKind, a malformed one engines.ErrCorruptState. The result
// is a new slice.
func Merge(a, b []byte) ([]byte, error) {
	j, _, err := join(a, b)
	return j.State, err
}

// Joined is the join of two states with what a node needs to store it.
type Joined struct {
	State []byte // Merge's result
	Kind  Kind   // its kind; 0 when both states were empty
	// Expiry is Expiry(State), from the decoded join.
	Expiry int64
	// Mark is the join's reset mark (see Reset), NoMark for none, and
	// Forgot says which of the two states it forgave whole: nothing of
	// that side is left, so whatever expiry its holder gave it no longer
	// applies (a window's expiry is the latest of its parts').
	Mark   int64
	Forgot [2]bool
}

// Join is Merge, and the kind and expiry of its result, decoding each
// state once. An expiry that Expiry could not compute (it overflows) is
// its error, where Merge succeeds.
func Join(a, b []byte) (Joined, error) {
	j, expiryErr, err := join(a, b)
	if err = cmp.Or(err, expiryErr); err != nil {
		return Joined{}, err
	}
	return j, nil
}

// join is Join, the error of the expiry apart. Joining a state with an
// empty one only validates it.
func join(a, b []byte) (j Joined, expiryErr, err error) {
	if marked(a) || marked(b) {
		return joinMarked(a, b)
	}
	j.Expiry, j.Mark = math.MinInt64, NoMark
	k, err := kindOfPair(a, b)
	switch {
	case err != nil || k == 0:
		return j, nil, err
	case k.debt():
		return joinDebt(a, b, k)
	}
	if len(a) == 0 {
		a, b = b, a // a holds a state
	}
	d, err := decode(a, k)
	if err != nil {
		return j, nil, err
	}
	j.Kind = k
	if len(b) == 0 {
		// The decoders take only canonical bytes: a state is its own
		// encoding.
		j.State = slices.Clone(a)
		return j, nil, nil
	}
	y, err := decode(b, k)
	if err != nil {
		return Joined{}, nil, err
	}
	j.State, err = d.join(y).encode()
	return j, nil, err
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
// counts any more), nor do strings: their state is returned validated and
// unchanged. The
// result is a new slice unless it is state unchanged.
func Fold(state []byte, complete int64) ([]byte, error) {
	if marked(state) {
		m, plain, err := unmark(state)
		if err != nil || plain == nil {
			return state, err
		}
		if plain, err = Fold(plain, complete); err != nil {
			return nil, err
		}
		return withMark(plain, m), nil
	}
	if len(state) == 0 {
		return state, nil
	}
	k, err := KindOf(state)
	if err != nil {
		return nil, err
	}
	if !k.debt() {
		_, err := decode(state, k)
		if err != nil {
			return nil, err
		}
		return state, nil
	}
	s, err := decodeDebt(state, k, nil)
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
}
