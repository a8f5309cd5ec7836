package accuracy

import (
	"math/rand/v2"
	"strings"
	"time"
)

const (
	// limit requests per window per client: the oracle's rule and every
	// algorithm's parameters.
	limit  = 100
	window = int64(60 * time.Second)
	// retryDelay is how long a client waits after a rejection before it
	// sends the same request again.
	retryDelay = int64(time.Second)
	// start is the first simulated instant, 2023-11-14 22:14:00 UTC, a
	// multiple of 60 s: FWC's epoch-aligned windows (and SWC's sub-windows)
	// begin with the run, as they begin on the minute on a real clock.
	start = 1_700_000_040 * int64(time.Second)
)

// group is one class of clients of the study.
type group struct {
	percent   int // share of the clients
	perMinute int // mean request rate of each client
}

var groups = []group{{5, 120}, {25, 90}, {70, 30}}

// Algorithm is one row of the table: the command sent for every request,
// "Cmd <key> Args".
type Algorithm struct {
	Name  string
	Cmd   string
	Args  string // space-separated
	Study string // the study's published deviation; "" when it gives none
}

// Algorithms are the rows of the table, in order.
var Algorithms = []Algorithm{
	{Name: "FWC", Cmd: "FWC.THROTTLE", Args: "100 60"},
	{Name: "SWL", Cmd: "SWL.THROTTLE", Args: "100 60"},
	{Name: "SWC, 2 sub-windows", Cmd: "SWC.THROTTLE", Args: "100 60 1 SUBWINDOWS 2", Study: "0.72%"},
	{Name: "SWC, 5 sub-windows", Cmd: "SWC.THROTTLE", Args: "100 60 1 SUBWINDOWS 5", Study: "0.56%"},
	// Capacity 5, refilled with 5 tokens every 3 s: 1.67/s.
	{Name: "TB", Cmd: "TB.THROTTLE", Args: "5 5 3"},
	// 100 per 60 s with redis-cell's max_burst = 5 (6 may pass at once).
	{Name: "GCRA", Cmd: "CL.THROTTLE", Args: "5 100 60"},
}

func (a Algorithm) command(key string) []any {
	cmd := []any{a.Cmd, key}
	for _, f := range strings.Fields(a.Args) {
		cmd = append(cmd, f)
	}
	return cmd
}

// Result is one algorithm's tally. Every attempt counts as a request, first
// tries and retries alike.
type Result struct {
	Alg      Algorithm
	Requests int
	Allowed  int
	Over     int // the server allowed, the oracle says 429
	Under    int // the server limited, the oracle says 200
	Nodes    int // servers the requests were spread over
	Barriers int // with more than one, how often the replay let them converge
	Took     time.Duration
}

func (r Result) mismatches() int { return r.Over + r.Under }

// Deviation is the study's throttling deviation, in percent.
func (r Result) Deviation() float64 {
	if r.Requests == 0 {
		return 0
	}
	return 100 * float64(r.mismatches()) / float64(r.Requests)
}

// clientRates returns each client's rate (requests per minute) for n
// clients: each group's share of n rounded, the last group taking the rest.
func clientRates(n int) []int {
	var rates []int
	for i, g := range groups {
		k := min((n*g.percent+50)/100, n-len(rates))
		if i == len(groups)-1 {
			k = n - len(rates)
		}
		for range k {
			rates = append(rates, g.perMinute)
		}
	}
	return rates
}

// arrivals returns each client's first tries, Unix ns in [start, start+d):
// a Poisson process at the client's rate (exponential gaps) that begins at a
// uniformly random offset within the first mean gap, so that the clients are
// out of phase. Client i draws from its own stream PCG(seed, i): its traffic
// does not depend on how many other clients there are.
func arrivals(seed uint64, rates []int, d int64) [][]int64 {
	out := make([][]int64, len(rates))
	for i, perMinute := range rates {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		gap := float64(time.Minute) / float64(perMinute) // mean, ns
		for t := start + rng.Int64N(int64(gap)); t < start+d; t += int64(rng.ExpFloat64() * gap) {
			out[i] = append(out[i], t)
		}
	}
	return out
}

// history is the oracle's view of one client: the times of its admitted
// requests, oldest first.
type history struct {
	admitted []int64
	head     int // admitted[:head] are older than every later question
}

// count returns how many admitted requests lie in (t-window, t]. Questions
// come in time order, so the ones that left the window are skipped for good.
func (w *history) count(t int64) int {
	for w.head < len(w.admitted) && w.admitted[w.head] <= t-window {
		w.head++
	}
	return len(w.admitted) - w.head
}

// event is one attempt of a client's request.
type event struct {
	t      int64 // Unix ns
	client int
	seq    int // creation order: breaks ties between equal times
}

// queue is a min-heap of events by (t, seq).
type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].t < q[j].t || q[i].t == q[j].t && q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
