package commands

import (
	"errors"
	"sync"

	"github.com/throttleddb/throttled/policy"
	"github.com/throttleddb/throttled/telemetry"
)

// Telemetry for clients that share one quota (package telemetry; the AATB
// strategy of client/retry reports to it):
//
//	TELEMETRY.REPORT group client sent got429 [OMEGA ms] [RATE count period-ms | POLICY id] [RESERVE ms]
//	TELEMETRY.GET group
//
// Both answer the group's aggregate over its last omega:
// [active clients, requests, clients that saw a 429, rate count, rate
// period ms], the rate being -1 -1 while the group is tied to no limit. A
// group is tied to a limit by RATE (the client states it) or POLICY (the
// slowest tier of that policy in the store, read at each report, so it
// follows POLICY SET). RESERVE also reserves the group's next free slot at
// or after ms from now, the slots one interval of the rate apart, and adds
// a sixth element: ms until the reserved slot (client/retry's Hinted waits
// for it, so that clients of a saturated limit come back one at a time).
//
// The aggregator is the node's own, in memory, outside the keyspace: the
// commands are neither logged nor replicated, never persisted, and never
// charge a quota. On a Raft group or a mesh each node aggregates the
// reports it receives, so a group's clients must report to one node (the
// same one, for instance the one their gateway uses) to see each other.

// maxTelemetryName bounds group and client names, as the caps bound their
// number, so what a node keeps for telemetry stays under a known size.
const maxTelemetryName = 256

type telemetryState struct {
	mu  sync.Mutex // guards agg
	agg *telemetry.Aggregator
}

const (
	errTelemetryFull = "ERR telemetry is full: too many groups, or clients in this group"
	errTelemetryName = "ERR telemetry group and client names are 1 to 256 bytes"
	errTelemetryArg  = "ERR sent, got429, OMEGA, RATE and RESERVE must be non-negative integers, OMEGA and RATE positive, RESERVE at most a day"
	errNoPolicy      = "ERR no such policy"
	errTelemetryRate = "ERR RESERVE needs the group tied to a rate: RATE or POLICY"
)

// maxReserveAfter bounds RESERVE's ms (a day), so that the slot's instant
// stays far from overflowing.
const maxReserveAfter = 86_400_000

// TELEMETRY.REPORT group client sent got429 [OMEGA ms] [RATE count period-ms | POLICY id] [RESERVE ms]
func telemetryReport(c *Ctx) {
	args := c.Args
	r := telemetry.Report{Group: string(args[1]), Client: string(args[2])}
	if !telemetryName(args[1]) || !telemetryName(args[2]) {
		c.W.Error(errTelemetryName)
		return
	}
	var ok1, ok2 bool
	r.Sent, ok1 = parseInt(args[3])
	r.Got429, ok2 = parseInt(args[4])
	if !ok1 || !ok2 || r.Sent < 0 || r.Got429 < 0 {
		c.W.Error(errTelemetryArg)
		return
	}
	tied := false
	for i := 5; i < len(args); {
		switch {
		case is(args[i], "OMEGA") && i+1 < len(args) && r.Omega == 0:
			ms, ok := parseInt(args[i+1])
			if !ok || ms <= 0 || ms > 1<<40 {
				c.W.Error(errTelemetryArg)
				return
			}
			r.Omega = ms * 1e6
			i += 2
		case is(args[i], "RATE") && i+2 < len(args) && !tied:
			n, ok1 := parseInt(args[i+1])
			ms, ok2 := parseInt(args[i+2])
			if !ok1 || !ok2 || n <= 0 || ms <= 0 || ms > 1<<40 {
				c.W.Error(errTelemetryArg)
				return
			}
			r.Rate, tied = telemetry.Rate{Count: n, Period: ms * 1e6}, true
			i += 3
		case is(args[i], "POLICY") && i+1 < len(args) && !tied:
			p, found := c.srv.policies.Table().Get(string(args[i+1]))
			if !found {
				c.W.Error(errNoPolicy)
				return
			}
			r.Rate, tied = policyRate(p), true
			i += 2
		case is(args[i], "RESERVE") && i+1 < len(args) && !r.Reserve:
			ms, ok := parseInt(args[i+1])
			if !ok || ms < 0 || ms > maxReserveAfter {
				c.W.Error(errTelemetryArg)
				return
			}
			r.Reserve, r.After = true, ms*1e6
			i += 2
		default:
			c.W.Error(errSyntax)
			return
		}
	}
	t := &c.srv.telemetry
	t.mu.Lock()
	agg, err := t.agg.Report(c.Tx.Now(), r)
	t.mu.Unlock()
	switch {
	case errors.Is(err, telemetry.ErrFull):
		c.W.Error(errTelemetryFull)
	case errors.Is(err, telemetry.ErrNoRate):
		c.W.Error(errTelemetryRate)
	case err != nil:
		c.W.Error(errTelemetryArg)
	case r.Reserve:
		writeAggregate(c, agg, 6)
		c.W.Int((agg.Slot + 999_999) / 1e6) // ms, rounded up: never early
	default:
		writeAggregate(c, agg, 5)
	}
}

// TELEMETRY.GET group
func telemetryGet(c *Ctx) {
	t := &c.srv.telemetry
	t.mu.Lock()
	agg, _ := t.agg.Get(c.Tx.Now(), string(c.Args[1]))
	t.mu.Unlock()
	writeAggregate(c, agg, 5)
}

// writeAggregate writes agg's five elements as the head of an array of n.
func writeAggregate(c *Ctx, agg telemetry.Aggregate, n int) {
	count, period := int64(-1), int64(-1)
	if agg.Rate != (telemetry.Rate{}) {
		count, period = agg.Rate.Count, agg.Rate.Period/1e6
	}
	c.W.Array(n)
	c.W.Int(agg.Active)
	c.W.Int(agg.Total)
	c.W.Int(agg.Clients429)
	c.W.Int(count)
	c.W.Int(period)
}

func telemetryName(b []byte) bool { return len(b) > 0 && len(b) <= maxTelemetryName }

// policyRate is the slowest sustained rate of p's tiers: what the group's
// clients can count on when every tier must pass.
func policyRate(p *policy.Policy) telemetry.Rate {
	var slowest telemetry.Rate
	for _, t := range p.Tiers {
		n := t.Count
		if n == 0 {
			n = t.Limit // fwc, swl, swc: Limit per Period
		}
		r := telemetry.Rate{Count: n, Period: t.Period * 1e6}
		if n > 0 && t.Period > 0 && (slowest == (telemetry.Rate{}) || telemetry.Slower(r, slowest)) {
			slowest = r
		}
	}
	return slowest
}
