package commands

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/store"
)

// The latency monitor, as Redis 7.0's (latency.c): with
// latency-monitor-threshold at N milliseconds (0, the default, turns it
// off), every command whose run takes N ms or more is a sample of the event
// "command", or of "fast-command" for the commands flagged fast (GET,
// INCR...; the throttle commands are not). Each event keeps its newest 160
// samples, one per second (a second with several keeps the highest), and
// its all-time high. LATENCY LATEST, HISTORY, RESET, DOCTOR and HELP answer
// as in Redis; GRAPH and HISTOGRAM are not there. A run is timed as for the
// SLOWLOG (slowlog.go), so a command's sample and its SLOWLOG entry agree.
//
// Redis' other events (fork, aof-fsync-always, expire-cycle,
// eviction-cycle...) time its own background work, whose counterparts here
// (Pebble, the group commit, the expiry sweeper) do not hold up commands
// the same way; INFO persistence and the metrics show them.

// latencySamples is LATENCY_TS_LEN: the samples an event keeps.
const latencySamples = 160

type latencySample struct {
	time    int64 // Unix seconds; 0: unused
	latency int64 // ms
}

// latencySeries is one event's samples, a ring.
type latencySeries struct {
	samples [latencySamples]latencySample
	idx     int // where the next sample goes
	max     int64
}

// latencyMonitor is the monitor. Safe for concurrent use.
type latencyMonitor struct {
	threshold atomic.Int64 // ms; 0: off

	mu     sync.Mutex // guards events
	events map[string]*latencySeries
}

// observe records a run that took took, if the monitor is on and it was
// slow enough.
func (m *latencyMonitor) observe(fast bool, took time.Duration, now time.Time) {
	t := m.threshold.Load()
	ms := took.Milliseconds()
	if t <= 0 || ms < t {
		return
	}
	event := "command"
	if fast {
		event = "fast-command"
	}
	m.add(event, ms, now.Unix())
}

// add is latencyAddSample.
func (m *latencyMonitor) add(event string, ms, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]*latencySeries{}
	}
	ts := m.events[event]
	if ts == nil {
		ts = &latencySeries{}
		m.events[event] = ts
	}
	ts.max = max(ts.max, ms)
	prev := &ts.samples[(ts.idx+latencySamples-1)%latencySamples]
	if prev.time == now {
		prev.latency = max(prev.latency, ms)
		return
	}
	ts.samples[ts.idx] = latencySample{time: now, latency: ms}
	ts.idx = (ts.idx + 1) % latencySamples
}

// sorted returns the event names in order: Redis walks a dict, whose order
// is its own; a sorted one is stable for tests and readers.
func (m *latencyMonitor) sortedLocked() []string {
	names := make([]string, 0, len(m.events))
	for e := range m.events {
		names = append(names, e)
	}
	slices.Sort(names)
	return names
}

// history returns an event's samples, oldest first.
func (ts *latencySeries) history() []latencySample {
	var out []latencySample
	for j := range latencySamples {
		s := ts.samples[(ts.idx+j)%latencySamples]
		if s.time != 0 {
			out = append(out, s)
		}
	}
	return out
}

var latencyHelp = []string{
	"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return a human readable latency analysis report.",
	"HISTORY <event>",
	"    Return time-latency samples for the <event> class.",
	"LATEST",
	"    Return the latest latency samples for all events.",
	"RESET [<event> ...]",
	"    Reset latency data of one or more <event> classes.",
	"    (default: reset all data for all event classes)",
	"HELP",
	"    Prints this help.",
}

