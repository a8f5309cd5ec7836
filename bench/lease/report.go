package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bars of issue 24, for lease modes at barDelay one way.
const (
	barDelay = 25 * time.Millisecond
	barP50   = time.Millisecond
	barP99   = 5 * time.Millisecond
	barCalls = 20.0 // at least this many times fewer store calls than per request
)

// report prints one table row per case, with the bars each case is held
// to: at 25 ms, lease modes' p50, p99 and calls ratio; everywhere, the
// over-admission against the mode's bound.
func report(w io.Writer, results []caseResult) {
	fmt.Fprintln(w, "| store | one way | mode | requests | admitted (limit x keys) | store calls / request | fewer calls than per request | p50 added | p99 added | over 1 ms | deviation (over / under) | most over a limit | bound | bars |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	perRequest := map[string]float64{} // store + delay -> calls per request
	for _, r := range results {
		if r.mode == "per-request" {
			perRequest[r.store+r.delay.String()] = r.callsPerRequest()
		}
	}
	for _, r := range results {
		fewer := "-"
		ratio := 0.0
		if base, ok := perRequest[r.store+r.delay.String()]; ok && r.mode != "per-request" && r.calls > 0 {
			ratio = base / r.callsPerRequest()
			fewer = fmt.Sprintf("%.1fx", ratio)
		}
		fmt.Fprintf(w, "| %s | %v | %s | %d | %d (%d) | %.4f | %s | %s | %s | %.1f%% | %.2f%% (%d / %d) | %d | %d | %s |\n",
			r.store, r.delay, r.mode, r.requests, r.admitted, r.limit*int64(r.keys), r.callsPerRequest(), fewer,
			ms(r.p50), ms(r.p99), pct(r.slow, r.steady), r.deviation(), r.over, r.under, max(r.maxOver, 0), r.bound, bars(r, ratio))
	}
	for _, r := range results {
		if r.mode == "eager" && r.delay == barDelay {
			base := perRequest[r.store+r.delay.String()]
			fmt.Fprintf(w, "\nHeadline (%s, eager leases, %v one way): %.0fx fewer store calls than per request, %s p50 and %s p99 added per request.\n",
				r.store, r.delay, base/r.callsPerRequest(), ms(r.p50), ms(r.p99))
		}
	}
	if errs := errorCount(results); errs > 0 {
		fmt.Fprintf(w, "\n%d decision(s) came back with an error (the store gave none; refused, failing closed).\n", errs)
	}
}

// bars marks the bars that apply to r: ✓ met, ✗ missed.
func bars(r caseResult, ratio float64) string {
	var out []string
	mark := func(name string, ok bool) {
		if ok {
			out = append(out, name+" ✓")
		} else {
			out = append(out, "**"+name+" ✗**")
		}
	}
	m, _ := modeNamed(r.mode)
	if m.lease && r.delay == barDelay {
		mark("p50", r.p50 < barP50)
		mark("p99", r.p99 < barP99)
		mark("calls", ratio >= barCalls)
	}
	mark("bound", r.maxOver <= r.bound)
	return strings.Join(out, ", ")
}

func errorCount(results []caseResult) int {
	n := 0
	for _, r := range results {
		n += r.errors
	}
	return n
}

// pct is n of total in percent; 0 when total is.
func pct(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

// ms formats a duration in milliseconds, to the microsecond.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
