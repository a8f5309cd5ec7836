package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestWatch_KeyAlreadyExpired (issue 22, item 11): a key that has expired
// but was not yet removed when WATCH read it was already gone for the
// client, so its lazy removal (by EXISTS, or a FLUSHDB) is no change and
// EXEC runs; a later write of the key does abort it. Compared live with
// redis-server (which waits out the millisecond for real) and throttled
// (on the debug clock).
func TestWatch_KeyAlreadyExpired(t *testing.T) {
	ctx := context.Background()
	n := servertest.Start(t, server.Config{DebugClock: true})
	targets := []struct {
		name string
		addr string
		wait func(*redis.Client)
	}{
		{"redis", startRedis(t, ""), func(*redis.Client) { time.Sleep(10 * time.Millisecond) }},
		{"throttled", n.Addr(), func(cl *redis.Client) { cl.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", int64(10*time.Millisecond)) }},
	}
	results := map[string][]string{}
	for _, tg := range targets {
		cl := redis.NewClient(&redis.Options{Addr: tg.addr, Protocol: 2})
		defer cl.Close()
		for _, touch := range []string{"EXISTS", "FLUSHDB", "SET"} {
			cl.Set(ctx, "x", "foo", time.Millisecond)
			tg.wait(cl)
			conn := cl.Conn()
			conn.Do(ctx, "WATCH", "x")
			switch touch {
			case "EXISTS":
				conn.Do(ctx, "EXISTS", "x")
			case "FLUSHDB":
				conn.Do(ctx, "FLUSHDB")
			case "SET":
				conn.Do(ctx, "SET", "x", "bar")
			}
			conn.Do(ctx, "MULTI")
			conn.Do(ctx, "PING")
			v, err := conn.Do(ctx, "EXEC").Result()
			results[tg.name] = append(results[tg.name], fmt.Sprintf("%s: %v %v", touch, v, err))
			conn.Close()
			cl.Del(ctx, "x")
		}
	}
	want := []string{"EXISTS: [PONG] <nil>", "FLUSHDB: [PONG] <nil>", "SET: <nil> redis: nil"}
	for name, got := range results {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
