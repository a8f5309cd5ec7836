package mstate

import (
	"encoding/binary"
	"math"

	"github.com/throttleddb/throttled/engines"
)

// Resets (THROTTLE.RESET on a mesh node): forgiving a rate-limit key's
// history on every node.
//
// A reset is a stamp r, a max register: every admission stamped at or
// before r is forgiven, wherever it was made and whenever it arrives. The
// joins already drop what a state's cut (debt logs) or floor (windows) puts
// behind it, so a reset moves the cut or floor to r and drops everything
// the state holds: (r, 0, no events) for a debt log, floor r and no slots or
// entries for a window. A copy from before the reset, merged later, loses
// everything up to r to it; admissions stamped after r, made by nodes that
// had not received the reset yet, stay (FWC and SWC keep a node's count for
// a window as one number: a node whose slot took an admission after r keeps
// its whole count for that window).
//
// The state keeps r as its mark, for two things. Every decision on a marked
// state is made at r+1 at the earliest, so that nothing stamped after the
// reset falls at or behind the cut (a node whose clock lags the resetting
// node's would otherwise stamp under it). And the node keeps the key past
// its expiry while some node may still send a copy from before the reset
// (Mark tells it the stamp): dropping it there would let such a copy bring
// the history back. Cuts and floors only move forward, so a marked state's
// cut or floor is never before its mark.
//
// A node that holds no state of the key writes a bare mark (kind Marker):
// it joins with a state of any rate-limit kind as that kind's state reset
// at its stamp, and with a string as nothing (a reset deletes a string as
// DEL does, on the node that holds it).
//
// Encoding: a marked state is version 2, its kind, the mark int64, then the
// unmarked (version 1) encoding after its header; a bare mark ends after
// the mark. An unmarked state stays version 1, so the states of keys never
// reset keep their bytes.

// Marker is the Kind of a bare mark: a reset on a node that held no state
// of the key.
const Marker = Str + 1

const (
	markedVersion = 2
	markedLen     = headerLen + 8 // version, kind, mark
)

// NoMark is the mark of a state that was never reset.
const NoMark int64 = math.MinInt64

// Mark returns the reset stamp state carries: NoMark for none.
func Mark(state []byte) (int64, error) {
	m, _, err := unmark(state)
	return m, err
}

// marked reports whether state has a mark (without validating it).
func marked(state []byte) bool { return len(state) > 0 && state[0] == markedVersion }

// unmark splits state into its mark and its unmarked form: state itself
// when unmarked, nil for a bare mark, else a new slice.
func unmark(state []byte) (int64, []byte, error) {
	if !marked(state) {
		return NoMark, state, nil
	}
	if len(state) < markedLen {
		return 0, nil, engines.ErrCorruptState
	}
	k, m := Kind(state[1]), int64(binary.LittleEndian.Uint64(state[headerLen:]))
	switch {
	case m == NoMark:
		return 0, nil, engines.ErrCorruptState
	case k == Marker && len(state) == markedLen:
		return m, nil, nil
	case k < FWC || k >= Str:
		return 0, nil, engines.ErrCorruptState
	}
	plain := append([]byte{version, byte(k)}, state[markedLen:]...)
	if len(plain) < headerLen+8 || floorOf(plain) < m {
		// Every rate-limit encoding starts with its cut or floor, which a
		// reset moved to at least its mark.
		return 0, nil, engines.ErrCorruptState
	}
	return m, plain, nil
}

// floorOf returns an unmarked rate-limit state's cut (debt logs) or floor
// (windows): the int64 after its header.
func floorOf(plain []byte) int64 {
	return int64(binary.LittleEndian.Uint64(plain[headerLen:]))
}

// withMark returns plain (an unmarked rate-limit state, or nil for a bare
// mark) marked m; plain itself when m is NoMark.
func withMark(plain []byte, m int64) []byte {
	if m == NoMark {
		return plain
	}
	k := Marker
	if len(plain) > 0 {
		k = Kind(plain[1])
	}
	b := make([]byte, 0, markedLen+max(len(plain)-headerLen, 0))
	b = appendI64(append(b, markedVersion, byte(k)), m)
	if len(plain) > 0 {
		b = append(b, plain[headerLen:]...)
	}
	return b
}

