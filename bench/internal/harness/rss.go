package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// RSS has settled when it stays within rssTolerance for RSSQuiet; SettledRSS
// gives up after RSSDeadline.
const (
	RSSQuiet    = 2 * time.Second
	RSSDeadline = 60 * time.Second
)

func rssTolerance(rss int64) int64 { return max(1<<20, rss/200) } // 1 MiB or 0.5%

// SettledRSS polls the resident set size of pid until it has stayed within
// 1 MiB (or 0.5%) for RSSQuiet, and returns it. After RSSDeadline it
// returns the last figure with settled false.
func SettledRSS(ctx context.Context, pid int) (rss int64, settled bool, err error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	began := time.Now()
	if rss, err = ReadRSS(pid); err != nil {
		return 0, false, err
	}
	lo, hi, since := rss, rss, began
	for {
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case now := <-tick.C:
			if rss, err = ReadRSS(pid); err != nil {
				return 0, false, err
			}
			lo, hi = min(lo, rss), max(hi, rss)
			switch {
			case hi-lo > rssTolerance(rss):
				lo, hi, since = rss, rss, now
			case now.Sub(since) >= RSSQuiet:
				return rss, true, nil
			}
			if now.Sub(began) >= RSSDeadline {
				return rss, false, nil
			}
		}
	}
}

// ReadRSS returns VmRSS from /proc/<pid>/status, in bytes.
func ReadRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseRSS(string(b))
}

// ParseRSS reads VmRSS, in bytes, from the text of a /proc/<pid>/status.
func ParseRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line in /proc/<pid>/status")
}

// MiB formats a byte count in MiB.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Unsettled is what a report adds after an RSS figure that SettledRSS
// returned unsettled (nothing when settled).
func Unsettled(settled bool) string {
	if settled {
		return ""
	}
	return fmt.Sprintf(" (still moving after %v)", RSSDeadline)
}
