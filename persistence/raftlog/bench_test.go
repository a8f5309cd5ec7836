package raftlog

import (
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// benchStores are the stores the benchmarks compare: ours, every write
// synced to disk, and raft's InmemStore, the reference (memory only).
var benchStores = []struct {
	name string
	open func(b *testing.B) raft.LogStore
}{
	{"pebble", func(b *testing.B) raft.LogStore { return openT(b, b.TempDir()) }},
	{"inmem", func(*testing.B) raft.LogStore { return raft.NewInmemStore() }},
}

// benchLogs returns n command entries of 1 KiB of random data, from index
// 1, for the caller to renumber.
func benchLogs(n int) []*raft.Log {
	logs := entries(1, uint64(n), 1)
	for _, l := range logs {
		l.Data = make([]byte, 1<<10)
		_, _ = rand.Read(l.Data)
	}
	return logs
}

// BenchmarkStoreLogs appends 1 KiB entries in batches of 1 (a lone
// command) and of 64 (raft's MaxAppendEntries), and compacts the log as
// raft would after a snapshot (every 16,384 entries, keeping 8,192). The
// same Log values are renumbered for every batch: the InmemStore keeps
// pointers to them, which only the timing of its map needs here.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		for _, st := range benchStores {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, st.name), func(b *testing.B) {
				s := st.open(b)
				logs := benchLogs(batch)
				first, next := uint64(1), uint64(1)
				b.SetBytes(int64(batch) << 10)
				b.ReportAllocs()
				for b.Loop() {
					for i, l := range logs {
						l.Index = next + uint64(i)
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
					next += uint64(batch)
					if next-first > 16<<10 {
						if err := s.DeleteRange(first, next-8<<10-1); err != nil {
							b.Fatal(err)
						}
						first = next - 8<<10
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/entry")
			})
		}
	}
}

// BenchmarkGetLog reads 8,192 entries of 1 KiB in turn. Pebble's are
// flushed to sstables first: a follower catching up reads there, where the
// latest entries would come from raft's LogCache in front of the store.
func BenchmarkGetLog(b *testing.B) {
	const n = 8 << 10
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			s := st.open(b)
			logs := benchLogs(n)
			for i := 0; i < n; i += 64 {
				if err := s.StoreLogs(logs[i : i+64]); err != nil {
					b.Fatal(err)
				}
			}
			if ps, ok := s.(*Store); ok {
				if err := ps.db.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			var l raft.Log
			i := uint64(0)
			b.SetBytes(1 << 10)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.GetLog(i%n+1, &l); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
