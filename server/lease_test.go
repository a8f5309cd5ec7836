package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestLeases_SurviveARestart: lease records persist with the keyspace. After
// a restart on the same folder, a lease granted before it is returned and
// credited once, a return made before it is answered as a repeat (no second
// credit), and the limit's state holds exactly what the leases left.
func TestLeases_SurviveARestart(t *testing.T) {
	ctx := context.Background()
	cfg := server.Config{Dir: filepath.Join(t.TempDir(), "data"), DebugClock: true}
	// In 2100 (a 60 s window starts there): later than the wall clock the
	// restarted node loads its keys at, so nothing has expired.
	const at = int64(4_102_444_800_000_000_000)
	open := func() (*server.Node, *redis.Client) {
		n, err := servertest.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2})
		if err := cl.Do(ctx, "DEBUG", "CLOCK", "SET", at).Err(); err != nil {
			t.Fatal(err)
		}
		return n, cl
	}
	ints := func(cl *redis.Client, args ...any) []any {
		t.Helper()
		v, err := cl.Do(ctx, args...).Slice()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	n, cl := open()
	a := ints(cl, "QUOTA.LEASE", "k", "FWC", 100, 60, 30, "HOLDER", "gw1", "TTL", 60_000)
	b := ints(cl, "QUOTA.LEASE", "k", "FWC", 100, 60, 20, "HOLDER", "gw2", "TTL", 60_000)
	if r := ints(cl, "QUOTA.RETURN", a[0], 10); r[0] != int64(1) || r[1] != int64(20) {
		t.Fatalf("return of a: %v, want 20 credited", r)
	}
	cl.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, cl = open()
	defer func() {
		cl.Close()
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	if r := ints(cl, "QUOTA.RETURN", a[0], 10); r[0] != int64(0) || r[1] != int64(20) {
		t.Errorf("retried return of a after the restart: %v, want status 0, 20", r)
	}
	if r := ints(cl, "QUOTA.RETURN", b[0], 5); r[0] != int64(1) || r[1] != int64(15) || r[3] != int64(85) {
		t.Errorf("return of b after the restart: %v, want 15 credited, 85 remaining", r)
	}
	if r := ints(cl, "FWC.THROTTLE", "k", 100, 60, 0); r[2] != int64(85) {
		t.Errorf("FWC.THROTTLE peek: %v, want 85 remaining (10 + 5 used)", r)
	}
}

// TestLeases_RefusedOnAMesh: a mesh node refuses both lease commands with
// an error that says why, and writes nothing (docs/leases.md).
func TestLeases_RefusedOnAMesh(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true, CRDT: &server.CRDTConfig{
		NodeID: "a", Transport: crdttest.NewNet(1).Transport("a")}})
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2})
	defer cl.Close()
	ctx := context.Background()
	for _, args := range [][]any{
		{"QUOTA.LEASE", "k", "FWC", 10, 60, 5},
		{"QUOTA.RETURN", "1:k", 0},
	} {
		err := cl.Do(ctx, args...).Err()
		if err == nil || !strings.Contains(err.Error(), "is not supported with CRDT replication") {
			t.Errorf("%v on a mesh node: %v", args, err)
		}
	}
	if got, _ := cl.DBSize(ctx).Result(); got != 0 {
		t.Errorf("DBSIZE %d after refused leases, want 0", got)
	}
}

// TestLeases_ExactUnderConcurrency: eight gateways over real sockets lease,
// spend a random part and return, and send per-request decisions too,
// concurrently, on one fixed window with the clock frozen; one of them dies
// holding a lease. Once every lease has
// ended, the store's own accounting (what the window has left) is exactly
// the limit less the units the gateways admitted and the dead one's grant:
// nothing lost, nothing credited twice, never over the limit.
func TestLeases_ExactUnderConcurrency(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true})
	ctx := context.Background()
	const at = int64(1_700_000_000_000_000_000) // a 60 s window starts here
	admin := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2})
	defer admin.Close()
	if err := admin.Do(ctx, "DEBUG", "CLOCK", "SET", at).Err(); err != nil {
		t.Fatal(err)
	}
	const limit = 1000
	type result struct{ admitted, lost int64 }
	results := make(chan result, 8)
	for g := range 8 {
		go func() {
			cl := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2})
			defer cl.Close()
			var r result
			defer func() { results <- r }()
			for i := 0; ; i++ {
				v, err := cl.Do(ctx, "QUOTA.LEASE", "k", "FWC", limit, 60, 40, "HOLDER", fmt.Sprint("gw", g), "SHARE", 50, "TTL", 1000).Slice()
				if err != nil {
					t.Error(err)
					return
				}
				granted := v[1].(int64)
				if granted == 0 {
					return // the window is spent
				}
				if g == 0 && i == 3 {
					r.lost = granted // dies holding it
					return
				}
				used := int64((i*7 + g) % int(granted+1))
				r.admitted += used
				// And one request decided by the store, per request.
				d, err := cl.Do(ctx, "FWC.THROTTLE", "k", limit, 60).Int64Slice()
				if err != nil {
					t.Error(err)
					return
				}
				if d[0] == 0 {
					r.admitted++
				}
				for range 1 + i%2 { // every other return is retried
					if err := cl.Do(ctx, "QUOTA.RETURN", v[0], used).Err(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	var admitted, lost int64
	for range 8 {
		r := <-results
		admitted, lost = admitted+r.admitted, lost+r.lost
	}
	if lost == 0 {
		t.Fatal("the dying gateway held no lease")
	}
	// The dead gateway's lease ends; its units stay spent.
	if err := admin.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", int64(1e9)).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := admin.Do(ctx, "FWC.THROTTLE", "k", limit, 60, 0).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	if admitted+lost > limit || v[2] != limit-admitted-lost {
		t.Fatalf("remaining %d; want %d - %d admitted - %d held by the dead gateway", v[2], limit, admitted, lost)
	}
	t.Logf("%d admitted, %d lost with a dead gateway, %d left", admitted, lost, v[2])
}
