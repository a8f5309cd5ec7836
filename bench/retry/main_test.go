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

func TestReport_Tables(t *testing.T) {
	var b bytes.Buffer
	report(&b, 1)
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
