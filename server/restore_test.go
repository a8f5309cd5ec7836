package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

// --restore-from starts a one-member group from a folder that holds
// something; anything else is refused before a member is created.
func TestRestoreFrom_Refusals(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from string
		peers      map[string]string
		want       string
	}{
		{"empty folder", t.TempDir(), map[string]string{"n1": "127.0.0.1:1"}, "not a BACKUP folder"},
		{"missing folder", filepath.Join(full, "none"), map[string]string{"n1": "127.0.0.1:1"}, "not a BACKUP folder"},
		{"two members", full, map[string]string{"n1": "127.0.0.1:1", "n2": "127.0.0.1:2"}, "starts with one member"},
	} {
		_, err := servertest.Open(server.Config{Dir: t.TempDir(), Raft: &server.RaftConfig{
			NodeID: "n1", ClusterAddr: "127.0.0.1:1", Peers: tc.peers, RestoreFrom: tc.from}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
