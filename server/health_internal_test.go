package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/throttleddb/throttled/replication/raft"
)

// Before Start has loaded the data folder, /readyz says so.
func TestReadyz_Loading(t *testing.T) {
	w := httptest.NewRecorder()
	serveReady(w, nil)
	if w.Code != http.StatusServiceUnavailable || w.Body.String() != "loading: the data folder is not loaded yet\n" {
		t.Fatalf("got %d %q", w.Code, w.Body.String())
	}
}

// A member that knows its leader but has applied far less than it knows
// committed is replaying a backlog: not ready until within RaftReadyLag.
func TestRaftReady_Lagging(t *testing.T) {
	st := raft.Status{State: "follower", Leader: "n1", CommitIndex: 5000, AppliedIndex: 5000 - RaftReadyLag - 1}
	if ok, why := raftReady(st); ok || why != "raft: catching up: applied index 3975, commit index 5000" {
		t.Fatalf("lagging follower: %v %q", ok, why)
	}
	st.AppliedIndex = 5000 - RaftReadyLag
	if ok, why := raftReady(st); !ok || why != "ready: raft follower" {
		t.Fatalf("follower within the lag: %v %q", ok, why)
	}
}
