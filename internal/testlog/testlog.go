// Package testlog sends what the code under test logs to t.Log, so that it
// shows only when the test fails (or under -v), beside the test's own lines.
package testlog

import (
	"log/slog"
	"strings"
	"testing"
)

// Writer writes each Write to T.Log as one line.
type Writer struct{ T testing.TB }

func (w Writer) Write(p []byte) (int, error) {
	w.T.Helper()
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Slog returns a logger that writes records at level and above to t.Log.
func Slog(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer{t}, &slog.HandlerOptions{Level: level}))
}
