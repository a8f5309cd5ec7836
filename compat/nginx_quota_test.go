package compat

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/server"
)

// These tests run examples/openresty's throttled_quota module
// (lua/throttled_quota.lua) in real nginx processes, each a master with two
// workers sharing the module's lua_shared_dict, in front of an in-process
// node on the debug clock. compat/nginx/quota.conf takes every setting from
// the request's headers (quotaReq), so that one configuration runs every
// case. The store's accounting is read with FWC.THROTTLE of quantity 0
// (its count is limit - remaining) after the gateways were stopped
// gracefully, which returns every batch they held.

// quotaReq is the settings of one request to compat/nginx/quota.conf.
type quotaReq struct {
	key, limit, mode, batch, share, ttl, refreshAt, holder, failOpen string
}

func (q quotaReq) headers() []string {
	return []string{"X-Quota-Key", q.key, "X-Quota-Limit", q.limit, "X-Quota-Mode", q.mode,
		"X-Quota-Batch", q.batch, "X-Quota-Share", q.share, "X-Quota-TTL", q.ttl,
		"X-Quota-Refresh-At", q.refreshAt, "X-Quota-Holder", q.holder, "X-Fail-Open", q.failOpen}
}

// quotaPass is the password of the tests' nodes, which the gateways log
// in with.
const quotaPass = "quota-s3cret"

// quotaNode starts a node on the debug clock, with a password, and
// connects to it.
func quotaNode(t *testing.T) (*server.Node, *nginxAdmin) {
	t.Helper()
	node := e2eNode(t, server.Config{RequirePass: quotaPass})
	return node, nginxDialAdmin(t, node, quotaPass)
}

// quotaStart runs compat/nginx/quota.conf (two workers) against the store
// at addr; subst changes more of the configuration.
func quotaStart(t *testing.T, bin, addr string, errorsExpected bool, subst map[string]string) *nginxServer {
	t.Helper()
	listen := nginxFreeAddr(t)
	s := map[string]string{"127.0.0.1:8080": listen}
	for k, v := range subst {
		s[k] = v
	}
	return nginxStart(t, bin, listen, nginxConfig{
		conf:           "nginx/quota.conf",
		lua:            "../examples/openresty/lua",
		subst:          s,
		env:            append(gatewayEnv(t, addr), "THROTTLED_PASSWORD="+quotaPass),
		errorsExpected: errorsExpected,
		master:         true,
	})
}

// quotaTally is what a run of requests got.
type quotaTally struct {
	mu      sync.Mutex
	status  map[int]int
	workers map[string]bool // X-Worker: the worker pids that answered
	waited  int             // responses that waited for throttled (X-Quota-Waited)
}

