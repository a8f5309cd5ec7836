// Package repltest is the conformance suite every replication mode must
// pass (Raft and the CRDT mesh): a replicated group answers a command
// stream exactly as one node does, on the debug clock; its members end with
// the same DEBUG DIGEST; a restarted member catches up by itself. An
// eventually consistent mode (Mode.Eventual) is held to it once its members
// have merged everything: the suite waits for equal digests before each
// command.
//
// A mode's test calls Run with a function that starts a group of members,
// each a whole server with the debug clock, as its users would run them.
package repltest

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// Cluster is a running group of members.
type Cluster interface {
	// Size is the number of members.
	Size() int
	// Client returns a client of member i (RESP2, no retries).
	Client(i int) *redis.Client
	// RestartMember stops member i and starts it again with its data.
	RestartMember(i int)
}

// Start starts a group of n members with the debug clock.
type Start func(t *testing.T, n int) Cluster

// seedFlag replays a stream: go test -run Conformance -args -repltest.seed N.
var seedFlag = flag.Uint64("repltest.seed", 0, "seed of the conformance suite's command stream (0: a new one, logged)")

// t0 is the suite's start instant.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// Mode says how a replication mode may differ from one node.
type Mode struct {
	// Eventual: a member answers from what it has merged so far. The
	// suite lets the members converge before each command; it leaves out
	// what such a mode does not promise: deleting rate-limit keys, the
	// millisecond of their PTTL (a member that merged a key may keep it a
	// millisecond longer than its writer), digests equal to one node's (the
	// states are mergeable ones) and WATCH across members.
	Eventual bool
}

// Run runs the suite on groups that start makes.
func Run(t *testing.T, mode Mode, start Start) {
	t.Run("SameRepliesAsSingleNode", func(t *testing.T) { sameReplies(t, mode, start(t, 3)) })
	t.Run("RestartCatchesUp", func(t *testing.T) { restartCatchesUp(t, start(t, 3)) })
	if !mode.Eventual {
		t.Run("Watch", func(t *testing.T) { watch(t, start(t, 3)) })
	}
}

// step is one command of a stream, sent to member `at`, or a clock move
// (advance > 0) on every member.
type step struct {
	at      int
	args    []any
	advance time.Duration
}

// stream returns a seeded random command stream over a few keys: the
// throttles of every algorithm, THROTTLE.ALL, strings, expiry, DEL,
// THROTTLE.RESET, MULTI/EXEC and scripts, with the clock moving in between.
func stream(seed uint64, members, n int, mode Mode) []step {
	rng := rand.New(rand.NewPCG(seed, 0))
	keys := []string{"a", "b", "c"}
	var steps []step
	for range n {
		k := keys[rng.IntN(len(keys))]
		at := rng.IntN(members)
		var args []any
		switch rng.IntN(15) {
		case 0:
			steps = append(steps, step{advance: time.Duration(1+rng.IntN(300)) * time.Millisecond})
			continue
		case 1:
			args = []any{"CL.THROTTLE", "gcra:" + k, 3, 10, 1, rng.IntN(3)}
		case 2:
			args = []any{"FWC.THROTTLE", "fwc:" + k, 5, 1}
		case 3:
			args = []any{"SWL.THROTTLE", "swl:" + k, 4, 1}
		case 4:
			args = []any{"SWC.THROTTLE", "swc:" + k, 4, 1}
		case 5:
			args = []any{"TB.THROTTLE", "tb:" + k, 4, 2, 1}
		case 6:
			args = []any{"LB.THROTTLE", "lb:" + k, 4, 2, 1}
		case 7:
			args = []any{"THROTTLE.ALL", 2, "gcra:" + k, "gcra", 5, 10, 1, "fwc:" + k, "fwc", 5, 1}
		case 8:
			args = []any{"INCRBY", "s:" + k, rng.IntN(10) - 5}
		case 9:
			args = []any{"SET", "s:" + k, strconv.Itoa(rng.IntN(100)), "PX", 100 + rng.IntN(500)}
		case 10:
			args = []any{"GET", "s:" + k}
		case 11:
			args = []any{"DEL", "s:" + k, "gcra:" + k}
			if mode.Eventual {
				args = args[:2]
			}
		case 12:
			args = []any{"EVAL", "redis.call('INCR', KEYS[1]); return redis.call('CL.THROTTLE', KEYS[2], 1, 5, 1)", 2, "s:" + k, "gcra:" + k}
		case 13:
			args = []any{"PTTL", "gcra:" + k}
			if mode.Eventual {
				args[1] = "s:" + k
			}
		case 14:
			args = []any{"THROTTLE.RESET", "gcra:" + k, "tb:" + k, "s:" + k}
			if mode.Eventual {
				// A mesh's reset is its own test (replication/crdt):
				// the key's next decision is stamped a nanosecond after
				// it, which can show at a window's edge.
				continue
			}
		}
		steps = append(steps, step{at: at, args: args})
	}
	return steps
}

