package main

import (
	"context"
	"fmt"
	"github.com/throttleddb/throttled/bench/internal/harness"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/respconn"
)

// fillParams are CL.THROTTLE's max_burst, count and period for the keys of
// parts 2 and 3: one call leaves a key that lives an hour.
var fillParams = []string{"10", "1", "3600"}

// fillBatch is how many calls go in one pipeline while filling.
const fillBatch = 1000

// persistedServers are the servers the restart part stops and starts again.
func (r *runner) persistedServers() []*server {
	return []*server{
		{label: "throttled, data folder (everysec)", args: []string{"--threads", "1"}, dir: filepath.Join(r.tmp, "m-throttled")},
		{label: "redis-server, AOF everysec", redis: true, args: []string{"--save", "", "--appendonly", "yes", "--appendfsync", "everysec"}, dir: filepath.Join(r.tmp, "m-redis")},
	}
}

// memResult is what the memory part measured on one server.
type memResult struct {
	s                   *server
	idle, full          int64 // RSS in bytes, before and after filling
	settled             bool  // full RSS stopped changing before harness.RSSDeadline
	usedMemory, dataset int64 // INFO memory after filling
	fill                time.Duration
}

// memory starts each server fresh, one at a time, fills it with keys and
// reports its memory. The persisted servers are left running, filled, and
// returned for the restart part.
func (r *runner) memory(ctx context.Context, w io.Writer) ([]*server, error) {
	persisted := r.persistedServers()
	servers := []*server{
		{label: "throttled, in memory", args: []string{"--threads", "1", "--persistence", "off"}},
		persisted[0],
		{label: "redis-server, no AOF", redis: true, args: []string{"--save", "", "--appendonly", "no"}},
		persisted[1],
	}
	var res []memResult
	for _, s := range servers {
		m := memResult{s: s}
		if _, err := r.start(ctx, s); err != nil {
			return nil, err
		}
		var err error
		if m.idle, _, err = harness.SettledRSS(ctx, s.p.Pid()); err != nil {
			return nil, err
		}
		if m.fill, err = r.fill(ctx, s); err != nil {
			return nil, err
		}
		if err := r.waitBackground(ctx, s); err != nil {
			return nil, err
		}
		if m.full, m.settled, err = harness.SettledRSS(ctx, s.p.Pid()); err != nil {
			return nil, err
		}
		info, err := respconn.Info(ctx, s.addr, "memory")
		if err != nil {
			return nil, err
		}
		m.usedMemory, _ = strconv.ParseInt(info["used_memory"], 10, 64)
		m.dataset, _ = strconv.ParseInt(info["used_memory_dataset"], 10, 64)
		r.logf("%s: RSS %s idle, %s with %d keys", s.label, harness.MiB(m.idle), harness.MiB(m.full), r.cfg.keys)
		res = append(res, m)
		if s.dir == "" {
			if err := s.p.Stop(); err != nil {
				return nil, err
			}
		}
	}

	keys := int64(r.cfg.keys)
	fmt.Fprintf(w, "\n### Memory for %s idle CL.THROTTLE keys\n\n", harness.Thousands(keys))
	fmt.Fprintf(w, "Each server fresh and alone, keys `k:0`..`k:%d` written with `CL.THROTTLE k:<i> %s` (redis-server: `EVALSHA <sha of bench/gcra.lua> 1 k:<i> %s 1`), "+
		"pipelined %d at a time on one connection; each key then lives an hour. "+
		"RSS is VmRSS once it stayed within 1 MiB (or 0.5%%) for %v; growth = RSS after - RSS before writing. "+
		"used_memory is Go's HeapAlloc on throttled (live data plus garbage not yet collected) and the allocator's figure on redis-server.\n\n",
		keys-1, strings.Join(fillParams, " "), strings.Join(fillParams, " "), fillBatch, harness.RSSQuiet)
	fmt.Fprintf(w, "| server | flags | idle RSS | RSS with keys | growth | growth per key | used_memory | used_memory_dataset | write time |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range res {
		fmt.Fprintf(w, "| %s | `%s` | %s | %s%s | %s | %d B | %s | %s | %.1f s |\n",
			m.s.label, flagsText(m.s), harness.MiB(m.idle), harness.MiB(m.full), harness.Unsettled(m.settled), harness.MiB(m.full-m.idle),
			(m.full-m.idle)/keys, harness.MiB(m.usedMemory), harness.MiB(m.dataset), m.fill.Seconds())
	}
	fmt.Fprintf(w, "\n| ratio | RSS growth | RSS | used_memory | bar (RSS growth) |\n|---|---:|---:|---:|---|\n")
	for _, q := range [][2]int{{0, 2}, {1, 2}, {1, 3}} {
		a, b := res[q[0]], res[q[1]]
		g := float64(a.full-a.idle) / float64(b.full-b.idle)
		fmt.Fprintf(w, "| %s / %s | %s | %.2f | %.2f | ≤ 1.0 |\n", a.s.label, b.s.label, harness.BarCell(g, true, g <= 1),
			float64(a.full)/float64(b.full), float64(a.usedMemory)/float64(b.usedMemory))
	}
	return persisted, nil
}

