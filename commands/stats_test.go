package commands

import (
	"regexp"
	"testing"
	"time"

	"github.com/throttleddb/throttled/resp"
)

func TestDurationBucket(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{-1, 0}, {0, 0}, {1, 0}, {us, 0},
		{us + 1, 1}, {2 * us, 1},
		{2*us + 1, 2}, {3 * us, 2}, {4 * us, 2},
		{1023 * us, 10}, {1024 * us, 10}, {1025 * us, 11},
		{(1 << 20) * us, 20}, {(1<<20)*us + 1, 21}, {time.Hour, 21},
	} {
		got := durationBucket(tc.d)
		if got != tc.want {
			t.Errorf("durationBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
		// The bucket is the first whose bound holds d.
		if got < DurationBuckets-1 && tc.d > DurationBound(got) || got > 0 && tc.d <= DurationBound(got-1) {
			t.Errorf("%v in bucket %d, whose bounds are (%v, %v]", tc.d, got, DurationBound(got-1), DurationBound(got))
		}
	}
}

// statsOf returns the counters of the command named name.
func statsOf(t *testing.T, s *Server, name string) CommandStats {
	t.Helper()
	var found CommandStats
	s.CommandStats(func(cs *CommandStats) {
		if cs.Name == name {
			found = *cs
		}
	})
	return found
}

// TestCommandStats_Decisions: every throttle command counts its decisions,
// wherever it runs (MULTI, a script); peeks and errors are not decisions.
func TestCommandStats_Decisions(t *testing.T) {
	s, _ := newTestServer(t)
	c := &resp.Conn{}
	for _, cmd := range [][]string{
		{"CL.THROTTLE", "k", "1", "1", "60"},      // allowed
		{"CL.THROTTLE", "k", "1", "1", "60"},      // allowed
		{"CL.THROTTLE", "k", "1", "1", "60"},      // limited
		{"CL.THROTTLE", "k", "1", "1", "60", "0"}, // a peek
		{"CL.THROTTLE", "k", "1", "0", "60"},      // an error
		{"MULTI"},
		{"CL.THROTTLE", "m", "0", "1", "60"}, // allowed
		{"EXEC"},
		{"EVAL", "return redis.call('CL.THROTTLE', KEYS[1], 0, 1, 60)", "1", "m"}, // limited
		{"TB.THROTTLE", "t", "1", "1", "60"},
		{"THROTTLE.ALL", "LIMIT", "FWC", "a", "1", "60", "LIMIT", "FWC", "b", "5", "60"},
		{"THROTTLE.ALL", "LIMIT", "FWC", "a", "1", "60", "LIMIT", "FWC", "b", "5", "60"},
		{"SET", "x", "1"},
	} {
		do(s, c, cmd...)
	}
	for _, tc := range []struct {
		name                            string
		calls, errors, allowed, limited int64
	}{
		{"cl.throttle", 7, 1, 3, 2},
		{"tb.throttle", 1, 0, 1, 0},
		{"throttle.all", 2, 0, 1, 1},
		{"set", 1, 0, 0, 0},
	} {
		cs := statsOf(t, s, tc.name)
		if cs.Calls != tc.calls || cs.Errors != tc.errors || cs.Allowed != tc.allowed || cs.Limited != tc.limited {
			t.Errorf("%s: got calls %d, errors %d, allowed %d, limited %d; want %d, %d, %d, %d",
				tc.name, cs.Calls, cs.Errors, cs.Allowed, cs.Limited, tc.calls, tc.errors, tc.allowed, tc.limited)
		}
		if cs.Throttle != (tc.name != "set") {
			t.Errorf("%s: Throttle %v", tc.name, cs.Throttle)
		}
		var inBuckets int64
		for _, n := range cs.Buckets {
			inBuckets += n
		}
		if inBuckets != cs.Calls || cs.Time <= 0 {
			t.Errorf("%s: %d calls in the buckets, %d calls, time %v", tc.name, inBuckets, cs.Calls, cs.Time)
		}
	}
	if got := statsOf(t, s, "exec").Calls; got != 1 {
		t.Errorf("exec: %d calls, want 1", got)
	}
	info := do(s, c, "INFO", "commandstats")
	if !regexp.MustCompile(`cmdstat_cl\.throttle:calls=7,usec=\d+,usec_per_call=\d+\.\d\d,rejected_calls=0,failed_calls=1\r\n`).MatchString(info) {
		t.Errorf("INFO commandstats: %q", info)
	}
	if got, want := s.CommandsProcessed(), int64(15); got != want {
		t.Errorf("CommandsProcessed: got %d, want %d", got, want)
	}
	do(s, c, "CONFIG", "RESETSTAT")
	if cs := statsOf(t, s, "cl.throttle"); cs.Calls != 0 {
		t.Errorf("after CONFIG RESETSTAT: %+v", cs)
	}
	if got := s.CommandsProcessed(); got != 1 { // CONFIG RESETSTAT itself
		t.Errorf("after CONFIG RESETSTAT, CommandsProcessed: got %d, want 1", got)
	}
}
