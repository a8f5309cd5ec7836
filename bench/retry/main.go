// Command retry emulates the client-side study's synthetic scenarios
// ("Rethinking HTTP API Rate Limiting: A Client-Side Approach", Section IV
// and Table V) in virtual time: clients with UB, WB, ATB, AATB (client/retry)
// and our Hinted strategy share a token bucket of 100 refilling 80 per
// minute, run by throttled's TB engine; AATB reports to the aggregator that
// TELEMETRY.REPORT answers from. Seeded and deterministic; nothing sleeps.
// It prints each strategy's 429s, total duration, mean service time (first
// attempt to success) and mean response time (arrival to success),
// averaged over -runs seeds, as reductions against UB beside the study's
// published figures.
//
//	go run ./bench/retry              # 30 seeds, every scenario
//	go run ./bench/retry -runs 100
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

// published are the study's reductions against UB: 429s and the change of
// the total duration, in percent (WB, ATB, AATB), per scenario.
var published = map[string]map[string][2]float64{
	"5 clients, 500 requests":   {"WB": {-48.6, 8.6}, "ATB": {-59, 10}, "AATB": {-96.9, 13.3}},
	"5 clients, 800 requests":   {"WB": {-26.4, 7.9}, "ATB": {-70.3, 13.2}, "AATB": {-97.3, 19.8}},
	"100 clients, 500 requests": {"WB": {-99.4, 30.4}, "ATB": {-91.5, 24.3}, "AATB": {-77.8, 26.4}},
	"100 clients, 800 requests": {"WB": {-19.3, 10.3}, "ATB": {-90.5, 23.1}, "AATB": {-91.7, 11.7}},
}

func main() {
	runs := flag.Int("runs", 30, "seeds averaged per scenario and strategy")
	flag.Parse()
	if *runs < 1 {
		fmt.Fprintln(os.Stderr, "retry: -runs must be at least 1")
		os.Exit(2)
	}
	report(os.Stdout, *runs)
}

// report prints one table per scenario.
func report(w io.Writer, runs int) {
	for _, sc := range Scenarios {
		fmt.Fprintf(w, "\n%s (%d seeds)\n\n", sc.Name, runs)
		fmt.Fprintln(w, "| strategy | 429s | vs UB | study | duration | vs UB | study | mean service | mean response |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
		var ub Result
		for _, name := range Strategies {
			r := Average(sc, name, runs)
			if name == "UB" {
				ub = r
			}
			p, ok := published[sc.Name][name]
			study429, studyDur := "", ""
			if ok {
				study429, studyDur = fmt.Sprintf("%+.1f%%", p[0]), fmt.Sprintf("%+.1f%%", p[1])
			}
			fmt.Fprintf(w, "| %s | %.1f | %+.1f%% | %s | %s | %+.1f%% | %s | %s | %s |\n", name, r.Got429,
				pct(r.Got429, ub.Got429), study429, r.Duration.Round(100*time.Millisecond),
				pct(r.Duration.Seconds(), ub.Duration.Seconds()), studyDur, r.Service.Round(10*time.Millisecond),
				r.Response.Round(10*time.Millisecond))
		}
	}
}

// pct is the change from base to x, in percent.
func pct(x, base float64) float64 {
	if base == 0 {
		return 0
	}
	return (x - base) / base * 100
}
