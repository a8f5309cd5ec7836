// Command etcdload is bench/raft's load generator for etcd: -clients
// goroutines put keys into an etcd cluster, each with one request in flight,
// for -duration, and it prints every put's latency as JSON on stdout for
// bench/raft to summarise.
//
// It is its own Go module so that the throttled module does not take etcd's
// client and its dependency tree (gRPC, protobuf, zap) for one benchmark:
// bench/raft builds it with `go build` in this folder. The v3.5 client is
// the newest line that speaks to etcd 3.4 servers (Debian bookworm's).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Report is what etcdload prints: bench/raft decodes the same fields.
type Report struct {
	Endpoint  string  `json:"endpoint"`     // where the puts went
	ElapsedNS int64   `json:"elapsed_ns"`   // from the first put to the last reply
	LatencyUS []int64 `json:"latencies_us"` // one per put, in µs
}

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated client addresses (host:port) of the cluster")
	clients := flag.Int("clients", 50, "goroutines putting, each with one request in flight")
	// One connection is what etcd's own benchmark tool uses by default,
	// and it gave etcd 13-40% more puts per second here than one per
	// client (gRPC multiplexes the clients' requests on it).
	conns := flag.Int("conns", 1, "gRPC connections the clients share")
	duration := flag.Duration("duration", 10*time.Second, "how long to put")
	keySpace := flag.Int("keyspace", 100000, "keys (8 digits) are drawn at random from this many")
	valSize := flag.Int("val-size", 256, "bytes per value")
	flag.Parse()
	if err := run(strings.Split(*endpoints, ","), *clients, *conns, *duration, *keySpace, *valSize); err != nil {
		fmt.Fprintln(os.Stderr, "etcdload:", err)
		os.Exit(1)
	}
}

func run(endpoints []string, clients, conns int, duration time.Duration, keySpace, valSize int) error {
	if clients < 1 || conns < 1 || keySpace < 1 || keySpace > 1e8 || valSize < 0 {
		return errors.New("-clients, -conns and -keyspace (at most 10^8) must be positive, -val-size not negative")
	}
	ctx := context.Background()
	leader, err := findLeader(ctx, endpoints)
	if err != nil {
		return err
	}
	cs := make([]*clientv3.Client, conns)
	for i := range cs {
		if cs[i], err = clientv3.New(clientv3.Config{Endpoints: []string{leader}, DialTimeout: 5 * time.Second}); err != nil {
			return err
		}
		defer cs[i].Close()
	}
	val := strings.Repeat("v", valSize)
	lat := make([][]int64, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	// The clock starts when every goroutine is ready to put.
	start := make(chan struct{})
	var began time.Time
	for i := range clients {
		wg.Go(func() {
			c := cs[i%conns]
			<-start
			for time.Since(began) < duration {
				key := fmt.Sprintf("%08d", rand.IntN(keySpace))
				t := time.Now()
				if _, err := c.Put(ctx, key, val); err != nil {
					errs[i] = err
					return
				}
				lat[i] = append(lat[i], time.Since(t).Microseconds())
			}
		})
	}
	began = time.Now()
	close(start)
	wg.Wait()
	rep := Report{Endpoint: leader, ElapsedNS: time.Since(began).Nanoseconds()}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, l := range lat {
		rep.LatencyUS = append(rep.LatencyUS, l...)
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// findLeader returns the endpoint of the member that leads: puts sent there
// skip the hop a follower makes to forward them, as etcd's own benchmark
// tool does with --target-leader.
func findLeader(ctx context.Context, endpoints []string) (string, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(sctx, ep)
		cancel()
		if err != nil {
			return "", fmt.Errorf("status of %s: %w", ep, err)
		}
		if st.Header.MemberId == st.Leader {
			return ep, nil
		}
	}
	return "", fmt.Errorf("no member of %v leads", endpoints)
}