// resetPlain is the unmarked state of kind k reset at r: everything up to
// r behind its cut or floor, nothing after.
func resetPlain(k Kind, r int64) ([]byte, error) {
	switch k {
	case GCRA, TB, LB:
		s := emptyDebt(k)
		s.cut = r
		return s.encode()
	case SWL:
		s := swlLog{floor: r}
		return s.encode()
	case FWC, SWC:
		s := slots{kind: k, floor: r}
		return s.encode()
	}
	return nil, engines.ErrWrongKind
}

// newestStamp returns the newest instant an unmarked rate-limit state
// holds: its cut or floor, or a later event, slot or entry.
func newestStamp(plain []byte, k Kind) (int64, error) {
	switch k {
	case GCRA, TB, LB:
		s, err := decodeDebt(plain, k, nil)
		if n := len(s.events); n > 0 && err == nil {
			return max(s.cut, s.events[n-1].t), nil
		}
		return s.cut, err
	case SWL:
		s, err := decodeSWL(plain)
		if n := len(s.entries); n > 0 && err == nil {
			return max(s.floor, s.entries[n-1].t), nil
		}
		return s.floor, err
	}
	s, err := decodeSlots(plain, k)
	t := s.floor
	for _, sl := range s.s {
		t = max(t, sl.newest)
	}
	return t, err
}

// Reset returns state reset (see above) at at, or at the newest stamp it
// holds when that is later (an admission from a node whose clock runs
// ahead that this node has merged is forgiven too), or at its mark. nil
// or a bare mark gives a bare mark. A string is engines.ErrWrongKind: it
// is deleted as DEL does (StrDel).
func Reset(state []byte, at int64) ([]byte, error) {
	m, plain, err := unmark(state)
	if err != nil {
		return nil, err
	}
	r := max(at, m)
	if len(plain) == 0 {
		return withMark(nil, r), nil
	}
	k, err := KindOf(plain)
	switch {
	case err != nil:
		return nil, err
	case k == Str:
		return nil, engines.ErrWrongKind
	}
	newest, err := newestStamp(plain, k)
	if err != nil {
		return nil, err
	}
	r = max(r, newest)
	if plain, err = resetPlain(k, r); err != nil {
		return nil, err
	}
	return withMark(plain, r), nil
}

// unmarkFor returns state's mark and its unmarked form for a limiter of
// kind k: a bare mark is k's state reset at the mark.
func unmarkFor(state []byte, k Kind) (int64, []byte, error) {
	m, plain, err := unmark(state)
	if err == nil && m != NoMark && plain == nil {
		plain, err = resetPlain(k, m)
	}
	return m, plain, err
}

// afterMark is the earliest decision time on a state marked m: just after
// the reset.
func afterMark(now, m int64) int64 {
	if m == NoMark || m == math.MaxInt64 {
		return now
	}
	return max(now, m+1)
}

// joinMarked is join for two states at least one of which is marked: the
// later mark, and the join of the unmarked forms, a bare mark standing for
// the other's kind reset at its stamp. A bare mark and a string join into
// the string.
func joinMarked(a, b []byte) (j Joined, expiryErr, err error) {
	var marks [2]int64
	var plains [2][]byte
	for i, s := range [2][]byte{a, b} {
		if marks[i], plains[i], err = unmark(s); err != nil {
			return Joined{}, nil, err
		}
	}
	m := max(marks[0], marks[1])
	k, err := kindOfPair(plains[0], plains[1])
	switch {
	case err != nil:
		return Joined{}, nil, err
	case k == 0:
		// Bare marks (or one and no state).
		return Joined{State: withMark(nil, m), Kind: Marker, Expiry: m, Mark: m, Forgot: [2]bool{true, true}}, nil, nil
	case k == Str:
		return join(plains[0], plains[1])
	}
	var forgot [2]bool
	for i := range plains {
		if plains[i] == nil && marks[i] != NoMark {
			if plains[i], err = resetPlain(k, marks[i]); err != nil {
				return Joined{}, nil, err
			}
		}
		if len(plains[i]) > 0 {
			newest, err := newestStamp(plains[i], k)
			if err != nil {
				return Joined{}, nil, err
			}
			forgot[i] = newest <= m
		}
	}
	j, expiryErr, err = join(plains[0], plains[1])
	if err == nil {
		j.State = withMark(j.State, m)
		j.Mark, j.Forgot = m, forgot
	}
	return j, expiryErr, err
}
