package server_test

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/server"
)

// TestStart_ConfigError: a start refused for its settings says so with a
// ConfigError (cmd/throttled then exits with the status a systemd unit does
// not restart on); one that fails for the moment (a port in use) does not.
func TestStart_ConfigError(t *testing.T) {
	dir := t.TempDir()
	raft := &server.RaftConfig{NodeID: "n1", ClusterAddr: "127.0.0.1:1", Peers: map[string]string{"n1": "127.0.0.1:1"}}
	crdt := &server.CRDTConfig{NodeID: "n1", ClusterAddr: "127.0.0.1:1"}
	for name, cfg := range map[string]server.Config{
		"listen nowhere":     {},
		"tls without a cert": {TLSPort: 1},
		"raft maxmemory":     {Port: 1, Dir: dir, MaxMemory: 1 << 30, Raft: raft},
		"crdt maxmemory":     {Port: 1, Dir: dir, MaxMemory: 1 << 30, CRDT: crdt},
	} {
		var ce *server.ConfigError
		if _, err := server.Start(cfg); !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", name, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// A wildcard bind is refused once the port it takes is known: the
	// port is this free one, closed for the moment.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freePort := free.Addr().(*net.TCPAddr).Port
	free.Close()
	var ce *server.ConfigError
	wildcard := server.Config{Bind: "0.0.0.0", Port: freePort, Dir: filepath.Join(dir, "wildcard"), Raft: raft}
	if _, err := server.Start(wildcard); !errors.As(err, &ce) || !strings.Contains(err.Error(), "wildcard") {
		t.Errorf("raft on a wildcard bind: %v, want a ConfigError", err)
	}
	_, err = server.Start(server.Config{Port: port, Dir: filepath.Join(dir, "single")})
	if err == nil || errors.As(err, &ce) {
		t.Fatalf("port in use: %v, want an error that is not a ConfigError", err)
	}
}
