package table

import (
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkKeyspace fills a keyspace of 256 shards, the store's default,
// with -keys CL.THROTTLE-like keys (15-byte names, an int64 TAT, an
// expiry), once in tables and once in maps of pointers shaped as today's
// store, and reports for each the heap per key, the longest single insert
// (the worst rehash pause) and how long a full collection takes with the
// keys live. Run it once (-benchtime 1x):
//
//	go test -run XXX -bench Keyspace -benchtime 1x ./store/internal/table -keys 10000000
func BenchmarkKeyspace(b *testing.B) {
	n := *keysFlag
	names := func(i int) []byte { return []byte("rl:user:" + fmt.Sprintf("%07d", i)) }
	measure := func(b *testing.B, fill func(i int, k []byte) time.Duration) {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		worst := time.Duration(0)
		for i := range n {
			worst = max(worst, fill(i, names(i)))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		began := time.Now()
		runtime.GC()
		gc := time.Since(began)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(n), "heapB/key")
		b.ReportMetric(float64(worst.Microseconds()), "worst-insert-µs")
		b.ReportMetric(float64(gc.Milliseconds()), "full-GC-ms")
	}
	const shards = 256
	b.Run("table", func(b *testing.B) {
		tabs := make([]*Table, shards)
		for i := range tabs {
			tabs[i] = New(hash)
		}
		measure(b, func(i int, k []byte) time.Duration {
			h := hash(k)
			t := tabs[h&(shards-1)]
			began := time.Now()
			t.Insert(k, h, Entry{Kind: 2, Int: 1_795_000_000_000_000_000 + int64(i), ExpireMs: 1_795_000_000_000 + 3_600_000, Atime: 1_795_000_000})
			return time.Since(began)
		})
		runtime.KeepAlive(tabs)
	})
	b.Run("map", func(b *testing.B) {
		type entry struct {
			kind, flags uint8
			atime       uint32
			n, exp      int64
			bytes       *[]byte
		}
		maps := make([]map[string]*entry, shards)
		for i := range maps {
			maps[i] = map[string]*entry{}
		}
		measure(b, func(i int, k []byte) time.Duration {
			h := hash(k)
			m := maps[h&(shards-1)]
			began := time.Now()
			m[string(k)] = &entry{kind: 2, n: 1_795_000_000_000_000_000 + int64(i), exp: 1_795_000_000_000 + 3_600_000, atime: 1_795_000_000}
			return time.Since(began)
		})
		runtime.KeepAlive(maps)
	})
}

var keysFlag = flag.Int("keys", 1_000_000, "keys BenchmarkKeyspace fills")
