// Package servertest starts in-process throttled nodes for tests: on a free
// loopback port, with the debug clock unless told otherwise, logging to the
// test log, and closed when the test ends.
package servertest

import (
	"log/slog"
	"testing"

	"github.com/throttleddb/throttled/server"
)

// Start runs a node for the test. Port 0 is used whatever cfg says, so tests
// never collide. Use cfg.DebugClock for exact timelines.
func Start(t testing.TB, cfg server.Config) *server.Node {
	t.Helper()
	cfg.Port = 0
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n, err := server.Start(cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return n
}

// testWriter sends log lines to t.Log, so they show only when a test fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
