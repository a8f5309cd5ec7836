package main

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/throttleddb/throttled/client/retry"
	"github.com/throttleddb/throttled/engines"
	"github.com/throttleddb/throttled/telemetry"
)

// Scenario is one of the study's synthetic set-ups (Section IV, Table V).
type Scenario struct {
	Name    string
	Clients int
	Range   int // requests per client are 1 + Poisson(Range/2), before scaling
	Total   int // requests of all clients together
	// Table V's per-scenario parameters.
	W                              int           // WB's attempts per 60 s
	Bucket, InitRate, InitCongRate float64       // ATB and AATB
	Omega                          time.Duration // AATB's; 0: Table V's 30 s

	// The limiter, a token bucket of Capacity refilling Refill every
	// Period; the arrivals span Span, the clients start within Shift.
	Capacity, Refill int64
	Period           time.Duration
	Span, Shift      time.Duration
	// SecondHints rounds the hints up to whole seconds, as HTTP's
	// Retry-After and RateLimit fields (and client/httplimit) carry them.
	SecondHints bool
	// RTT is each attempt's round trip: the limiter decides RTT/2 after
	// the attempt is sent, its answer reaches the client RTT after, and
	// the client does nothing meanwhile (it serves one request at a
	// time). 0, the default, answers at once.
	RTT time.Duration
}

// study is the study's limiter and timing: a token bucket of 100 refilling
// 80 per minute, arrivals over 5 minutes, clients starting within 10 s.
func study(sc Scenario) Scenario {
	sc.Capacity, sc.Refill, sc.Period = 100, 80, time.Minute
	sc.Span, sc.Shift = 300*time.Second, 10*time.Second
	return sc
}

// Scenarios are the study's four synthetic ones.
var Scenarios = []Scenario{
	study(Scenario{Name: "5 clients, 500 requests", Clients: 5, Range: 200, Total: 500, W: 40, Bucket: 40, InitRate: 40, InitCongRate: 300}),
	study(Scenario{Name: "5 clients, 800 requests", Clients: 5, Range: 200, Total: 800, W: 40, Bucket: 40, InitRate: 40, InitCongRate: 300}),
	study(Scenario{Name: "100 clients, 500 requests", Clients: 100, Range: 10, Total: 500, W: 4, Bucket: 4, InitRate: 4, InitCongRate: 12}),
	study(Scenario{Name: "100 clients, 800 requests", Clients: 100, Range: 10, Total: 800, W: 4, Bucket: 4, InitRate: 4, InitCongRate: 12}),
}

// Strategies, in the order of the tables.
var Strategies = []string{"UB", "WB", "ATB", "AATB", "Hinted"}

// t0 is the emulation's first instant (virtual).
var t0 = time.Unix(1_700_000_000, 0)

// Result is one run's (or an average of runs') figures.
type Result struct {
	Requests int
	Got429   float64
	Duration time.Duration // first attempt to last success
	Service  time.Duration // mean first attempt to success of a request
	Response time.Duration // mean arrival to success
}

// workload returns each client's arrival instants: counts 1 + Poisson(range/2)
// scaled to the scenario's total; the first at a start drawn in [0, 10 s),
// the others a Poisson process (exponential gaps) over the rest of the span.
func workload(sc Scenario, rng *rand.Rand) [][]time.Time {
	weights := make([]float64, sc.Clients)
	sum := 0.0
	for i := range weights {
		weights[i] = 1 + float64(poisson(rng, float64(sc.Range)/2))
		sum += weights[i]
	}
	counts := apportion(weights, sum, sc.Total)
	out := make([][]time.Time, sc.Clients)
	for i, n := range counts {
		start := time.Duration(rng.Float64() * float64(sc.Shift))
		// n-1 exponential gaps, scaled so the last arrival lands within the span.
		cum := make([]float64, n)
		for k := 1; k < n; k++ {
			cum[k] = cum[k-1] + rng.ExpFloat64()
		}
		last := cum[n-1] + rng.ExpFloat64()
		for k := range n {
			out[i] = append(out[i], t0.Add(start+time.Duration(cum[k]/last*float64(sc.Span-start))))
		}
	}
	return out
}

// apportion splits total by weights, each at least 1 (largest remainders).
func apportion(w []float64, sum float64, total int) []int {
	counts := make([]int, len(w))
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	left := total
	for i, x := range w {
		exact := x / sum * float64(total-len(w))
		counts[i] = 1 + int(exact)
		left -= counts[i]
		rems = append(rems, rem{i, exact - math.Floor(exact)})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.r > b.r:
			return -1
		case a.r < b.r:
			return 1
		}
		return 0
	})
	for k := 0; left > 0; k++ {
		counts[rems[k%len(rems)].i]++
		left--
	}
	return counts
}

