package crdt_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/gcra"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/replication/crdt/crdttest"
)

// hourly are a key of each rate-limit kind, each allowing 4 calls an hour:
// the command without its quantity.
var hourly = map[string][]any{
	"cl":  {"CL.THROTTLE", "cl", 3, 4, 3600},
	"tb":  {"TB.THROTTLE", "tb", 4, 1, 3600},
	"lb":  {"LB.THROTTLE", "lb", 3, 1, 3600},
	"fwc": {"FWC.THROTTLE", "fwc", 4, 3600},
	"swl": {"SWL.THROTTLE", "swl", 4, 3600},
	"swc": {"SWC.THROTTLE", "swc", 4, 3600},
}

// call runs cmd on key with quantity qty at m.
func call(c *crdttest.Cluster, m *crdttest.Node, cmd []any, key string, qty int) string {
	args := append([]any{cmd[0], key}, cmd[2:]...)
	return fmt.Sprint(c.Do(m, append(args, qty)...))
}

// setClock sets m's debug clock.
func setClock(t *testing.T, c *crdttest.Cluster, m *crdttest.Node, at int64) {
	t.Helper()
	if err, ok := c.Do(m, "DEBUG", "CLOCK", "SET", at).(error); ok {
		t.Fatal(err)
	}
}

// TestReset_Partition: keys of every kind exhausted on nodes a and b; a is
// cut off from the others, and the reset is issued on c (which restarts
// with its data meanwhile). b gets it; the clocks move on past when the
// reset keys would expire, with a still holding the history it had; then
// the partition heals, and a's copy from before the reset (its full sync
// on reconnect, a late delta) does not bring the history back: every node
// converges on a fresh key, a full budget.
func TestReset_Partition(t *testing.T) {
	c := crdttest.New(t, 3, seed(t), fast)
	a, b, cn := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	c.Connected()
	c.SetClocks(crdttest.Start)
	for name, cmd := range hourly {
		for _, m := range []*crdttest.Node{a, a, b, b} {
			if got := call(c, m, cmd, name, 1); got[:2] != "[0" {
				t.Fatalf("%s on %s: %s, want allowed", name, m.ID, got)
			}
		}
	}
	c.Converged()
	for name, cmd := range hourly {
		if got := call(c, cn, cmd, name, 1); got[:2] != "[1" {
			t.Fatalf("%s on %s after 4 calls: %s, want limited", name, cn.ID, got)
		}
	}
	// DEL is refused, and says what to run instead.
	if err, ok := c.Do(cn, "DEL", "cl").(error); !ok || !strings.Contains(err.Error(), "THROTTLE.RESET resets it") {
		t.Fatalf("DEL of a rate-limit key on a mesh: %v, want a refusal naming THROTTLE.RESET", err)
	}
	c.Net.Partition([]string{a.Addr}, []string{b.Addr, cn.Addr})
	now := crdttest.Start + int64(time.Second)
	c.SetClocks(now)
	args := []any{"THROTTLE.RESET"}
	for name := range hourly {
		args = append(args, name)
	}
	if got := c.Do(cn, args...); got != int64(len(hourly)) {
		t.Fatalf("THROTTLE.RESET on %s: %v, want %d", cn.ID, got, len(hourly))
	}
	// fresh is what a key never used answers a peek at m, now.
	fresh := func(m *crdttest.Node, name string) string { return call(c, m, hourly[name], "never-used", 0) }
	testwait.For(t, 10*time.Second, "the reset on b", func() bool {
		for name, cmd := range hourly {
			if call(c, b, cmd, name, 0) != fresh(b, name) {
				return false
			}
		}
		return true
	})
	c.Restart(cn, true)
	// Ten minutes on, the reset keys are past their expiry, and a's
	// history is not (an hour's worth).
	now += int64(10 * time.Minute)
	c.SetClocks(now)
	for name, cmd := range hourly {
		if got := call(c, a, cmd, name, 0); got == fresh(a, name) {
			t.Fatalf("%s on %s before the heal: %s, want its old history", name, a.ID, got)
		}
	}
	c.Net.Heal()
	c.Connected()
	c.Converged()
	for _, m := range c.Nodes {
		for name, cmd := range hourly {
			if got, want := call(c, m, cmd, name, 0), fresh(m, name); got != want {
				t.Errorf("%s on %s after the heal: %s, want a fresh key's %s", name, m.ID, got, want)
			}
		}
	}
	// And the budget is whole: 4 calls pass anywhere.
	for name, cmd := range hourly {
		for _, m := range c.Nodes[:2] {
			for range 2 {
				if got := call(c, m, cmd, name, 1); got[:2] != "[0" {
					t.Errorf("%s on %s after the reset: %s, want allowed", name, m.ID, got)
				}
			}
		}
	}
}

