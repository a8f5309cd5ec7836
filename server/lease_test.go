package server_test

import (
	"context"
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
