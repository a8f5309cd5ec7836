package crdt

import (
	"encoding/binary"
	"errors"
	"github.com/throttleddb/throttled/store"
	"math"
)

// The messages nodes exchange, one per frame of a Conn. Integers are
// little-endian; strings and byte strings carry a uint32 length.
//
//	hello     1, node id, incarnation uint64, clock int64, max skew int64
//	helloAck  2, clock int64, refusal (empty: accepted)
//	batch     3, seq uint64, watermark int64, complete int64, partial uint8,
//	          count uint32, then per entry: db uint16, key, expireMs int64, state
//
// A node dials each of its peers and sends batches over that connection;
// the peer answers only the hello. A batch's watermark is the sender's
// promise that every event it stamped before it is in this batch or an
// earlier one of the connection, valid once the receiver holds every batch
// up to it (seq counts from 1, per connection) and the batch is not partial
// (a full sync or a large batch spans several frames, the last one whole).
// complete is the sender's own completeness bound, which tells the receiver
// what the sender has seen.

const (
	msgHello    = 1
	msgHelloAck = 2
	msgBatch    = 3
)

// maxFrame is the largest frame a node sends or accepts. A batch is cut into
// frames of about batchBytes; one entry can make a frame larger, up to the
// largest key and state.
const (
	maxFrame   = 64 << 20
	batchBytes = 256 << 10
)

var errBadFrame = errors.New("crdt: malformed frame")

type hello struct {
	id          string
	incarnation uint64
	clock       int64
	maxSkew     int64 // ns: --crdt-max-skew, the same on every node
}

type helloAck struct {
	clock   int64
	refusal string
}

// entry is one key's state as its sender holds it.
type entry struct {
	db       int // as numbered outside the store (store.WireDB)
	key      []byte
	expireMs int64
	state    []byte
}

type batch struct {
	seq       uint64
	watermark int64
	complete  int64
	partial   bool
	entries   []entry
}

func appendString(b []byte, s []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
}

func (h hello) encode() []byte {
	b := []byte{msgHello}
	b = appendString(b, []byte(h.id))
	b = binary.LittleEndian.AppendUint64(b, h.incarnation)
	b = binary.LittleEndian.AppendUint64(b, uint64(h.clock))
	return binary.LittleEndian.AppendUint64(b, uint64(h.maxSkew))
}

func (a helloAck) encode() []byte {
	b := binary.LittleEndian.AppendUint64([]byte{msgHelloAck}, uint64(a.clock))
	return appendString(b, []byte(a.refusal))
}

// entrySize is what an entry adds to a batch frame.
func entrySize(e entry) int { return 2 + 4 + len(e.key) + 8 + 4 + len(e.state) }

func (m batch) encode() []byte {
	n := 1 + 8 + 8 + 8 + 1 + 4
	for _, e := range m.entries {
		n += entrySize(e)
	}
	b := make([]byte, 0, n)
	b = append(b, msgBatch)
	b = binary.LittleEndian.AppendUint64(b, m.seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.watermark))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.complete))
	if m.partial {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.entries)))
	for _, e := range m.entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e.db))
		b = appendString(b, e.key)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.expireMs))
		b = appendString(b, e.state)
	}
	return b
}

// frameReader decodes a frame front to back; a read past its end marks it
// bad, so decoders check once at the end.
type frameReader struct {
	b   []byte
	bad bool
}

func (r *frameReader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return make([]byte, max(n, 0))
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *frameReader) u8() byte    { return r.take(1)[0] }
func (r *frameReader) u16() int    { return int(binary.LittleEndian.Uint16(r.take(2))) }
func (r *frameReader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *frameReader) i64() int64  { return int64(r.u64()) }
func (r *frameReader) bytes() []byte {
	n := binary.LittleEndian.Uint32(r.take(4))
	if n > math.MaxInt32 {
		r.bad = true
		return nil
	}
	return r.take(int(n))
}

// end reports whether the frame was read whole and nothing is left.
func (r *frameReader) end() bool { return !r.bad && len(r.b) == 0 }

func decodeHello(b []byte) (hello, error) {
	r := &frameReader{b: b}
	if r.u8() != msgHello {
		return hello{}, errBadFrame
	}
	h := hello{id: string(r.bytes()), incarnation: r.u64(), clock: r.i64(), maxSkew: r.i64()}
	if !r.end() {
		return hello{}, errBadFrame
	}
	return h, nil
}

func decodeHelloAck(b []byte) (helloAck, error) {
	r := &frameReader{b: b}
	if r.u8() != msgHelloAck {
		return helloAck{}, errBadFrame
	}
	a := helloAck{clock: r.i64(), refusal: string(r.bytes())}
	if !r.end() {
		return helloAck{}, errBadFrame
	}
	return a, nil
}

// decodeBatch decodes a batch frame; the entries alias b. dbs is how many
// databases the receiver has: an entry for another is malformed.
func decodeBatch(b []byte, dbs int) (batch, error) {
	r := &frameReader{b: b}
	if r.u8() != msgBatch {
		return batch{}, errBadFrame
	}
	m := batch{seq: r.u64(), watermark: r.i64(), complete: r.i64()}
	switch r.u8() {
	case 0:
	case 1:
		m.partial = true
	default:
		return batch{}, errBadFrame
	}
	n := binary.LittleEndian.Uint32(r.take(4))
	// Every entry takes at least 18 bytes: a count beyond that is a lie.
	if r.bad || int64(n)*18 > int64(len(r.b)) {
		return batch{}, errBadFrame
	}
	m.entries = make([]entry, n)
	for i := range m.entries {
		e := entry{db: r.u16(), key: r.bytes(), expireMs: r.i64(), state: r.bytes()}
		if (e.db >= dbs && e.db != store.WireSystemDB) || len(e.state) == 0 {
			return batch{}, errBadFrame
		}
		m.entries[i] = e
	}
	if !r.end() || m.seq == 0 {
		return batch{}, errBadFrame
	}
	return m, nil
}