// TestReset_RacesDecisions: a reset on b while a, cut off, goes on
// deciding. What a admits stamped before the reset's instant (its clock
// lags b's) is forgiven once the two meet, what it admits after stays, as
// does what b admits after its own reset. Two resets of one key made
// concurrently join into the later one. An FWC key keeps a's whole count
// for the window, since a's slot took an admission after the reset.
func TestReset_RacesDecisions(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	a, b := c.Nodes[0], c.Nodes[1]
	c.Connected()
	c.SetClocks(crdttest.Start)
	p, err := gcra.NewParams(9, 10, 3600) // 10 at once, then 10 an hour
	if err != nil {
		t.Fatal(err)
	}
	cl := []any{"CL.THROTTLE", "", 9, 10, 3600}
	fwc := []any{"FWC.THROTTLE", "", 10, 3600}
	swl := []any{"SWL.THROTTLE", "", 10, 3600}
	allow := func(m *crdttest.Node, cmd []any, key string) {
		t.Helper()
		if got := call(c, m, cmd, key, 1); got[:2] != "[0" {
			t.Fatalf("%v %s on %s: %s, want allowed", cmd[0], key, m.ID, got)
		}
	}
	keys := map[string][]any{"k": cl, "f": fwc, "l": swl, "twice": cl}
	for key, cmd := range keys {
		for range 3 {
			allow(a, cmd, key)
			allow(b, cmd, key)
		}
	}
	c.Converged()
	c.Net.Partition([]string{a.Addr}, []string{b.Addr})
	r := crdttest.Start + int64(time.Second)
	lag := int64(20 * time.Millisecond)
	setClock(t, c, b, r)
	setClock(t, c, a, r-lag)
	// b resets everything, and admits once on each key after it.
	if got := c.Do(b, "THROTTLE.RESET", "k", "f", "l", "twice"); got != int64(4) {
		t.Fatalf("THROTTLE.RESET: %v", got)
	}
	for key, cmd := range keys {
		allow(b, cmd, key)
	}
	// a, which has not heard of it, admits twice before its instant and
	// resets "twice" itself (earlier than b did), admitting once after.
	for key, cmd := range keys {
		if key != "twice" {
			allow(a, cmd, key)
			allow(a, cmd, key)
		}
	}
	if got := c.Do(a, "THROTTLE.RESET", "twice"); got != int64(1) {
		t.Fatalf("THROTTLE.RESET twice on a: %v", got)
	}
	allow(a, cl, "twice")
	// Then once after b's instant.
	now := r + lag
	setClock(t, c, a, now)
	setClock(t, c, b, now)
	for key, cmd := range keys {
		if key != "twice" {
			allow(a, cmd, key)
		}
	}
	c.Net.Heal()
	c.Connected()
	c.Converged()
	// k: b's admission just after its reset (r+1: a decision on a reset
	// key is made after it) and a's at r+lag.
	wantK := peek(exactTAT([]admission{{t: r + 1, qty: 1}, {t: now, qty: 1}}, p), p, now)
	// twice: b's reset at r is the later; a's admission after its own
	// reset is stamped before r.
	wantTwice := peek(exactTAT([]admission{{t: r + 1, qty: 1}}, p), p, now)
	for _, m := range c.Nodes {
		if got := call(c, m, cl, "k", 0); got != wantK {
			t.Errorf("k on %s: %s, want %s (b's admission after the reset and a's after its instant)", m.ID, got, wantK)
		}
		if got := call(c, m, cl, "twice", 0); got != wantTwice {
			t.Errorf("twice on %s: %s, want %s (only b's admission after the later reset)", m.ID, got, wantTwice)
		}
		// SWL: the same two admissions, 8 left of 10.
		if got := c.Do(m, "SWL.THROTTLE", "l", 10, 3600, 0).([]any); got[2] != int64(8) {
			t.Errorf("l on %s: %v, want 8 remaining", m.ID, got)
		}
		// FWC: b's admission, and a's whole count for the window (3
		// before the partition, 2 before the reset's instant, 1 after):
		// 3 left of 10.
		if got := c.Do(m, "FWC.THROTTLE", "f", 10, 3600, 0).([]any); got[2] != int64(3) {
			t.Errorf("f on %s: %v, want 3 remaining", m.ID, got)
		}
	}
}

