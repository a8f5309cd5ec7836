package telemetry

import (
	"errors"
	"testing"
)

const s = int64(1e9)

func TestReport_WindowedAggregate(t *testing.T) {
	a := New(Limits{})
	t0 := int64(1700000000) * s
	steps := []struct {
		at   int64
		r    Report
		want Aggregate
	}{
		{0, Report{Group: "g", Client: "a", Sent: 10}, Aggregate{Active: 1, Total: 10}},
		{5 * s, Report{Group: "g", Client: "b", Sent: 4, Got429: 1}, Aggregate{Active: 2, Total: 14, Clients429: 1}},
		{20 * s, Report{Group: "g", Client: "a", Sent: 6, Rate: Rate{80, 60 * s}}, Aggregate{Active: 2, Total: 20, Clients429: 1, Rate: Rate{80, 60 * s}}},
		// a's first report (at 0) leaves the window at 30 s.
		{30 * s, Report{Group: "g", Client: "b", Sent: 0}, Aggregate{Active: 2, Total: 10, Clients429: 1, Rate: Rate{80, 60 * s}}},
		// b's 429 (at 5 s) leaves it at 35 s; a (last at 20 s) is still active.
		{35 * s, Report{Group: "g", Client: "b", Sent: 2}, Aggregate{Active: 2, Total: 8, Rate: Rate{80, 60 * s}}},
		// a is forgotten at 50 s: only b's reports at 30 and 35 s are left.
		{50 * s, Report{Group: "g", Client: "b", Sent: 1}, Aggregate{Active: 1, Total: 3, Rate: Rate{80, 60 * s}}},
		// another group is apart; a short omega of its own.
		{50 * s, Report{Group: "h", Client: "a", Sent: 7, Omega: 2 * s}, Aggregate{Active: 1, Total: 7}},
		// a clock step back is taken as the newest instant seen.
		{40 * s, Report{Group: "h", Client: "a", Sent: 1, Omega: 2 * s}, Aggregate{Active: 1, Total: 8}},
	}
	for i, st := range steps {
		got, err := a.Report(t0+st.at, st.r)
		if err != nil || got != st.want {
			t.Fatalf("step %d: got %+v, %v; want %+v", i, got, err, st.want)
		}
	}
	if got, ok := a.Get(t0+53*s, "h"); !ok || got != (Aggregate{}) {
		t.Fatalf("h after its omega: got %+v, %v; want an empty aggregate", got, ok)
	}
	if _, ok := a.Get(t0, "nope"); ok {
		t.Fatal("Get of an unknown group: ok")
	}
}

func TestReport_FoldsPastSlots(t *testing.T) {
	a := New(Limits{})
	var got Aggregate
	for i := range int64(20) {
		got, _ = a.Report(i*s, Report{Group: "g", Client: "a", Sent: 1})
	}
	if got.Total != 20 {
		t.Fatalf("total of 20 reports within omega: got %d, want 20", got.Total)
	}
	if n := len(a.groups["g"].clients["a"].entries); n != slots {
		t.Fatalf("entries kept: got %d, want %d", n, slots)
	}
}

