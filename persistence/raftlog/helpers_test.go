package raftlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/throttleddb/throttled/internal/testlog"
)

func testLogger(t testing.TB) *slog.Logger { return testlog.Slog(t, slog.LevelInfo) }

// openT opens the log in dir and closes it when the test ends (unless the
// test closed it itself).
func openT(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func closeT(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// t0 is the AppendedAt of entry 0 in entries; entry i is i ms later.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// entries returns command entries from index from to index to, both
// included, in term.
func entries(from, to, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{
			Index:      i,
			Term:       term,
			Type:       raft.LogCommand,
			Data:       fmt.Appendf(nil, "entry %d of term %d", i, term),
			AppendedAt: t0.Add(time.Duration(i) * time.Millisecond),
		})
	}
	return logs
}

func storeT(t testing.TB, s raft.LogStore, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d to %d): %v", logs[0].Index, logs[len(logs)-1].Index, err)
	}
}

func deleteT(t testing.TB, s raft.LogStore, min, max uint64) {
	t.Helper()
	if err := s.DeleteRange(min, max); err != nil {
		t.Fatalf("DeleteRange(%d, %d): %v", min, max, err)
	}
}

// checkBounds checks FirstIndex and LastIndex.
func checkBounds(t testing.TB, s raft.LogStore, first, last uint64) {
	t.Helper()
	f, ferr := s.FirstIndex()
	l, lerr := s.LastIndex()
	if f != first || l != last || ferr != nil || lerr != nil {
		t.Errorf("FirstIndex, LastIndex = %d (%v), %d (%v); want %d, %d", f, ferr, l, lerr, first, last)
	}
}

// checkLogs checks that every entry of want reads back equal.
func checkLogs(t testing.TB, s raft.LogStore, want []*raft.Log) {
	t.Helper()
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Errorf("GetLog(%d): %v", w.Index, err)
			continue
		}
		if got.Index != w.Index || got.Term != w.Term || got.Type != w.Type ||
			!bytes.Equal(got.Data, w.Data) || !bytes.Equal(got.Extensions, w.Extensions) ||
			!got.AppendedAt.Equal(w.AppendedAt) {
			t.Errorf("GetLog(%d) = %+v, want %+v", w.Index, got, *w)
		}
	}
}

// checkMissing checks that GetLog answers raft.ErrLogNotFound itself for
// each index from min to max.
func checkMissing(t testing.TB, s raft.LogStore, min, max uint64) {
	t.Helper()
	for i := min; i <= max; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != raft.ErrLogNotFound { // raft compares with ==, not errors.Is
			t.Errorf("GetLog(%d) = %v, want raft.ErrLogNotFound", i, err)
		}
	}
}
