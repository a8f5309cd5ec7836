package raft_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/throttleddb/throttled/replication/raft/rafttest"
	"github.com/throttleddb/throttled/server"
)

// TestLeases_AgreeAcrossTheCluster: quota leases taken and returned through
// every member (a seeded mix of algorithms, eager and lazy, with retried
// returns) go through the log: each member applies the same grants, ids and
// credits, so a return reaches the lease whichever member it is sent to, a
// retried one never credits twice, even after the leader is replaced, and
// the members end with equal digests, lease tables included. A member
// restarted after the log was trimmed gets the tables from a snapshot.
func TestLeases_AgreeAcrossTheCluster(t *testing.T) {
	c := rafttest.New(t, 3, server.Config{DebugClock: true})
	rng := rand.New(rand.NewPCG(24, 1))
	limits := [][]any{
		{"fwc", "FWC", 100, 60},
		{"tb", "TB", 50, 5, 1},
		{"cl", "CL", 49, 5, 1},
		{"swc", "SWC", 100, 60},
	}
	type held struct {
		id   string
		want int64 // status and units its return answered, for retries
		used int64
		done []any
	}
	var leases []*held
	member := func() *rafttest.Member {
		for {
			if m := c.Members[rng.IntN(len(c.Members))]; m.Node != nil {
				return m
			}
		}
	}
	step := func(i int) {
		lim := limits[rng.IntN(len(limits))]
		args := append([]any{"QUOTA.LEASE"}, lim...)
		args = append(args, 1+rng.IntN(20), "HOLDER", "gw"+strconv.Itoa(rng.IntN(3)), "TTL", 60_000)
		if rng.IntN(3) == 0 {
			args = append(args, "LAZY")
		}
		reply, ok := c.Do(member(), args...).([]any)
		if !ok || len(reply) != 7 {
			t.Fatalf("step %d: %v: %v", i, args, reply)
		}
		if id, ok := reply[0].(string); ok {
			leases = append(leases, &held{id: id, want: reply[1].(int64)})
		}
		// Return a random live lease through a random member, sometimes
		// twice.
		if len(leases) > 0 && rng.IntN(2) == 0 {
			h := leases[rng.IntN(len(leases))]
			if h.done == nil {
				h.used = rng.Int64N(h.want + 1)
				r, ok := c.Do(member(), "QUOTA.RETURN", h.id, h.used).([]any)
				if !ok || r[0] != int64(1) {
					t.Fatalf("step %d: return of %s: %v", i, h.id, r)
				}
				h.done = r
			}
			r, ok := c.Do(member(), "QUOTA.RETURN", h.id, h.used).([]any)
			if !ok || r[0] != int64(0) || r[1] != h.done[1] {
				t.Fatalf("step %d: retried return of %s: %v, want status 0 and units %v", i, h.id, r, h.done[1])
			}
		}
	}
	for i := range 60 {
		step(i)
	}
	c.Converged()

	// The leader goes: the new one holds the same tables.
	lead := c.Leader()
	c.Stop(lead)
	c.Leader()
	for i := 60; i < 120; i++ {
		step(i)
	}
	c.Converged()

	// Back after the log moved on (4 trailing entries): a snapshot
	// brings it the tables, and it agrees.
	c.Do(c.Leader(), "RAFT", "SNAPSHOT")
	c.Restart(lead)
	c.Leader()
	for i := 120; i < 150; i++ {
		step(i)
	}
	if d := c.Converged(); d == "" {
		t.Fatal("no digest")
	}
	// Every member holds the four lease tables.
	for _, m := range c.Members {
		for _, lim := range limits {
			if got := c.Do(m, "TYPE", "quota:leases:"+lim[0].(string)); got != "leases" {
				t.Errorf("%s: TYPE quota:leases:%s = %v", m.ID, lim[0], got)
			}
		}
	}
}
