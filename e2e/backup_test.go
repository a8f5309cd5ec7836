package e2e

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testwait"
)

// everyKind writes a key of every kind (database 0): GCRA TATs, each engine's state,
// counters, strings with and without a TTL, and a key in another database.
var everyKind = [][]any{
	{"CL.THROTTLE", "gcra", 5, 10, 3600, 3},
	{"INCRBY", "counter", 42},
	{"SET", "ttl", "v", "EX", 1000},
	{"SET", "plain", "text"},
	{"FWC.THROTTLE", "fwc", 10, 3600, 2},
	{"SWL.THROTTLE", "swl", 10, 3600, 2},
	{"SWC.THROTTLE", "swc", 10, 3600, 2, "SUBWINDOWS", 5},
	{"TB.THROTTLE", "tb", 10, 1, 3600, 2},
	{"LB.THROTTLE", "lb", 10, 1, 3600, 2},
}

// writeEveryKind runs everyKind on c, and SETs a key in database 5.
func writeEveryKind(t *testing.T, c *redis.Client) {
	t.Helper()
	for _, cmd := range everyKind {
		do(t, c, cmd...)
	}
	pipe := c.Pipeline()
	pipe.Do(context.Background(), "SELECT", 5)
	pipe.Do(context.Background(), "SET", "in-db-5", "x", "PX", 5_000_000)
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// pairLoad increments pair:a and pair:b together in a transaction, over
// backupUnderLoad runs BACKUP while pairLoad writes, once the load has
// written 50 pairs, lets it go on to after pairs (0: stop at once), stops
// it and returns the backup's folder.
func backupUnderLoad(t *testing.T, s *server, c *redis.Client, after int64) string {
	t.Helper()
	stop := make(chan struct{})
	wg := pairLoad(t, s, stop)
	waitFor(t, c, "pair:a", 50)
	backup := filepath.Join(t.TempDir(), "backup")
	if got := do(t, c, "BACKUP", backup); got != "OK" {
		t.Fatalf("BACKUP = %v", got)
	}
	if after > 0 {
		waitFor(t, c, "pair:a", after)
	}
	close(stop)
	wg.Wait()
	return backup
}

// and over, until stop is closed: in any consistent copy they are equal.
func pairLoad(t *testing.T, s *server, stop chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range 4 {
		c := s.client(t)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
					p.Incr(context.Background(), "pair:a")
					p.Incr(context.Background(), "pair:b")
					p.Do(context.Background(), "CL.THROTTLE", "pair:gcra", 1000, 1000, 1)
					return nil
				})
				if err != nil {
					t.Errorf("load: %v", err)
					return
				}
			}
		})
	}
	return &wg
}

// checkRestored compares the restored node r with the original s at the
// same debug-clock instant: the pair is equal (one instant) and was written
// to under load; once the load's keys are gone from both, the digests
// match.
func checkRestored(t *testing.T, s, r *server, now int64) {
	t.Helper()
	cs, cr := s.client(t), r.client(t)
	do(t, cr, "DEBUG", "CLOCK", "SET", now)
	a, b := do(t, cr, "GET", "pair:a"), do(t, cr, "GET", "pair:b")
	if a != b || a == nil {
		t.Fatalf("restored pair: a=%v b=%v, want equal and written", a, b)
	}
	t.Logf("restored pair at %v increments", a)
	for _, c := range []*redis.Client{cs, cr} {
		do(t, c, "DEL", "pair:a", "pair:b", "pair:gcra")
	}
	want, got := do(t, cs, "DEBUG", "DIGEST"), do(t, cr, "DEBUG", "DIGEST")
	if got != want || want == strings.Repeat("0", 40) {
		t.Fatalf("restored DEBUG DIGEST %v, original %v", got, want)
	}
	if got := infoField(t, cr, "keyspace", "db0"); !strings.HasPrefix(got, "keys=9,") {
		t.Errorf("restored INFO keyspace db0 = %q, want 9 keys", got)
	}
	if got := infoField(t, cr, "keyspace", "db5"); !strings.HasPrefix(got, "keys=1,") {
		t.Errorf("restored INFO keyspace db5 = %q, want 1 key", got)
	}
}

// TestBackup_SingleNode: BACKUP under load writes a folder a new node
// starts on with the keyspace as of one instant.
func TestBackup_SingleNode(t *testing.T) {
	s := start(t, t.TempDir(), "--debug-clock")
	c := s.client(t)
	now := do(t, c, "DEBUG", "CLOCK").(int64)
	writeEveryKind(t, c)

	backup := backupUnderLoad(t, s, c, 100)

	r := start(t, backup, "--debug-clock")
	checkRestored(t, s, r, now)
}