// restart stops each persisted server cleanly and starts it again on the same
// folder. filled holds the servers the memory part left running; when it is
// nil (-skip memory) they are started and filled here.
func (r *runner) restart(ctx context.Context, w io.Writer, filled []*server) error {
	if filled == nil {
		filled = r.persistedServers()
		for _, s := range filled {
			if _, err := r.start(ctx, s); err != nil {
				return err
			}
			if _, err := r.fill(ctx, s); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "\n### Restart with %s keys\n\n", harness.Thousands(int64(r.cfg.keys)))
	fmt.Fprintf(w, "The data-folder servers of the memory part (filled here if it was skipped) are stopped with SIGTERM and started again with the same flags on the same folder. "+
		"\"start to PING\" runs from starting the process until it answers PONG (polled every 10 ms); "+
		"\"server's own figure\" is the `took` of throttled's `loaded data folder` log line and redis-server's `DB loaded from append only file` line.\n\n")
	fmt.Fprintf(w, "| server | SIGTERM to exit | folder on disk | start to PING | server's own figure | DBSIZE after | RSS after |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range filled {
		if s.redis { // a rewrite under way would be cut short by the stop
			if err := waitAOFRewrite(ctx, s.addr); err != nil {
				return err
			}
		}
		began := time.Now()
		if err := s.p.Stop(); err != nil {
			return fmt.Errorf("%w\n--- its output ---\n%s", err, s.p.Output())
		}
		stopped := time.Since(began)
		size, err := dirSize(s.dir)
		if err != nil {
			return err
		}
		took, err := r.start(ctx, s)
		if err != nil {
			return err
		}
		own := loadTook(s.p.Output())
		c, err := respconn.Dial(ctx, s.addr, time.Minute)
		if err != nil {
			return err
		}
		n, err := c.Do("DBSIZE")
		c.Close()
		if err != nil {
			return err
		}
		rss, _, err := harness.SettledRSS(ctx, s.p.Pid())
		if err != nil {
			return err
		}
		check := ""
		if n != int64(r.cfg.keys) {
			check = fmt.Sprintf(" **✗ want %d**", r.cfg.keys)
		}
		r.logf("%s: restarted in %v (own figure %s), DBSIZE %v", s.label, took.Round(time.Millisecond), own, n)
		fmt.Fprintf(w, "| %s | %.2f s | %s | %.2f s | %s | %v%s | %s |\n",
			s.label, stopped.Seconds(), harness.MiB(size), took.Seconds(), own, n, check, harness.MiB(rss))
	}
	return nil
}

// fill writes keys k:0..k:<keys-1> to s, pipelined, and checks that every
// call was allowed and that DBSIZE is then the number of keys.
func (r *runner) fill(ctx context.Context, s *server) (time.Duration, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: 2, DisableIdentity: true,
		PoolSize: 1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer c.Close()
	began := time.Now()
	for lo := 0; lo < r.cfg.keys; lo += fillBatch {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := lo; i < min(lo+fillBatch, r.cfg.keys); i++ {
				var args []any
				for _, a := range s.throttle("k:"+strconv.Itoa(i), fillParams...) {
					args = append(args, a)
				}
				p.Do(ctx, args...)
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("%s: writing keys: %w", s.label, err)
		}
		for _, cmd := range cmds {
			if v, err := cmd.(*redis.Cmd).Int64Slice(); err != nil || len(v) != 5 || v[0] != 0 {
				return 0, fmt.Errorf("%s: %v answered %v, %v; want an allowed call", s.label, cmd.Args(), v, err)
			}
		}
	}
	took := time.Since(began)
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		return 0, err
	}
	if n != int64(r.cfg.keys) {
		return 0, fmt.Errorf("%s: DBSIZE is %d after writing %d keys", s.label, n, r.cfg.keys)
	}
	r.logf("%s: wrote %d keys in %v (%.0f/s)", s.label, r.cfg.keys, took.Round(time.Millisecond), float64(r.cfg.keys)/took.Seconds())
	return took, nil
}

// waitBackground waits until a server with a data folder is done with the
// work the fill left it, so that its RSS is that of idle keys: redis-server
// with no AOF rewrite, throttled with the fill checkpointed (no log left),
// and then both using no CPU for a second (Pebble's compactions after the
// checkpoint hold memory while they run).
func (r *runner) waitBackground(ctx context.Context, s *server) error {
	if s.dir == "" {
		return nil
	}
	if s.redis {
		if err := waitAOFRewrite(ctx, s.addr); err != nil {
			return err
		}
	} else if err := waitInfo(ctx, s.addr, "persistence", "the checkpoint", func(info map[string]string) bool {
		return info["aof_log_bytes"] == "0"
	}); err != nil {
		return err
	}
	return harness.WaitIdle(ctx, []int{s.p.Pid()}, 0, r.logf)
}

// waitInfo waits, for at most 5 minutes, until INFO section's fields
// satisfy done, which says what it waits for.
func waitInfo(ctx context.Context, addr, section, what string, done func(info map[string]string) bool) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		info, err := respconn.Info(ctx, addr, section)
		if err != nil {
			return err
		}
		if done(info) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still waiting for %s after 5 minutes", addr, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitAOFRewrite waits until redis-server has no AOF rewrite running or
// scheduled.
func waitAOFRewrite(ctx context.Context, addr string) error {
	return waitInfo(ctx, addr, "persistence", "the AOF rewrite", func(info map[string]string) bool {
		return info["aof_rewrite_in_progress"] == "0" && info["aof_rewrite_scheduled"] == "0"
	})
}

var (
	throttledTook = regexp.MustCompile(`msg="loaded data folder".* took=(\S+)`)
	redisTook     = regexp.MustCompile(`DB loaded from append only file: ([0-9.]+) seconds`)
)

// loadTook finds the server's own load time in its log: throttled's
// "loaded data folder ... took=1.234s", redis-server's "DB loaded from
// append only file: 1.234 seconds". "-" when there is none.
func loadTook(log string) string {
	if m := throttledTook.FindStringSubmatch(log); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			return fmt.Sprintf("%.2f s", d.Seconds())
		}
	}
	if m := redisTook.FindStringSubmatch(log); m != nil {
		if s, err := strconv.ParseFloat(m[1], 64); err == nil {
			return fmt.Sprintf("%.2f s", s)
		}
	}
	return "-"
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}
