package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	// The tests run a binary built in TestMain, which go test's cache does
	// not see; importing the server ties their cached results to the code
	// the binary is made of.
	_ "github.com/throttleddb/throttled/server"
)

// bin is the throttled binary built once for the package.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "throttled-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "throttled")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/throttled").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a throttled process under test.
type server struct {
	*proc.Process
	dir  string
	args []string
}

// start runs throttled on a free port with the data folder dir and args; the
// process is stopped when the test ends.
func start(t testing.TB, dir string, args ...string) *server {
	t.Helper()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"--port", strconv.Itoa(port), "--dir", dir}, args...)
	p, err := proc.Start(context.Background(), proc.Config{
		Name: "throttled", Path: bin, Args: all, Addr: proc.Addr(port), Timeout: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("%v\n%s", err, p.Output())
		}
	})
	return &server{Process: p, dir: dir, args: args}
}

// restart stops s cleanly and starts it again on the same folder.
func (s *server) restart(t testing.TB) *server {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, s.Output())
	}
	return start(t, s.dir, s.args...)
}

// client connects to s with RESP2 (plain replies are easiest to compare).
func (s *server) client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, ReadTimeout: 30 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// do runs a command and fails the test on an error reply.
func do(t testing.TB, c *redis.Client, args ...any) any {
	t.Helper()
	v, err := c.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

// infoField returns one field of INFO's text.
func infoField(t testing.TB, c *redis.Client, section, name string) string {
	t.Helper()
	txt := do(t, c, "INFO", section).(string)
	for line := range strings.SplitSeq(txt, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, name, txt)
	return ""
}

// TestRestart_StateSurvives: GCRA TATs, counters, TTLs and every engine's
// state are the same after a clean restart, on the same debug-clock instant.
func TestRestart_StateSurvives(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir, "--debug-clock")
	c := s.client(t)
	// The debug clock starts at the real time; keep that instant so the keys
	// (whose expiries are in the future of the real clock) load again.
	now := do(t, c, "DEBUG", "CLOCK").(int64)
	now -= now % 1e9
	do(t, c, "DEBUG", "CLOCK", "SET", now)
	cmds := everyKind
	for _, cmd := range cmds {
		do(t, c, cmd...)
	}
	do(t, c, "SELECT", 5)
	do(t, c, "SET", "in-db-5", "x")
	snapshot := func(c *redis.Client) string {
		var b strings.Builder
		do(t, c, "SELECT", 0)
		for _, k := range []string{"gcra", "counter", "ttl", "plain", "fwc", "swl", "swc", "tb", "lb", "missing"} {
			fmt.Fprintf(&b, "%s type=%v pttl=%v", k, do(t, c, "TYPE", k), do(t, c, "PTTL", k))
			if typ := do(t, c, "TYPE", k); typ == "string" {
				fmt.Fprintf(&b, " get=%v", do(t, c, "GET", k))
			}
			b.WriteString("\n")
		}
		// Peeks show each engine's state without changing it.
		for _, cmd := range cmds {
			if strings.HasSuffix(cmd[0].(string), ".THROTTLE") {
				peek := append([]any{}, cmd...)
				if cmd[0] == "SWC.THROTTLE" {
					peek[4] = 0
				} else {
					peek[len(peek)-1] = 0
				}
				fmt.Fprintf(&b, "%v -> %v\n", peek, do(t, c, peek...))
			}
		}
		do(t, c, "SELECT", 5)
		fmt.Fprintf(&b, "db5 %v\n", do(t, c, "GET", "in-db-5"))
		return b.String()
	}
	before := snapshot(c)

	s = s.restart(t)
	c = s.client(t)
	do(t, c, "DEBUG", "CLOCK", "SET", now)
	if after := snapshot(c); after != before {
		t.Errorf("state changed across a restart:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := infoField(t, c, "keyspace", "db0"); !strings.HasPrefix(got, "keys=9,") {
		t.Errorf("INFO keyspace db0 = %q, want 9 keys", got)
	}
}

// TestRestart_ExpiredKeysDropped: a key whose expiry passed while the server
// was down is not loaded. The debug clock is set 10 s in the past, so a key
// written with PX 1000 has expired by the time the restarted server (whose
// clock starts at the real time) loads it.
func TestRestart_ExpiredKeysDropped(t *testing.T) {
	s := start(t, t.TempDir(), "--debug-clock")
	c := s.client(t)
	past := time.Now().Add(-10 * time.Second).UnixNano()
	do(t, c, "DEBUG", "CLOCK", "SET", past)
	do(t, c, "SET", "short", "v", "PX", 1000)
	do(t, c, "SET", "long", "v", "EX", 1000)
	do(t, c, "CL.THROTTLE", "gcra", 0, 1, 1)
	s = s.restart(t)
	c = s.client(t)
	if n := do(t, c, "DBSIZE").(int64); n != 1 {
		t.Errorf("DBSIZE after the expiries passed = %d, want 1 (only \"long\")", n)
	}
}

// TestStart_BadFolder: a folder that is not ours stops the start with a
// clear message and is left as it was.
func TestStart_BadFolder(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "MANIFEST-000001")
	if err := os.WriteFile(junk, []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--port", strconv.Itoa(port), "--dir", dir).CombinedOutput()
	if err == nil {
		t.Fatalf("started on a foreign folder; output:\n%s", out)
	}
	if !strings.Contains(string(out), dir) {
		t.Errorf("the error does not name the folder:\n%s", out)
	}
	entries, _ := os.ReadDir(dir)
	if got, _ := os.ReadFile(junk); len(entries) != 1 || string(got) != "not a manifest" {
		t.Errorf("the folder was changed: %d entries, junk file now %q", len(entries), got)
	}
}