// TestBackup_Refusals: paths BACKUP will not write to, and a user without
// @admin.
func TestBackup_Refusals(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	c := s.client(t)
	taken := t.TempDir()
	for _, tc := range []struct{ path, want string }{
		{"relative/backup", `ERR backup path: "relative/backup" is not absolute`},
		{taken, "already exists"},
		{filepath.Join(dir, "inside"), "overlaps the node's data folder"},
		{filepath.Join(taken, "no", "parent"), "does not exist"},
	} {
		_, err := c.Do(context.Background(), "BACKUP", tc.path).Result()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("BACKUP %s: %v, want %q", tc.path, err, tc.want)
		}
	}
	do(t, c, "ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-@dangerous")
	app := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, Username: "app", Password: "pw"})
	defer app.Close()
	_, err := app.Do(context.Background(), "BACKUP", filepath.Join(taken, "b")).Result()
	if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Errorf("BACKUP by a user without @dangerous: %v", err)
	}
	_, err = c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		p.Do(context.Background(), "BACKUP", filepath.Join(taken, "m"))
		return nil
	})
	// Refused when queued, as Redis refuses SAVE (no-multi): EXEC aborts.
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Errorf("BACKUP in MULTI: %v", err)
	}
}

// waitFor polls until the integer at key reaches n.
func waitFor(t *testing.T, c *redis.Client, key string, n int64) {
	t.Helper()
	testwait.For(t, 30*time.Second, key+" written to", func() bool {
		v, _ := c.Get(context.Background(), key).Int64()
		return v >= n
	})
}

// TestBackup_RaftMember: BACKUP on a Raft follower copies the member's
// applied keyspace; a single node started on it holds the group's keys.
func TestBackup_RaftMember(t *testing.T) {
	nodes := raftCluster(t, 3)
	lead := leaderOf(t, nodes)
	c := lead.client(t)
	do(t, c, "DEBUG", "CLOCK", "SET", far)
	writeEveryKind(t, c)
	stop := make(chan struct{})
	wg := pairLoad(t, lead, stop)
	waitFor(t, c, "pair:a", 50)
	var follower *server
	for _, s := range nodes {
		if s != lead {
			follower = s
			break
		}
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if got := do(t, follower.client(t), "BACKUP", backup); got != "OK" {
		t.Fatalf("BACKUP = %v", got)
	}
	waitFor(t, c, "pair:a", 100)
	close(stop)
	wg.Wait()
	waitSameDigest(t, nodes)

	r := start(t, backup, "--debug-clock")
	checkRestored(t, lead, r, far)
}

// TestBackup_RestoreNewRaftGroup: a single node's BACKUP starts a new
// one-member Raft group (--restore-from); a member added with --join gets
// the state as a snapshot, and both hold the keyspace as of the backup.
func TestBackup_RestoreNewRaftGroup(t *testing.T) {
	s := start(t, t.TempDir(), "--debug-clock")
	c := s.client(t)
	now := do(t, c, "DEBUG", "CLOCK").(int64)
	writeEveryKind(t, c)
	backup := backupUnderLoad(t, s, c, 0)

	member := func(id string, args ...string) *server {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := proc.Addr(port)
		args = append(args, "--node-id", id, "--cluster-addr", addr)
		if args[0] == "--restore-from" {
			// The group starts with this member alone.
			args = append(args, "--peers", id+"="+addr)
		}
		return start(t, t.TempDir(), append([]string{"--debug-clock", "--replication", "raft"}, args...)...)
	}
	n1 := member("n1", "--restore-from", backup)
	leaderOf(t, []*server{n1})
	n2 := member("n2", "--join", n1.Addr)
	checkRestored(t, s, n1, now)
	waitSameDigest(t, []*server{n1, n2})

	// Started again with the flag, the member refuses rather than seed
	// its group a second time over the state it holds.
	if err := n1.Stop(); err != nil {
		t.Fatal(err)
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	again, err := proc.Start(context.Background(), proc.Config{Name: "throttled", Path: bin, Addr: proc.Addr(port),
		Args: append([]string{"--port", strconv.Itoa(port), "--dir", n1.dir}, n1.args...), Timeout: 30 * time.Second})
	if err == nil {
		again.Stop()
		t.Fatal("restarted with --restore-from over its Raft state: it started")
	}
	if !strings.Contains(err.Error(), "already holds Raft state") {
		t.Fatalf("restarted with --restore-from: %v", err)
	}
}