// quotaRun sends n requests with q's settings, spread over the gateways,
// from conc goroutines at once, and tallies the answers.
func quotaRun(t *testing.T, gws []*nginxServer, q quotaReq, n, conc int) *quotaTally {
	t.Helper()
	tally := &quotaTally{status: map[int]int{}, workers: map[string]bool{}}
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	hdr := q.headers()
	for range conc {
		wg.Go(func() {
			for i := range next {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, gws[i%len(gws)].url+"/q", nil)
				if err != nil {
					t.Error(err)
					return
				}
				for j := 0; j+1 < len(hdr); j += 2 {
					req.Header.Set(hdr[j], hdr[j+1])
				}
				resp, err := nginxClient.Do(req)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				tally.mu.Lock()
				tally.status[resp.StatusCode]++
				tally.workers[fmt.Sprint(i%len(gws))+"/"+resp.Header.Get("X-Worker")] = true
				if resp.Header.Get("X-Quota-Waited") == "1" {
					tally.waited++
				}
				tally.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return tally
}

// decided fails the test unless every response was 200 or 429, and
// returns the tally.
func (q *quotaTally) decided(t *testing.T) *quotaTally {
	t.Helper()
	for s, c := range q.status {
		if s != 200 && s != 429 {
			t.Errorf("%d responses with status %d", c, s)
		}
	}
	return q
}

// fwcCount returns what the store's FWC state of key counts in the window,
// even past the limit: it asks with a larger limit, which FWC's state
// (one count per window) does not keep.
func fwcCount(t *testing.T, a *nginxAdmin, key string, window int) int {
	t.Helper()
	const limit = 1 << 30
	reply := a.do(t, "FWC.THROTTLE", key, strconv.Itoa(limit), strconv.Itoa(window), "0")
	f := strings.Split(reply, "\r\n")
	if len(f) < 4 || f[0] != "*5" {
		t.Fatalf("FWC.THROTTLE %s: %q", key, reply)
	}
	rem, err := strconv.Atoi(strings.TrimPrefix(f[3], ":"))
	if err != nil {
		t.Fatalf("FWC.THROTTLE %s: %q", key, reply)
	}
	return limit - rem
}

// TestNginxQuotaLease: eager leases across two nginx instances of two
// workers each admit no more than the limit, and exactly what the store
// counted (granted - returned) once the gateways have ended their batches;
// each instance's workers share its batches (both answered).
func TestNginxQuotaLease(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	a := quotaStart(t, bin, node.Addr(), false, nil)
	b := quotaStart(t, bin, node.Addr(), false, nil)
	before := admin.calls(t)
	const limit, n = 200, 400
	q := quotaReq{key: "q:exact", limit: "FWC 200 60", batch: "10"}
	qa, qb := q, q
	qa.holder, qb.holder = "gwA", "gwB"
	// Half the requests to each gateway (quotaRun alternates), as its holder.
	tally := quotaRun(t, []*nginxServer{a, b}, qa, n/2, 8).decided(t)
	tally2 := quotaRun(t, []*nginxServer{b}, qb, n/2, 8).decided(t)
	admitted := tally.status[200] + tally2.status[200]
	if admitted > limit {
		t.Errorf("admitted %d, over the limit %d", admitted, limit)
	}
	if admitted < limit/2 {
		t.Errorf("admitted %d of %d requests against a limit of %d: the batches were not spent", admitted, n, limit)
	}
	// While the gateways hold batches the store has charged at least what
	// they admitted; stopped, they return the rest.
	if got := fwcCount(t, admin, "q:exact", 60); got < admitted {
		t.Errorf("store counts %d before the returns, less than the %d admitted", got, admitted)
	}
	a.stop(t)
	b.stop(t)
	if got := fwcCount(t, admin, "q:exact", 60); got != admitted {
		t.Errorf("store counts %d (granted - returned), gateways admitted %d", got, admitted)
	}
	workers := 0
	for w := range tally.workers {
		if strings.HasPrefix(w, "0/") {
			workers++
		}
	}
	if workers < 2 {
		t.Errorf("gateway A answered from %d worker(s), want both: %v", workers, tally.workers)
	}
	calls := admin.calls(t)
	leases, returns := calls["quota.lease"]-before["quota.lease"], calls["quota.return"]-before["quota.return"]
	if returns > leases || leases > n/5 {
		t.Errorf("%d QUOTA.LEASE and %d QUOTA.RETURN for %d requests, want a return per lease at most and a lease per 5 requests at most", leases, returns, n)
	}
	t.Logf("%d requests, %d admitted (limit %d), %d QUOTA.LEASE, %d QUOTA.RETURN, %d waited for the store",
		n, admitted, limit, leases, returns, tally.waited+tally2.waited)
}

// TestNginxQuotaLease_Steady: with the limit far away, a gateway leases its
// next batch in the background before the current one runs out, so the
// request path waits for the store only for the key's first batch.
func TestNginxQuotaLease_Steady(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	gw := quotaStart(t, bin, node.Addr(), false, nil)
	before := admin.calls(t)
	const n = 300
	tally := quotaRun(t, []*nginxServer{gw}, quotaReq{key: "q:steady", limit: "FWC 100000 60", batch: "20"}, n, 1).decided(t)
	if tally.status[200] != n {
		t.Fatalf("admitted %d of %d", tally.status[200], n)
	}
	leases := admin.calls(t)["quota.lease"] - before["quota.lease"]
	if leases < n/20 || leases > n/20+2 {
		t.Errorf("%d QUOTA.LEASE for %d requests in batches of 20", leases, n)
	}
	// Batch 20, the next leased at 10 left: 10 requests' time for a store
	// round trip. Only the first request must wait; a slow machine may make
	// a few more wait, never most of the batches.
	if tally.waited < 1 || tally.waited > leases/2 {
		t.Errorf("%d requests waited for the store, %d leases: want the first and few others", tally.waited, leases)
	}
	t.Logf("%d requests, %d QUOTA.LEASE, %d waited", n, leases, tally.waited)
	gw.stop(t)
	if got := fwcCount(t, admin, "q:steady", 60); got != n {
		t.Errorf("store counts %d, admitted %d", got, n)
	}
}

// TestNginxQuotaLease_Killed: a gateway killed (kill -9) mid-lease has its
// batch counted as spent: the store's count is what the live gateway
// admitted plus the dead one's whole grant, and a return of the dead lease
// after its TTL changes nothing (status -1). The dead gateway's unused
// units are refused to the live one until then: never over the limit.
func TestNginxQuotaLease_Killed(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	dead := quotaStart(t, bin, node.Addr(), false, nil)
	live := quotaStart(t, bin, node.Addr(), false, nil)
	const limit = 100
	q := quotaReq{key: "q:kill", limit: "FWC 100 60", batch: "10", ttl: "10000", holder: "dead"}
	// 3 requests: the first leases 10 (the debug clock is frozen: its id
	// is the clock's nanoseconds), 7 left, nothing leased ahead.
	if got := quotaRun(t, []*nginxServer{dead}, q, 3, 1).decided(t); got.status[200] != 3 {
		t.Fatalf("dead gateway: %v", got.status)
	}
	deadLease := strconv.FormatInt(e2eClockStart, 10) + ":q:kill"
	dead.kill9(t)
	if got := fwcCount(t, admin, "q:kill", 60); got != 10 {
		t.Fatalf("store counts %d after the dead gateway's lease, want its grant 10", got)
	}
	q.holder = "live"
	tally := quotaRun(t, []*nginxServer{live}, q, 120, 4).decided(t)
	if tally.status[200] != limit-10 {
		t.Errorf("live gateway admitted %d, want %d (the limit less the dead lease)", tally.status[200], limit-10)
	}
	admin.advance(t, 11*time.Second) // past the dead lease's TTL
	if got := admin.do(t, "QUOTA.RETURN", deadLease, "3"); !strings.HasPrefix(got, "*5\r\n:-1\r\n") {
		t.Errorf("QUOTA.RETURN of the dead lease after its TTL: %q, want status -1 (expired, counted as spent)", got)
	}
	live.stop(t)
	if got := fwcCount(t, admin, "q:kill", 60); got != limit {
		t.Errorf("store counts %d, want %d: 3 admitted and 7 spent by the dead gateway, %d by the live one", got, limit, limit-10)
	}
}

// TestNginxQuotaLazy: lazy leases from two gateways may go over the limit,
// by at most gateways x batch, and the store charges exactly what they
// admitted.
func TestNginxQuotaLazy(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	a := quotaStart(t, bin, node.Addr(), false, nil)
	b := quotaStart(t, bin, node.Addr(), false, nil)
	const limit, batch, gateways = 20, 5, 2
	q := quotaReq{key: "q:lazy", limit: "FWC 20 60", mode: "lazy", batch: strconv.Itoa(batch)}
	// Both gateways lease a batch each before either reports: 10 units out
	// on a limit that has 20, and the last two batches reach past it.
	qa, qb := q, q
	qa.holder, qb.holder = "gwA", "gwB"
	admitted := 0
	for range 8 {
		for _, g := range []struct {
			gw *nginxServer
			q  quotaReq
		}{{a, qa}, {b, qb}} {
			admitted += quotaRun(t, []*nginxServer{g.gw}, g.q, batch, 1).decided(t).status[200]
		}
	}
	a.stop(t)
	b.stop(t)
	if admitted > limit+gateways*batch {
		t.Errorf("admitted %d, over the bound %d + %d x %d", admitted, limit, gateways, batch)
	}
	if admitted <= limit {
		t.Errorf("admitted %d: the gateways never went past the limit %d, the bound is not exercised", admitted, limit)
	}
	if got := fwcCount(t, admin, "q:lazy", 60); got != admitted {
		t.Errorf("store charged %d, gateways admitted %d", got, admitted)
	}
	t.Logf("lazy: %d admitted, limit %d, bound %d", admitted, limit, limit+gateways*batch)
}

// TestNginxQuotaShare: the study's shares. SHARE 50 grants half of what
// remains (8, 4, 2, 1, 1 of 16) and SHARE DYNAMIC a new holder's half, then
// twice what it used: either way the gateway admits the limit exactly, in
// smaller batches than the 100 it asks for.
func TestNginxQuotaShare(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	gw := quotaStart(t, bin, node.Addr(), false, nil)
	for _, share := range []string{"50", "dynamic"} {
		t.Run(share, func(t *testing.T) {
			key := "q:share:" + share
			before := admin.calls(t)
			q := quotaReq{key: key, limit: "FWC 16 60", batch: "100", share: share, holder: "gw"}
			tally := quotaRun(t, []*nginxServer{gw}, q, 30, 1).decided(t)
			if tally.status[200] != 16 || tally.status[429] != 14 {
				t.Errorf("got %v, want 16 admitted and 14 refused", tally.status)
			}
			// A batch of 100 would be one lease; a share of what remains
			// takes several.
			leases := admin.calls(t)["quota.lease"] - before["quota.lease"]
			if leases < 3 {
				t.Errorf("%d QUOTA.LEASE: a share of what remains takes more than 2 for 16 units", leases)
			}
			t.Logf("share %s: %d QUOTA.LEASE", share, leases)
			if got := fwcCount(t, admin, key, 60); got != 16 {
				t.Errorf("store counts %d, want 16", got)
			}
		})
	}
}

// TestNginxQuotaTwoLayer: two gateways count locally and sync with INCRBY.
// Each decides from the total it learned at its last sync, so a window can
// go over by what the gateways admit between syncs (here 20 each), and the
// store's counter is exactly what they admitted. The syncs are asked for
// (/sync) so that the timeline is exact; then the timer's sync is checked.
func TestNginxQuotaTwoLayer(t *testing.T) {
	bin := nginxLook(t)
	node, admin := quotaNode(t)
	a := quotaStart(t, bin, node.Addr(), false, nil)
	b := quotaStart(t, bin, node.Addr(), false, nil)
	// The store's window key: the module's clock is nginx's, not the node's.
	q := quotaReq{key: "q:two", limit: "FWC 50 86400", mode: "two-layer"}
	sync := func(gw *nginxServer) {
		t.Helper()
		if r := nginxGet(t, gw.url+"/sync"); r.body != "synced\n" {
			t.Fatalf("/sync: %q", r.body)
		}
	}
	round := func(gw *nginxServer) int { return quotaRun(t, []*nginxServer{gw}, q, 20, 4).decided(t).status[200] }
	// Round 1: 20 each, both within 50 as each knows it.
	got := []int{round(a), round(b)}
	sync(a) // the store: 20
	sync(b) // 40; B knows 40, A knows 20
	// Round 2: A admits 20 more (40 of 50 as it knows), B 10.
	got = append(got, round(a), round(b))
	sync(a)
	sync(b)
	// Round 3: both know the window is past its limit.
	got = append(got, round(a), round(b))
	if want := []int{20, 20, 20, 10, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("admitted per round and gateway %v, want %v", got, want)
	}
	total := 0
	for _, n := range got {
		total += n
	}
	if bound := 50 + 2*20; total > bound || total <= 50 {
		t.Errorf("admitted %d, want over the limit 50 and within 50 + 2 x 20", total)
	}
	if got := twoLayerCount(t, admin, "q:two"); got != total {
		t.Errorf("the store's counter holds %d, the gateways admitted %d", got, total)
	}

	// The timer: one worker syncs every interval (here 50 ms), unasked.
	c := quotaStart(t, bin, node.Addr(), false, map[string]string{"sync_interval = 3600": "sync_interval = 0.05"})
	q.key = "q:timer"
	if n := quotaRun(t, []*nginxServer{c}, q, 7, 1).decided(t).status[200]; n != 7 {
		t.Fatalf("admitted %d of 7", n)
	}
	testwait.For(t, 10*time.Second, "the timer's sync of 7", func() bool { return twoLayerCount(t, admin, "q:timer") == 7 })
}

// twoLayerCount returns the store counter of key's current window (the
// module's "<key>:<window start ms>"), 0 when there is none.
func twoLayerCount(t *testing.T, a *nginxAdmin, key string) int {
	t.Helper()
	keys := strings.Split(a.do(t, "KEYS", key+":*"), "\r\n")
	if keys[0] == "*0" {
		return 0
	}
	if keys[0] != "*1" {
		t.Fatalf("KEYS %s:*: %q, want one window", key, keys)
	}
	reply := strings.Split(a.do(t, "GET", keys[2]), "\r\n")
	n, err := strconv.Atoi(reply[1])
	if err != nil {
		t.Fatalf("GET %s: %q", keys[2], reply)
	}
	return n
}

// TestNginxQuotaFailure: when throttled gives no decision, an error reply
// (NOPERM: the gateway's user may not name the key, or run INCRBY) or no
// server, the module never lets a request pass as if it had been decided:
// with $throttle_fail_open unset or off it answers 503, with on it lets
// the request through, and it logs the error either way. Lease mode asks
// on the key's first request; two-layer decides locally until a sync has
// failed, and fails closed from then on.
func TestNginxQuotaFailure(t *testing.T) {
	bin := nginxLook(t)
	erring, dead := gatewayStores(t, quotaPass)
	stores := []struct {
		name, addr string
		lease, two string // the error logged, lease and two-layer
	}{
		{"error reply", erring.Addr(),
			"QUOTA.LEASE: NOPERM this user has no permissions to access one of the keys used as arguments",
			"NOPERM this user has no permissions to run the 'incrby' command"},
		{"unreachable", dead, "connect: connection refused", "connect: connection refused"},
	}
	for _, store := range stores {
		for _, failOpen := range []string{"", "off", "on"} {
			t.Run(store.name+"/fail_open="+failOpen, func(t *testing.T) {
				gw := quotaStart(t, bin, store.addr, true, nil)
				status, log := 503, "(failing closed: 503)"
				if failOpen == "on" {
					status, log = 200, "(failing open: request let through)"
				}
				key := "q:fail:" + failOpen
				const n = 10
				before := gatewayCount(gw.errors(), "throttled_quota: "+store.lease, log)
				lease := quotaRun(t, []*nginxServer{gw}, quotaReq{key: key, limit: "FWC 5 60", batch: "2", failOpen: failOpen}, n, 1)
				if lease.status[status] != n {
					t.Errorf("lease: got %v, want %d x %d", lease.status, n, status)
				}
				if got := gatewayCount(gw.errors(), "throttled_quota: "+store.lease, log) - before; got != n {
					t.Errorf("lease: %d log lines with %q and %q, want %d", got, store.lease, log, n)
				}

				// Two-layer: decided locally (the limit of 5 holds), until
				// a sync fails.
				q := quotaReq{key: key, limit: "FWC 5 60", mode: "two-layer", failOpen: failOpen}
				if got := quotaRun(t, []*nginxServer{gw}, q, 7, 1).status; got[200] != 5 || got[429] != 2 {
					t.Errorf("two-layer before a sync: got %v, want 5 admitted and 2 refused", got)
				}
				if r := nginxGet(t, gw.url+"/sync"); !strings.Contains(r.body, store.two) {
					t.Errorf("/sync: %q, want the error %q", r.body, store.two)
				}
				want := 503
				if failOpen == "on" {
					want = 429 // still the local count's decision
				}
				if got := quotaRun(t, []*nginxServer{gw}, q, 3, 1).status; got[want] != 3 {
					t.Errorf("two-layer after a failed sync: got %v, want 3 x %d", got, want)
				}
			})
		}
	}
}

// TestNginxQuotaExample runs examples/openresty's nginx.conf (a master and
// two workers; only the ports changed) as the user its README makes for
// /lease/ and /local/, and checks what the README says: /lease/ admits the
// client's 100 a minute exactly and then answers 429 with Retry-After and
// the headers, and stopping nginx returns what it held; /local/ counts
// here and its timer sends the count within a second or so.
func TestNginxQuotaExample(t *testing.T) {
	bin := nginxLook(t)
	const userPass = "quota-pw"
	node, admin := quotaNode(t)
	admin.want(t, "+OK\r\n", gatewayRecipe(t, "../examples/openresty/README.md", "openresty-quota", userPass)...)
	listen, upstream := nginxFreeAddr(t), nginxFreeAddr(t)
	gw := nginxStart(t, bin, listen, nginxConfig{
		conf:   "../examples/openresty/nginx.conf",
		lua:    "../examples/openresty/lua",
		subst:  map[string]string{"127.0.0.1:8080": listen, "127.0.0.1:8081": upstream},
		env:    append(gatewayEnv(t, node.Addr()), "THROTTLED_USERNAME=openresty-quota", "THROTTLED_PASSWORD="+userPass),
		master: true,
	})
	// The node's clock stands 20 s into a minute: 40 s to the window's end.
	r := nginxGet(t, gw.url+"/lease/hello", "X-API-Key", "alice")
	got := fmt.Sprintf("%d %q %q %q %q %q", r.status, r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"),
		r.header.Get("X-RateLimit-Limit"), r.header.Get("X-RateLimit-Remaining"), r.body)
	if want := fmt.Sprintf("200 %q %q %q %q %q", `"lease";q=100;w=60`, `"lease";r=99;t=40`, "100", "99", "hello from the upstream: /lease/hello\n"); got != want {
		t.Errorf("first /lease/ request: got %s, want %s", got, want)
	}
	admitted := 1
	for range 110 {
		r := nginxGet(t, gw.url+"/lease/hello", "X-API-Key", "alice")
		switch {
		case r.status == 200:
			admitted++
		case r.status != 429:
			t.Fatalf("status %d: %q", r.status, r.body)
		case r.header.Get("Retry-After") != "40" || r.header.Get("RateLimit") != `"lease";r=0;t=40`:
			t.Errorf("429: Retry-After %q RateLimit %q, want 40 and %q", r.header.Get("Retry-After"), r.header.Get("RateLimit"), `"lease";r=0;t=40`)
		}
	}
	if admitted != 100 {
		t.Errorf("/lease/ admitted %d, want 100", admitted)
	}

	// /local/'s windows are minutes of nginx's clock, the real one: start
	// its requests and their sync at least 15 s before a minute ends, so
	// that they all fall in one window.
	testwait.For(t, 20*time.Second, "15 s left in the minute", func() bool { return time.Now().Unix()%60 < 45 })
	for i := range 3 {
		r := nginxGet(t, gw.url+"/local/hello", "X-API-Key", "alice")
		if r.status != 200 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(99-i) || r.header.Get("RateLimit-Policy") != `"local";q=100;w=60` {
			t.Errorf("/local/ request %d: %d remaining %q policy %q", i, r.status, r.header.Get("X-RateLimit-Remaining"), r.header.Get("RateLimit-Policy"))
		}
	}
	testwait.For(t, 10*time.Second, "the sync of /local/'s 3", func() bool { return twoLayerCount(t, admin, "local:alice") == 3 })
	// PEXPIREAT was applied too: the counter expires (TTL from nginx's
	// clock, far past the node's debug clock).
	keys := strings.Split(admin.do(t, "KEYS", "local:alice:*"), "\r\n")
	if ttl := admin.do(t, "PTTL", keys[2]); !strings.HasPrefix(ttl, ":") || strings.HasPrefix(ttl, ":-") {
		t.Errorf("PTTL %s: %q, want an expiry", keys[2], ttl)
	}

	// bob uses 3 of a batch of 10: stopping nginx returns the other 7.
	for range 3 {
		if r := nginxGet(t, gw.url+"/lease/hello", "X-API-Key", "bob"); r.status != 200 {
			t.Errorf("bob: %d", r.status)
		}
	}
	gw.stop(t)
	if got := fwcCount(t, admin, "lease:alice", 60); got != 100 {
		t.Errorf("store counts %d for lease:alice, want 100", got)
	}
	if got := fwcCount(t, admin, "lease:bob", 60); got != 3 {
		t.Errorf("store counts %d for lease:bob, want 3 (10 leased, 7 returned)", got)
	}
}
