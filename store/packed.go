package store

import (
	"math"

	"github.com/throttleddb/throttled/engines"
)

// Packed states. An FWC state is 18 bytes: held as bytes it would take an
// arena record of 24 beside its key's 32-byte slot. Its two numbers are
// small next to the key's expiry (the instant it was written at lies within
// a window of it, and the count is at most the limit), so the state packs
// into the slot's 64-bit word counted back from the expiry
// (engines.PackFWC), and the store holds it there: the table sees an
// integer, and every read gets the very bytes written back (entryOf), so
// digests, saved folders, snapshots and the engines see no difference. A
// state that does not pack (no expiry, a count too large for its window's
// width) is held as bytes, as every other state is.
//
// The word depends on the expiry, so a new expiry repacks the state
// (Tx.SetExpire).

// packable reports whether states of kind k may be packed.
func packable(k Kind) bool { return k == KindFWC }

// packRef returns the instant a packed state of a key expiring at expireMs
// counts from: the first nanosecond after the key's last millisecond, which
// the window's end precedes. There is none without an expiry, or past the
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
	if !ok || !packable(v.Kind) {
		return 0, false
	}
	return engines.PackFWC(v.Bytes, ref)
}

// PackedLen is the length of a packed state's bytes: a buffer with this
// much room given to Tx.GetIn takes them without allocating.
const PackedLen = engines.FWCStateLen

// unpack appends to dst the bytes of the state pack made word of. The table
// holds a word only for a packable kind with an expiry.
func unpack(dst []byte, word uint64, expireMs int64) []byte {
	ref, _ := packRef(expireMs)
	return engines.AppendFWC(dst, word, ref)
}
