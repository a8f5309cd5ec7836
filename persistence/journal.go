package persistence

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/throttleddb/throttled/store"
)

var _ store.Journal = (*DB)(nil)

// linger is how long the committer lets changes gather under EverySec and No
// before applying them. Nothing waits for those changes (WaitDurable does not
// under these policies), so waiting a little turns a wake-up per change into
// at most one per linger at high rates; it is far below the loss EverySec
// allows anyway.
const linger = time.Millisecond

// sealAt is the size at which a log record is sealed and queued for the
// committer, which it wakes: the committer then has a full record to write
// without lingering, and memory per record stays small.
const sealAt = 256 << 10

// maxQueue bounds the sealed records waiting for the committer: about
// maxQueue*sealAt bytes. Only when the disk stalls for long (a disk far slower
// than the write rate) does an appender reach it, and then it waits, as
// Redis blocks writes when its AOF fsync falls behind, rather than letting
// memory grow without bound.
const maxQueue = 64

// maxFree is how many committed records are kept for reuse.
const maxFree = 4

// Set records that key of db holds v, expiring at expireMs (Unix ms, 0 for
// never). It copies key and v.Bytes. It is part of store.Journal: the store
// calls it under the key's shard lock, so it only appends to memory.
func (d *DB) Set(db int, key []byte, v store.Value, expireMs int64) {
	d.mu.Lock()
	if d.waitRoomLocked() {
		first := len(d.rec) == 0
		d.rec = appendSet(d.rec, db, key, v, expireMs)
		d.appendedLocked(first)
	}
	d.mu.Unlock()
}

// Delete records that key of db is gone. It is part of store.Journal.
func (d *DB) Delete(db int, key []byte) {
	d.mu.Lock()
	if d.waitRoomLocked() {
		first := len(d.rec) == 0
		d.rec = appendDelete(d.rec, db, key)
		d.appendedLocked(first)
	}
	d.mu.Unlock()
}

// FlushDB records that every key of db is gone. It is part of
// store.Journal.
func (d *DB) FlushDB(db int) {
	d.mu.Lock()
	if d.waitRoomLocked() {
		first := len(d.rec) == 0
		d.rec = appendFlush(d.rec, db)
		d.appendedLocked(first)
	}
	d.mu.Unlock()
}

// waitRoomLocked waits while the queue is full and reports whether the
// change may be appended.
func (d *DB) waitRoomLocked() bool {
	for len(d.queue) >= maxQueue && !d.stopped {
		d.room.Wait()
	}
	return !d.stopped
}

// appendedLocked numbers the change just appended and wakes the committer
// when it has new work: a first change in an empty record (under EverySec
// and No the committer then lingers to gather more) or a sealed record.
func (d *DB) appendedLocked(first bool) {
	d.lastSeq.Add(1)
	first = first && len(d.queue) == 0
	if len(d.rec) >= sealAt {
		d.sealLocked()
	} else if !first {
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// sealLocked queues the current record for the committer and starts another.
func (d *DB) sealLocked() {
	last := d.lastSeq.Load()
	d.queue = append(d.queue, sealed{b: d.rec, seq: last})
	if n := len(d.free); n > 0 {
		d.rec = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		d.rec = make([]byte, 0, 64<<10)
	}
}

// dropBuffers lets go of the buffers kept for reuse: the committed records
// of the free list, the current record while it is empty, and the log's
// frame buffer. They are live, so the collector cannot take them, and would
// stay for as long as the node then stays idle: about 0.3 MB after
// bench/persist's fill of a million keys (the committer takes a record
// every millisecond, long before it is sealed full), up to 3.5 MB after the
// disk fell behind (4 records and the current one of up to 2*sealAt, a
// frame of up to 4*sealAt). A checkpoint calls it; under load they are back
// within a few records, some 100 KB allocated per checkpoint (up to a few
// MB after a backlog) against the log written between two of them.
func (d *DB) dropBuffers() {
	d.mu.Lock()
	clear(d.free)
	d.free = d.free[:0]
	if len(d.rec) == 0 {
		d.rec = nil
	}
	d.mu.Unlock()
	d.segs.mu.Lock()
	d.segs.frame = nil
	d.segs.mu.Unlock()
}

// LastSeq returns the sequence number of the latest change appended, 0 when
// none was. Every change gets the next number, in the order of the Journal
// calls.
func (d *DB) LastSeq() uint64 { return d.lastSeq.Load() }

// WaitDurable blocks until every change up to seq is written to the log and
// synced, when the policy is Always. Under EverySec and No it does not wait:
// durability is not promised per change there. It returns the DB's write
// error (see Err) when the changes cannot become durable, and ErrClosed when
// the DB was closed first.
//
// This is how appendfsync always keeps its promise: the server calls
// WaitDurable(LastSeq()) before it writes replies, so no client sees the
// effect of a change (its own or anybody's) that a crash could still undo.
// Everyone waiting shares the one fsync of each group commit.
func (d *DB) WaitDurable(seq uint64) error {
	if d.policy != Always {
		return d.Err()
	}
	if d.synced.Load() >= seq {
		return nil
	}
	d.dmu.Lock()
	defer d.dmu.Unlock()
	for d.synced.Load() < seq {
		switch {
		case d.err != nil:
			return d.err
		case d.finished:
			return ErrClosed
		}
		d.durable.Wait()
	}
	return nil
}

// run is the committer: it applies the appended changes in group commits,
// in order, and syncs per the policy.
// maxAlwaysYields bounds how many times the committer yields to the
// connections before cutting an Always batch.
const maxAlwaysYields = 32

func (d *DB) run() {
	defer func() {
		d.dmu.Lock()
		d.finished = true
		d.dmu.Unlock()
		d.durable.Broadcast()
		close(d.done)
	}()
	// Under everysec another goroutine syncs, so that the committer keeps
	// writing while the disk flushes a second of changes (which can take
	// longer than a second's worth of queue holds on a slow disk).
	var syncer sync.WaitGroup
	if d.policy == EverySec {
		syncer.Go(d.syncEverySecond)
	}
	lingerT := time.NewTimer(linger)
	lingerT.Stop()
	for {
		select {
		case <-d.wake:
			if d.policy == Always {
				// Let the connections that are ready to run append
				// their changes before this batch is cut, so that one
				// fsync covers all of them. With few OS threads (the
				// server's --threads) the committer would otherwise
				// cut a batch as soon as the first connection wrote.
				// Stop once a yield brings nothing new.
				for range maxAlwaysYields {
					seq := d.lastSeq.Load()
					runtime.Gosched()
					if d.lastSeq.Load() == seq {
						break
					}
				}
			}
			if d.policy != Always && !d.sealedWaiting() {
				lingerT.Reset(linger)
				select {
				case <-lingerT.C:
				case <-d.wake: // a batch was sealed
					lingerT.Stop()
				case <-d.stop:
					lingerT.Stop()
				}
			}
			d.commit()
		case <-d.stop:
			d.commit()
			syncer.Wait() // it stops on d.stop too
			d.sync()
			return
		}
	}
}

// sealedWaiting reports whether a sealed batch is queued: then there is
// enough to commit without lingering.
func (d *DB) sealedWaiting() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.queue) > 0
}

