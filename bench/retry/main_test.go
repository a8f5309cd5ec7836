package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// The same seed gives the same figures, every strategy, every scenario;
// another seed gives others.
func TestRun_Deterministic(t *testing.T) {
	for _, sc := range Scenarios {
		for _, name := range Strategies {
			a, b := Run(sc, name, 7), Run(sc, name, 7)
			if a != b {
				t.Fatalf("%s, %s: seed 7 twice: %+v then %+v", sc.Name, name, a, b)
			}
			if a.Requests != sc.Total {
				t.Fatalf("%s, %s: %d requests, want %d", sc.Name, name, a.Requests, sc.Total)
			}
		}
	}
	slow := Scenarios[0]
	slow.RTT = 50 * time.Millisecond
	for _, name := range Strategies {
		if a, b := Run(slow, name, 7), Run(slow, name, 7); a != b {
			t.Fatalf("%s with RTT 50ms, %s: seed 7 twice: %+v then %+v", slow.Name, name, a, b)
		}
	}
	if a, b := Run(Scenarios[1], "UB", 1), Run(Scenarios[1], "UB", 2); a == b {
		t.Fatalf("seeds 1 and 2 gave the same run: %+v", a)
	}
}

// The emulator shows what the strategies are for: against UB with five
// clients at 800 requests, AATB cuts 429s by more than 90%; in every
// scenario, Hinted cuts them by 99% with a duration no longer than AATB's
// (with a hundred clients only since it takes the group's slots).
func TestRun_Ordering(t *testing.T) {
	sc := Scenarios[1]
	if ub, aatb := Average(sc, "UB", 10), Average(sc, "AATB", 10); aatb.Got429 > 0.1*ub.Got429 {
		t.Errorf("AATB: %.1f 429s against UB's %.1f: want at least 90%% fewer", aatb.Got429, ub.Got429)
	}
	for _, sc := range Scenarios {
		ub, aatb, hinted := Average(sc, "UB", 10), Average(sc, "AATB", 10), Average(sc, "Hinted", 10)
		if hinted.Got429 > 0.01*ub.Got429 || hinted.Duration > aatb.Duration {
			t.Errorf("%s: Hinted %.1f 429s in %v; UB %.1f, AATB's duration %v", sc.Name, hinted.Got429, hinted.Duration, ub.Got429, aatb.Duration)
		}
	}
}

// With a round trip, a client's next attempt waits for the answer to the
// last: three requests arriving together, none refused, are answered RTT,
// 2 RTT and 3 RTT after the first is sent (each sent when the one before
// it is answered). UB and WB: they send at once while not refused (ATB
// and AATB pace their attempts).
func TestRun_RTT(t *testing.T) {
	sc := Scenario{Name: "one client", Clients: 1, Range: 2, Total: 3, W: 4,
		Capacity: 100, Refill: 100, Period: time.Second, Span: time.Nanosecond}
	for _, name := range []string{"UB", "WB"} {
		if r := Run(sc, name, 1); r.Duration != 0 || r.Response != 0 || r.Got429 != 0 {
			t.Fatalf("%s, no RTT: %+v, want everything answered at once", name, r)
		}
		sc.RTT = 40 * time.Millisecond
		r := Run(sc, name, 1)
		sc.RTT = 0
		want := Result{Requests: 3, Duration: 120 * time.Millisecond, Service: 40 * time.Millisecond, Response: 80 * time.Millisecond}
		if r != want {
			t.Fatalf("%s, RTT 40ms: %+v, want %+v", name, r, want)
		}
	}
}

// A refused attempt's retry also waits for the answer: five requests
// through a bucket of one refilled every 100 ms take at least five round
// trips of 300 ms, and UB, refused without a round trip, is not with it
// (the token is back before the next attempt reaches the limiter).
func TestRun_RTTSpacesRetries(t *testing.T) {
	sc := Scenario{Name: "tight", Clients: 1, Range: 2, Total: 5, Capacity: 1, Refill: 1, Period: 100 * time.Millisecond,
		Span: time.Nanosecond}
	fast := Run(sc, "UB", 1)
	sc.RTT = 300 * time.Millisecond
	slow := Run(sc, "UB", 1)
	if fast.Got429 == 0 || slow.Got429 != 0 {
		t.Fatalf("429s: %.0f without a round trip, %.0f with: want some, then none", fast.Got429, slow.Got429)
	}
	if slow.Duration < 5*sc.RTT {
		t.Fatalf("RTT 300ms: 5 requests in %v, want at least 5 round trips", slow.Duration)
	}
}

func TestReport_Tables(t *testing.T) {
	var b bytes.Buffer
	report(&b, 1, 0)
	for _, sc := range Scenarios {
		if !strings.Contains(b.String(), sc.Name) {
			t.Fatalf("no table for %s:\n%s", sc.Name, b.String())
		}
	}
	if n := strings.Count(b.String(), "| Hinted |"); n != len(Scenarios) {
		t.Fatalf("%d Hinted rows, want %d", n, len(Scenarios))
	}
}

// A tiny real-time run through real sockets: clients with UB and Hinted as
// http.RoundTripper wrappers, the httplimit service, a throttled node.
// Every request is served; UB is refused, Hinted less.
func TestRunHTTP_Tiny(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: a few seconds")
	}
	n := servertest.Start(t, server.Config{})
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
	t.Cleanup(func() { rdb.Close() })
	sc := Scenario{Name: "tiny", Clients: 3, Range: 10, Total: 30, Bucket: 4, InitRate: 300, InitCongRate: 600,
		Omega: time.Second, Capacity: 3, Refill: 10, Period: time.Second, Span: time.Second, Shift: 100 * time.Millisecond}
	ub, err := RunHTTP(t.Context(), rdb, sc, "UB", 1)
	if err != nil {
		t.Fatal(err)
	}
	hinted, err := RunHTTP(t.Context(), rdb, sc, "Hinted", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UB: %.0f 429s in %v; Hinted: %.0f in %v", ub.Got429, ub.Duration, hinted.Got429, hinted.Duration)
	if ub.Got429 == 0 || hinted.Got429 >= ub.Got429 {
		t.Fatalf("UB got %.0f 429s, Hinted %.0f: want UB refused, Hinted less", ub.Got429, hinted.Got429)
	}
	if ub.Duration <= 0 || ub.Response <= 0 {
		t.Fatalf("UB's run measured nothing: %+v", ub)
	}
}
