// Package telemetry is the aggregator behind TELEMETRY.REPORT: clients that
// share one quota report, every omega, how many requests they sent and how
// many 429s they got, and each report is answered with the group's totals
// over the last omega (the telemetry server of the client-side study's AATB,
// Table IV). It is pure: no clock, no I/O; the caller passes the instant of
// each call (Unix ns), so a server's debug clock and the bench emulator's
// virtual time drive it alike.
//
// What it keeps is bounded: at most MaxGroups groups and MaxClients clients
// a group, and per client its last few reports. A client that has not
// reported for omega is forgotten, and a group with no client left goes
// with it; a new group or client over the caps is refused with ErrFull
// after those are swept, never by evicting one that is still active.
//
// An Aggregator is not safe for concurrent use: the caller locks it.
package telemetry

import (
	"errors"
	"math"
	"math/big"
)

// Defaults for Limits.
const (
	DefaultMaxGroups  = 1024
	DefaultMaxClients = 1024
	// DefaultOmega is the study's omega (Table V): 30 seconds.
	DefaultOmega int64 = 30e9
	// slots is how many reports a client keeps within omega; when a client
	// reports more often, its oldest two are folded into one.
	slots = 8
)

var (
	// ErrFull is returned when a new group or client would pass a cap.
	ErrFull = errors.New("telemetry: too many groups or clients")
	// ErrInvalid is returned for a negative count, a zero or negative
	// omega, a rate that is not positive or a negative After.
	ErrInvalid = errors.New("telemetry: invalid report")
	// ErrNoRate is returned for a reservation in a group tied to no rate:
	// the rate is what spaces the slots.
	ErrNoRate = errors.New("telemetry: a reservation needs the group tied to a rate")
)

// Limits cap what an Aggregator keeps. Zero fields take the defaults.
type Limits struct {
	MaxGroups  int
	MaxClients int // per group
}

// Rate is a limit's sustained rate: Count requests every Period ns. The
// zero Rate means the group is tied to no limit.
type Rate struct {
	Count, Period int64
}

// Report is one client's report.
type Report struct {
	Group, Client string
	// Sent is how many requests the client sent since its last report;
	// Got429 how many of them were refused.
	Sent, Got429 int64
	// Omega is the window in ns (DefaultOmega when 0). The group takes the
	// omega of its latest report.
	Omega int64
	// Rate ties the group to a limit's rate when not zero; the group keeps
	// the latest one it was given.
	Rate Rate
	// Reserve asks for the group's next free slot at or after After ns
	// from now (see Aggregator.Report).
	Reserve bool
	After   int64
}

// Aggregate is a group's state over its last omega, as a report's answer.
type Aggregate struct {
	// Active is the number of clients that reported within omega.
	Active int64
	// Total is the requests they reported sent within omega.
	Total int64
	// Clients429 is how many of them reported at least one 429 within omega.
	Clients429 int64
	// Rate is the rate of the limit the group is tied to (zero: none).
	Rate Rate
	// Slot is, for a report that reserved, how long from now (ns) until
	// the reserved slot; 0 otherwise.
	Slot int64
}

// entry is one kept report.
type entry struct {
	at, sent, got429 int64
}

type client struct {
	last    int64 // the instant of its latest report
	entries []entry
}

type group struct {
	omega   int64
	rate    Rate
	last    int64
	clients map[string]*client
	// next is the earliest instant the next reservation may get: the last
	// slot given plus one interval of the rate.
	next int64
}

// Aggregator holds the groups of one node.
type Aggregator struct {
	limits Limits
	groups map[string]*group
}

// New returns an empty Aggregator with limits l.
func New(l Limits) *Aggregator {
	if l.MaxGroups <= 0 {
		l.MaxGroups = DefaultMaxGroups
	}
	if l.MaxClients <= 0 {
		l.MaxClients = DefaultMaxClients
	}
	return &Aggregator{limits: l, groups: map[string]*group{}}
}

