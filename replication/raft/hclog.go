package raft

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// repeatEvery is how often one warning or error about one peer is let
// through: while a member is down the leader's heartbeats and appends to
// it fail several times a second, and each failure is a line.
const repeatEvery = 10 * time.Second

// NewHclog gives Raft a logger that writes to ours: hashicorp/raft logs
// through hclog, whose lines are passed on at the level hclog gave them,
// warnings and errors about one peer at most once per repeatEvery.
func NewHclog(log *slog.Logger) hclog.Logger {
	return newHclog(log, time.Now)
}

func newHclog(log *slog.Logger, now func() time.Time) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Info,
		Output: &slogWriter{log: log, now: now, seen: map[string]*repeats{}},
		// The level is read back from the line's prefix.
		DisableTime: true,
	})
}

// slogWriter turns hclog's lines ("[LEVEL] raft: message: key=value") into
// slog records.
type slogWriter struct {
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]*repeats // by message and first field (the peer)
}

// repeats is one warning's last line let through and the copies held back
// since.
type repeats struct {
	last       time.Time
	suppressed int
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug, "[WARN]": slog.LevelWarn, "[ERROR]": slog.LevelError} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = l
		}
	}
	if _, rest, ok := bytes.Cut(line, []byte("] ")); ok {
		line = bytes.TrimSpace(rest)
	}
	msg := string(line)
	if level >= slog.LevelWarn {
		var pass bool
		if msg, pass = w.limit(msg); !pass {
			return len(p), nil
		}
	}
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}

// limit lets a line through if no line of the same message about the same
// peer passed within repeatEvery, adding how many it held back since the
// last one. Lines without a field are not limited.
func (w *slogWriter) limit(msg string) (string, bool) {
	key := peerKey(msg)
	if key == "" {
		return msg, true
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.seen[key]
	switch {
	case r == nil:
		w.seen[key] = &repeats{last: now}
		return msg, true
	case now.Sub(r.last) < repeatEvery:
		r.suppressed++
		return "", false
	}
	if r.suppressed > 0 {
		msg = fmt.Sprintf("%s suppressed=%d", msg, r.suppressed)
	}
	r.last, r.suppressed = now, 0
	return msg, true
}

// peerKey is a line's message and its first field, which names the peer
// in hashicorp/raft's per-peer lines ("failed to heartbeat to:
// peer=10.0.0.2:7001 ...", "failed to contact: server-id=n2 ..."); "" for
// a line without a field.
func peerKey(msg string) string {
	eq := strings.IndexByte(msg, '=')
	if eq < 0 {
		return ""
	}
	end := eq + 1
	if end < len(msg) && msg[end] == '"' {
		if q := strings.IndexByte(msg[end+1:], '"'); q >= 0 {
			end += q + 2
		} else {
			end = len(msg)
		}
	} else if sp := strings.IndexByte(msg[end:], ' '); sp >= 0 {
		end += sp
	} else {
		end = len(msg)
	}
	return msg[:end]
}
