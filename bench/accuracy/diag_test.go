package main

import (
	"container/heap"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttleddb/throttled/server"
	"github.com/throttleddb/throttled/server/servertest"
)

type dtally struct{ req, over, under int }

func (d dtally) String() string {
	return fmt.Sprintf("req %7d over %6d under %6d dev %6.2f%%", d.req, d.over, d.under, 100*float64(d.over+d.under)/float64(max(d.req, 1)))
}

// policy: 0 retry 1s, 1 no retry, 2 retry after server's retry_after (ms via MS? no, use seconds reply)
func diagReplay(ctx context.Context, rdb *redis.Client, alg algorithm, first [][]int64, end int64, rates []int, policy int) map[string]*dtally {
	out := map[string]*dtally{}
	get := func(k string) *dtally {
		if out[k] == nil {
			out[k] = &dtally{}
		}
		return out[k]
	}
	rdb.FlushAll(ctx)
	var q queue
	for c, ts := range first {
		for _, t := range ts {
			q = append(q, event{t: t, client: c, seq: len(q)})
		}
	}
	heap.Init(&q)
	seq := len(q)
	isRetry := map[int]bool{}
	oracle := make([]history, len(first))
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		pipe := rdb.Pipeline()
		pipe.Do(ctx, "DEBUG", "CLOCK", "SET", e.t)
		c := pipe.Do(ctx, alg.command(clientKey(e.client))...)
		if _, err := pipe.Exec(ctx); err != nil {
			panic(err)
		}
		r, _ := c.Int64Slice()
		allowed := r[0] == 0
		w := &oracle[e.client]
		want := w.count(e.t) < limit
		kind := "first"
		if isRetry[e.seq] {
			kind = "retry"
		}
		for _, k := range []string{"all", kind, fmt.Sprintf("%d/min", rates[e.client])} {
			d := get(k)
			d.req++
			if allowed && !want {
				d.over++
			}
			if !allowed && want {
				d.under++
			}
		}
		if allowed {
			w.admitted = append(w.admitted, e.t)
			continue
		}
		delay := retryDelay
		switch policy {
		case 1:
			continue
		case 2:
			delay = max(r[3], 1) * int64(time.Second)
		}
		if e.t+delay < end {
			heap.Push(&q, event{t: e.t + delay, client: e.client, seq: seq})
			isRetry[seq] = true
			seq++
		}
	}
	return out
}

func TestDiag(t *testing.T) {
	if os.Getenv("DIAG") == "" {
		t.Skip()
	}
	n := servertest.Start(t, server.Config{DebugClock: true})
	rdb := redis.NewClient(&redis.Options{Addr: n.Addr(), Protocol: 2, PoolSize: 1, MaxRetries: -1})
	defer rdb.Close()
	rates := clientRates(100)
	d := int64(10 * time.Minute)
	first := arrivals(1, rates, d)
	for _, policy := range []int{0, 1, 2} {
		for _, alg := range algorithms {
			m := diagReplay(t.Context(), rdb, alg, first, start+d, rates, policy)
			for _, k := range []string{"all", "first", "retry", "120/min", "90/min", "30/min"} {
				if m[k] != nil {
					t.Logf("policy %d %-20s %-8s %v", policy, alg.Name, k, m[k])
				}
			}
		}
	}
}
