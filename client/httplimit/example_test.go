package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/client/httplimit"
	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// A service behind one trusted proxy limits logins to 3 a minute per
// client, with the limits in its own YAML, failing closed.
func Example() {
	// A throttled for the example (a gateway would dial its own).
	node, err := servertest.Open(server.Config{DebugClock: true, DebugClockStart: time.Now().Truncate(time.Minute).UnixNano()})
	if err != nil {
		panic(err)
	}
	defer node.Close()

	rdb := redis.NewClient(&redis.Options{Addr: node.Addr()})
	defer rdb.Close()
	limits, err := policy.Parse([]byte(`
policies:
  - id: login
    path: /v1/login
    methods: [POST]
    tiers: [{algorithm: fwc, limit: 3, window: 1m}]
`))
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Client:         rdb,
		Policies:       limits,
		Mode:           client.PerRequest,
		Fail:           client.FailClosed,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	defer mw.Close()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "welcome") })
	handler := mw.Handler(app)

	for range 4 {
		r := httptest.NewRequest("POST", "/v1/login", nil)
		r.RemoteAddr = "10.0.0.1:5123" // the proxy
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "login";r=2;t=60 Retry-After: ""
	// 200 RateLimit: "login";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "login";r=0;t=60 Retry-After: ""
	// 429 RateLimit: "login";r=0;t=60 Retry-After: "60"
}
