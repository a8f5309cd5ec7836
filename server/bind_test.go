package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestBind: several bind addresses, as redis.conf's "bind 127.0.0.1
// -::1"; a missing address stops the start unless '-' makes it optional.
// 192.0.2.1 is TEST-NET-1, which no machine has.
func TestBind(t *testing.T) {
	n := servertest.Start(t, server.Config{Bind: "127.0.0.1 -192.0.2.1"})
	if !strings.HasPrefix(n.Addr(), "127.0.0.1:") {
		t.Errorf("Addr = %q, want the first bind address", n.Addr())
	}
	if err := client(t, n.Addr(), nil).Ping(context.Background()).Err(); err != nil {
		t.Errorf("PING: %v", err)
	}
	if _, err := servertest.Open(server.Config{Bind: "127.0.0.1 192.0.2.1"}); err == nil || !strings.Contains(err.Error(), "192.0.2.1") {
		t.Errorf("start on an address the machine lacks: %v, want an error", err)
	}
	if _, err := servertest.Open(server.Config{Bind: "-192.0.2.1"}); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Errorf("start with only a missing optional address: %v, want an error", err)
	}
}
