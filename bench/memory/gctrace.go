package main

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gcStats is what a Go process's GODEBUG=gctrace=1 lines say about its
// collector.
type gcStats struct {
	cycles int
	// cpuMs is the CPU the collections took, summed over every phase
	// (the "ms cpu" figures).
	cpuMs float64
	// worstPauseMs is the longest stop-the-world phase: the first or the
	// last of the "ms clock" figures.
	worstPauseMs float64
	// lastForcedMarkMs is the concurrent mark phase's wall time (the middle
	// "ms clock" figure) of the last forced collection: the idle server's
	// release of its garbage (debug.FreeOSMemory) marks the whole heap.
	lastForcedMarkMs float64
	// processCPU is the process's whole CPU time, set by the caller.
	processCPU time.Duration
}

// share is the collector's share of the process's CPU time.
func (g gcStats) share() float64 {
	if g.processCPU <= 0 {
		return 0
	}
	return g.cpuMs / float64(g.processCPU.Milliseconds())
}

// gcLine matches one gctrace line's clock and cpu figures, e.g.
//
//	gc 12 @3.456s 4%: 0.018+1.2+0.003 ms clock, 0.036+0.5/1.1/0+0.006 ms cpu, 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
var gcLine = regexp.MustCompile(`^gc \d+ @[0-9.]+s \d+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock, (\S+) ms cpu`)

// parseGCTrace reads the gctrace lines of a process's output; other lines
// are skipped. The output may be a tail that lost its first lines: the
// early collections, of a small heap, are the cheapest.
func parseGCTrace(out string) gcStats {
	var g gcStats
	for line := range strings.Lines(out) {
		m := gcLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		g.cycles++
		stw1, _ := strconv.ParseFloat(m[1], 64)
		mark, _ := strconv.ParseFloat(m[2], 64)
		stw2, _ := strconv.ParseFloat(m[3], 64)
		g.worstPauseMs = max(g.worstPauseMs, stw1, stw2)
		for _, f := range strings.FieldsFunc(m[4], func(r rune) bool { return r == '+' || r == '/' }) {
			ms, _ := strconv.ParseFloat(f, 64)
			g.cpuMs += ms
		}
		if strings.HasSuffix(strings.TrimSpace(line), "(forced)") {
			g.lastForcedMarkMs = mark
		}
	}
	return g
}
