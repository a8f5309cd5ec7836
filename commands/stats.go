package commands

import (
	"bytes"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Per-command statistics: what INFO commandstats shows and CommandStats
// hands to the Prometheus collector (package server) at scrape time.
//
// run adds to them once per command with two atomic adds, its run time to a
// total and one to the count of its histogram bucket (fixed power-of-two
// buckets, found with one bits.Len): no lock, no allocation, nothing kept
// per call. The calls are the sum of the buckets, and the commands processed
// the sum of the calls, so counting costs the hot path as many atomic adds
// as it did before there was a histogram, plus one for a throttle command's
// decision (docs/operations.md, "Metrics", has the figures); readers build a histogram
// from the counters when asked.

// DurationBuckets is the number of buckets of a command's run-time
// histogram: bucket i counts the runs of at most DurationBound(i), 1 µs
// doubling up to 2^20 µs (about 1 s); the last one counts the longer runs.
const DurationBuckets = 22

// DurationBound is the upper bound of histogram bucket i (inclusive), for
// i < DurationBuckets-1.
func DurationBound(i int) time.Duration { return time.Microsecond << i }

// durationBucket is the bucket of a run that took d: the first whose bound
// is at least d.
func durationBucket(d time.Duration) int {
	us := (uint64(max(d, 0)) + 999) / 1000 // rounded up
	if us <= 1 {
		return 0
	}
	return min(bits.Len64(us-1), DurationBuckets-1)
}

// cmdStats counts a command's calls, error replies, throttle decisions and
// run time. A container command (CONFIG, CLIENT, SCRIPT...) counts each
// subcommand apart, as Redis 7 does ("config|get"), in subs, parallel to
// Spec.Subcommands.
type cmdStats struct {
	errors atomic.Int64
	// allowed and limited count a throttle command's decisions (decide).
	allowed, limited atomic.Int64
	// nanos is the total run time; buckets count the runs by run time, and
	// add up to the calls.
	nanos   atomic.Int64
	buckets [DurationBuckets]atomic.Int64
	subs    []cmdStats
}

// calls returns how many times the command ran.
func (st *cmdStats) calls() int64 {
	var n int64
	for i := range st.buckets {
		n += st.buckets[i].Load()
	}
	return n
}

// of returns the counters for spec called with args: its subcommand's when
// args name one, else st's own.
func (st *cmdStats) of(spec *Spec, args [][]byte) *cmdStats {
	if i := spec.sub(args); i >= 0 {
		return &st.subs[i]
	}
	return st
}

// each calls fn with st's own counters and then each subcommand's, with the
// name INFO shows for them.
func (st *cmdStats) each(spec *Spec, fn func(name string, c *cmdStats)) {
	fn(spec.Name, st)
	for i, sub := range spec.Subcommands {
		fn(spec.Name+"|"+sub.Name, &st.subs[i])
	}
}

// record counts one run that took d.
func (st *cmdStats) record(d time.Duration, failed bool, dec decision) {
	st.nanos.Add(int64(d))
	st.buckets[durationBucket(d)].Add(1)
	if failed {
		st.errors.Add(1)
	}
	switch dec {
	case allowed:
		st.allowed.Add(1)
	case limited:
		st.limited.Add(1)
	}
}

// reset zeroes the counters (CONFIG RESETSTAT).
func (st *cmdStats) reset() {
	st.errors.Store(0)
	st.allowed.Store(0)
	st.limited.Store(0)
	st.nanos.Store(0)
	for i := range st.buckets {
		st.buckets[i].Store(0)
	}
}

// decision is what a throttle command decided, for the decision counters.
type decision uint8

const (
	undecided decision = iota
	allowed
	limited
)

// decide records the decision of the throttle command being run on qty
// units; run counts it once the command is done. A peek (qty 0) decides
// nothing and is not counted.
func (c *Ctx) decide(qty int64, isLimited bool) {
	switch {
	case qty == 0:
	case isLimited:
		c.decision = limited
	default:
		c.decision = allowed
	}
}

// CommandStats are one command's counters since the start or the last
// CONFIG RESETSTAT.
type CommandStats struct {
	// Name is the command's lower-case name, "name|sub" for a subcommand
	// ("config|get"), as INFO commandstats shows it.
	Name string
	// Throttle is set for the rate-limit commands, whose decisions are
	// counted in Allowed and Limited.
	Throttle bool
	// Calls counts the runs, Errors those that replied with an error.
	Calls, Errors    int64
	Allowed, Limited int64
	// Time is the total run time.
	Time time.Duration
	// Buckets[i] counts the runs that took at most DurationBound(i); the
	// last counts the rest.
	Buckets [DurationBuckets]int64
}

// CommandStats calls fn with the counters of every command and subcommand
// that has run, in name order. The counters are read one by one while
// commands run, so they may be a few calls apart from each other.
func (s *Server) CommandStats(fn func(*CommandStats)) {
	var cs CommandStats
	for _, sp := range s.sortedSpecs() {
		s.stats[sp].each(sp, func(name string, st *cmdStats) {
			cs = CommandStats{Name: name, Throttle: sp.Group == "throttle"}
			for i := range st.buckets {
				cs.Buckets[i] = st.buckets[i].Load()
				cs.Calls += cs.Buckets[i]
			}
			if cs.Calls == 0 {
				return
			}
			cs.Errors = st.errors.Load()
			cs.Allowed, cs.Limited = st.allowed.Load(), st.limited.Load()
			cs.Time = time.Duration(st.nanos.Load())
			fn(&cs)
		})
	}
}

// CommandsProcessed returns how many commands have run (INFO's
// total_commands_processed): the sum of every command's calls.
func (s *Server) CommandsProcessed() int64 {
	var n int64
	for sp, st := range s.stats {
		st.each(sp, func(_ string, c *cmdStats) { n += c.calls() })
	}
	return n
}

// sortedSpecs returns the command table in name order.
func (s *Server) sortedSpecs() []*Spec {
	list := make([]*Spec, 0, len(s.cmds))
	for _, sp := range s.cmds {
		list = append(list, sp)
	}
	slices.SortFunc(list, func(a, b *Spec) int { return strings.Compare(a.Name, b.Name) })
	return list
}

// errorStats counts error replies by their prefix (the first word, "ERR",
// "WRONGTYPE"...), for INFO errorstats. Like Redis it tracks at most
// maxErrorPrefixes prefixes (scripts can make up their own); later new ones
// are not counted. It is safe for concurrent use.
type errorStats struct {
	mu     sync.Mutex // guards counts
	counts map[string]int64
}

const maxErrorPrefixes = 128

// count records the error reply that starts reply ("-PREFIX text...").
func (e *errorStats) count(reply []byte) {
	prefix := reply[1:]
	if i := bytes.IndexAny(prefix, " \r"); i >= 0 {
		prefix = prefix[:i]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = map[string]int64{}
	}
	if _, ok := e.counts[string(prefix)]; ok || len(e.counts) < maxErrorPrefixes {
		e.counts[string(prefix)]++
	}
}

// each calls fn with every prefix counted, in name order.
func (e *errorStats) each(fn func(prefix string, n int64)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(e.counts)) {
		fn(p, e.counts[p])
	}
}

// reset forgets every count (CONFIG RESETSTAT).
func (e *errorStats) reset() {
	e.mu.Lock()
	clear(e.counts)
	e.mu.Unlock()
}