// Report records r at instant now and answers the group's aggregate,
// this report included. A refused report (ErrFull, ErrInvalid, ErrNoRate)
// changes nothing.
//
// A report with Reserve also reserves a slot: the later of now + After and
// the group's next free slot, after which the next free slot is one
// interval of the group's rate (its period over its count) later. Clients
// of a saturated limit that each wait for a slot before sending come back
// one interval apart, as the limit gives back requests, instead of all at
// the same retry_after (a thundering herd). The answer's Slot says how long
// until the reserved one.
func (a *Aggregator) Report(now int64, r Report) (Aggregate, error) {
	if r.Sent < 0 || r.Got429 < 0 || r.Omega < 0 || r.Rate.Count < 0 || r.Rate.Period < 0 ||
		(r.Rate.Count == 0) != (r.Rate.Period == 0) || r.After < 0 {
		return Aggregate{}, ErrInvalid
	}
	if r.Reserve && r.Rate == (Rate{}) && (a.groups[r.Group] == nil || a.groups[r.Group].rate == (Rate{})) {
		return Aggregate{}, ErrNoRate
	}
	if r.Omega == 0 {
		r.Omega = DefaultOmega
	}
	g := a.groups[r.Group]
	if g == nil {
		if len(a.groups) >= a.limits.MaxGroups {
			a.sweep(now)
		}
		if len(a.groups) >= a.limits.MaxGroups {
			return Aggregate{}, ErrFull
		}
		g = &group{clients: map[string]*client{}}
		a.groups[r.Group] = g
	}
	g.omega = r.Omega
	c := g.clients[r.Client]
	if c == nil {
		if len(g.clients) >= a.limits.MaxClients {
			g.forget(now)
		}
		if len(g.clients) >= a.limits.MaxClients {
			if len(g.clients) == 0 {
				delete(a.groups, r.Group)
			}
			return Aggregate{}, ErrFull
		}
		c = &client{}
		g.clients[r.Client] = c
	}
	if r.Rate != (Rate{}) {
		g.rate = r.Rate
	}
	now = max(now, c.last, g.last) // a clock step back never reorders reports
	c.add(entry{at: now, sent: r.Sent, got429: r.Got429}, now-g.omega)
	c.last, g.last = now, now
	agg := g.aggregate(now)
	if r.Reserve {
		agg.Slot = g.reserve(now, r.After)
	}
	return agg, nil
}

// reserve gives the slot at or after now+after and at or after g.next, and
// returns how long from now it is. The interval is rounded up, so that
// slots never come faster than the rate.
func (g *group) reserve(now, after int64) int64 {
	slot := max(now+after, g.next)
	interval := (g.rate.Period + g.rate.Count - 1) / g.rate.Count
	g.next = slot + min(interval, math.MaxInt64-slot) // a rate of one a century must not wrap
	return slot - now
}

// Get answers group's aggregate at now without reporting; ok is false for
// a group that is not kept.
func (a *Aggregator) Get(now int64, name string) (agg Aggregate, ok bool) {
	g := a.groups[name]
	if g == nil {
		return Aggregate{}, false
	}
	return g.aggregate(max(now, g.last)), true
}

// Groups returns how many groups are kept (INFO shows it).
func (a *Aggregator) Groups() int { return len(a.groups) }

// sweep forgets expired clients of every group, and the groups left empty.
func (a *Aggregator) sweep(now int64) {
	for name, g := range a.groups {
		g.forget(now)
		if len(g.clients) == 0 {
			delete(a.groups, name)
		}
	}
}

// forget drops the clients that have not reported within omega.
func (g *group) forget(now int64) {
	for id, c := range g.clients {
		if c.last <= now-g.omega {
			delete(g.clients, id)
		}
	}
}

// aggregate sums the reports within (now-omega, now], forgetting the
// clients with none.
func (g *group) aggregate(now int64) Aggregate {
	g.forget(now)
	agg := Aggregate{Rate: g.rate}
	for _, c := range g.clients {
		saw429 := false
		for _, e := range c.entries {
			if e.at > now-g.omega {
				agg.Total += e.sent
				saw429 = saw429 || e.got429 > 0
			}
		}
		agg.Active++
		if saw429 {
			agg.Clients429++
		}
	}
	return agg
}

// add keeps e, dropping the entries at or before since and folding the
// oldest two when the client already keeps slots of them (the folded entry
// keeps the newer instant, so it stays a little longer, never shorter).
func (c *client) add(e entry, since int64) {
	kept := c.entries[:0]
	for _, old := range c.entries {
		if old.at > since {
			kept = append(kept, old)
		}
	}
	if len(kept) == slots {
		kept[1] = entry{at: kept[1].at, sent: kept[0].sent + kept[1].sent, got429: kept[0].got429 + kept[1].got429}
		kept = append(kept[:0], kept[1:]...)
	}
	c.entries = append(kept, e)
}

// Slower reports whether rate a lets fewer requests through per ns than b
// (a zero Rate is never slower): the tightest of a policy's tiers is the
// one a group reports.
func Slower(a, b Rate) bool {
	if a == (Rate{}) {
		return false
	}
	if b == (Rate{}) {
		return true
	}
	// a.Count/a.Period < b.Count/b.Period, without overflow.
	x := new(big.Int).Mul(big.NewInt(a.Count), big.NewInt(b.Period))
	y := new(big.Int).Mul(big.NewInt(b.Count), big.NewInt(a.Period))
	return x.Cmp(y) < 0
}
