package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestCommands_Compare: the two commands the benchmark compares do the
// same work: THROTTLE.POLICY finds the last template's policy and applies
// the same two limits THROTTLE.ALL is given, with the same replies' limits.
func TestCommands_Compare(t *testing.T) {
	n := servertest.Start(t, server.Config{DebugClock: true})
	cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
	defer cl.Close()
	ctx := context.Background()
	var file strings.Builder
	file.WriteString("policies:\n")
	for _, p := range policies(10) {
		file.WriteString("  - " + string(policy.Marshal(&p)) + "\n")
	}
	if err := cl.Do(ctx, "POLICY", "LOAD", file.String()).Err(); err != nil {
		t.Fatal(err)
	}
	args := func(cmd []string) []any {
		var out []any
		for _, a := range cmd {
			out = append(out, strings.ReplaceAll(a, "__rand_int__", "7"))
		}
		return out
	}
	cmds := commands(10)
	pol, err := cl.Do(ctx, args(cmds["THROTTLE.POLICY"])...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	all, err := cl.Do(ctx, args(cmds["THROTTLE.ALL"])...).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if pol[0] != int64(0) || pol[1] != "t9" || all[0] != int64(0) {
		t.Fatalf("THROTTLE.POLICY %v, THROTTLE.ALL %v: want both allowed, by t9", pol, all)
	}
	tiers := pol[9].([]any)
	for i, lim := range all[1:] {
		if got, want := tiers[i].([]any)[1], lim.([]any)[1]; got != want {
			t.Errorf("tier %d: limit %v, THROTTLE.ALL's %v", i+1, got, want)
		}
	}
}
