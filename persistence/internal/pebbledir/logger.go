package pebbledir

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Logger routes Pebble's messages to slog instead of Pebble's default (the
// standard log package, i.e. stderr): its chatter (WALs found, flushes,
// compactions) at Debug, its errors at Warn.
type Logger struct{ L *slog.Logger }

func (p Logger) Infof(format string, args ...any) {
	if p.L.Enabled(context.Background(), slog.LevelDebug) {
		p.L.Debug(fmt.Sprintf(format, args...))
	}
}

func (p Logger) Errorf(format string, args ...any) {
	p.L.Warn(fmt.Sprintf(format, args...))
}

// Fatalf must not return: Pebble calls it when its commit pipeline is broken
// (a failed WAL write) and carries on as if it had stopped. Panicking keeps
// that contract without calling os.Exit from a library.
func (p Logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.L.Error(msg)
	panic(msg)
}

// stallWarnEvery is the least time between two warnings about stalled
// writes; the stalls in between are logged at Debug. A burst stalls Pebble
// many times a second, each stall being short.
const stallWarnEvery = time.Minute

// EventListener logs Pebble's events through l, raising to Warn the ones an
// operator should see: a slow disk, and writes stalled because flushes fall
// behind (at most once per stallWarnEvery).
func EventListener(l Logger) *pebble.EventListener {
	el := pebble.MakeLoggingEventListener(l)
	var lastWarn atomic.Int64 // Unix ns
	el.WriteStallBegin = func(info pebble.WriteStallBeginInfo) {
		now, last := time.Now().UnixNano(), lastWarn.Load()
		if now-last >= int64(stallWarnEvery) && lastWarn.CompareAndSwap(last, now) {
			l.L.Warn("pebble: writes stalled, the disk is not keeping up (logged once a minute)", "reason", info.Reason)
			return
		}
		l.Infof("writes stalled: %s", info.Reason)
	}
	el.DiskSlow = func(info pebble.DiskSlowInfo) {
		l.L.Warn("pebble: disk slow", "info", info.String())
	}
	return &el
}
