package engines

// Packed states. A rate-limit state held as bytes takes an arena record
// beside its key's slot in the store; most FWC, TB and LB states pack into
// one 64-bit word instead, which the store (store/packed.go) holds in the
// slot itself. A word counts the state's instants back from ref, an instant
// the holder keeps anyway (the first nanosecond after the key's expiry,
// which the state's own end precedes), so it needs only as many bits as the
// key's lifetime. Unpacking gives back the very bytes packed, so digests,
// snapshots and saved folders cannot tell; a state that does not pack stays
// bytes.

// PackedLen is the longest state a word unpacks to: a dst with this much
// room takes it without allocating.
const PackedLen = bucketLen

// Pack returns state, which must be of kind k, as a word counted from ref
// (Unix ns), and whether it packs.
func Pack(state []byte, k Kind, ref int64) (uint64, bool) {
	if len(state) < headerLen || state[0] != version || Kind(state[1]) != k {
		return 0, false
	}
	switch k {
	case FWC:
		return packFWC(state, ref)
	case TB, LB:
		return packBucket(state, ref)
	}
	return 0, false
}

// AppendPacked appends to dst the state of kind k that Pack(state, k, ref)
// made word of.
func AppendPacked(dst []byte, k Kind, word uint64, ref int64) []byte {
	if k == FWC {
		return appendFWC(dst, word, ref)
	}
	return appendBucket(dst, k, word, ref)
}

// grow returns dst with n more bytes, and those bytes.
func grow(dst []byte, n int) ([]byte, []byte) {
	l := len(dst)
	dst = append(dst, make([]byte, n)...)
	return dst, dst[l:]
}
