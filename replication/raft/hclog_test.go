package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A dead member made the leader log about 4 lines a second: hashicorp/raft
// reports every failed heartbeat and append. One warning about one peer
// now passes at most once per repeatEvery, with the count held back; other
// peers' and other messages' lines are not held back by it.
func TestHclog_RepeatsLimited(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := newHclog(slog.New(slog.NewTextHandler(&out, nil)), func() time.Time { return now })
	lines := func() []string { return strings.Split(strings.TrimSpace(out.String()), "\n") }
	// 4 a second for 9 s, as a leader logs about a dead follower.
	for range 36 {
		log.Error("failed to heartbeat to", "peer", "127.0.0.1:7002", "backoff time", "10ms", "error", "dial tcp: connection refused")
		log.Error("failed to appendEntries to", "peer", "{Voter n2 127.0.0.1:7002}", "error", "dial tcp: connection refused")
		log.Warn("failed to contact", "server-id", "n2", "time", "1s")
		now = now.Add(250 * time.Millisecond)
	}
	log.Error("failed to heartbeat to", "peer", "127.0.0.1:7003", "error", "dial tcp: connection refused")
	log.Info("entering leader state", "leader", "n1")
	log.Info("entering leader state", "leader", "n1")
	if got := lines(); len(got) != 6 {
		t.Fatalf("after 9 s, %d lines, want 3 (one per message and peer), the other peer's and both info lines:\n%s", len(got), out.String())
	}
	now = now.Add(time.Second)
	log.Error("failed to heartbeat to", "peer", "127.0.0.1:7002", "error", "dial tcp: connection refused")
	got := lines()
	if len(got) != 7 || !strings.Contains(got[6], "failed to heartbeat to") || !strings.Contains(got[6], "suppressed=35") {
		t.Fatalf("after 10 s, want the heartbeat line with suppressed=35:\n%s", out.String())
	}
}

func TestPeerKey(t *testing.T) {
	for msg, want := range map[string]string{
		`raft: failed to heartbeat to: peer=127.0.0.1:7002 backoff time=10ms`:        `raft: failed to heartbeat to: peer=127.0.0.1:7002`,
		`raft: failed to appendEntries to: peer="{Voter n2 127.0.0.1:7002}" error=x`: `raft: failed to appendEntries to: peer="{Voter n2 127.0.0.1:7002}"`,
		`raft: failed to contact: server-id=n2`:                                      `raft: failed to contact: server-id=n2`,
		`raft: entering follower state`:                                              ``,
	} {
		if got := peerKey(msg); got != want {
			t.Errorf("peerKey(%q) = %q, want %q", msg, got, want)
		}
	}
}
