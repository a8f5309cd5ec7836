package store

import (
	"math"

	"github.com/throttleddb/throttled/engines"
)

// Packed states. An FWC state is 18 bytes and a TB or LB state 26: held as
// bytes, each takes an arena record of 24 or 32 beside its key's 32-byte
// slot. Their numbers are small next to the key's expiry (an FWC window's
// end, a bucket's fullAt, lies within the key's last millisecond), so most
// such states pack into the slot's 64-bit word counted back from the
// expiry (engines.Pack), and the store holds them there: the table sees an
// integer, and every read gets the very bytes written back (entryOf), so
// digests, saved folders, snapshots and the engines see no difference. A
// state that does not pack (no expiry; an FWC count too large for its
// window's width; a bucket whose debt has drained in part since it was
// last full) is held as bytes, as every other state is.
//
// The word depends on the expiry, so a new expiry repacks the state
// (Tx.SetExpire).

// engineKind returns the engine whose states a kind holds, and whether
// they may be packed.
func engineKind(k Kind) (engines.Kind, bool) {
	switch k {
	case KindFWC:
		return engines.FWC, true
	case KindTB:
		return engines.TB, true
	case KindLB:
		return engines.LB, true
	}
	return 0, false
}

// packable reports whether states of kind k may be packed.
func packable(k Kind) bool {
	_, ok := engineKind(k)
	return ok
}

// packRef returns the instant a packed state of a key expiring at expireMs
// counts from: the first nanosecond after the key's last millisecond, which
// the state's end precedes. There is none without an expiry, or past the
// year 2262.
func packRef(expireMs int64) (int64, bool) {
	if expireMs <= 0 || expireMs >= math.MaxInt64/1_000_000 {
		return 0, false
	}
	return (expireMs + 1) * 1e6, true
}

// pack returns v as the word its slot holds when it packs.
func pack(v Value, expireMs int64) (uint64, bool) {
	ref, ok := packRef(expireMs)
	k, packs := engineKind(v.Kind)
	if !ok || !packs {
		return 0, false
	}
	return engines.Pack(v.Bytes, k, ref)
}

// PackedLen is the longest packed state's bytes: a buffer with this much
// room given to Tx.GetIn takes them without allocating.
const PackedLen = engines.PackedLen

// unpack appends to dst the bytes of the state of kind k that pack made
// word of. The table holds a word only for a packable kind with an expiry.
func unpack(dst []byte, k Kind, word uint64, expireMs int64) []byte {
	ref, _ := packRef(expireMs)
	ek, _ := engineKind(k)
	return engines.AppendPacked(dst, ek, word, ref)
}
