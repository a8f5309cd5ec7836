package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/throttleddb/throttled/internal/proc"
	"github.com/throttleddb/throttled/internal/respconn"
)

// How the failover part polls the survivors: a CL.THROTTLE every
// pollInterval, from pollWorkers connections so that requests that wait
// for the new leader (up to --raft-apply-timeout, 2 s) do not stop the
// polling.
const (
	pollInterval = time.Millisecond
	pollWorkers  = 32
	failoverMax  = 30 * time.Second // a failover slower than this fails the run
)

// failoverTry is one leader kill.
type failoverTry struct {
	killed, next string // the members that led before and after
	took         time.Duration
}

// failovers kills the leader -failovers times and times each failover. The
// killed member is restarted, and caught up, before the next try, so each
// try starts from three members.
func (r *runner) failovers(ctx context.Context) ([]failoverTry, error) {
	var tries []failoverTry
	for i := range r.cfg.failovers {
		lead, err := r.cluster.leader(ctx, r.cluster.nodes)
		if err != nil {
			return nil, err
		}
		var survivors []*node
		for _, n := range r.cluster.nodes {
			if n != lead {
				survivors = append(survivors, n)
			}
		}
		took, err := killAndTime(ctx, lead, survivors)
		if err != nil {
			return nil, err
		}
		next, err := r.cluster.leader(ctx, survivors)
		if err != nil {
			return nil, err
		}
		tries = append(tries, failoverTry{killed: lead.id, next: next.id, took: took})
		r.logf("failover %d/%d: killed %s, first decision %v later; %s leads", i+1, r.cfg.failovers, lead.id,
			took.Round(time.Millisecond), next.id)
		if err := r.startNode(ctx, lead); err != nil {
			return nil, err
		}
		if err := caughtUp(ctx, next, lead); err != nil {
			return nil, err
		}
	}
	return tries, nil
}

// killAndTime polls the survivors with CL.THROTTLE, kills lead with SIGKILL
// once a poll has succeeded, and returns the time from the kill to the
// first decision on a request sent after it.
func killAndTime(ctx context.Context, lead *node, survivors []*node) (time.Duration, error) {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var addrs []string
	for _, n := range survivors {
		addrs = append(addrs, n.addr)
	}
	p := newPoller(addrs)
	go p.run(pctx)
	warm := func(context.Context) error {
		if p.decided.Load() == 0 {
			return fmt.Errorf("no decision from %s yet", ids(survivors))
		}
		return nil
	}
	if err := proc.WaitReady(ctx, "the survivors", failoverMax, nil, warm); err != nil {
		return 0, err
	}
	killed := time.Now()
	p.killedAt.Store(killed.UnixNano())
	lead.p.Kill()
	lead.p = nil
	select {
	case at := <-p.first:
		return at.Sub(killed), nil
	case <-time.After(failoverMax):
		return 0, fmt.Errorf("no decision within %v of killing %s", failoverMax, lead.id)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// poller sends CL.THROTTLE to its addresses in turn, one every
// pollInterval while a worker is free.
type poller struct {
	addrs    []string
	decided  atomic.Int64   // decisions so far
	killedAt atomic.Int64   // Unix ns of the kill; 0 before
	first    chan time.Time // when the first decision on a request sent after the kill came back
	ticks    chan struct{}
}

func newPoller(addrs []string) *poller {
	return &poller{addrs: addrs, first: make(chan time.Time, 1), ticks: make(chan struct{})}
}

// run polls until ctx is done.
func (p *poller) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := range pollWorkers {
		wg.Go(func() { p.work(ctx, w) })
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			select {
			case p.ticks <- struct{}{}:
			default: // every worker is waiting for a reply
			}
		}
	}
	wg.Wait()
}

// work is one polling connection per address; worker w starts with
// address w mod n and moves to the next on each tick.
func (p *poller) work(ctx context.Context, w int) {
	conns := make([]*respconn.Conn, len(p.addrs))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := w; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-p.ticks:
		}
		a := i % len(p.addrs)
		if conns[a] == nil {
			c, err := respconn.Dial(ctx, p.addrs[a], failoverMax)
			if err != nil {
				continue
			}
			conns[a] = c
		}
		sent := time.Now()
		v, err := conns[a].Do(throttleCmd[0], "failover", throttleCmd[2], throttleCmd[3], throttleCmd[4])
		if err != nil {
			// CLUSTERDOWN or UNKNOWN keep the connection; anything else
			// may have broken it.
			if _, reply := err.(respconn.Error); !reply {
				conns[a].Close()
				conns[a] = nil
			}
			continue
		}
		if ints, err := respconn.Ints(v); err != nil || len(ints) != 5 {
			continue
		}
		p.decided.Add(1)
		if k := p.killedAt.Load(); k != 0 && sent.UnixNano() >= k {
			select {
			case p.first <- time.Now():
			default: // not the first
			}
		}
	}
}