// commit writes every appended change to the log, each sealed record as one
// frame, in one write. It takes the queue and the current record under mu
// and writes them without it, so appenders never wait for the disk. Under
// Always the segment is synced before WaitDurable returns.
func (d *DB) commit() {
	d.mu.Lock()
	if d.hasErr.Load() {
		d.mu.Unlock()
		return // nothing more is written after a failure
	}
	if len(d.rec) > 0 {
		d.sealLocked()
	}
	work := d.queue
	d.queue, d.work = d.work, nil
	d.mu.Unlock()
	d.room.Broadcast()
	if len(work) == 0 {
		return
	}

	recs, seqs := d.recs[:0], d.seqs[:0]
	for _, s := range work {
		recs, seqs = append(recs, s.b), append(seqs, s.seq)
	}
	last := work[len(work)-1].seq
	first := d.applied.Load() + 1
	d.segs.mu.Lock()
	err := d.segs.write(recs, seqs, first, d.policy == Always)
	if err == nil {
		// Under segs.mu, so that a checkpoint's rotation sees it.
		d.applied.Store(last)
	}
	d.segs.mu.Unlock()
	clear(recs)
	d.recs, d.seqs = recs, seqs
	if err != nil {
		d.fail(fmt.Errorf("writing the log up to change %d: %w", last, err))
		return
	}
	for _, s := range work {
		d.logBytes.Add(int64(len(s.b)))
	}
	d.commits.Add(1)
	if d.policy == Always {
		d.markSynced(last)
	}

	d.mu.Lock()
	for i, s := range work {
		if len(d.free) < maxFree && cap(s.b) <= 2*sealAt {
			d.free = append(d.free, s.b[:0])
		}
		work[i] = sealed{}
	}
	d.mu.Unlock()
	d.work = work[:0]
}

// syncEverySecond syncs the log once a second until d.stop.
func (d *DB) syncEverySecond() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.sync()
		case <-d.stop:
			return
		}
	}
}

// sync syncs the log if changes were written since the last sync: every
// change written when it begins. It holds segs.mu only to read which
// segment that is, not during the fsync, so the committer can go on
// appending to it meanwhile. The segments before it were synced when they
// were closed (rotate syncs, then closes), and so was this one if a
// checkpoint closes it meanwhile: then Sync may find it closed.
func (d *DB) sync() {
	d.segs.mu.Lock()
	seq, f := d.applied.Load(), d.segs.f
	d.segs.mu.Unlock()
	if d.synced.Load() >= seq || d.Err() != nil {
		return
	}
	if f != nil {
		if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			d.fail(fmt.Errorf("syncing changes up to %d: %w", seq, err))
			return
		}
	}
	d.markSynced(seq)
}

func (d *DB) markSynced(seq uint64) {
	d.syncs.Add(1)
	d.lastSync.Store(time.Now().Unix())
	// Stored under dmu so that a waiter cannot check synced, miss this
	// store and then sleep through the broadcast.
	d.dmu.Lock()
	d.synced.Store(seq)
	d.dmu.Unlock()
	d.durable.Broadcast()
}
