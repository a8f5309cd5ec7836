package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

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

// TestLeaseShareLazy: the middleware hands Share and Lazy to its lease
// limiters: its first QUOTA.LEASE carries them.
func TestLeaseShareLazy(t *testing.T) {
	for _, c := range []struct {
		shareCfg    int
		lazyCfg     bool
		share, lazy string // in the first lease, or "" for none
	}{{0, false, "", ""}, {50, false, "SHARE 50", ""}, {client.ShareDynamic, true, "SHARE DYNAMIC", "LAZY"}} {
		t.Run(fmt.Sprint(c.shareCfg, c.lazyCfg), func(t *testing.T) {
			rdb := store(t)
			var leases leaseLog
			rdb.AddHook(&leases)
			m, err := httplimit.New(httplimit.Config{Client: rdb, Policies: policies(t, loginPolicies),
				Mode: client.Lease, BatchSize: 2, Share: c.shareCfg, Lazy: c.lazyCfg, Fail: client.FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			if res := req(h, "POST", "/v1/login", "198.51.100.67:4000"); res.StatusCode != 200 {
				t.Fatalf("first request: %d", res.StatusCode)
			}
			first := leases.first() + " "
			for opt, want := range map[string]string{"SHARE": c.share, "LAZY": c.lazy} {
				if want == "" && strings.Contains(first, " "+opt+" ") || want != "" && !strings.Contains(first, " "+want+" ") {
					t.Errorf("first lease %q, want %q", first, want)
				}
			}
		})
	}
}

// leaseLog is a go-redis hook that keeps the QUOTA.LEASE commands sent.
type leaseLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *leaseLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *leaseLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.note(cmd)
		return next(ctx, cmd)
	}
}

func (l *leaseLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			l.note(cmd)
		}
		return next(ctx, cmds)
	}
}

func (l *leaseLog) note(cmd redis.Cmder) {
	if strings.EqualFold(cmd.Name(), "quota.lease") {
		l.mu.Lock()
		l.sent = append(l.sent, strings.ToUpper(strings.TrimSuffix(fmt.Sprintln(cmd.Args()...), "\n")))
		l.mu.Unlock()
	}
}

func (l *leaseLog) first() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(l.sent, "")[0]
}
