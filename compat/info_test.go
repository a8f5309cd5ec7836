package compat

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestInfo_SectionsAndErrorstats (issue 22, item 7): INFO selects the
// sections Redis 7.0 does for each argument, in its order and with its
// headings (Commandstats only in all/everything or by name, # CPU, the
// Errorstats and Cluster sections), and Errorstats counts error replies by
// prefix as redis-server does, live. Redis' Latencystats section is not
// kept here; throttled's Policies section shows, like a module's, in
// "everything" only.
func TestInfo_SectionsAndErrorstats(t *testing.T) {
	ctx := context.Background()
	n := servertest.Start(t, server.Config{})
	heading := regexp.MustCompile(`(?m)^# (\w+)\r?$`)
	run := func(addr string) (map[string][]string, []string) {
		cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		defer cl.Close()
		cl.Do(ctx, "CONFIG", "RESETSTAT")
		cl.Do(ctx, "NOSUCHCOMMAND")
		cl.Do(ctx, "SET", "k", "v")
		cl.Do(ctx, "INCR", "k")
		cl.Do(ctx, "GET")
		cl.Do(ctx, "EVAL", "return redis.error_reply('MYERR made up')", "0")
		conn := cl.Conn()
		conn.Do(ctx, "MULTI")
		conn.Do(ctx, "NOSUCHCOMMAND")
		conn.Do(ctx, "EXEC")
		conn.Close()
		sections := map[string][]string{}
		for _, args := range [][]string{{}, {"default"}, {"all"}, {"everything"}, {"commandstats"}, {"errorstats"}, {"cluster"}, {"cpu"}, {"default", "commandstats"}, {"keyspace", "server"}} {
			info, err := cl.Info(ctx, args...).Result()
			if err != nil {
				t.Fatal(err)
			}
			var hs []string
			for _, m := range heading.FindAllStringSubmatch(info, -1) {
				if m[1] != "Latencystats" && m[1] != "Policies" {
					hs = append(hs, m[1])
				}
			}
			sections[strings.Join(args, " ")] = hs
		}
		errs, _ := cl.Info(ctx, "errorstats").Result()
		var lines []string
		for _, l := range strings.Split(errs, "\r\n") {
			if strings.HasPrefix(l, "errorstat_") {
				lines = append(lines, l)
			}
		}
		cluster, _ := cl.Info(ctx, "cluster").Result()
		return sections, append(lines, strings.TrimSpace(cluster))
	}
	redisSections, redisLines := run(startRedis(t, ""))
	ours, ourLines := run(n.Addr())
	for args, want := range redisSections {
		if got := ours[args]; !slices.Equal(got, want) {
			t.Errorf("INFO %s: sections %v, redis-server %v", args, got, want)
		}
	}
	if !slices.Equal(ourLines, redisLines) {
		t.Errorf("errorstats and cluster: %q\nredis-server: %q", ourLines, redisLines)
	}
}
