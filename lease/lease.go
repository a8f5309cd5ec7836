// Package lease keeps the lease table of one rate-limit key: the leases
// QUOTA.LEASE granted on it, what became of each, and each holder's recent
// use for dynamic shares. It is pure, like gcra and engines: no I/O, no
// clock (every instant is passed in), no locks, and a versioned binary
// encoding, so a table replicates and persists as the key's other state does
// and replicas that apply the same commands hold the same bytes.
//
// The limit's own state (the charge of an eager lease, the credit of its
// return) stays in the key, in its engine's state; this table only records
// the leases. Package commands ties the two together.
package lease

import (
	"encoding/binary"
	"errors"
	"math"
)

// Bounds on one table. A table is at most a few tens of KiB.
const (
	// MaxLive is the most live (neither returned nor expired) leases on a key.
	MaxLive = 64
	// MaxLivePerHolder is the most live leases one holder has on a key.
	MaxLivePerHolder = 8
	// MaxRecords is the most lease records a table keeps, live or ended; the
	// oldest ended ones go first to make room.
	MaxRecords = 256
	// MaxHolders is the most holders whose history a table keeps; the one
	// seen least recently goes first.
	MaxHolders = 64
	// MaxHolderLen is the longest holder id, in bytes.
	MaxHolderLen = 128
	// MaxTTL is the longest lease, in ns (one day).
	MaxTTL = 86_400_000 * int64(1e6)
	// ewmaOne is 1 unit in a holder's EWMA (fixed point).
	ewmaOne = 1024
)

// Errors. The command layer maps them to replies.
var (
	ErrTooManyLive      = errors.New("lease: too many live leases on the key")
	ErrTooManyForHolder = errors.New("lease: too many live leases for the holder")
	ErrCorrupt          = errors.New("lease: corrupt lease table")
)

// Status is what became of a lease.
type Status uint8

const (
	Live     Status = iota // granted, neither returned nor expired
	Returned               // its holder returned it
	Expired                // its TTL passed first: counted as spent
)

// Limit is the limit a lease was taken from, enough to rebuild its engine
// for the return: Alg is 0 for GCRA (CL) or an engines.Kind; Nums are the
// parameters as the engine's constructor takes them (times in ns; GCRA:
// burst and interval), Sub the SWC sub-window count.
type Limit struct {
	Alg  uint8
	Nums [3]int64
	Sub  int64
}

// Lease is one lease record.
type Lease struct {
	Seq     int64 // the lease id's number, unique to the key over time
	Holder  string
	Lazy    bool
	Status  Status
	Granted int64 // units granted
	Units   int64 // once ended: units credited back (eager) or charged (lazy)
	At      int64 // instant of the grant, ns
	Expires int64 // instant the lease ends unreturned, ns
	Limit   Limit
	// Mark locates an eager grant's units in the limit's state (see
	// engines.Grant: At, Debt, Unit; GCRA: Debt is the TAT the grant left).
	MarkAt, MarkDebt, MarkUnit int64
}

// drop is when an ended record goes: a retried return within the lease's
// TTL after its end still finds it, and is answered without a second credit.
func (l *Lease) drop() int64 { return l.Expires + (l.Expires - l.At) }

// Holder is one holder's history on the key.
type Holder struct {
	ID   string
	EWMA int64 // units used per lease, in 1/1024 units
	Seen int64 // the last instant a lease of it ended or was granted
	Has  bool  // EWMA has seen at least one ended lease
}

// Table is a key's lease table. The zero Table is an empty one.
type Table struct {
	Seq     int64 // the last lease's Seq
	Leases  []Lease
	Holders []Holder
}

// NextSeq is the Seq of the next lease granted at now: above every earlier
// one, and at least now, so that a table that expired and came back never
// reuses an id (its leases ended at least a millisecond before).
func (t *Table) NextSeq(now int64) int64 {
	if t.Seq == math.MaxInt64 {
		return t.Seq
	}
	return max(t.Seq+1, now)
}

