package retry

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// fakeClock's Sleep moves its time forward instead of sleeping.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept time.Duration
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.slept += d
	return nil
}

// recorder is a Strategy that keeps the outcomes and waits wait after a
// refusal.
type recorder struct {
	wait     time.Duration
	next     time.Time
	sent     int
	outcomes []Outcome
}

func (r *recorder) Wait(now time.Time) time.Duration { return max(r.next.Sub(now), 0) }
func (r *recorder) Sent(time.Time)                   { r.sent++ }
func (r *recorder) Done(now time.Time, o Outcome) {
	r.outcomes = append(r.outcomes, o)
	if o.Limited {
		r.next = now.Add(r.wait)
	}
}

// limitedServer answers 429 with throttled's gateway headers to the first
// refusals attempts, then 200; it checks every attempt's body.
func limitedServer(t *testing.T, refusals int64, inFlight *atomic.Int64, maxInFlight *atomic.Int64) (*httptest.Server, *atomic.Int64) {
	var attempts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if inFlight != nil {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
			}
		}
		if b, _ := io.ReadAll(r.Body); r.Method == http.MethodPost && string(b) != "payload" {
			t.Errorf("attempt %d: body %q, want the request's", attempts.Load()+1, b)
		}
		w.Header().Set("RateLimit-Policy", `"default";q=16;w=60`)
		if attempts.Add(1) <= refusals {
			w.Header().Set("Retry-After", "2")
			w.Header().Set("RateLimit", `"default";r=0;t=2`)
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down")
			return
		}
		w.Header().Set("RateLimit", `"default";r=15;t=4`)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &attempts
}

func TestTransport_RetriesWithHints(t *testing.T) {
	srv, attempts := limitedServer(t, 2, nil, nil)
	clock := &fakeClock{now: t0}
	rec := &recorder{wait: 2 * time.Second}
	hc := &http.Client{Transport: &Transport{Client: NewClient(rec, clock)}}
	resp, err := hc.Post(srv.URL, "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" || attempts.Load() != 3 || rec.sent != 3 {
		t.Fatalf("got %d %q after %d attempts (%d sent); want 200 \"ok\" after 3", resp.StatusCode, body, attempts.Load(), rec.sent)
	}
	want := Hint{RetryAfter: 2 * time.Second, Remaining: 0, Reset: 2 * time.Second, Limit: 16}
	if len(rec.outcomes) != 3 || !rec.outcomes[0].Limited || rec.outcomes[0].Hint != want {
		t.Fatalf("outcomes %+v; want the first limited with %+v", rec.outcomes, want)
	}
	if last := rec.outcomes[2]; last.Limited || last.Hint.Remaining != 15 || last.Hint.RetryAfter != -1 {
		t.Fatalf("last outcome %+v, want served with 15 remaining", last)
	}
	if clock.slept != 4*time.Second {
		t.Fatalf("waited %v on the clock, want two refusals' 2s", clock.slept)
	}
}

func TestTransport_MaxAttemptsAndBodies(t *testing.T) {
	srv, attempts := limitedServer(t, 100, nil, nil)
	clock := &fakeClock{now: t0}
	tr := &Transport{Client: NewClient(&recorder{wait: time.Second}, clock), MaxAttempts: 4}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || attempts.Load() != 4 {
		t.Fatalf("got %d after %d attempts; want the last 429 after 4", resp.StatusCode, attempts.Load())
	}
	// A body that cannot be read again is sent once.
	attempts.Store(0)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("payload")))
	resp, err = tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || attempts.Load() != 1 {
		t.Fatalf("without GetBody: %d after %d attempts; want one 429", resp.StatusCode, attempts.Load())
	}
}

// One attempt in flight per client: concurrent callers queue, and a
// refused request keeps its turn through its retries.
func TestTransport_OneInFlight(t *testing.T) {
	var inFlight, most atomic.Int64
	srv, attempts := limitedServer(t, 5, &inFlight, &most)
	tr := &Transport{Client: NewClient(NewUB(rand.New(rand.NewPCG(1, 1))), &fakeClock{now: t0})}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 || attempts.Load() != 13 {
		t.Fatalf("%d in flight at most over %d attempts; want 1 over 8 requests + 5 refusals", most.Load(), attempts.Load())
	}
}

func TestClient_AcquireReport(t *testing.T) {
	c := NewClient(&recorder{}, nil)
	if err := c.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while another holds the turn: %v, want the deadline", err)
	}
	c.Report(Outcome{Hint: NoHint})
	if err := c.Acquire(context.Background()); err != nil {
		t.Fatalf("Acquire after Report: %v", err)
	}
	c.Report(Outcome{Hint: NoHint})
}

func TestParseHint(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want Hint
	}{
		{http.Header{}, NoHint},
		{http.Header{"Retry-After": {"Sat, 28 Nov 2026 12:00:07 GMT"}}, Hint{RetryAfter: 7 * time.Second, Remaining: -1, Reset: -1}},
		{http.Header{"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"3"}, "Ratelimit-Reset": {"9"}}, Hint{RetryAfter: -1, Remaining: 3, Reset: 9 * time.Second, Limit: 100}},
		{http.Header{"Retry-After": {"soon"}, "Ratelimit": {`"d";r=x`}}, NoHint},
	}
	for i, c := range cases {
		if got := ParseHint(c.h, now); got != c.want {
			t.Errorf("case %d: got %+v, want %+v", i, got, c.want)
		}
	}
}

// AATB against throttled's TELEMETRY.REPORT on the debug clock: two
// clients of one group see each other, tied to a policy's rate.
func TestStoreTelemetry(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true})
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	if err := rdb.Do(ctx, "POLICY", "SET", "{id: shared, path: /s, tiers: [{algorithm: tb, capacity: 100, refill: 80, period: 1m}]}").Err(); err != nil {
		t.Fatal(err)
	}
	a := &StoreTelemetry{Redis: rdb, Group: "g", Client: "a", Policy: "shared"}
	b := &StoreTelemetry{Redis: rdb, Group: "g", Client: "b", Omega: 30 * time.Second}
	if _, err := a.Report(t0, 12, false); err != nil {
		t.Fatal(err)
	}
	got, err := b.Report(t0, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Aggregate{Active: 2, Total: 15, Clients429: 1, Rate: 80}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Reservations: the group's rate (the policy's 80 a minute) spaces the
	// slots 750 ms apart; after is sent in whole ms, rounded up.
	slot, err := a.Reserve(t0, 0, true, 200*time.Millisecond+1)
	if err != nil || slot.Slot != 201*time.Millisecond || slot.Clients429 != 2 {
		t.Fatalf("first reservation: %+v, %v; want a slot in 201ms", slot, err)
	}
	if slot, err = b.Reserve(t0, 0, false, 0); err != nil || slot.Slot != 951*time.Millisecond {
		t.Fatalf("second reservation: %+v, %v; want a slot in 951ms", slot, err)
	}
	norate := &StoreTelemetry{Redis: rdb, Group: "h", Client: "a"}
	if _, err := norate.Reserve(t0, 0, false, 0); err == nil || !strings.Contains(err.Error(), "RESERVE needs") {
		t.Fatalf("a reservation in a group tied to no rate: %v", err)
	}
	bad := &StoreTelemetry{Redis: rdb, Group: "g", Client: "c", Policy: "nosuch"}
	if _, err := bad.Report(t0, 1, false); err == nil || !strings.Contains(err.Error(), "no such policy") {
		t.Fatalf("a missing policy: %v", err)
	}
}