// sameReplies sends a random stream to the group, each command to some
// member, and the same stream to one node: every reply must match, and the
// members must end with the same digest, the single node's.
func sameReplies(t *testing.T, mode Mode, c Cluster) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d", seed)
	single := servertest.Start(t, server.Config{DebugClock: true})
	one := redis.NewClient(&redis.Options{Addr: single.Addr(), Protocol: 2, MaxRetries: -1})
	defer one.Close()
	setClocks(t, c, one, t0)
	now := t0
	for i, s := range stream(seed, c.Size(), 400, mode) {
		// Eventual members must have every write before the next
		// command, so that the stream is one history, as on the single
		// node; and before the clocks move, because equal digests prove
		// it only while the last write is visible. (A member that had not
		// yet received a SET whose TTL has passed would increment the key
		// it knows, and lose that to the SET's register once it came.)
		if mode.Eventual {
			waitDigests(t, c, "")
		}
		if s.advance > 0 {
			now += int64(s.advance)
			setClocks(t, c, one, now)
			continue
		}
		want := reply(one, s.args...)
		got := reply(c.Client(s.at), s.args...)
		if got != want {
			t.Fatalf("seed %d step %d %v on member %d: got %s, want %s", seed, i, s.args, s.at, got, want)
		}
	}
	if got := multiExec(t, c.Client(1)); got != multiExec(t, one) {
		t.Fatalf("MULTI/EXEC: got %s, want the single node's", got)
	}
	want := reply(one, "DEBUG", "DIGEST")
	if mode.Eventual {
		want = ""
	}
	waitDigests(t, c, want)
}

// multiExec runs a transaction and returns EXEC's reply.
func multiExec(t *testing.T, cl *redis.Client) string {
	ctx := context.Background()
	cmds, err := cl.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "CL.THROTTLE", "tx", 1, 10, 1)
		p.Do(ctx, "INCR", "tx:n")
		p.Do(ctx, "CL.THROTTLE", "tx", 1, 10, 1)
		return nil
	})
	if err != nil {
		t.Fatalf("MULTI/EXEC: %v", err)
	}
	var out []string
	for _, cmd := range cmds {
		out = append(out, fmt.Sprint(cmd.(*redis.Cmd).Val()))
	}
	return fmt.Sprint(out)
}

// restartCatchesUp restarts a member while the others take writes, then
// checks that it answers with the others' state.
func restartCatchesUp(t *testing.T, c Cluster) {
	setClocks(t, c, nil, t0)
	for i := range 50 {
		mustDo(t, c.Client(i%c.Size()), "INCR", "n")
	}
	c.RestartMember(2)
	setClocks(t, c, nil, t0)
	for i := range 50 {
		mustDo(t, c.Client(i%2), "CL.THROTTLE", "k", 1000, 1, 1)
	}
	waitDigests(t, c, "")
	if got := reply(c.Client(2), "GET", "n"); got != "50" {
		t.Fatalf("restarted member: GET n = %s, want 50", got)
	}
}

// watch checks WATCH across members: a transaction on one member whose
// watched key another member changed in between does not run; one whose
// keys nobody touched does.
func watch(t *testing.T, c Cluster) {
	ctx := context.Background()
	mustDo(t, c.Client(0), "SET", "w", "1")
	tx := func(change bool) error {
		return c.Client(1).Watch(ctx, func(tx *redis.Tx) error {
			if change {
				mustDo(t, c.Client(2), "SET", "w", "2")
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Incr(ctx, "w:runs")
				return nil
			})
			return err
		}, "w")
	}
	if err := tx(false); err != nil {
		t.Fatalf("a transaction on an untouched watched key: %v", err)
	}
	if err := tx(true); err != redis.TxFailedErr {
		t.Fatalf("a transaction whose watched key changed: %v, want %v", err, redis.TxFailedErr)
	}
	if got := reply(c.Client(0), "GET", "w:runs"); got != "1" {
		t.Fatalf("GET w:runs = %s, want 1 (one transaction ran)", got)
	}
}

// setClocks sets every member's debug clock, and one's when it is not nil.
func setClocks(t *testing.T, c Cluster, one *redis.Client, at int64) {
	t.Helper()
	for i := range c.Size() {
		mustDo(t, c.Client(i), "DEBUG", "CLOCK", "SET", at)
	}
	if one != nil {
		mustDo(t, one, "DEBUG", "CLOCK", "SET", at)
	}
}

// waitDigests waits until every member's DEBUG DIGEST is want, or, with
// want "", until they are all the same.
func waitDigests(t *testing.T, c Cluster, want string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = got[:0]
		for i := range c.Size() {
			got = append(got, reply(c.Client(i), "DEBUG", "DIGEST"))
		}
		w := cmp.Or(want, got[0])
		if !slices.ContainsFunc(got, func(d string) bool { return d != w }) {
			return
		}
		if time.Now().After(deadline) {
			logKeys(t, c)
			t.Fatalf("digests %v, want every one %s", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// logKeys logs every member's digest and PTTL of each key the stream
// uses, to show which one differs.
func logKeys(t *testing.T, c Cluster) {
	var keys []string
	for _, p := range []string{"s:", "gcra:", "fwc:", "swl:", "swc:", "tb:", "lb:"} {
		for _, k := range []string{"a", "b", "c"} {
			keys = append(keys, p+k)
		}
	}
	for i := range c.Size() {
		for _, k := range append(keys, "tx", "tx:n") {
			t.Logf("member %d %s: digest %s, pttl %s", i, k, reply(c.Client(i), "DEBUG", "DIGEST-VALUE", k), reply(c.Client(i), "PTTL", k))
		}
	}
}

func mustDo(t *testing.T, cl *redis.Client, args ...any) {
	t.Helper()
	if r := reply(cl, args...); strings.HasPrefix(r, "error: ") && r != "error: "+redis.Nil.Error() {
		t.Fatalf("%v: %s", args, r)
	}
}

// reply renders a command's reply, or its error, as text. A command that
// met no leader (CLUSTERDOWN: it was not applied) is sent again, for up to
// 10 seconds: a loaded machine can make a member miss heartbeats and call an
// election. UNKNOWN (the outcome is unknown) is a reply like any other.
func reply(cl *redis.Client, args ...any) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := cl.Do(context.Background(), args...).Result()
		switch {
		case err == nil:
			return fmt.Sprint(v)
		case strings.HasPrefix(err.Error(), "CLUSTERDOWN") && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond)
		default:
			return "error: " + err.Error()
		}
	}
}
