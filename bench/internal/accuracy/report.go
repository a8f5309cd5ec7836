package accuracy

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// FirstTries is how many first tries the workload of cfg holds.
func FirstTries(cfg Config) int {
	n := 0
	for _, ts := range arrivals(cfg.Seed, clientRates(cfg.Clients), int64(cfg.Minutes)*int64(time.Minute)) {
		n += len(ts)
	}
	return n
}

// Describe prints the workload's parameters as a Markdown list.
func Describe(w io.Writer, cfg Config) {
	rates := clientRates(cfg.Clients)
	var groupsText []string
	for _, g := range groups {
		n := 0
		for _, r := range rates {
			if r == g.perMinute {
				n++
			}
		}
		groupsText = append(groupsText, fmt.Sprintf("%d at %d/min", n, g.perMinute))
	}
	fmt.Fprintf(w, "- Clients: %d (%s), Poisson arrivals, seed %d: %d first tries\n", cfg.Clients, strings.Join(groupsText, ", "), cfg.Seed, FirstTries(cfg))
	fmt.Fprintf(w, "- Limit: %d per %d s per client; a rejected request is retried %v later until allowed or the run ends\n",
		limit, window/int64(time.Second), time.Duration(retryDelay))
	fmt.Fprintf(w, "- Simulated time: %d min from %s (Unix %d s), server on --debug-clock\n",
		cfg.Minutes, time.Unix(0, cfg.start()).UTC().Format("2006-01-02 15:04 MST"), cfg.start()/int64(time.Second))
	fmt.Fprintf(w, "- Deviation: requests whose answer differs from \"200 if fewer than %d of the client's requests were allowed in the preceding %d s\"\n",
		limit, window/int64(time.Second))
}

// WriteTable prints one row per algorithm: its tallies, its deviation and
// the study's figure.
func WriteTable(w io.Writer, results []Result) {
	fmt.Fprintf(w, "| algorithm | command | requests | allowed | over-admitted | under-admitted | deviation | study |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range results {
		study := r.Alg.Study
		if study == "" {
			study = "—"
		}
		fmt.Fprintf(w, "| %s | `%s <key> %s` | %d | %d | %d | %d | %.2f%% | %s |\n",
			r.Alg.Name, r.Alg.Cmd, r.Alg.Args, r.Requests, r.Allowed, r.Over, r.Under, r.Deviation(), study)
	}
}
