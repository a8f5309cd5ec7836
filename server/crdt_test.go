package server_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/throttleddb/throttled/replication/crdt/crdttest"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// TestMeshFolder: a mesh node and a single node refuse each other's data
// folders, and a mesh start that fails once its folder is open (its port
// in use) leaves a folder the next start accepts.
func TestMeshFolder(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// Every start below on the busy port fails, at the latest when it
	// listens; servertest.Open finds a free one.
	single := func(dir string) server.Config {
		return server.Config{Dir: dir, Bind: "127.0.0.1", Port: busy.Addr().(*net.TCPAddr).Port}
	}
	mesh := func(dir string) server.Config {
		cfg := single(dir)
		cfg.CRDT = &server.CRDTConfig{NodeID: "a", Transport: crdttest.NewNet(1).Transport("a:cluster")}
		return cfg
	}
	open := func(cfg server.Config) {
		t.Helper()
		n, err := servertest.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}

	plain := t.TempDir()
	open(single(plain))
	if _, err := server.Start(mesh(plain)); err == nil || !strings.Contains(err.Error(), "not a CRDT node's") {
		t.Fatalf("a mesh node on a single node's folder: %v", err)
	}

	dir := t.TempDir()
	if _, err := server.Start(mesh(dir)); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("a mesh node on a port in use: %v, want EADDRINUSE", err)
	}
	open(mesh(dir))
	if _, err := server.Start(single(dir)); err == nil || !strings.Contains(err.Error(), "is a CRDT node's data folder") {
		t.Fatalf("a single node on a mesh node's folder: %v", err)
	}

	// A crash while the first start wrote its incarnation leaves only the
	// temporary copy.
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, "crdt-incarnation.tmp"), []byte("17"), 0o644); err != nil {
		t.Fatal(err)
	}
	open(mesh(crashed))
}
