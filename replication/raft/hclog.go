package raft

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// NewHclog gives Raft a logger that writes to ours: hashicorp/raft logs
// through hclog, whose lines are passed on at the level hclog gave them.
func NewHclog(log *slog.Logger) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "raft",
		Level:  hclog.Info,
		Output: slogWriter{log},
		// The level is read back from the line's prefix.
		DisableTime: true,
	})
}

// slogWriter turns hclog's lines ("[LEVEL] raft: message: key=value") into
// slog records.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
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
	w.log.Log(context.Background(), level, string(line))
	return len(p), nil
}
