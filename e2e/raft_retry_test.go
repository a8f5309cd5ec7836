package e2e

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttleddb/throttled/internal/testwait"
)

// TestRaft_DefaultClientRetryAppliesOnce: go-redis with its default options
// resends, by itself, a command answered with an error it deems safe to
// retry (TRYAGAIN, CLUSTERDOWN, LOADING, READONLY...: shouldRetry in its
// error.go). Clients of the followers send INCR while the leader is killed
// (SIGKILL), three times over. The counter must hold every acknowledged
// INCR and at most those plus the ones answered with an error: an INCR the
// cluster may have applied must reach the client as an error it does not
// resend (UNKNOWN), or a resend applies it twice and the counter exceeds
// that bound.
func TestRaft_DefaultClientRetryAppliesOnce(t *testing.T) {
	nodes := raftCluster(t, 3)
	var acked, unknown, down atomic.Int64
	for round := range 3 {
		lead := leaderOf(t, nodes)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 16 {
			var target *server
			for i := range nodes {
				if s := nodes[(w+i)%len(nodes)]; s != lead {
					target = s
					break
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := redis.NewClient(&redis.Options{Addr: target.Addr}) // default options: retries on
				defer c.Close()
				for ctx.Err() == nil {
					_, err := c.Incr(ctx, "n").Result()
					switch {
					case err == nil:
						acked.Add(1)
					case strings.HasPrefix(err.Error(), "CLUSTERDOWN "):
						// Never proposed, and every resend met the same.
						down.Add(1)
						time.Sleep(5 * time.Millisecond)
					default:
						unknown.Add(1)
					}
				}
			}()
		}
		from := acked.Load()
		testwait.For(t, 30*time.Second, "INCRs before the kill", func() bool { return acked.Load() > from+300 })
		lead.Kill()
		var survivors []*server
		for _, s := range nodes {
			if s != lead {
				survivors = append(survivors, s)
			}
		}
		leaderOf(t, survivors)
		from = acked.Load()
		testwait.For(t, 30*time.Second, "INCRs after the failover", func() bool { return acked.Load() > from+300 })
		cancel()
		wg.Wait()
		for i, s := range nodes {
			if s == lead {
				nodes[i] = start(t, s.dir, s.args...)
			}
		}
		t.Logf("round %d: %d acknowledged, %d unknown, %d CLUSTERDOWN so far", round, acked.Load(), unknown.Load(), down.Load())
	}
	c := leaderOf(t, nodes).client(t)
	n, err := c.Get(context.Background(), "n").Int64()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counter %d; %d acknowledged, %d with an unknown outcome", n, acked.Load(), unknown.Load())
	if n < acked.Load() || n > acked.Load()+unknown.Load() {
		t.Errorf("counter %d: %d INCRs were acknowledged and %d had an unknown outcome: some applied twice or got lost",
			n, acked.Load(), unknown.Load())
	}
}
