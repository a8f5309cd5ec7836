package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	throttledclient "github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/client/httplimit"
	"github.com/throttleddb/throttled/client/retry"
	"github.com/throttleddb/throttled/internal/sleep"
)

// RealTime is the scenario of the real-time run (-http), scaled down to
// seconds: 10 clients send 300 requests in 10 s to a token bucket of 20
// refilling 20 a second (demand half again the limit's rate, as the
// study's 800-request scenarios run at twice it), with hints in whole
// seconds as HTTP carries them. ATB and AATB's rates are scaled by hand:
// each client starts at 5 a second (2.5 times its share, as Table V's
// five clients), the congestion rate is the limit's, omega is 1 s. WB is
// left out: its window of 60 s is longer than the run.
var RealTime = Scenario{Name: "real time: 10 clients, 300 requests in 10 s", Clients: 10, Range: 10, Total: 300,
	Bucket: 4, InitRate: 300, InitCongRate: 1200, Omega: time.Second,
	Capacity: 20, Refill: 20, Period: time.Second, Span: 10 * time.Second, Shift: 200 * time.Millisecond,
	SecondHints: true}

// RealTimeStrategies are the strategies of the real-time run.
var RealTimeStrategies = []string{"UB", "ATB", "AATB", "Hinted"}

// realPolicy is the store's policy the service limits by and the
// telemetry ties its groups to.
const realPolicy = "retry-rt"

// RunHTTP runs strategy name on sc in real time: sc.Clients clients, each a
// retry.Transport over its strategy, send their requests (the emulator's
// workload for seed, at its instants from now) to a Go HTTP service that
// client/httplimit limits by the store's policy, a token bucket of sc's
// in the throttled at rdb; AATB and Hinted report to that throttled's
// TELEMETRY.REPORT (a group of their own per run). The 429s, the duration
// (first attempt to last success) and the mean response are counted at
// the service and the clients, over real sockets.
func RunHTTP(ctx context.Context, rdb *redis.Client, sc Scenario, name string, seed uint64) (Result, error) {
	tier := fmt.Sprintf("{algorithm: tb, capacity: %d, refill: %d, period: %dms}", sc.Capacity, sc.Refill, sc.Period.Milliseconds())
	if err := rdb.Do(ctx, "POLICY", "SET", "{id: "+realPolicy+", path: /work, tiers: ["+tier+"]}").Err(); err != nil {
		return Result{}, err
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil { // a full bucket
		return Result{}, err
	}
	mw, err := httplimit.New(httplimit.Config{Client: rdb, StorePolicies: true, Fail: throttledclient.FailClosed})
	if err != nil {
		return Result{}, err
	}
	defer mw.Close()
	var srv service
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	hs := &http.Server{Handler: srv.count(mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/work"

	wrng := rand.New(rand.NewPCG(seed, 0))
	arrivals := workload(sc, wrng)
	start := time.Now()
	group := fmt.Sprintf("retry-rt-%s-%d-%d", name, seed, start.UnixNano())
	var wg sync.WaitGroup
	var response atomic.Int64
	errs := make(chan error, sc.Total)
	for i, a := range arrivals {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		tel := &retry.StoreTelemetry{Redis: rdb, Group: group, Client: strconv.Itoa(i), Omega: sc.Omega, Policy: realPolicy}
		s := newStrategy(name, sc, rng, tel, start)
		// An idle client's strategy reports nothing here (the emulator's
		// keep reporting): a Client runs the strategy only in its turns.
		hc := &http.Client{Transport: &retry.Transport{Client: retry.NewClient(s, nil)}}
		for k, at := range a {
			wg.Add(1)
			// Each request is sent at its arrival; the Transport's FIFO
			// keeps one in flight per client. The requests of a client
			// are started a microsecond apart, so they queue in order.
			due := start.Add(at.Sub(t0) + time.Duration(k)*time.Microsecond)
			go func() {
				defer wg.Done()
				if err := sleep.For(ctx, time.Until(due)); err != nil {
					errs <- err
					return
				}
				if err := get(ctx, hc, url); err != nil {
					errs <- err
					return
				}
				response.Add(int64(time.Since(due)))
			}()
		}
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	r := srv.result()
	if r.Requests != sc.Total {
		return Result{}, fmt.Errorf("%d requests served, want %d", r.Requests, sc.Total)
	}
	r.Response = time.Duration(response.Load() / int64(sc.Total))
	return r, nil
}

// get sends one request and reads its answer: a 200, after as many 429s as
// the strategy met.
func get(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET: %s", res.Status)
	}
	return nil
}

// service counts what the HTTP service answered: 429s, and the instants of
// the first attempt and of the successes.
type service struct {
	mu        sync.Mutex
	got429    int
	first     time.Time
	successes []time.Time
}

func (s *service) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		at := time.Now()
		next.ServeHTTP(rec, r)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.first.IsZero() || at.Before(s.first) {
			s.first = at
		}
		switch rec.status {
		case http.StatusTooManyRequests:
			s.got429++
		case http.StatusOK:
			s.successes = append(s.successes, at)
		}
	})
}

func (s *service) result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Slice(s.successes, func(i, j int) bool { return s.successes[i].Before(s.successes[j]) })
	r := Result{Requests: len(s.successes), Got429: float64(s.got429)}
	if n := len(s.successes); n > 0 {
		r.Duration = s.successes[n-1].Sub(s.first)
	}
	return r
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}
