// Package accuracy replays the accuracy workload of the LB-filter study in
// virtual time against throttled (one node, or the nodes of an
// active-active mesh behind a round-robin balancer) and tallies each
// algorithm's throttling deviation. bench/accuracy and bench/crdt print
// its tables; the workload is described in bench/accuracy's doc and in
// bench/README.md ("Accuracy workload").
package accuracy

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is one replay of the workload.
type Config struct {
	Seed    uint64
	Minutes int // simulated minutes of traffic
	Clients int
	// Addrs are the servers, all started with --debug-clock. With one, it
	// takes every request and is flushed before each algorithm. With more,
	// they are the nodes of one mesh (--replication crdt): the requests go
	// to them in turn, in time order, as a round-robin load balancer sends
	// them, and nothing is flushed (a mesh refuses FLUSHALL): each
	// algorithm has keys of its own.
	Addrs []string
	// Start is the first simulated instant, Unix ns, a multiple of 60 s;
	// 0 means 2023-11-14 22:14 UTC. Algorithm k runs from Start + k times
	// (Minutes + 1) min, so the servers' clocks only move forward: a mesh
	// node never stamps before a watermark it has sent, so its clock must
	// start after the moment the node started, and never go back.
	Start int64
	// Lag is the replication delay modelled with more than one address, in
	// simulated time: requests less than Lag apart may or may not see each
	// other's effects on the other nodes, requests Lag or more apart do.
	// 0 means 5 ms, the default --crdt-sync-interval.
	Lag time.Duration
	// Logf reports progress; nil is quiet.
	Logf func(format string, a ...any)
}

// StartAfter is a Config.Start for servers (mesh nodes) started before
// now: the minute after next.
func StartAfter(now time.Time) int64 {
	return (now.Unix()/60 + 2) * 60 * int64(time.Second)
}

// DefaultLag is Config.Lag's default: the mesh's default sync interval.
const DefaultLag = 5 * time.Millisecond

func (c Config) start() int64 {
	if c.Start == 0 {
		return start
	}
	return c.Start
}

func (c Config) lag() int64 {
	if c.Lag <= 0 {
		return int64(DefaultLag)
	}
	return int64(c.Lag)
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case c.Minutes < 1 || c.Clients < 1:
		return errors.New("minutes and clients must be positive")
	case len(c.Addrs) == 0:
		return errors.New("no server address")
	case c.Start%int64(time.Minute) != 0:
		return errors.New("the start must be a multiple of 60 s")
	}
	return nil
}

// Measure runs the workload for every algorithm and returns their tallies.
func Measure(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rdbs := make([]*redis.Client, len(cfg.Addrs))
	for i, addr := range cfg.Addrs {
		rdbs[i] = redis.NewClient(&redis.Options{
			Addr:     addr,
			Protocol: 2,
			PoolSize: 1, // one connection: the server runs the commands in the order sent
			// A replayed pipeline would apply its throttle calls twice.
			MaxRetries:  -1,
			ReadTimeout: time.Minute,
		})
		defer rdbs[i].Close()
	}
	duration := int64(cfg.Minutes) * int64(time.Minute)
	first := arrivals(cfg.Seed, clientRates(cfg.Clients), duration)
	var results []Result
	for k, alg := range Algorithms {
		algStart := cfg.start() + int64(k)*(duration+int64(time.Minute))
		for i, rdb := range rdbs {
			if err := rdb.Do(ctx, "DEBUG", "CLOCK", "SET", algStart).Err(); err != nil {
				return nil, fmt.Errorf("%s: DEBUG CLOCK SET (the server needs --debug-clock): %w", cfg.Addrs[i], err)
			}
		}
		if len(rdbs) == 1 {
			if err := rdbs[0].FlushAll(ctx).Err(); err != nil {
				return nil, err
			}
		}
		r := replayer{alg: alg, tag: "a" + strconv.Itoa(k), rdbs: rdbs, lag: cfg.lag()}
		began := time.Now()
		res, err := r.replay(ctx, first, algStart, duration)
		if err != nil {
			return nil, err
		}
		res.Took = time.Since(began)
		logf("%-20s %d node(s): %8d requests, deviation %.2f%% (%v)", alg.Name, len(rdbs), res.Requests, res.Deviation(), res.Took.Round(time.Millisecond))
		results = append(results, res)
	}
	return results, nil
}

// replayer replays the workload for one algorithm.
type replayer struct {
	alg  Algorithm
	tag  string // prefix of this algorithm's keys
	rdbs []*redis.Client
	lag  int64 // ns; with more than one server
	next int   // the server the next request goes to
	// barriers counts the waits for the mesh to converge.
	barriers int
}

