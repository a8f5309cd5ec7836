// Package raft makes throttled nodes a Raft group (hashicorp/raft) with one
// linearizable history of decisions, which plain Redis clients use through
// any member.
//
// # One apply path
//
// commands.Server sends every command that reads or writes the keyspace
// to the Node (commands.Cluster.Propose) instead of running it. The leader
// batches the commands that arrive while earlier entries are being stored
// into one log entry (batch.go): one fsync and one round trip for all of
// them. It stamps each entry with its clock, never earlier than the last
// instant it stamped or applied, so time never goes back across leader
// changes. Every replica's FSM (fsm.go) applies an entry's commands through
// commands.Server.Apply, the same Spec.Run a single node runs, at
// max(the entry's instant, the last applied one): the same log gives the
// same state and the same replies on every replica, byte for byte. The
// leader hands each reply back to its waiting connection (the ApplyFuture's
// response); followers drop theirs. No replica reads its own clock for the
// keyspace: expiry and DEBUG DIGEST use the last applied instant.
//
// # Any member serves any client
//
// A follower forwards its clients' commands to the leader over one
// pipelined RESP connection (RAFT FORWARD, forward.go) and relays the
// leader's reply bytes; the leader checks a forwarded command as it checks
// its own clients'. A command is proposed or forwarded once and never
// retried between members, so it applies at most once: when its fate is
// unknown (a broken link, a leader that stepped down, the apply timeout)
// the client gets UNKNOWN; when it certainly never reached the log,
// CLUSTERDOWN. Members learn each other's RESP addresses through the log
// (announce entries), since Raft's configuration holds only their cluster
// addresses.
//
// # What the package does not own
//
// The log and stable store (persistence/raftlog, Pebble, synced on every
// append), the snapshot store (hashicorp/raft's files) and the transport
// (TCP, or in-memory in tests) are Parts given to Start; server wires the
// production ones. Snapshots hold the keyspace and the script cache
// (commands.Server.AppendSnapshot) and the members' RESP addresses; a
// restarted member rebuilds its keyspace from the last snapshot and the
// log.
package raft
