// Command go-policy-gateway is a small HTTP gateway in Go: a reverse proxy
// that asks throttled one question per request, with go-redis,
//
//	THROTTLE.POLICY <method> <request URI> <principal> [TENANT <tenant>]
//
// and lets the policies held in throttled (docs/policies.md) decide. It
// answers 429 with Retry-After when the request is limited, passes it on
// otherwise, and on both sets X-RateLimit-Limit/Remaining/Reset (the
// deciding tier) and the IETF draft's RateLimit-Policy and RateLimit fields
// (one item per tier). When throttled gives no decision (down, or an error
// reply) it fails closed: 503, and the error is logged.
//
//	go run ./examples/go -listen 127.0.0.1:8080 -throttled 127.0.0.1:6379 -upstream http://127.0.0.1:8081
//
// The principal is the X-API-Key header, else the client's address; the
// tenant is the X-Tenant header when present. THROTTLED_USERNAME and
// THROTTLED_PASSWORD log in (see examples/openresty/README.md for a user
// that may run THROTTLE.POLICY only).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve on")
	store := flag.String("throttled", "127.0.0.1:6379", "throttled's address")
	upstream := flag.String("upstream", "http://127.0.0.1:8081", "the application behind the gateway")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("-upstream: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:     *store,
		Username: os.Getenv("THROTTLED_USERNAME"),
		Password: os.Getenv("THROTTLED_PASSWORD"),
		// A decision that does not come quickly is no decision.
		ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	defer rdb.Close()
	srv := &http.Server{Addr: *listen, Handler: Limit(rdb, httputil.NewSingleHostReverseProxy(target)), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// A Decision is THROTTLE.POLICY's reply.
type Decision struct {
	Limited  bool
	Policy   string // "" when no policy applies
	Endpoint string
	// The deciding tier (1-based) and its state; times in milliseconds,
	// RetryAfter -1 when allowed.
	Tier, Limit, Remaining, Reset, RetryAfter int64
	Shadow                                    bool // a shadow policy would have refused
	Tiers                                     []Tier
}

// A Tier is one tier's state in the reply.
type Tier struct {
	Algorithm                                   string
	Limit, Remaining, Reset, RetryAfter, Window int64 // ms
}

// Decide asks throttled about one request.
func Decide(ctx context.Context, rdb *redis.Client, method, uri, principal, tenant string) (Decision, error) {
	args := []any{"THROTTLE.POLICY", method, uri, principal}
	if tenant != "" {
		args = append(args, "TENANT", tenant)
	}
	reply, err := rdb.Do(ctx, args...).Slice()
	if err != nil {
		return Decision{}, err
	}
	return parseDecision(reply)
}

var errShape = errors.New("not a THROTTLE.POLICY reply")

// parseDecision reads THROTTLE.POLICY's ten elements.
func parseDecision(r []any) (Decision, error) {
	var d Decision
	if len(r) != 10 {
		return d, errShape
	}
	ints := make([]int64, 0, 7)
	for _, i := range []int{0, 3, 4, 5, 6, 7, 8} {
		n, ok := r[i].(int64)
		if !ok {
			return d, errShape
		}
		ints = append(ints, n)
	}
	if r[1] != nil {
		if d.Policy, _ = r[1].(string); d.Policy == "" {
			return d, errShape
		}
	}
	endpoint, ok1 := r[2].(string)
	tiers, ok2 := r[9].([]any)
	if !ok1 || !ok2 {
		return d, errShape
	}
	d.Limited, d.Endpoint, d.Shadow = ints[0] == 1, endpoint, ints[6] == 1
	d.Tier, d.Limit, d.Remaining, d.Reset, d.RetryAfter = ints[1], ints[2], ints[3], ints[4], ints[5]
	for _, t := range tiers {
		f, ok := t.([]any)
		if !ok || len(f) != 6 {
			return d, errShape
		}
		var tier Tier
		var okAll bool
		tier.Algorithm, okAll = f[0].(string)
		for i, p := range []*int64{&tier.Limit, &tier.Remaining, &tier.Reset, &tier.RetryAfter, &tier.Window} {
			n, ok := f[i+1].(int64)
			okAll = okAll && ok
			*p = n
		}
		if !okAll {
			return d, errShape
		}
		d.Tiers = append(d.Tiers, tier)
	}
	return d, nil
}

// Limit wraps next with a THROTTLE.POLICY decision per request.
func Limit(rdb *redis.Client, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		principal := r.Header.Get("X-API-Key")
		if principal == "" {
			principal, _, _ = net.SplitHostPort(r.RemoteAddr)
		}
		// The raw request target: throttled normalizes it and drops the
		// query, the same way for every gateway.
		d, err := Decide(r.Context(), rdb, r.Method, r.RequestURI, principal, r.Header.Get("X-Tenant"))
		if err != nil {
			log.Printf("go-policy-gateway: THROTTLE.POLICY %s %s: %v (failing closed: 503)", r.Method, r.RequestURI, err)
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		if d.Policy == "" { // no policy applies
			next.ServeHTTP(w, r)
			return
		}
		SetHeaders(w.Header(), d)
		if d.Limited {
			retry := seconds(d.RetryAfter)
			w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":"rate limited","policy":%q,"retry_after":%d}`+"\n", d.Policy, retry)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// SetHeaders sets the rate-limit headers of a decision: X-RateLimit-* of
// the deciding tier, and RateLimit-Policy and RateLimit with one item per
// tier, named "<policy>.<tier>" (policy ids need no escaping).
func SetHeaders(h http.Header, d Decision) {
	h.Set("X-RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("X-RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(seconds(d.Reset), 10))
	if d.Shadow {
		h.Set("X-RateLimit-Shadow", "limited")
	}
	policies := make([]string, len(d.Tiers))
	states := make([]string, len(d.Tiers))
	for i, t := range d.Tiers {
		name := fmt.Sprintf("%q", fmt.Sprintf("%s.%d", d.Policy, i+1))
		policies[i] = fmt.Sprintf("%s;q=%d;w=%d", name, t.Limit, seconds(t.Window))
		states[i] = fmt.Sprintf("%s;r=%d;t=%d", name, t.Remaining, seconds(t.Reset))
	}
	h.Set("RateLimit-Policy", strings.Join(policies, ", "))
	h.Set("RateLimit", strings.Join(states, ", "))
}

// seconds is a duration in ms in whole seconds, rounded up.
func seconds(ms int64) int64 { return (ms + 999) / 1000 }
