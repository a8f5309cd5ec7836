package main

import (
	"context"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/throttleddb/throttled/bench"
	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// TestGCRALuaMatchesRedisCell runs bench/gcra.lua on a real redis-server and
// checks it against redis-cell's vectors (reference/redis-cell.md section 4):
// the rows that are stable under the few milliseconds a real clock moves
// between calls. It is what makes the CL.THROTTLE vs EVALSHA comparison
// apples to apples.
func TestGCRALuaMatchesRedisCell(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH")
	}
	ctx := t.Context()
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := proc.Addr(port)
	p, err := proc.Start(ctx, proc.Config{
		Name:    "redis-server",
		Path:    bin,
		Args:    []string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1"},
		Addr:    addr,
		Dir:     t.TempDir(),
		Timeout: 15 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop redis-server: %v", err)
		}
	})

	c, err := respconn.Dial(context.Background(), addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sha, err := harness.LoadScript(ctx, addr, bench.GCRALua)
	if err != nil {
		t.Fatal(err)
	}

	type step struct {
		args string // after CL.THROTTLE
		want []int64
	}
	scenarios := []struct {
		name  string
		steps []step
	}{
		{"V01", []step{{"user123 15 30 60", []int64{0, 16, 15, -1, 2}}}},
		{"V02", []step{{"user123 5 5 3600", []int64{0, 6, 5, -1, 720}}}},
		{"V03", []step{
			{"user123 0 1 2 1", []int64{0, 1, 0, -1, 2}},
			{"user123 0 1 2 1", []int64{1, 1, 0, 2, 2}},
		}},
		{"V04", []step{
			{"foo 4 1 1 6", []int64{1, 5, 5, -1, 0}},
			{"foo 4 1 1", []int64{0, 5, 4, -1, 1}},
			{"foo 4 1 1", []int64{0, 5, 3, -1, 2}},
			{"foo 4 1 1", []int64{0, 5, 2, -1, 3}},
			{"foo 4 1 1", []int64{0, 5, 1, -1, 4}},
			{"foo 4 1 1", []int64{0, 5, 0, -1, 5}},
			{"foo 4 1 1", []int64{1, 5, 0, 1, 5}},
		}},
		// V05 row 16 as a first call (so independent of the clock): reset is
		// 4 µs, which redis-cell rounds to 0 (sub-millisecond remainders are
		// ignored); Dragonfly would say 1.
		{"V05-row16", []step{{"bar 4 500000 1 2", []int64{0, 5, 3, -1, 0}}}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			// Each scenario starts on a fresh database.
			if _, err := c.Do("FLUSHALL"); err != nil {
				t.Fatal(err)
			}
			for i, st := range sc.steps {
				got, err := evalGCRA(c, sha, st.args)
				if err != nil {
					t.Fatalf("row %d (%s): %v", i+1, st.args, err)
				}
				if !slices.Equal(got, st.want) {
					t.Errorf("row %d (%s): got %v, want %v", i+1, st.args, got, st.want)
				}
			}
		})
	}

	// Storage matches redis-cell: after V01's call the key holds the TAT as
	// 19 decimal digits of ns, and PTTL = floor_ms(new_tat - now) = 2000 ms
	// minus the few ms since the call.
	t.Run("storage", func(t *testing.T) {
		if _, err := c.Do("FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		before := time.Now().UnixNano()
		if _, err := evalGCRA(c, sha, "user123 15 30 60"); err != nil {
			t.Fatal(err)
		}
		v, err := c.Do("GET", "user123")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := v.(string)
		tat, err := strconv.ParseInt(s, 10, 64)
		if err != nil || len(s) != 19 {
			t.Fatalf("GET user123 = %q, want 19 decimal digits", v)
		}
		// TAT = now + T = now + 2 s; allow generous clock skew between the
		// test and the server's TIME (same host).
		if d := time.Duration(tat - before); d < 1900*time.Millisecond || d > 2100*time.Millisecond {
			t.Errorf("TAT - now = %v, want about 2s", d)
		}
		v, err = c.Do("PTTL", "user123")
		if err != nil {
			t.Fatal(err)
		}
		if ms, _ := v.(int64); ms < 1900 || ms > 2000 {
			t.Errorf("PTTL user123 = %v, want 1900..2000", v)
		}
		// A limited call writes nothing: burst 0, second call is limited and
		// must leave the TAT as it was.
		if _, err := evalGCRA(c, sha, "one 0 1 2 1"); err != nil {
			t.Fatal(err)
		}
		v1, _ := c.Do("GET", "one")
		if _, err := evalGCRA(c, sha, "one 0 1 2 1"); err != nil {
			t.Fatal(err)
		}
		v2, _ := c.Do("GET", "one")
		if v1 == nil || v1 != v2 {
			t.Errorf("limited call changed the TAT: %v -> %v", v1, v2)
		}
		// A peek on a missing key leaves no key behind.
		got, err := evalGCRA(c, sha, "peek 4 1 1 0")
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{0, 5, 5, -1, 0}; !slices.Equal(got, want) {
			t.Errorf("peek: got %v, want %v", got, want)
		}
		if v, _ := c.Do("EXISTS", "peek"); v != int64(0) {
			t.Errorf("EXISTS peek = %v after a peek, want 0", v)
		}
	})

	// V18 (2000 per second, burst 0): the TTL rounds down to 0 ms and the
	// key stays to the end of the millisecond, so a second call within it
	// is limited (issue 12). On a real clock both calls must land within
	// 0.5 ms in one millisecond: they go in one MULTI between two TIMEs,
	// tried again when they did not.
	t.Run("V18", func(t *testing.T) {
		call := append([]string{"EVALSHA", sha, "1"}, "ms", "0", "2000", "1")
		for try := 1; ; try++ {
			for _, cmd := range [][]string{{"FLUSHALL"}, {"MULTI"}, {"TIME"}, call, call, {"EXISTS", "ms"}, {"TIME"}} {
				if _, err := c.Do(cmd...); err != nil {
					t.Fatalf("%v: %v", cmd, err)
				}
			}
			v, err := c.Do("EXEC")
			if err != nil {
				t.Fatal(err)
			}
			r, _ := v.([]any)
			if len(r) != 5 {
				t.Fatalf("EXEC = %v", v)
			}
			t1, t2 := timeUs(t, r[0]), timeUs(t, r[4])
			if t1/1000 != t2/1000 || t2-t1 >= 500 {
				if try == 100 {
					t.Fatalf("in 100 tries the calls never shared a millisecond (last: TIME %d then %d us)", t1, t2)
				}
				continue
			}
			first, _ := respconn.Ints(r[1])
			second, _ := respconn.Ints(r[2])
			if want := []int64{0, 1, 0, -1, 0}; !slices.Equal(first, want) {
				t.Errorf("first call: got %v, want %v", first, want)
			}
			if want := []int64{1, 1, 0, 0, 0}; !slices.Equal(second, want) {
				t.Errorf("second call: got %v, want %v", second, want)
			}
			if r[3] != int64(1) {
				t.Errorf("EXISTS ms = %v within the calls' millisecond, want 1", r[3])
			}
			return
		}
	})
}

// timeUs reads a TIME reply as Unix microseconds.
func timeUs(t *testing.T, v any) int64 {
	t.Helper()
	parts, _ := v.([]any)
	if len(parts) != 2 {
		t.Fatalf("TIME = %v", v)
	}
	s, err1 := strconv.ParseInt(fmt.Sprint(parts[0]), 10, 64)
	us, err2 := strconv.ParseInt(fmt.Sprint(parts[1]), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME = %v", v)
	}
	return s*1e6 + us
}

// evalGCRA runs gcra.lua as CL.THROTTLE <args> would run.
func evalGCRA(c *respconn.Conn, sha, args string) ([]int64, error) {
	fields, err := splitArgs(args)
	if err != nil {
		return nil, err
	}
	cmd := append([]string{"EVALSHA", sha, "1"}, fields...)
	v, err := c.Do(cmd...)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", cmd, err)
	}
	return respconn.Ints(v)
}
