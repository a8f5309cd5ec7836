package store

import (
	"crypto/sha1"
	"encoding/binary"
	"hash"
	"strconv"
)

// Digests of the dataset, for DEBUG DIGEST and DEBUG DIGEST-VALUE: replicas
// compare them to check that they hold the same data.
//
// The dataset digest is the XOR of one SHA-1 per live key over
//
//	db (8 bytes) | expireMs (8 bytes) | len(key) (8 bytes) | key | value
//
// and a value is encoded as
//
//	type name ("string", "fwc"...) | 0 | payload to the end
//
// where the payload of a string is its bytes, an integer-encoded string's
// being its decimal text, and an engine state's is its encoded bytes.
//
// Every field before the value has a fixed width or a length, and the value
// runs to the end after a type name that holds no 0 byte, so two different
// (db, key, expiry, value) never encode alike. XOR makes the digest
// independent of the order keys are visited in, so neither the shard count,
// the store's hash seed nor map iteration order matter. XOR lets two equal
// terms cancel, but no term repeats: a database holds a key at most once, and
// db and key are part of each term. An empty dataset is all zeros.
//
// The encoding depends only on what a client can see: a string digests the
// same whether it is held as an int64 or as bytes (a replica's choice of
// representation can depend on its history), and an engine state by its kind
// as TYPE names it. Nothing else of an entry (access time, persistence
// bookkeeping) takes part. A merged state (KindMerged) digests with expiry 0:
// each node derives its expiry from the bytes and from when it learnt them,
// so equal bytes are the convergence that matters.

// Digest returns the digest of every database at the transaction's instant:
// each live key with its value and expiry. Keys past their expiry are not
// part of it, whether or not they have been removed yet, and it removes
// none; neither are the values hidden says a client does not see (nil: all
// are seen). Every shard must be locked.
func (t Tx) Digest(hidden func(Value) bool) [sha1.Size]byte {
	var sum [sha1.Size]byte
	d := newDigester()
	for i := range t.s.shards {
		sh := &t.s.shards[i]
		for db := range sh.dbs {
			sh.each(db, 0, func(k []byte, r ref) bool {
				e := r.get()
				if t.expired(e) {
					return true
				}
				v := e.valueIn(d.unpacked)
				if hidden != nil && hidden(v) {
					return true
				}
				d.h.Reset()
				d.buf = binary.BigEndian.AppendUint64(d.buf[:0], uint64(db))
				exp := e.expireMs
				if e.kind == KindMerged {
					exp = 0
				}
				d.buf = binary.BigEndian.AppendUint64(d.buf, uint64(exp))
				d.buf = binary.BigEndian.AppendUint64(d.buf, uint64(len(k)))
				d.buf = append(d.buf, k...)
				d.h.Write(d.buf)
				for j, b := range d.value(v) {
					sum[j] ^= b
				}
				return true
			})
		}
	}
	return sum
}

// DigestValue returns the digest of the value of key, as Redis' DEBUG
// DIGEST-VALUE does: the value only, not its key, database or expiry. It is
// all zeros when the key is missing or past its expiry, which it does not
// remove. The key's shard must be locked.
func (t Tx) DigestValue(db int, key []byte) [sha1.Size]byte {
	e, ok := t.peek(db, key)
	if !ok || t.expired(e) {
		return [sha1.Size]byte{}
	}
	d := newDigester()
	return d.value(e.value())
}

// digester hashes entries with one SHA-1 state and scratch buffers.
type digester struct {
	h   hash.Hash
	buf []byte
	// unpacked takes packed states' bytes (packed.go).
	unpacked []byte
}

func newDigester() *digester {
	return &digester{h: sha1.New(), unpacked: make([]byte, 0, PackedLen)}
}

// value writes v's encoding (see above) after what is already in the hash,
// and returns the sum.
func (d *digester) value(v Value) [sha1.Size]byte {
	d.buf = append(d.buf[:0], v.Kind.TypeName()...)
	d.buf = append(d.buf, 0)
	if v.Kind == KindInt {
		d.buf = strconv.AppendInt(d.buf, v.Int, 10)
	}
	d.h.Write(d.buf)
	d.h.Write(v.Bytes)
	var sum [sha1.Size]byte
	d.h.Sum(sum[:0])
	return sum
}
