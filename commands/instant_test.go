package commands

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/resp"
)

// replyInts returns the integers of a raw RESP reply in order, nested ones
// included: for a throttle reply the first is limited.
func replyInts(t testing.TB, raw string) []int64 {
	t.Helper()
	var ns []int64
	for line := range strings.SplitSeq(raw, "\r\n") {
		switch {
		case strings.HasPrefix(line, "-"):
			t.Fatalf("error reply %q", raw)
		case strings.HasPrefix(line, ":"):
			n, err := strconv.ParseInt(line[1:], 10, 64)
			if err != nil {
				t.Fatalf("reply %q: %v", raw, err)
			}
			ns = append(ns, n)
		}
	}
	return ns
}

// TestThrottle_SubMillisecondRates: at rates whose whole state drains in
// under a millisecond, many calls at one frozen instant admit exactly the
// limit and then limit every call, wherever the instant falls in its
// millisecond, through every path that writes a rate-limit key: each
// command, THROTTLE.ALL and a script. The key stays through the millisecond
// (issue 12: CL.THROTTLE's TTL rounded down to 0 ms, the key was not stored,
// and every call found a full bucket).
func TestThrottle_SubMillisecondRates(t *testing.T) {
	for _, tc := range []struct {
		cmd   string // on the key k
		limit int
	}{
		{"CL.THROTTLE k 0 2000 1", 1}, // reference vector V18
		{"CL.THROTTLE k 5 10000 1", 6},
		{"CL.THROTTLE k 50 100000 1", 51},
		{"THROTTLE.ALL LIMIT CL k 5 10000 1", 6},
		{"EVAL|return redis.call('CL.THROTTLE', KEYS[1], 5, 10000, 1)|1|k", 6},
		{"FWC.THROTTLE k 5 1 MS", 5},
		{"SWL.THROTTLE k 5 1 MS", 5},
		{"SWC.THROTTLE k 5 1 MS", 5},
		{"SWC.THROTTLE k 5 2 SUBWINDOWS 3 MS", 5},
		{"TB.THROTTLE k 6 10000 1000 MS", 6},
		{"TB.THROTTLE k 6 10000 1", 6},
		{"LB.THROTTLE k 5 10000 1000 MS", 6},
		{"LB.THROTTLE k 5 10000 1", 6},
		{"THROTTLE.ALL LIMIT TB k 6 10000 1000 MS", 6},
		{"EVAL|return redis.call('TB.THROTTLE', KEYS[1], 6, 10000, 1000, 'MS')|1|k", 6},
	} {
		for _, off := range []int64{0, 400_000, 999_999} {
			t.Run(fmt.Sprintf("%s@+%dns", tc.cmd, off), func(t *testing.T) {
				s, m := newTestServer(t)
				m.Set(t0 + off)
				c := &resp.Conn{}
				sep := " "
				if strings.HasPrefix(tc.cmd, "EVAL") {
					sep = "|"
				}
				args := strings.Split(tc.cmd, sep)
				for i := range tc.limit + 3 {
					r := do(s, c, args...)
					if limited := replyInts(t, r)[0] == 1; limited != (i >= tc.limit) {
						t.Fatalf("call %d: %q; want limited=%v", i+1, r, i >= tc.limit)
					}
				}
				if r := do(s, c, "EXISTS", "k"); r != ":1\r\n" {
					t.Fatalf("EXISTS after the burst: %q, want 1", r)
				}
			})
		}
	}
}

// TestThrottle_SubMillisecondTimeline: calls every 10 us for 100 ms, as on
// a real clock, against 10,000 per second with a burst of 6. TB and LB keep
// exact state across millisecond boundaries and admit what the rate allows:
// 6 at once plus one per 0.1 ms, 1,005 (docs/commands.md's advice for such rates).
// CL.THROTTLE follows redis-cell: its key expires with the millisecond its
// TTL rounds down to, so the bucket starts over every millisecond and each
// millisecond admits 15 (6 at once, then one per 0.1 ms).
func TestThrottle_SubMillisecondTimeline(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		want int
	}{
		{"CL.THROTTLE k 5 10000 1", 1500},
		{"TB.THROTTLE k 6 10000 1000 MS", 1005},
		{"TB.THROTTLE k 6 10000 1", 1005},
		{"LB.THROTTLE k 5 10000 1000 MS", 1005},
	} {
		s, m := newTestServer(t)
		c := &resp.Conn{}
		args := strings.Fields(tc.cmd)
		admitted := 0
		for i := range int64(10_000) {
			m.Set(t0 + 3_000 + i*10_000)
			if replyInts(t, do(s, c, args...))[0] == 0 {
				admitted++
			}
		}
		if admitted != tc.want {
			t.Errorf("%s: %d admitted in 100 ms, want %d", tc.cmd, admitted, tc.want)
		}
	}
}

// TestThrottle_OneInstantProperty: whatever the algorithm, its parameters
// (rates above and below one per millisecond) and where the instant falls
// in its millisecond, calls of random quantities sharing one instant on a
// fresh key are admitted exactly while their total fits the definition's
// limit (max_burst+1, the window's limit, the bucket's capacity, the queue's
// capacity+1): never more, never fewer. Peeks pass and take nothing.
// Through the command path, so the key's expiry is part of what is tested.
func TestThrottle_OneInstantProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	s, m := newTestServer(t)
	c := &resp.Conn{}
	n := func(lo, hi int) string { return strconv.Itoa(lo + rng.IntN(hi-lo+1)) }
	for round := range 400 {
		key := "p" + strconv.Itoa(round)
		var args []string
		var limit int
		switch alg := rng.IntN(6); alg {
		case 0:
			burst := rng.IntN(10)
			args, limit = []string{"CL.THROTTLE", key, strconv.Itoa(burst), n(1, 200_000), n(1, 2), "Q"}, burst+1
		case 1, 2, 3:
			limit = 1 + rng.IntN(10)
			args = []string{[]string{"FWC", "SWL", "SWC"}[alg-1] + ".THROTTLE", key, strconv.Itoa(limit), n(1, 1000), "Q", "MS"}
		case 4:
			limit = 1 + rng.IntN(10)
			args = []string{"TB.THROTTLE", key, strconv.Itoa(limit), n(1, 200_000), n(1, 1000), "Q", "MS"}
		case 5:
			capacity := 1 + rng.IntN(10)
			args, limit = []string{"LB.THROTTLE", key, strconv.Itoa(capacity), n(1, 200_000), n(1, 1000), "Q", "MS"}, capacity+1
		}
		qty := slices.Index(args, "Q")
		m.Set(t0 + rng.Int64N(1e9))
		left := limit
		for call := range 3 * limit {
			q := rng.IntN(4) // 0 is a peek
			args[qty] = strconv.Itoa(q)
			r := do(s, c, args...)
			got := replyInts(t, r)
			want := q <= left
			if limited := got[0] == 1; limited == want || got[1] != int64(limit) {
				t.Fatalf("seed %d round %d call %d: %s with %d of %d left: %q; want limited=%v, limit %d",
					seed, round, call, strings.Join(args, " "), left, limit, r, !want, limit)
			}
			if want {
				left -= q
			}
			if got[2] != int64(left) {
				t.Fatalf("seed %d round %d call %d: %s: remaining %d, want %d", seed, round, call, strings.Join(args, " "), got[2], left)
			}
		}
		if exists := do(s, c, "EXISTS", key) == ":1\r\n"; exists != (left < limit) {
			t.Fatalf("seed %d round %d: %s: key exists=%v after taking %d", seed, round, strings.Join(args, " "), exists, limit-left)
		}
	}
}
