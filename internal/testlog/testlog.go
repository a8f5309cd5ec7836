// Package testlog sends what the code under test logs to t.Log, so that it
// shows only when the test fails (or under -v), beside the test's own lines,
// or into a Buffer the test reads.
package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
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

// Buffer collects output written from several goroutines (a child
// process's copy goroutines, the nodes of a test's mesh), for a test to read
// while they write.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
