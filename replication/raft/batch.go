package raft

import (
	"encoding/binary"
	"slices"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// The leader's batcher: throughput comes from many client commands sharing
// one log entry, one fsync and one round trip to the followers. Proposals
// queue here while the previous entries are being stored; the batcher's
// goroutine takes everything queued, cuts it into entries of at most
// maxEntryBytes, stamps each with the instant and hands them to Raft, and
// keeps up to maxInflight entries in flight (Raft stores the entries that
// queued during one fsync with the next: raft-notes.md, section 3).
const (
	maxEntryBytes = 256 << 10
	maxInflight   = 64
)

type batcher struct {
	n *Node

	mu      sync.Mutex // guards queue and last
	queue   []proposal
	last    int64 // the last instant stamped
	wake    chan struct{}
	slots   chan struct{} // a token per entry in flight
	scratch []byte
}

func newBatcher(n *Node) *batcher {
	return &batcher{n: n, wake: make(chan struct{}, 1), slots: make(chan struct{}, maxInflight)}
}

// add queues p for the next entry.
func (b *batcher) add(p proposal) {
	b.mu.Lock()
	b.queue = append(b.queue, p)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// resume starts a term of leadership: instants stamped from now on are at
// least applied, the instant of the last entry applied.
func (b *batcher) resume(applied int64) {
	b.mu.Lock()
	b.last = max(b.last, applied)
	b.mu.Unlock()
}

// setLast makes now the last instant stamped (DEBUG CLOCK SET).
func (b *batcher) setLast(now int64) {
	b.mu.Lock()
	b.last = now
	b.mu.Unlock()
}

// stamp returns the instant for a new entry: the clock, but never earlier
// than an instant stamped or applied before (a new leader's clock may be
// behind the old one's).
func (b *batcher) stamp() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.last = max(b.last, b.n.cfg.Clock.Now())
	return b.last
}

func (b *batcher) run() {
	defer b.n.stopped.Done()
	for {
		select {
		case <-b.n.stop:
			b.failAll()
			return
		case <-b.wake:
		}
		b.mu.Lock()
		queue := b.queue
		b.queue = nil
		b.mu.Unlock()
		for len(queue) > 0 {
			if !b.n.ready.Load() {
				// Leadership was lost: what is not proposed yet goes
				// to the new leader, or waits for one.
				for _, p := range queue {
					b.n.route(p)
				}
				break
			}
			queue = b.propose(queue)
		}
	}
}

// propose hands one entry, made of the first proposals of queue, to Raft
// and returns the proposals left.
func (b *batcher) propose(queue []proposal) []proposal {
	body := b.scratch[:0]
	count := 0
	for _, p := range queue {
		if count > 0 && len(body) >= maxEntryBytes {
			break
		}
		body = p.cmd.AppendBinary(body)
		count++
	}
	b.scratch = body
	data := make([]byte, 0, entryHeader+binary.MaxVarintLen64+len(body))
	data = appendHeader(data, kindCommands, b.stamp())
	data = binary.AppendUvarint(data, uint64(count))
	data = append(data, body...)
	batch := slices.Clone(queue[:count])
	select {
	case b.slots <- struct{}{}:
	case <-b.n.stop:
		fail(batch, replyDown)
		return queue[count:]
	}
	f := b.n.r.Apply(data, b.n.cfg.ApplyTimeout)
	go b.await(f, batch)
	return queue[count:]
}

// await answers an entry's proposals once Raft has applied it (their
// replies), failed it (CLUSTERDOWN when it was never appended, UNKNOWN when
// it may still commit) or let the first proposal's deadline pass (UNKNOWN).
func (b *batcher) await(f hraft.ApplyFuture, batch []proposal) {
	defer func() { <-b.slots }()
	res := make(chan error, 1)
	go func() { res <- f.Error() }()
	timer := time.NewTimer(time.Until(batch[0].deadline))
	defer timer.Stop()
	select {
	case err := <-res:
		switch {
		case err == nil:
			a := f.Response().(*applied)
			for i, p := range batch {
				r := a.reply(i)
				p.done(r[:len(r):len(r)])
			}
		case f.Index() == 0:
			fail(batch, replyDown)
		default:
			fail(batch, replyUnknown)
		}
	case <-timer.C:
		fail(batch, replyUnknown)
	}
}

// failAll answers what is still queued when the node stops.
func (b *batcher) failAll() {
	b.mu.Lock()
	queue := b.queue
	b.queue = nil
	b.mu.Unlock()
	fail(queue, replyDown)
}

// fail answers every proposal of batch with reply (each its own copy: a
// reply is handed over to its connection).
func fail(batch []proposal, reply []byte) {
	for _, p := range batch {
		p.fail(reply)
	}
}

// fail answers p with its own copy of reply.
func (p proposal) fail(reply []byte) { p.done(slices.Clone(reply)) }
