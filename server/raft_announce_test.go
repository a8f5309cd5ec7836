package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/testwait"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestRaft_AnnounceAddr: a Raft member announces the RESP address other
// members forward to and RAFT LEADER gives out. A wildcard --bind names no
// address another host can dial, so without --announce-addr it is refused,
// as is an --announce-addr that is itself a wildcard or not host:port.
func TestRaft_AnnounceAddr(t *testing.T) {
	raftCfg := func(announce string) *server.RaftConfig {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := proc.Addr(port)
		return &server.RaftConfig{NodeID: "n1", ClusterAddr: addr, AnnounceAddr: announce, Peers: map[string]string{"n1": addr}}
	}
	for _, tc := range []struct{ bind, announce, want string }{
		{"0.0.0.0", "", "--bind 0.0.0.0: 0.0.0.0:"},
		{"* -::*", "", "--bind * -::*: 0.0.0.0:"},
		{"::", "", "--bind ::: [::]:"},
		{"127.0.0.1", "0.0.0.0:6379", "--announce-addr: 0.0.0.0:6379 is a wildcard address"},
		{"127.0.0.1", "127.0.0.1:notaport", "the port must be a number from 1 to 65535"},
		{"127.0.0.1", "127.0.0.1:0", "the port must be a number from 1 to 65535"},
		{"127.0.0.1", "127.0.0.1", "--announce-addr: \"127.0.0.1\": want host:port"},
	} {
		_, err := servertest.Open(server.Config{Bind: tc.bind, Dir: t.TempDir(), Raft: raftCfg(tc.announce)})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--bind %q --announce-addr %q: %v, want one line with %q", tc.bind, tc.announce, err, tc.want)
		} else if tc.announce == "" && !strings.Contains(err.Error(), "give --announce-addr") {
			t.Errorf("--bind %q: %v, want it to name --announce-addr", tc.bind, err)
		}
	}
	// With --announce-addr, a wildcard bind is fine, and RAFT LEADER names
	// the announced address.
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	announce := fmt.Sprintf("127.0.0.1:%d", port)
	n, err := server.Start(server.Config{Bind: "0.0.0.0", Port: port, Dir: t.TempDir(), Raft: raftCfg(announce)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	c := client(t, announce, nil)
	testwait.For(t, 10*time.Second, "RAFT LEADER", func() bool {
		v, err := c.Do(context.Background(), "RAFT", "LEADER").Slice()
		return err == nil && fmt.Sprint(v) == fmt.Sprint([]any{"n1", announce})
	})
}

// TestCRDT_BadPeerAddress: a mesh node over TCP refuses a peer address it
// could never dial (it used to start and log "peer unreachable" forever).
func TestCRDT_BadPeerAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:notaport": `--peers y: "127.0.0.1:notaport": the port must be a number from 1 to 65535`,
		"127.0.0.1:0":        "the port must be a number",
		"127.0.0.1":          "want host:port",
		":7001":              "the host is missing",
		"0.0.0.0:7001":       "a wildcard host names no node to dial",
	} {
		_, err := servertest.Open(server.Config{CRDT: &server.CRDTConfig{NodeID: "x", ClusterAddr: "127.0.0.1:0", Peers: map[string]string{"y": addr}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--peers y=%s: %v, want %q", addr, err, want)
		}
	}
}

// TestCRDT_PeerAddBadAddress: CRDT PEER ADD refuses, with an error reply
// and no peer added, what --peers refuses at start (it used to add the
// peer and log "peer unreachable" forever).
func TestCRDT_PeerAddBadAddress(t *testing.T) {
	n := servertest.Start(t, server.Config{CRDT: &server.CRDTConfig{NodeID: "x", ClusterAddr: "127.0.0.1:0"}})
	c := client(t, n.Addr(), nil)
	ctx := context.Background()
	for addr, want := range map[string]string{
		"127.0.0.1:notaport": `ERR peer y: "127.0.0.1:notaport": the port must be a number from 1 to 65535`,
		"127.0.0.1:0":        "the port must be a number",
		"127.0.0.1":          "want host:port",
		":7001":              "the host is missing",
		"0.0.0.0:7001":       "a wildcard host names no node to dial",
		"[::]:7001":          "a wildcard host names no node to dial",
	} {
		err := c.Do(ctx, "CRDT", "PEER", "ADD", "y", addr).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR ") || !strings.Contains(err.Error(), want) {
			t.Errorf("CRDT PEER ADD y %s: %v, want %q", addr, err, want)
		}
	}
	if v, err := c.Do(ctx, "CRDT", "PEERS").Slice(); err != nil || len(v) != 0 {
		t.Fatalf("CRDT PEERS after refused adds: %v %v, want none", v, err)
	}
	if err := c.Do(ctx, "CRDT", "PEER", "ADD", "y", "127.0.0.1:7001").Err(); err != nil {
		t.Fatalf("CRDT PEER ADD with a good address: %v", err)
	}
}
