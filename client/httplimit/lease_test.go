package httplimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/throttleddb/throttled/client"
	"github.com/throttleddb/throttled/client/httplimit"
)

// TestLease: two middleware instances in lease mode never admit more than
// the login limit together, and after Close (their returns) the store
// counted exactly what they admitted.
func TestLease(t *testing.T) {
	rdb := store(t)
	var hs []http.Handler
	var ms []*httplimit.Middleware
	for range 2 {
		m, err := httplimit.New(httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies),
			Mode: client.Lease, BatchSize: 2, Fail: client.FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		hs = append(hs, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	}
	admitted := 0
	for i := range 10 {
		if res := req(hs[i%2], "POST", "/v1/login", "198.51.100.66:4000"); res.StatusCode == 200 {
			admitted++
		} else if res.StatusCode != 429 || res.Header.Get("Retry-After") == "" {
			t.Fatalf("request %d: %d %v", i, res.StatusCode, res.Header)
		}
	}
	for _, m := range ms {
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// login is cl burst 2, 1 per 60 s: 3 at once.
	peek, err := rdb.Do(context.Background(), "CL.THROTTLE", "httplimit:login::ip:198.51.100.66", 2, 1, 60, 0).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if admitted > 3 || peek[1]-peek[2] != int64(admitted) {
		t.Errorf("admitted %d, the store counted %d", admitted, peek[1]-peek[2])
	}
	t.Logf("admitted %d of 3", admitted)
}