// poisson draws from Poisson(lambda) (Knuth's method; lambda is at most 100).
func poisson(rng *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	if lambda > 30 { // split to keep exp(-lambda) away from underflow
		return poisson(rng, lambda/2) + poisson(rng, lambda-lambda/2)
	}
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// newStrategy builds client i's strategy for sc.
func newStrategy(name string, sc Scenario, rng *rand.Rand, tel retry.Telemetry, start time.Time) retry.Strategy {
	atb := retry.DefaultATB()
	atb.BucketSize, atb.InitialRate, atb.InitialCongestionRate = sc.Bucket, sc.InitRate, sc.InitCongRate
	aatb := retry.DefaultAATB()
	aatb.BucketSize, aatb.InitialRate = sc.Bucket, sc.InitRate
	if sc.Omega > 0 {
		aatb.Omega = sc.Omega
	}
	switch name {
	case "UB":
		return retry.NewUB(rng)
	case "WB":
		return retry.NewWB(rng, sc.W)
	case "ATB":
		return retry.NewATB(atb, rng, start)
	case "AATB":
		return retry.NewAATB(aatb, tel, rng, start)
	case "Hinted":
		return retry.NewHinted(retry.NewAATB(aatb, tel, rng, start), rng)
	}
	panic("unknown strategy " + name)
}

// groupTelemetry is a client's view of the in-process aggregator: the same
// package TELEMETRY.REPORT answers from, at virtual instants.
type groupTelemetry struct {
	agg    *telemetry.Aggregator
	client string
	rate   telemetry.Rate // the limiter's
	omega  time.Duration  // 0: the aggregator's 30 s
}

func (g groupTelemetry) Report(now time.Time, sent int64, got429 bool) (retry.Aggregate, error) {
	return g.send(now, sent, got429, -1)
}

// Reserve is TELEMETRY.REPORT ... RESERVE: after and the slot are whole
// milliseconds, rounded up, as StoreTelemetry sends one and the command
// answers the other.
func (g groupTelemetry) Reserve(now time.Time, sent int64, got429 bool, after time.Duration) (retry.Aggregate, error) {
	agg, err := g.send(now, sent, got429, ceilMS(max(after, 0)))
	agg.Slot = ceilMS(agg.Slot)
	return agg, err
}

func ceilMS(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}

// send reports, and reserves when after >= 0.
func (g groupTelemetry) send(now time.Time, sent int64, got429 bool, after time.Duration) (retry.Aggregate, error) {
	r := telemetry.Report{Group: "emulated", Client: g.client, Sent: sent,
		Rate: g.rate, Omega: int64(g.omega), Reserve: after >= 0, After: int64(max(after, 0))}
	if got429 {
		r.Got429 = 1
	}
	a, err := g.agg.Report(now.UnixNano(), r)
	if err != nil {
		return retry.Aggregate{}, err
	}
	return retry.Aggregate{Active: a.Active, Total: a.Total, Clients429: a.Clients429,
		Rate: float64(a.Rate.Count) / time.Duration(a.Rate.Period).Minutes(),
		Slot: time.Duration(a.Slot)}, nil
}

// updater is a strategy with periodic work that goes on while its client
// is idle (AATB's routine update).
type updater interface{ Update(now time.Time) time.Time }

type client struct {
	s        retry.Strategy
	arrivals []time.Time // of the requests not served yet, in order
	first    time.Time   // first attempt of the head request (zero: none yet)
	ver      int         // of the pending wake
	inFlight bool        // an attempt awaits its answer (RTT > 0)
}

type event struct {
	at   time.Time
	seq  int // ties in order of scheduling: deterministic
	c    int
	ver  int // of the client's wake it is
	tick bool
	// answer, when not nil, is the limiter's result for the client's
	// attempt in flight, arriving at at.
	answer *engines.Result
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if !e[i].at.Equal(e[j].at) {
		return e[i].at.Before(e[j].at)
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// Run emulates strategy name on sc with seed: every client's strategy
// against throttled's TB engine, in virtual time. The same arguments give
// the same Result.
func Run(sc Scenario, name string, seed uint64) Result {
	wrng := rand.New(rand.NewPCG(seed, 0))
	arrivals := workload(sc, wrng)
	tb, err := engines.NewTB(sc.Capacity, sc.Refill, int64(sc.Period))
	if err != nil {
		panic(err)
	}
	var state []byte
	agg := telemetry.New(telemetry.Limits{})
	cs := make([]*client, sc.Clients)
	q := &events{}
	seq := 0
	push := func(e event) { e.seq = seq; seq++; heap.Push(q, e) }
	wake := func(i int, at time.Time) {
		cs[i].ver++
		push(event{at: at, c: i, ver: cs[i].ver})
	}
	total := 0
	for i, a := range arrivals {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		tel := groupTelemetry{agg: agg, client: strconv.Itoa(i),
			rate: telemetry.Rate{Count: sc.Refill, Period: int64(sc.Period)}, omega: sc.Omega}
		cs[i] = &client{s: newStrategy(name, sc, rng, tel, a[0]), arrivals: a}
		total += len(a)
		wake(i, a[0])
		if u, ok := cs[i].s.(updater); ok {
			if at := u.Update(a[0]); !at.IsZero() {
				push(event{at: at, c: i, tick: true})
			}
		}
	}
	var res Result
	res.Requests = total
	var firstTry, lastDone time.Time
	var service, response time.Duration
	served := 0
	// answered records the outcome of c's attempt, at now.
	answered := func(c *client, now time.Time, r engines.Result) {
		hint := retry.Hint{RetryAfter: time.Duration(r.RetryAfter), Remaining: r.Remaining,
			Reset: time.Duration(r.ResetAfter), Limit: r.Limit}
		if sc.SecondHints {
			hint = inSeconds(hint, r.Limited)
		}
		c.s.Done(now, retry.Outcome{Limited: r.Limited, Hint: hint})
		if r.Limited {
			res.Got429++
			return
		}
		served++
		service += now.Sub(c.first)
		response += now.Sub(c.arrivals[0])
		lastDone = now
		c.arrivals, c.first = c.arrivals[1:], time.Time{}
	}
	for q.Len() > 0 && served < total {
		e := heap.Pop(q).(event)
		c := cs[e.c]
		now := e.at
		switch {
		case e.tick:
			push(event{at: c.s.(updater).Update(now), c: e.c, tick: true})
			if c.inFlight {
				continue
			}
		case e.ver != c.ver:
			continue
		case e.answer != nil:
			c.inFlight = false
			answered(c, now, *e.answer)
		}
		for len(c.arrivals) > 0 && !c.arrivals[0].After(now) {
			d := c.s.Wait(now)
			if d > 0 {
				wake(e.c, now.Add(d))
				break
			}
			c.s.Sent(now)
			if c.first.IsZero() {
				c.first = now
				if firstTry.IsZero() || now.Before(firstTry) {
					firstTry = now
				}
			}
			// Every attempt reaches the limiter the same RTT/2 after it
			// is sent, so in the order they are sent: its state only
			// moves forward.
			r, next, _, write, err := engines.Apply(tb, state, now.Add(sc.RTT/2).UnixNano(), 1)
			if err != nil {
				panic(err)
			}
			if write {
				state = next
			}
			if sc.RTT > 0 {
				c.inFlight = true
				c.ver++
				push(event{at: now.Add(sc.RTT), c: e.c, ver: c.ver, answer: &r})
				break
			}
			answered(c, now, r)
		}
		if !c.inFlight && len(c.arrivals) > 0 && c.arrivals[0].After(now) {
			wake(e.c, c.arrivals[0])
		}
	}
	if served < total {
		panic(fmt.Sprintf("%s on %s, seed %d: %d of %d served", name, sc.Name, seed, served, total))
	}
	res.Duration = lastDone.Sub(firstTry)
	res.Service = service / time.Duration(total)
	res.Response = response / time.Duration(total)
	return res
}

// inSeconds is h as the HTTP fields carry it: client/httplimit's
// Retry-After (on a refusal) and RateLimit's t are whole seconds, rounded
// up, Retry-After at least 1.
func inSeconds(h retry.Hint, limited bool) retry.Hint {
	up := func(d time.Duration) time.Duration { return (d + time.Second - 1) / time.Second * time.Second }
	retryAfter := time.Duration(-1)
	if limited {
		retryAfter = max(up(h.RetryAfter), time.Second)
	}
	h.Reset, h.RetryAfter = up(max(h.Reset, 0)), retryAfter
	return h
}

// Average runs seeds 1..runs and averages their figures.
func Average(sc Scenario, name string, runs int) Result {
	var sum Result
	for seed := 1; seed <= runs; seed++ {
		r := Run(sc, name, uint64(seed))
		sum.Requests = r.Requests
		sum.Got429 += r.Got429
		sum.Duration += r.Duration
		sum.Service += r.Service
		sum.Response += r.Response
	}
	n := time.Duration(runs)
	return Result{Requests: sum.Requests, Got429: sum.Got429 / float64(runs),
		Duration: sum.Duration / n, Service: sum.Service / n, Response: sum.Response / n}
}