// Find returns the lease with seq, or nil.
func (t *Table) Find(seq int64) *Lease {
	for i := range t.Leases {
		if t.Leases[i].Seq == seq {
			return &t.Leases[i]
		}
	}
	return nil
}

// Expire ends, at now, every live lease whose TTL has passed, and returns
// them (their Status is now Expired) so the caller can charge the lazy ones.
// It drops the ended records whose time is over. The returned slice is the
// caller's.
func (t *Table) Expire(now int64) []Lease {
	var ended []Lease
	kept := t.Leases[:0]
	for _, l := range t.Leases {
		if l.Status == Live && l.Expires <= now {
			l.Status = Expired
			l.Units = 0
			t.used(l.Holder, l.Granted, l.Expires)
			ended = append(ended, l)
		}
		if l.Status != Live && l.drop() <= now {
			continue
		}
		kept = append(kept, l)
	}
	t.Leases = kept
	return ended
}

// Live counts the live leases, of all holders and of holder.
func (t *Table) Live(holder string) (all, ofHolder int) {
	for _, l := range t.Leases {
		if l.Status == Live {
			all++
			if l.Holder == holder {
				ofHolder++
			}
		}
	}
	return all, ofHolder
}

// CanAdd reports whether a lease of holder fits under the caps.
func (t *Table) CanAdd(holder string) error {
	all, mine := t.Live(holder)
	switch {
	case all >= MaxLive:
		return ErrTooManyLive
	case mine >= MaxLivePerHolder:
		return ErrTooManyForHolder
	}
	return nil
}

// Add records l (its Seq from NextSeq), dropping the oldest ended record
// when the table is full. Call CanAdd first: with at most MaxLive live
// leases, a full table always has an ended record to drop.
func (t *Table) Add(l Lease) {
	if len(t.Leases) >= MaxRecords {
		for i := range t.Leases {
			if t.Leases[i].Status != Live {
				t.Leases = append(t.Leases[:i], t.Leases[i+1:]...)
				break
			}
		}
	}
	t.Seq = l.Seq
	t.Leases = append(t.Leases, l)
	t.holder(l.Holder, l.At)
}

// End records that l's holder returned it at now, having used used units,
// and that units were credited (eager) or charged (lazy).
func (t *Table) End(l *Lease, used, units, now int64) {
	l.Status, l.Units = Returned, units
	t.used(l.Holder, used, now)
}

// used folds one ended lease's use into its holder's EWMA.
func (t *Table) used(holder string, used, now int64) {
	h := t.holder(holder, now)
	u := min(used, math.MaxInt64/(2*ewmaOne)) * ewmaOne
	if h.Has {
		h.EWMA = h.EWMA/2 + u/2
	} else {
		h.EWMA, h.Has = u, true
	}
}

// holder returns id's record, making it (and dropping the one seen least
// recently when there are MaxHolders) if need be; now marks it seen.
func (t *Table) holder(id string, now int64) *Holder {
	for i := range t.Holders {
		if t.Holders[i].ID == id {
			h := &t.Holders[i]
			h.Seen = max(h.Seen, now)
			return h
		}
	}
	if len(t.Holders) >= MaxHolders {
		old := 0
		for i, h := range t.Holders {
			if h.Seen < t.Holders[old].Seen {
				old = i
			}
		}
		t.Holders = append(t.Holders[:old], t.Holders[old+1:]...)
	}
	t.Holders = append(t.Holders, Holder{ID: id, Seen: now})
	return &t.Holders[len(t.Holders)-1]
}

// DynamicShare is the grant SHARE DYNAMIC gives holder when remaining units
// are left (before want caps it): twice its EWMA of units used per lease,
// rounded up, at least 1; half of remaining, rounded up, without history.
func (t *Table) DynamicShare(holder string, remaining int64) int64 {
	for _, h := range t.Holders {
		if h.ID == holder && h.Has {
			return max(1, (h.EWMA+ewmaOne/2-1)/(ewmaOne/2))
		}
	}
	return remaining/2 + remaining%2
}

