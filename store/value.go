package store

// Kind is the kind of value a key holds.
type Kind uint8

// The value kinds.
const (
	// KindString is a string held as bytes (Value.Bytes).
	KindString Kind = iota + 1
	// KindInt is a string that is the canonical decimal form of an int64,
	// held as that integer (Value.Int).
	KindInt

	// The rate-limit engines' states (package engines), each held as its
	// encoded bytes (Value.Bytes). The GCRA state of CL.THROTTLE is a
	// KindInt, as redis-cell keeps it.
	KindFWC // fixed window counter
	KindSWL // sliding window log
	KindSWC // sliding window counter
	KindTB  // token bucket
	KindLB  // leaky bucket

	// KindMerged is a state of the active-active mode (--replication
	// crdt): a mergeable string or rate-limit state of package
	// replication/crdt/mstate, its encoded bytes (Value.Bytes), whose
	// second byte says which. Its expiry is derived from the bytes by the
	// node that holds it, so digests leave it out (see Digest).
	KindMerged

	// KindLeases is the lease table of a rate-limit key (package lease),
	// its encoded bytes: the leases QUOTA.LEASE granted on the key.
	KindLeases
)

// TypeName is what TYPE answers for a key of this kind, and what SCAN's TYPE
// option matches: "string" for strings, the engine's command prefix ("fwc",
// "swl", "swc", "tb", "lb") for rate-limit states.
func (k Kind) TypeName() string {
	switch k {
	case KindString, KindInt:
		return "string"
	case KindFWC:
		return "fwc"
	case KindSWL:
		return "swl"
	case KindSWC:
		return "swc"
	case KindTB:
		return "tb"
	case KindLB:
		return "lb"
	case KindMerged:
		return "merged"
	case KindLeases:
		return "leases"
	}
	return "none"
}

// Value is one key's value. A Value handed to the store becomes the store's:
// the caller must not modify Bytes afterwards. A Value read from the store
// aliases the store's bytes and is valid while the key's shard is locked.
type Value struct {
	Kind  Kind
	Int   int64
	Bytes []byte
}

// StringValue returns the value for the string b, using the integer encoding
// when b is the canonical decimal form of an int64 ("12", "-7"; not "012",
// "+1", "-0" or " 1", which stay bytes so GET returns them unchanged). b is
// kept, not copied.
func StringValue(b []byte) Value {
	if n, ok := ParseInt(b); ok {
		return Value{Kind: KindInt, Int: n}
	}
	return Value{Kind: KindString, Bytes: b}
}

// IntValue returns the integer-encoded value n.
func IntValue(n int64) Value { return Value{Kind: KindInt, Int: n} }

// IsString reports whether the value is a string (either encoding).
func (v Value) IsString() bool { return v.Kind == KindString || v.Kind == KindInt }

// Integer returns the value as an int64 when it is a string holding a decimal
// integer, with Redis' rules (string2ll: optional '-', digits, no leading
// zeros, no spaces, fits in int64).
func (v Value) Integer() (int64, bool) {
	switch v.Kind {
	case KindInt:
		return v.Int, true
	case KindString:
		return ParseInt(v.Bytes)
	}
	return 0, false
}

// ParseInt parses b when it is the canonical decimal form of an int64, what
// strconv.FormatInt would print for the number. These are Redis' rules for
// integer arguments and values (string2ll): an optional '-', digits, no
// leading zeros, no '+', no spaces, no "-0".
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	i := 0
	neg := b[0] == '-'
	if neg {
		i = 1
		if len(b) == 1 {
			return 0, false
		}
	}
	if b[i] == '0' && len(b) > i+1 {
		return 0, false // leading zero
	}
	if neg && b[i] == '0' {
		return 0, false // "-0"
	}
	var u uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > 1<<63-1 {
		return 0, false
	}
	return int64(u), true
}