// LATENCY DOCTOR | HISTORY event | LATEST | RESET [event ...] | HELP
func latencyCmd(c *Ctx) {
	m := &c.srv.latency
	sub := c.Args[1]
	switch {
	case is(sub, "LATEST") && len(c.Args) == 2:
		m.mu.Lock()
		defer m.mu.Unlock()
		names := m.sortedLocked()
		c.W.Array(len(names))
		for _, e := range names {
			ts := m.events[e]
			last := ts.samples[(ts.idx+latencySamples-1)%latencySamples]
			c.W.Array(4)
			c.W.BulkString(e)
			c.W.Int(last.time)
			c.W.Int(last.latency)
			c.W.Int(ts.max)
		}
	case is(sub, "HISTORY") && len(c.Args) == 3:
		m.mu.Lock()
		defer m.mu.Unlock()
		ts := m.events[string(c.Args[2])]
		if ts == nil {
			c.W.Array(0)
			return
		}
		h := ts.history()
		c.W.Array(len(h))
		for _, s := range h {
			c.W.Array(2)
			c.W.Int(s.time)
			c.W.Int(s.latency)
		}
	case is(sub, "RESET") && len(c.Args) >= 2:
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		if len(c.Args) == 2 {
			n = len(m.events)
			m.events = nil
		} else {
			for _, e := range c.Args[2:] {
				if _, ok := m.events[string(e)]; ok {
					delete(m.events, string(e))
					n++
				}
			}
		}
		c.W.Int(int64(n))
	case is(sub, "DOCTOR") && len(c.Args) == 2:
		c.W.Verbatim([]byte(m.doctor(c.srv.slow.slowerThan.Load(), c.srv.slow.maxLen.Load(), time.Now().Unix())))
	case is(sub, "HELP"):
		c.help("latency", latencyHelp)
	case is(sub, "LATEST"), is(sub, "HISTORY"), is(sub, "DOCTOR"):
		c.W.Error(wrongArity("latency|" + strings.ToLower(string(sub))))
	default:
		c.W.Error(unknownSubcommand(sub, "LATENCY"))
	}
}

// doctor is createLatencyReport, for the events this server has: Redis'
// texts for a monitor that is off and for one that saw nothing, one line of
// figures per event, and Redis' advice about the SLOWLOG and slow commands.
func (m *latencyMonitor) doctor(slowerThan, slowMaxLen, now int64) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	threshold := m.threshold.Load()
	if len(m.events) == 0 && threshold == 0 {
		return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
	}
	if len(m.events) == 0 {
		return "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n"
	}
	var b strings.Builder
	b.WriteString("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n")
	var slowlogOff, slowlogTuning, slowCommands, scheduler bool
	for i, e := range m.sortedLocked() {
		ts := m.events[e]
		h := ts.history()
		var sum, mad, oldest int64
		for _, s := range h {
			sum += s.latency
			if oldest == 0 || s.time < oldest {
				oldest = s.time
			}
		}
		avg := sum / int64(len(h))
		for _, s := range h {
			d := avg - s.latency
			mad += max(d, -d)
		}
		mad /= int64(len(h))
		period := max(now-oldest, 1)
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %.2f sec). Worst all time event %dms.",
			i+1, e, len(h), avg, mad, float64(period)/float64(len(h)), ts.max)
		b.WriteString("\n")
		switch e {
		case "command":
			if slowerThan < 0 || slowMaxLen == 0 {
				slowlogOff = true
			} else if slowerThan/1000 > threshold {
				slowlogTuning = true
			}
			slowCommands = true
		case "fast-command":
			scheduler = true
		}
	}
	b.WriteString("\nI have a few advices for you:\n\n")
	if slowlogOff {
		b.WriteString("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than " +
			strconv.FormatInt(threshold*1000, 10) + "'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n")
	}
	if slowlogTuning {
		b.WriteString("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than " +
			strconv.FormatInt(threshold*1000, 10) + "'.\n")
	}
	if slowCommands {
		b.WriteString("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n")
		b.WriteString("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n")
	}
	if scheduler {
		b.WriteString("- Commands flagged fast took the threshold or more: the process did not get the CPU for that long. Lower the load of the machine, give the server CPUs of its own (--threads, taskset or systemd's CPUAffinity), and check for a noisy neighbour.\n")
	}
	return b.String()
}

// latencySetting is latency-monitor-threshold, in ms, with Redis' texts.
func latencySetting(m *latencyMonitor) setting {
	return setting{name: "latency-monitor-threshold", get: func() string {
		return strconv.FormatInt(m.threshold.Load(), 10)
	}, set: func(v string) error {
		n, ok := store.ParseInt([]byte(v))
		if !ok {
			return errors.New("argument couldn't be parsed into an integer")
		}
		if n < 0 {
			return errors.New("argument must be between 0 and 9223372036854775807 inclusive")
		}
		m.threshold.Store(n)
		return nil
	}}
}