// StaticShare is ceil(remaining * pct / 100), for 1 <= pct <= 100.
func StaticShare(remaining, pct int64) int64 {
	if remaining <= 0 {
		return 0
	}
	if remaining > math.MaxInt64/100 {
		return remaining / 100 * pct
	}
	return (remaining*pct + 99) / 100
}

// ExpireAt is when the whole table may go: when its last record would be
// dropped. ok is false when it holds nothing.
func (t *Table) ExpireAt() (at int64, ok bool) {
	for i := range t.Leases {
		if d := t.Leases[i].drop(); !ok || d > at {
			at, ok = d, true
		}
	}
	return at, ok
}

// Encoding: version 1, then uvarints/varints: Seq, the number of leases and
// each lease's fields, the number of holders and each holder's fields.
const version = 1

// Encode appends the table's encoding to dst.
func (t *Table) Encode(dst []byte) []byte {
	dst = append(dst, version)
	dst = binary.AppendVarint(dst, t.Seq)
	dst = binary.AppendUvarint(dst, uint64(len(t.Leases)))
	for _, l := range t.Leases {
		dst = appendString(dst, l.Holder)
		var flags byte
		if l.Lazy {
			flags = 1
		}
		dst = append(dst, flags, byte(l.Status), l.Limit.Alg)
		for _, v := range []int64{l.Seq, l.Granted, l.Units, l.At, l.Expires,
			l.Limit.Nums[0], l.Limit.Nums[1], l.Limit.Nums[2], l.Limit.Sub, l.MarkAt, l.MarkDebt, l.MarkUnit} {
			dst = binary.AppendVarint(dst, v)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(t.Holders)))
	for _, h := range t.Holders {
		dst = appendString(dst, h.ID)
		has := byte(0)
		if h.Has {
			has = 1
		}
		dst = append(dst, has)
		dst = binary.AppendVarint(dst, h.EWMA)
		dst = binary.AppendVarint(dst, h.Seen)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decoder reads an encoding, remembering the first error.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) count(most int) int {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > uint64(most) {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.bad = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) string() string {
	n := d.count(MaxHolderLen)
	if n > len(d.b) {
		d.bad = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Decode reads an encoded table. Anything malformed is ErrCorrupt.
func Decode(b []byte) (Table, error) {
	if len(b) == 0 || b[0] != version {
		return Table{}, ErrCorrupt
	}
	d := &decoder{b: b[1:]}
	var t Table
	t.Seq = d.varint()
	n := d.count(MaxRecords)
	for range n {
		if d.bad {
			break
		}
		var l Lease
		l.Holder = d.string()
		flags, status, alg := d.byte(), d.byte(), d.byte()
		l.Lazy, l.Status, l.Limit.Alg = flags == 1, Status(status), alg
		if flags > 1 || status > byte(Expired) {
			d.bad = true
		}
		for _, p := range []*int64{&l.Seq, &l.Granted, &l.Units, &l.At, &l.Expires,
			&l.Limit.Nums[0], &l.Limit.Nums[1], &l.Limit.Nums[2], &l.Limit.Sub, &l.MarkAt, &l.MarkDebt, &l.MarkUnit} {
			*p = d.varint()
		}
		t.Leases = append(t.Leases, l)
	}
	n = d.count(MaxHolders)
	for range n {
		if d.bad {
			break
		}
		var h Holder
		h.ID = d.string()
		has := d.byte()
		h.Has = has == 1
		if has > 1 {
			d.bad = true
		}
		h.EWMA, h.Seen = d.varint(), d.varint()
		t.Holders = append(t.Holders, h)
	}
	if d.bad || len(d.b) != 0 {
		return Table{}, ErrCorrupt
	}
	return t, nil
}
