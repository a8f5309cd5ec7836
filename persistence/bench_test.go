package persistence

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttleddb/throttled/store"
)

// benchKeys is the number of distinct keys the benchmarks rewrite, as a
// rate limiter rewrites the state of its active keys.
const benchKeys = 100_000

// BenchmarkJournalSet measures Set from parallel appenders (as the store's
// shards call it) with a GCRA-like 8-byte state. The timer includes writing
// everything to the log, so ns/op is the sustained rate, not just the append.
func BenchmarkJournalSet(b *testing.B) {
	for _, p := range []FsyncPolicy{No, EverySec, Always} {
		b.Run(p.String(), func(b *testing.B) {
			d := openT(b, b.TempDir(), p)
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := []byte("rl:user:00000000")
				for pb.Next() {
					i := next.Add(1)
					binary.BigEndian.PutUint64(key[len(key)-8:], i%benchKeys)
					d.Set(0, key, store.IntValue(int64(i)), nowMs+60_000)
				}
			})
			for d.Stats().Pending != 0 {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			s := d.Stats()
			b.ReportMetric(float64(b.N)/float64(max(s.GroupCommits, 1)), "changes/commit")
		})
	}
}

// BenchmarkJournalSet_WaitDurable is appendfsync always as the server uses
// it: each connection sets and waits for durability before its reply. Group
// commit shares one fsync among all the connections waiting.
func BenchmarkJournalSet_WaitDurable(b *testing.B) {
	d := openT(b, b.TempDir(), Always)
	var next atomic.Uint64
	b.SetParallelism(32) // connections per CPU
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := []byte("rl:user:00000000")
		for pb.Next() {
			i := next.Add(1)
			binary.BigEndian.PutUint64(key[len(key)-8:], i%benchKeys)
			d.Set(0, key, store.IntValue(int64(i)), nowMs+60_000)
			if err := d.WaitDurable(d.LastSeq()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.StopTimer()
	s := d.Stats()
	b.ReportMetric(float64(b.N)/float64(max(s.Syncs, 1)), "changes/fsync")
}

// BenchmarkCheckpoint measures a checkpoint that saves 500,000 new keys, as
// the first one after a burst does. ns/op is one whole checkpoint.
func BenchmarkCheckpoint(b *testing.B) {
	const n = 500_000
	for range b.N {
		b.StopTimer()
		d := openT(b, b.TempDir(), EverySec)
		s, err := store.New(store.Config{})
		if err != nil {
			b.Fatal(err)
		}
		loadInto(b, d, s, nowMs)
		s.SetJournal(d)
		key := []byte("rl:user:00000000")
		locked(s, nowMs, func(tx store.Tx) {
			for i := range n {
				binary.BigEndian.PutUint64(key[len(key)-8:], uint64(i)*0x9E3779B97F4A7C15)
				tx.Put(0, key, store.IntValue(int64(i)), nowMs+60_000)
			}
		})
		for d.Stats().Pending != 0 {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		if err := d.checkpoint(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		closeT(b, d) // not at the end: each iteration's store and Pebble would stay
	}
}
