package raftlog

import (
	"bytes"
	"cmp"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// logStableStore is what a raft node needs of its store.
type logStableStore interface {
	raft.LogStore
	raft.StableStore
}

// TestConformance runs the suite of what raft relies on against our Store
// and against raft's own InmemStore, the reference: a case the reference
// fails would test our reading of raft rather than the Store.
func TestConformance(t *testing.T) {
	t.Run("pebble", func(t *testing.T) {
		runConformance(t, func(t *testing.T) logStableStore { return openT(t, t.TempDir()) })
	})
	t.Run("inmem", func(t *testing.T) {
		runConformance(t, func(*testing.T) logStableStore { return raft.NewInmemStore() })
	})
}

func runConformance(t *testing.T, open func(*testing.T) logStableStore) {
	t.Run("Empty", func(t *testing.T) {
		s := open(t)
		checkBounds(t, s, 0, 0)
		checkMissing(t, s, 0, 2)
	})

	t.Run("StoreAndGet", func(t *testing.T) {
		s := open(t)
		logs := entries(1, 10, 1)
		if err := s.StoreLog(logs[0]); err != nil {
			t.Fatalf("StoreLog: %v", err)
		}
		storeT(t, s, logs[1:])
		checkBounds(t, s, 1, 10)
		checkLogs(t, s, logs)
		checkMissing(t, s, 11, 11)
	})

	t.Run("EveryTypeAndShape", func(t *testing.T) {
		s := open(t)
		types := []raft.LogType{raft.LogCommand, raft.LogNoop, raft.LogAddPeerDeprecated,
			raft.LogRemovePeerDeprecated, raft.LogBarrier, raft.LogConfiguration}
		var logs []*raft.Log
		for i, typ := range types {
			logs = append(logs, &raft.Log{
				Index: uint64(i + 1), Term: uint64(i + 1), Type: typ,
				Data: []byte{byte(i), 0, 0xff}, Extensions: []byte("ext"),
				AppendedAt: t0.Add(time.Duration(i)),
			})
		}
		n := uint64(len(logs))
		logs = append(logs,
			&raft.Log{Index: n + 1, Term: 7},                                                 // zero everything
			&raft.Log{Index: n + 2, Term: 7, Data: []byte{}, Extensions: []byte{}},           // empty, not nil
			&raft.Log{Index: n + 3, Term: 7, Extensions: []byte{1}},                          // extensions only
			&raft.Log{Index: n + 4, Term: 1<<64 - 1, Type: 200, AppendedAt: time.Unix(1, 0)}, // extremes
			&raft.Log{Index: n + 5, Term: 8, Data: bytes.Repeat([]byte("big"), 100_000)},
		)
		storeT(t, s, logs)
		checkBounds(t, s, 1, n+5)
		checkLogs(t, s, logs)
	})

	// The deletions raft makes, each from a log of entries 5 to 20, then
	// an append where raft would make the next one.
	for _, tc := range []struct {
		name        string
		min, max    uint64
		first, last uint64 // left after the deletion
		next        uint64
	}{
		{"Head", 5, 10, 11, 20, 21},           // compaction after a snapshot
		{"HeadFromBefore", 1, 10, 11, 20, 21}, // the same, named from further back
		{"Tail", 15, 20, 5, 14, 15},           // a follower's entries that conflict with the leader's
		{"TailBeyond", 15, 1000, 5, 14, 15},   // the same, named further on
		{"All", 5, 20, 0, 0, 100},             // after a snapshot install, or RecoverCluster: any index next
	} {
		t.Run("Delete"+tc.name, func(t *testing.T) {
			s := open(t)
			logs := entries(5, 20, 1)
			storeT(t, s, logs)
			deleteT(t, s, tc.min, tc.max)
			checkBounds(t, s, tc.first, tc.last)
			checkMissing(t, s, max(tc.min, 5), min(tc.max, 20))
			if tc.first != 0 {
				checkLogs(t, s, logs[tc.first-5:tc.last-5+1])
			}
			newer := entries(tc.next, tc.next+2, 2)
			storeT(t, s, newer)
			checkBounds(t, s, cmp.Or(tc.first, tc.next), tc.next+2)
			checkLogs(t, s, newer)
		})
	}

	t.Run("StableMissing", func(t *testing.T) {
		s := open(t)
		// raft compares the text (api.go, raft.go).
		if v, err := s.Get([]byte("LastVoteCand")); err == nil || err.Error() != "not found" || v != nil {
			t.Errorf("Get(missing) = %q, %v; want nil, \"not found\"", v, err)
		}
		if v, err := s.GetUint64([]byte("CurrentTerm")); v != 0 || err != nil {
			t.Errorf("GetUint64(missing) = %d, %v; want 0, nil", v, err)
		}
	})

	t.Run("StableSetGet", func(t *testing.T) {
		s := open(t)
		for _, kv := range []struct{ k, v string }{
			{"LastVoteCand", "node-1"}, {"empty", ""}, {"LastVoteCand", "node-2"}, {"\x00\xff", "\x00binary\xff"},
		} {
			if err := s.Set([]byte(kv.k), []byte(kv.v)); err != nil {
				t.Fatalf("Set(%q): %v", kv.k, err)
			}
			v, err := s.Get([]byte(kv.k))
			if err != nil || string(v) != kv.v || v == nil {
				t.Errorf("Get(%q) = %q, %v; want %q (non-nil)", kv.k, v, err, kv.v)
			}
		}
		for _, kv := range []struct {
			k string
			v uint64
		}{{"CurrentTerm", 1}, {"LastVoteTerm", 1<<64 - 1}, {"CurrentTerm", 42}, {"zero", 0}} {
			if err := s.SetUint64([]byte(kv.k), kv.v); err != nil {
				t.Fatalf("SetUint64(%q): %v", kv.k, err)
			}
			if v, err := s.GetUint64([]byte(kv.k)); err != nil || v != kv.v {
				t.Errorf("GetUint64(%q) = %d, %v; want %d", kv.k, v, err, kv.v)
			}
		}
	})
}