func TestReport_Caps(t *testing.T) {
	a := New(Limits{MaxGroups: 2, MaxClients: 2})
	for _, r := range []Report{{Group: "g", Client: "a"}, {Group: "g", Client: "b"}, {Group: "h", Client: "a"}} {
		if _, err := a.Report(0, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Report(s, Report{Group: "g", Client: "c"}); !errors.Is(err, ErrFull) {
		t.Fatalf("third client of a group: got %v, want ErrFull", err)
	}
	if _, err := a.Report(s, Report{Group: "i", Client: "a"}); !errors.Is(err, ErrFull) {
		t.Fatalf("third group: got %v, want ErrFull", err)
	}
	if a.Groups() != 2 || len(a.groups["g"].clients) != 2 {
		t.Fatalf("a refused report changed what is kept: %d groups, %d clients", a.Groups(), len(a.groups["g"].clients))
	}
	// Once the others expire, new ones take their place.
	if _, err := a.Report(31*s, Report{Group: "g", Client: "c"}); err != nil {
		t.Fatalf("a client after the others expired: %v", err)
	}
	if _, err := a.Report(31*s, Report{Group: "i", Client: "a"}); err != nil {
		t.Fatalf("a group after the others expired: %v", err)
	}
	if _, ok := a.groups["h"]; ok {
		t.Fatal("the expired group h is still kept")
	}
}

func TestReport_Invalid(t *testing.T) {
	a := New(Limits{})
	for _, r := range []Report{
		{Sent: -1}, {Got429: -1}, {Omega: -1}, {Rate: Rate{1, 0}}, {Rate: Rate{0, 1}}, {Rate: Rate{-1, -1}},
	} {
		if _, err := a.Report(0, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", r, err)
		}
	}
	if a.Groups() != 0 {
		t.Fatal("an invalid report was kept")
	}
}

func TestSlower(t *testing.T) {
	cases := []struct {
		a, b Rate
		want bool
	}{
		{Rate{80, 60}, Rate{2, 1}, true},
		{Rate{2, 1}, Rate{80, 60}, false},
		{Rate{1, 1}, Rate{2, 2}, false},
		{Rate{}, Rate{1, 1}, false},
		{Rate{1, 1}, Rate{}, true},
		{Rate{1 << 62, 1}, Rate{1 << 62, 2}, false},
	}
	for _, c := range cases {
		if got := Slower(c.a, c.b); got != c.want {
			t.Errorf("Slower(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Reservations: the later of now + After and the group's next free slot,
// the slots one interval of the rate apart; a group tied to no rate has
// none, and the refused report adds nothing.
func TestReport_Reserve(t *testing.T) {
	a := New(Limits{})
	rate := Rate{Count: 80, Period: 60 * s} // one every 750 ms
	ms := int64(1e6)
	steps := []struct {
		at   int64
		r    Report
		slot int64
	}{
		{0, Report{Group: "g", Client: "a", Rate: rate, Reserve: true, After: 200 * ms}, 200 * ms},
		{0, Report{Group: "g", Client: "b", Reserve: true}, 950 * ms},
		{0, Report{Group: "g", Client: "c", Reserve: true, After: 3 * s}, 3 * s},
		{s, Report{Group: "g", Client: "a", Reserve: true}, 2750 * ms},
		// A report without RESERVE takes no slot.
		{s, Report{Group: "g", Client: "b"}, 0},
		{s, Report{Group: "g", Client: "b", Reserve: true}, 3500 * ms},
		// Past the last slot: now.
		{10 * s, Report{Group: "g", Client: "c", Reserve: true}, 0},
	}
	for i, st := range steps {
		got, err := a.Report(st.at, st.r)
		if err != nil || got.Slot != st.slot {
			t.Fatalf("step %d: slot %v, %v; want %v", i, got.Slot, err, st.slot)
		}
	}
	if _, err := a.Report(0, Report{Group: "h", Client: "a", Reserve: true}); !errors.Is(err, ErrNoRate) {
		t.Fatalf("a reservation without a rate: %v, want ErrNoRate", err)
	}
	if _, ok := a.Get(0, "h"); ok {
		t.Fatal("the refused reservation created its group")
	}
	if _, err := a.Report(0, Report{Group: "g", Client: "a", Reserve: true, After: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a negative After: %v, want ErrInvalid", err)
	}
	// A rate of one per 2^62 ns: the next slot saturates instead of wrapping
	// round to a slot now.
	slow := Rate{Count: 1, Period: 1 << 62}
	for i := range 3 {
		got, err := a.Report(1<<62, Report{Group: "slow", Client: "a", Rate: slow, Reserve: true})
		if err != nil || (i == 0) != (got.Slot == 0) || got.Slot < 0 {
			t.Fatalf("slow rate, reservation %d: slot %v, %v", i, got.Slot, err)
		}
	}
}
