// Package servertest starts in-process throttled nodes for tests: on free
// loopback ports, with the debug clock unless told otherwise, logging to the
// test log, and closed when the test ends.
package servertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/server"
)

// Start runs a node for the test and closes it when the test ends. It
// listens on a free port whatever cfg.Port says, so tests never collide,
// and on a free TLS port too when cfg names a certificate. Use
// cfg.DebugClock for exact timelines.
func Start(t testing.TB, cfg server.Config) *server.Node {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	n, err := Open(cfg)
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

// Open starts a node as Start does, for a caller that closes it itself.
// Port 0 would turn plain TCP off, so the ports come from the OS
// (proc.FreePort); when another process takes one before the node listens
// on it, Open tries again with new ones.
func Open(cfg server.Config) (*server.Node, error) {
	if cfg.Bind == "" {
		cfg.Bind = "127.0.0.1"
	}
	for try := 0; ; try++ {
		var err error
		if cfg.Port, err = proc.FreePort(); err != nil {
			return nil, err
		}
		if cfg.TLSCertFile != "" {
			if cfg.TLSPort, err = proc.FreePort(); err != nil {
				return nil, err
			}
		}
		n, err := server.Start(cfg)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || try == 10 {
			return n, err
		}
	}
}

// testWriter sends log lines to t.Log, so they show only when a test fails.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Do sends a command with cl and returns its reply, or the error it got
// (a nil reply is nil).
func Do(cl *redis.Client, args ...any) any {
	v, err := cl.Do(context.Background(), args...).Result()
	if err != nil && err != redis.Nil {
		return err
	}
	return v
}

// SameDigest waits until the nodes of clients all have the same DEBUG
// DIGEST, and returns it: a replicated group has converged.
func SameDigest(t testing.TB, clients []*redis.Client) string {
	t.Helper()
	var digest string
	testwait.For(t, 10*time.Second, "equal digests", func() bool {
		digest = ""
		for _, cl := range clients {
			d := fmt.Sprint(Do(cl, "DEBUG", "DIGEST"))
			if digest != "" && d != digest {
				return false
			}
			digest = d
		}
		return true
	})
	return digest
}
