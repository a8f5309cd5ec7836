package lease

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

const (
	t0 = int64(1_700_000_000_000_000_000)
	ms = int64(1e6)
)

func grant(t *Table, holder string, at, ttl, granted int64) *Lease {
	l := Lease{Seq: t.NextSeq(at), Holder: holder, Granted: granted, At: at, Expires: at + ttl,
		Limit: Limit{Alg: 1, Nums: [3]int64{10, 1000 * ms}}, MarkAt: at}
	t.Add(l)
	return t.Find(l.Seq)
}

func TestEncode_RoundTrip(t *testing.T) {
	var tab Table
	grant(&tab, "gw1", t0, 100*ms, 5)
	l := grant(&tab, "", t0+1, 100*ms, 7)
	l.Lazy = true
	tab.End(l, 3, 3, t0+2)
	b := tab.Encode(nil)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(nil), b) {
		t.Fatalf("decode then encode differs")
	}
	if got.Seq != tab.Seq || len(got.Leases) != 2 || got.Leases[1] != tab.Leases[1] || got.Holders[0] != tab.Holders[0] {
		t.Fatalf("got %+v, want %+v", got, tab)
	}
	// Every strict prefix, a wrong version and trailing bytes are corrupt.
	for i := range len(b) {
		if _, err := Decode(b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: %v, want ErrCorrupt", i, err)
		}
	}
	for _, bad := range [][]byte{append([]byte{2}, b[1:]...), append(bytes.Clone(b), 0)} {
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%x: %v, want ErrCorrupt", bad, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	var tab Table
	grant(&tab, "gw", t0, ms, 1)
	f.Add(tab.Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Decode(b)
		if err != nil {
			return
		}
		if again, err := Decode(tab.Encode(nil)); err != nil || !bytes.Equal(again.Encode(nil), tab.Encode(nil)) {
			t.Fatalf("re-encoding a decoded table: %v", err)
		}
	})
}

// Ids grow and never fall below the instant: a table that expired and came
// back does not hand out an id a retried return could match.
func TestNextSeq(t *testing.T) {
	var tab Table
	a := grant(&tab, "", t0, ms, 1).Seq
	b := grant(&tab, "", t0, ms, 1).Seq
	if a != t0 || b != t0+1 {
		t.Fatalf("seqs %d, %d; want t0, t0+1", a, b)
	}
	var fresh Table
	if s := fresh.NextSeq(t0 + 2*ms); s <= b {
		t.Fatalf("a new table later gives %d, not above %d", s, b)
	}
}

func TestCaps(t *testing.T) {
	var tab Table
	for i := range MaxLivePerHolder {
		if err := tab.CanAdd("gw"); err != nil {
			t.Fatalf("lease %d: %v", i, err)
		}
		grant(&tab, "gw", t0, ms, 1)
	}
	if err := tab.CanAdd("gw"); !errors.Is(err, ErrTooManyForHolder) {
		t.Fatalf("holder over its cap: %v", err)
	}
	for i := MaxLivePerHolder; i < MaxLive; i++ {
		grant(&tab, "h"+strconv.Itoa(i), t0, ms, 1)
	}
	if err := tab.CanAdd("new"); !errors.Is(err, ErrTooManyLive) {
		t.Fatalf("key over its cap: %v", err)
	}
	// Expired leases free their places.
	if ended := tab.Expire(t0 + ms); len(ended) != MaxLive {
		t.Fatalf("%d ended, want %d", len(ended), MaxLive)
	}
	if err := tab.CanAdd("gw"); err != nil {
		t.Fatal(err)
	}
}

// A full table drops its oldest ended record, never a live one.
func TestMaxRecords(t *testing.T) {
	var tab Table
	live := grant(&tab, "keep", t0, 1000*ms, 1).Seq
	for i := range MaxRecords + 10 {
		l := grant(&tab, "gw", t0+int64(i), 1000*ms, 1)
		tab.End(l, 1, 0, t0+int64(i))
	}
	if len(tab.Leases) > MaxRecords {
		t.Fatalf("%d records", len(tab.Leases))
	}
	if tab.Find(live) == nil {
		t.Fatal("the live lease was dropped")
	}
}

// An ended record stays one TTL past the lease's end, then goes; the
// table's expiry follows the last record.
func TestExpire(t *testing.T) {
	var tab Table
	l := grant(&tab, "gw", t0, 10*ms, 4)
	seq := l.Seq
	if at, ok := tab.ExpireAt(); !ok || at != t0+20*ms {
		t.Fatalf("ExpireAt %d, %v", at, ok)
	}
	ended := tab.Expire(t0 + 10*ms)
	if len(ended) != 1 || ended[0].Status != Expired || tab.Find(seq).Status != Expired {
		t.Fatalf("ended %+v", ended)
	}
	if len(tab.Expire(t0+15*ms)) != 0 || tab.Find(seq) == nil {
		t.Fatal("the record went before its time")
	}
	tab.Expire(t0 + 20*ms)
	if tab.Find(seq) != nil {
		t.Fatal("the record outlived its time")
	}
	if _, ok := tab.ExpireAt(); ok {
		t.Fatal("an empty table has an expiry")
	}
}

// The dynamic share: half of what remains without history, then twice the
// EWMA of units used per lease (an expired lease counts as all used).
func TestDynamicShare(t *testing.T) {
	var tab Table
	if got := tab.DynamicShare("gw", 9); got != 5 {
		t.Fatalf("no history: %d, want 5", got)
	}
	l := grant(&tab, "gw", t0, ms, 20)
	tab.End(l, 10, 10, t0)
	if got := tab.DynamicShare("gw", 100); got != 20 {
		t.Fatalf("after 10 used: %d, want 20", got)
	}
	l = grant(&tab, "gw", t0, ms, 20)
	tab.End(l, 0, 20, t0)
	if got := tab.DynamicShare("gw", 100); got != 10 {
		t.Fatalf("after 10 then 0 used: %d, want 10 (EWMA 5)", got)
	}
	grant(&tab, "gw", t0+ms, ms, 30)
	tab.Expire(t0 + 2*ms) // unreturned: all 30 used
	if got := tab.DynamicShare("gw", 100); got != 35 {
		t.Fatalf("after an expired lease of 30: %d, want 35 (EWMA 17.5)", got)
	}
	l = grant(&tab, "idle", t0, ms, 3)
	tab.End(l, 0, 3, t0)
	if got := tab.DynamicShare("idle", 100); got != 1 {
		t.Fatalf("a holder that used nothing: %d, want 1", got)
	}
}

func TestStaticShare(t *testing.T) {
	for _, tc := range []struct{ remaining, pct, want int64 }{
		{9, 50, 5}, {1, 50, 1}, {0, 50, 0}, {100, 100, 100}, {3, 1, 1},
	} {
		if got := StaticShare(tc.remaining, tc.pct); got != tc.want {
			t.Errorf("StaticShare(%d, %d) = %d, want %d", tc.remaining, tc.pct, got, tc.want)
		}
	}
}

// The holder seen least recently makes room for a new one.
func TestMaxHolders(t *testing.T) {
	var tab Table
	for i := range MaxHolders + 5 {
		l := grant(&tab, "h"+strconv.Itoa(i), t0+int64(i), ms, 1)
		tab.End(l, 1, 0, t0+int64(i))
	}
	if len(tab.Holders) != MaxHolders || tab.Holders[0].ID != "h5" {
		t.Fatalf("%d holders, first %q; want %d, h5", len(tab.Holders), tab.Holders[0].ID, MaxHolders)
	}
}