// TestReset_Released: every node keeps a reset key past its expiry while
// some node may not have the reset, and drops it once every node has
// reported having everything stamped before it, and Linger more.
func TestReset_Released(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	a, b := c.Nodes[0], c.Nodes[1]
	c.Connected()
	c.SetClocks(crdttest.Start)
	c.Do(a, "CL.THROTTLE", "k", 3, 4, 3600)
	c.Converged()
	if got := c.Do(b, "THROTTLE.RESET", "k"); got != int64(1) {
		t.Fatalf("THROTTLE.RESET: %v", got)
	}
	// held reports whether m still holds k, past its expiry: EXISTS
	// removes an expired key nothing holds, DBSIZE counts what is left.
	held := func(m *crdttest.Node) bool {
		if got := c.Do(m, "EXISTS", "k"); got != int64(0) {
			t.Fatalf("EXISTS k on %s after the reset: %v", m.ID, got)
		}
		return c.Do(m, "DBSIZE") == int64(1)
	}
	c.SetClocks(crdttest.Start + int64(time.Second))
	testwait.For(t, 10*time.Second, "the reset on a", func() bool {
		return fmt.Sprint(c.Do(a, "CL.THROTTLE", "k", 3, 4, 3600, 0)) == fmt.Sprint(c.Do(a, "CL.THROTTLE", "never-used", 3, 4, 3600, 0))
	})
	for _, m := range c.Nodes {
		if !held(m) {
			t.Fatalf("%s dropped the reset key within Linger of it", m.ID)
		}
	}
	c.SetClocks(crdttest.Start + int64(time.Second+crdt.Linger+time.Second))
	testwait.For(t, 10*time.Second, "the reset key dropped", func() bool {
		return !held(a) && !held(b)
	})
}

// TestReset_RestartKeepsMark: a node that reset a key no other node has
// heard of yet restarts after the key's expiry (its clock later than when
// it wrote the reset): it loads the mark from its data folder all the
// same, and once the partition heals the other node's history is forgiven.
func TestReset_RestartKeepsMark(t *testing.T) {
	c := crdttest.New(t, 2, seed(t), fast)
	a, b := c.Nodes[0], c.Nodes[1]
	c.Connected()
	c.SetClocks(crdttest.Start)
	cmd := hourly["cl"]
	for range 4 {
		call(c, a, cmd, "cl", 1)
	}
	c.Converged()
	c.Net.Partition([]string{a.Addr}, []string{b.Addr})
	if got := c.Do(b, "THROTTLE.RESET", "cl"); got != int64(1) {
		t.Fatalf("THROTTLE.RESET: %v", got)
	}
	now := crdttest.Start + int64(10*time.Minute)
	c.StartAt = now
	c.Restart(b, true)
	c.SetClocks(now)
	c.Net.Heal()
	c.Connected()
	c.Converged()
	for _, m := range c.Nodes {
		if got, want := call(c, m, cmd, "cl", 0), call(c, m, cmd, "never-used", 0); got != want {
			t.Errorf("cl on %s: %s, want a fresh key's %s", m.ID, got, want)
		}
	}
}