// replay sends the workload to the servers and compares every answer with
// the oracle's. first holds each client's first tries from start (the
// package's constant); they are shifted to begin at from. Retries are
// scheduled as rejections come back, until from+duration.
func (r *replayer) replay(ctx context.Context, first [][]int64, from, duration int64) (Result, error) {
	res := Result{Alg: r.alg}
	end := from + duration
	var q queue
	for c, ts := range first {
		for _, t := range ts {
			q = append(q, event{t: t - start + from, client: c, seq: len(q)})
		}
	}
	heap.Init(&q)
	seq := len(q)
	oracle := make([]history, len(first))
	// A reply can only schedule a retry retryDelay after its request, so
	// every event before q[0].t+retryDelay is already known and goes in
	// one batch, still in time order. In a mesh a batch is also at most
	// the modelled lag long, and the nodes converge between batches.
	span := retryDelay
	if len(r.rdbs) > 1 {
		span = min(span, r.lag)
	}
	var batch []event
	for q.Len() > 0 {
		batch = batch[:0]
		for cut := q[0].t + span; q.Len() > 0 && q[0].t < cut; {
			batch = append(batch, heap.Pop(&q).(event))
		}
		allowed, err := r.send(ctx, batch)
		if err != nil {
			return res, err
		}
		for i, e := range batch {
			w := &oracle[e.client]
			want := w.count(e.t) < limit
			res.Requests++
			switch {
			case allowed[i] && !want:
				res.Over++
			case !allowed[i] && want:
				res.Under++
			}
			switch {
			case allowed[i]:
				res.Allowed++
				w.admitted = append(w.admitted, e.t)
			case e.t+retryDelay < end:
				heap.Push(&q, event{t: e.t + retryDelay, client: e.client, seq: seq})
				seq++
			}
		}
	}
	res.Nodes, res.Barriers = len(r.rdbs), r.barriers
	return res, nil
}

// send sends a batch and returns which of its events were allowed. Each
// event goes to the next server in turn; each server gets its events in one
// pipeline, for each DEBUG CLOCK SET to its time then the algorithm's
// command on its client's key. With more than one server, the pipelines go
// at once, and send waits until every node has merged what the others did
// (barrier).
func (r *replayer) send(ctx context.Context, batch []event) ([]bool, error) {
	n := len(r.rdbs)
	allowed := make([]bool, len(batch))
	pipes := make([]redis.Pipeliner, n)
	cmds := make([][]*redis.Cmd, n)
	index := make([][]int, n) // batch index of each command
	for i := range pipes {
		pipes[i] = r.rdbs[i].Pipeline()
	}
	for i, e := range batch {
		node := r.next
		r.next = (r.next + 1) % n
		pipes[node].Do(ctx, "DEBUG", "CLOCK", "SET", e.t)
		cmds[node] = append(cmds[node], pipes[node].Do(ctx, r.alg.command(r.tag+":client:"+strconv.Itoa(e.client))...))
		index[node] = append(index[node], i)
	}
	var marks []string
	if n > 1 {
		// Each node ends its pipeline with a write to a key of its own,
		// fresh for this barrier, after everything else it ran.
		r.barriers++
		marks = make([]string, n)
		for i := range pipes {
			marks[i] = r.markKey(i)
			pipes[i].Do(ctx, "CL.THROTTLE", marks[i], 10, 1, 60)
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range pipes {
		wg.Go(func() {
			if p.Len() > 0 {
				_, errs[i] = p.Exec(ctx)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", r.alg.Name, err)
	}
	for node := range cmds {
		for j, c := range cmds[node] {
			v, err := c.Int64Slice()
			if err != nil || len(v) < 5 {
				return nil, fmt.Errorf("%s: %v answered %v (%v)", r.alg.Name, c.Args(), c.Val(), err)
			}
			allowed[index[node][j]] = v[0] == 0
		}
	}
	if n > 1 {
		if err := r.barrier(ctx, marks); err != nil {
			return nil, err
		}
	}
	return allowed, nil
}

// markKey is node i's barrier key for the current barrier. It sorts after
// every key of the workload ("~" > "a"): a node ships the keys written
// since its last cut in key order, in order on one connection, so a peer
// that has merged the mark has merged everything the node ran before it.
func (r *replayer) markKey(i int) string {
	return "~sync:" + r.tag + ":" + strconv.Itoa(r.barriers) + ":" + strconv.Itoa(i)
}

// barrierTimeout is how long a barrier may wait for the mesh to converge.
const barrierTimeout = 30 * time.Second

// barrier waits until every node has merged every other node's mark: a
// peek (quantity 0) of the mark shows its one call (remaining 10, of 11).
func (r *replayer) barrier(ctx context.Context, marks []string) error {
	deadline := time.Now().Add(barrierTimeout)
	done := make([]bool, len(r.rdbs))
	for {
		left := 0
		for i, rdb := range r.rdbs {
			if done[i] {
				continue
			}
			pipe := rdb.Pipeline()
			var peeks []*redis.Cmd
			for j, m := range marks {
				if j != i {
					peeks = append(peeks, pipe.Do(ctx, "CL.THROTTLE", m, 10, 1, 60, 0))
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("%s: barrier: %w", r.alg.Name, err)
			}
			done[i] = true
			for _, p := range peeks {
				v, err := p.Int64Slice()
				if err != nil || len(v) != 5 {
					return fmt.Errorf("%s: %v answered %v (%v)", r.alg.Name, p.Args(), p.Val(), err)
				}
				if v[2] == v[1] { // not merged yet
					done[i] = false
				}
			}
			if !done[i] {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: barrier %d: %d node(s) had not merged the others' writes after %v", r.alg.Name, r.barriers, left, barrierTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
}
