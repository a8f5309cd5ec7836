package engines

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
)

// Sentinel errors. The command layer maps them to wire replies, so they carry no
// argument values; compare with errors.Is.
var (
	// ErrNotPositive reports a limit, capacity, count or time that is zero or
	// negative, or a Commit of quantity 0 (a peek has nothing to record).
	ErrNotPositive = errors.New("engines: value must be positive")

	// ErrNegative reports a negative quantity.
	ErrNegative = errors.New("engines: negative quantity")

	// ErrOverflow reports a value that does not fit in int64: a capacity times a
	// period, a window end past the year 2262, and the like. Nothing is stored.
	ErrOverflow = errors.New("engines: arithmetic overflow")

	// ErrLimitTooLarge reports a sliding window log limit above MaxSWLLimit, the
	// bound on its memory per key.
	ErrLimitTooLarge = errors.New("engines: limit too large for a sliding window log")

	// ErrSubwindows reports a sliding window counter with fewer than
	// MinSubwindows or more than MaxSubwindows counters, or with sub-windows
	// shorter than 1 ns (window < n-1).
	ErrSubwindows = errors.New("engines: bad number of subwindows")

	// ErrCorruptState reports a state that is not a valid encoding: unknown
	// version or kind, wrong length, or impossible header fields.
	ErrCorruptState = errors.New("engines: corrupt state")

	// ErrWrongKind reports a valid state of another engine than the Limiter's
	// (a key reused with another algorithm). KindOf tells which.
	ErrWrongKind = errors.New("engines: state belongs to another engine")

	// ErrLimited reports a Commit of a request that Check limits. Commit
	// re-checks, so a caller bug can neither over-admit nor break the bounds on
	// memory per key.
	ErrLimited = errors.New("engines: commit of a limited request")
)

// Result is the reply to one request, durations in ns. It describes the state
// after the request: after recording it when it is allowed, unchanged when it
// is limited or a peek.
type Result struct {
	Limited    bool
	Limit      int64 // the most units that can pass at once from a fresh key
	Remaining  int64 // 1-unit requests that would still pass now, 0..Limit
	RetryAfter int64 // ns until a retry of this quantity could succeed; -1 when allowed or when it can never fit
	ResetAfter int64 // ns until the state is back to full (0 when already full)
	Delay      int64 // LB only: ns to hold an admitted request before forwarding it; 0 otherwise
}

// Limiter is one algorithm with validated parameters. The implementations are
// small immutable values: safe for concurrent use, keeping nothing between
// calls.
//
// now is Unix ns. A now earlier than the newest time the state has recorded
// (its last Commit) is treated as that newest time, and all durations in the
// Result are measured from the time actually used. state is the key's encoded
// state, nil or empty when the key does not exist.
type Limiter interface {
	// Check decides a request of qty units at now. qty 0 peeks. It never
	// modifies state.
	Check(state []byte, now, qty int64) (Result, error)

	// Commit records an admitted request of qty > 0 at now: call it only after
	// Check allowed the same (state, now, qty). It returns the new state and
	// fullAt, the Unix ns instant from which the state is equivalent to no state
	// at all (the key may expire then). Commit may update state in place and
	// return it, so the caller must own state; otherwise it returns a new slice.
	// It keeps no reference to either. Same inputs give byte-identical output.
	// On error it writes nothing: state is as it was.
	Commit(state []byte, now, qty int64) (next []byte, fullAt int64, err error)

	// Kind says which algorithm this is.
	Kind() Kind
}

// Kind names an algorithm. It is the second byte of every encoded state.
type Kind uint8

// The algorithms. 0 is not a Kind.
const (
	FWC Kind = iota + 1 // fixed window counter
	SWL                 // sliding window log
	SWC                 // sliding window counter
	TB                  // token bucket
	LB                  // leaky bucket as a queue
)

// String returns the command prefix: "fwc", "swl", "swc", "tb" or "lb".
func (k Kind) String() string {
	switch k {
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

// version is the first byte of every encoded state. A change of any layout
// bumps it, and decoders refuse versions they do not know.
const (
	version   = 1
	headerLen = 2 // version, kind
)

// KindOf reports which engine wrote state, from its first two bytes. It checks
// only those bytes; Check and Commit validate the rest.
func KindOf(state []byte) (Kind, error) {
	if len(state) < headerLen || state[0] != version {
		return 0, ErrCorruptState
	}
	k := Kind(state[1])
	if k < FWC || k > LB {
		return 0, ErrCorruptState
	}
	return k, nil
}

// checkKind validates the header of a stored state of kind k.
func checkKind(state []byte, k Kind) error {
	got, err := KindOf(state)
	if err != nil {
		return err
	}
	if got != k {
		return ErrWrongKind
	}
	return nil
}

// Apply is the sequence the command layer runs for one request: Check, then
// Commit when the request is allowed and qty > 0. write reports whether next is
// to be stored, with the key expiring at fullAt; otherwise the key is left as
// it was.
func Apply(l Limiter, state []byte, now, qty int64) (res Result, next []byte, fullAt int64, write bool, err error) {
	res, err = l.Check(state, now, qty)
	if err != nil || res.Limited || qty == 0 {
		return res, state, 0, false, err
	}
	next, fullAt, err = l.Commit(state, now, qty)
	if err != nil {
		return Result{}, state, 0, false, err
	}
	return res, next, fullAt, true, nil
}

// commitQty checks the quantity Commit is given.
func commitQty(qty int64) error {
	switch {
	case qty < 0:
		return ErrNegative
	case qty == 0:
		return ErrNotPositive
	}
	return nil
}

// States are little-endian: the byte order of amd64 and arm64, so the loads
// below compile to single instructions.

func getInt(b []byte, off int) int64 { return int64(binary.LittleEndian.Uint64(b[off:])) }

func putInt(b []byte, off int, v int64) { binary.LittleEndian.PutUint64(b[off:], uint64(v)) }

func getU32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

func putU32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }

// reuse returns state resized to n bytes when its capacity allows (Commit may
// write in place), or a new slice. The caller overwrites all n bytes.
func reuse(state []byte, n int) []byte {
	if cap(state) >= n {
		return state[:n]
	}
	return make([]byte, n)
}

// writeHeader writes the version and kind bytes.
func writeHeader(b []byte, k Kind) {
	b[0], b[1] = version, byte(k)
}

// mul returns a*b for a, b >= 0, or ErrOverflow if it does not fit in int64.
func mul(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return int64(lo), nil
}

// add returns a+b for b >= 0, or ErrOverflow if it does not fit in int64.
func add(a, b int64) (int64, error) {
	if a > math.MaxInt64-b {
		return 0, ErrOverflow
	}
	return a + b, nil
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// floorDivMod returns q = floor(a/b) and r = a - q*b in [0, b), for b > 0,
// without overflow for any a.
func floorDivMod(a, b int64) (q, r int64) {
	q, r = a/b, a%b
	if r < 0 {
		q, r = q-1, r+b
	}
	return q, r
}

// mulDiv returns floor(a*b/c) for a, b >= 0 and c > 0 when a*b < c<<64 (the
// caller guarantees it, typically with a <= c or b <= c); the 128-bit product
// keeps it exact whatever the sizes.
func mulDiv(a, b, c int64) (q, r uint64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return bits.Div64(hi, lo, uint64(c))
}
