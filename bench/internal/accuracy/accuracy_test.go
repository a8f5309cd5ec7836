package accuracy

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestWorkload runs a short workload against an in-process server: SWL
// enforces the oracle's rule, so it must never disagree with it; FWC must
// (its windows reset on the minute); and a seed must give the same table
// twice.
func TestWorkload(t *testing.T) {
	addr := servertest.Start(t, server.Config{DebugClock: true}).Addr()
	cfg := Config{Seed: 1, Minutes: 2, Clients: 20, Addrs: []string{addr}, Logf: t.Logf}
	first, err := Measure(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Measure(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		first[i].Took, second[i].Took = 0, 0
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("two runs of seed 1 differ:\n%+v\n%+v", first, second)
	}
	byName := map[string]Result{}
	for _, r := range first {
		byName[r.Alg.Name] = r
		if r.Requests == 0 || r.Allowed == 0 {
			t.Errorf("%s: %d requests, %d allowed", r.Alg.Name, r.Requests, r.Allowed)
		}
	}
	if r := byName["SWL"]; r.mismatches() != 0 {
		t.Errorf("SWL: %d over-admitted, %d under-admitted, want none", r.Over, r.Under)
	}
	if r := byName["FWC"]; r.mismatches() == 0 {
		t.Errorf("FWC: no mismatch in %d requests", r.Requests)
	}
}

// The oracle's window is (t-60 s, t]: a request allowed exactly 60 s ago no
// longer counts, one allowed 1 ns later still does.
func TestHistoryWindow(t *testing.T) {
	t0 := start
	h := history{admitted: []int64{t0, t0 + 1, t0 + int64(30*time.Second)}}
	for _, step := range []struct {
		t    int64
		want int
	}{
		{t0 + int64(30*time.Second), 3},
		{t0 + window - 1, 3},
		{t0 + window, 2},
		{t0 + window + 1, 1},
		{t0 + window + int64(30*time.Second), 0},
	} {
		if got := h.count(step.t); got != step.want {
			t.Errorf("count(t0+%v) = %d, want %d", time.Duration(step.t-t0), got, step.want)
		}
	}
}

func TestClientRates(t *testing.T) {
	count := func(rates []int, perMinute int) int {
		n := 0
		for _, r := range rates {
			if r == perMinute {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct{ n, fast, mid, slow int }{
		{100, 5, 25, 70},
		{20, 1, 5, 14},
		{1, 0, 0, 1},
	} {
		rates := clientRates(tc.n)
		got := []int{count(rates, 120), count(rates, 90), count(rates, 30)}
		if want := []int{tc.fast, tc.mid, tc.slow}; len(rates) != tc.n || !slices.Equal(got, want) {
			t.Errorf("clientRates(%d): %d clients, %v at 120/90/30 per min, want %v", tc.n, len(rates), got, want)
		}
	}
}
