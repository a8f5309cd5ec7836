package server

import (
	"fmt"
	"net/http"

	"github.com/throttleddb/throttled/replication/crdt"
	"github.com/throttleddb/throttled/replication/raft"
)

// Health probes, served on the metrics listener (--metrics-addr) beside
// /metrics, for a load balancer or Kubernetes:
//
//   - /healthz (live): 200 "ok" while the process serves HTTP. The listener
//     opens before the data folder loads, so a long load does not get the
//     process killed by a liveness probe.
//   - /readyz (ready): 200 "ready" when the node should be sent clients,
//     503 with the reason otherwise (see ready).
//
// Both answer a short text/plain body ending in a newline.

// RaftReadyLag is how many log entries a Raft member's applied index may
// trail the commit index it knows and still count as caught up. An entry
// carries a batch of commands, so 1024 entries is a few milliseconds of a
// busy group's traffic: a member further behind is replaying a backlog (just
// restarted, or back from a partition) and would answer reads from old
// state.
const RaftReadyLag = 1024

// ready says whether the node should be given clients, and why not. The
// node exists only once its data folder is loaded, so "loaded" holds here;
// the listener answers "loading" before (see metricsServer).
func (n *Node) ready() (bool, string) {
	switch {
	case n.raft != nil:
		return raftReady(n.raft.Status())
	case n.mesh != nil:
		return meshReady(n.mesh.Peers())
	}
	return true, "ready"
}

// raftReady: a member is ready while it knows a leader (it is in a
// group with a quorum, so its commands commit) and has applied the log up
// to within RaftReadyLag entries of the commit index it knows. A member cut
// off from a quorum loses its leader within the election timeout (a
// follower stops hearing heartbeats and stands for election; a leader steps
// down after its lease), so it turns not ready then.
func raftReady(st raft.Status) (bool, string) {
	switch {
	case st.State == "shutdown":
		return false, "raft: shut down"
	case st.Leader == "":
		return false, fmt.Sprintf("raft: no leader known (state %s, term %d)", st.State, st.Term)
	case st.CommitIndex > st.AppliedIndex+RaftReadyLag:
		return false, fmt.Sprintf("raft: catching up: applied index %d, commit index %d", st.AppliedIndex, st.CommitIndex)
	}
	return true, "ready: raft " + st.State
}

// meshReady: a mesh node alone by design (no peers) is ready once loaded.
// One with peers is ready once a peer has sent it a whole state since it
// started (its first batch on a link is a full sync), so that it decides
// with the consumption the mesh admitted while it was down, not only what
// its own folder held. After that it stays ready through partitions: a
// partitioned mesh node keeps deciding by design (with the over-admission
// bound docs/replication.md gives), and a load balancer that dropped every
// node of a split mesh would turn a partition into an outage. The peer
// links show on /metrics (throttled_crdt_peer_connected).
func meshReady(peers []crdt.PeerInfo) (bool, string) {
	if len(peers) == 0 {
		return true, "ready: mesh node with no peers"
	}
	for _, p := range peers {
		if p.LagMs >= 0 {
			return true, "ready: mesh state received from " + p.ID
		}
	}
	return false, fmt.Sprintf("mesh: no state received from any of %d peers since start", len(peers))
}

// serveReady answers /readyz for n, nil while the node is loading.
func serveReady(w http.ResponseWriter, n *Node) {
	ok, why := false, "loading: the data folder is not loaded yet"
	if n != nil {
		ok, why = n.ready()
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeText(w, status, why)
}

// writeText answers a short text body.
func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintln(w, body)
}
